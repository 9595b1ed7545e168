"""A filter may read only fields shown on every node the scope may see (``fields_shown_everywhere``).

Sound for any field rules and any scope: whatever domain a visible node is in, the fields
``fields_shown_everywhere`` allows are shown there. A field hidden in one reachable domain
only would otherwise let a filter tell which of that domain's nodes hold a value.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from cairn.policy.profiles import FieldRule, matches
from cairn.policy.scope import Scope

DOMAIN_NAMES = ("acme/corporate", "acme/correspondence", "acme/board", "acme/region_emea", "other/x", "")
GLOBS = ("acme/*", "acme/board", "acme/correspondence", "acme/region_*", "other/*", "*", "acme/b?ard")
FIELDS = ("id", "author", "exec_tags", "status_tags", "date", "*")

globs = st.lists(st.sampled_from(GLOBS), min_size=1, max_size=3, unique=True).map(tuple)
rules = st.lists(
    st.builds(
        FieldRule, domains=globs, fields=st.lists(st.sampled_from(FIELDS), min_size=1, unique=True).map(tuple)
    ),
    max_size=4,
).map(tuple)


def scope(domains: tuple[str, ...], section_rules: tuple[FieldRule, ...]) -> Scope:
    return Scope("r", domains, 2, ("public",), 1, (), {"Section": section_rules})


@settings(max_examples=1000)
@given(domains=globs, section_rules=rules)
def test_allowed_fields_are_shown_in_every_reachable_domain(
    domains: tuple[str, ...], section_rules: tuple[FieldRule, ...]
) -> None:
    s = scope(domains, section_rules)
    everywhere = s.fields_shown_everywhere("Section")
    for domain in DOMAIN_NAMES:
        if not matches(domain, domains):
            continue
        shown = s.visible_fields("Section", domain)
        if shown is not None:
            assert everywhere is not None and set(everywhere) <= set(shown), (domain, everywhere, shown)


def test_a_field_hidden_in_one_reachable_domain_is_not_allowed() -> None:
    board = FieldRule(domains=("acme/board",), fields=("id", "author", "title"))
    rest = FieldRule(domains=("*",), fields=("*",))
    assert scope(("acme/*",), (board, rest)).fields_shown_everywhere("Section") == ("author", "id", "title")
    # Narrowed to where every field shows, or to rules that cover the scope piecewise: all of them.
    assert scope(("acme/correspondence",), (board, rest)).fields_shown_everywhere("Section") is None
    split = (FieldRule(domains=("acme/a",), fields=("*",)), FieldRule(domains=("acme/b",), fields=("*",)))
    assert scope(("acme/a", "acme/b"), split).fields_shown_everywhere("Section") is None
    # A domain past every rule shows ids only.
    assert scope(("acme/*",), split).fields_shown_everywhere("Section") == ("id",)
    assert Scope.system().fields_shown_everywhere("Section") is None
