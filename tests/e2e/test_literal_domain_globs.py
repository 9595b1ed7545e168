"""The literal-glob shortcut of the node ACL and of the edge rule between visible nodes.

``acl.acl_visible`` and ``acl.edge_allowed_between_visible`` test a domain's membership in the
scope's globs without a wildcard (``$domain_exact``, a rule's ``from_exact`` / ``to_exact``:
``profiles.literal_globs``) before the regex, only to spare Neo4j compiling the regex on every
row (docs/design.md §Policy module). Evaluated by Neo4j over a grid of scopes whose globs mix
literals, wildcards and regex metacharacters, and of domains that nearly match them (one more
or one other character, a line break, the glob itself as text): the node ACL's verdict is the
regex's alone, and so is the edge rule's between two visible ends (the only way it is used).
"""

from __future__ import annotations

import itertools

from neo4j import Driver

from cairn.policy.acl import acl_visible, edge_allowed_between_visible
from cairn.policy.profiles import EdgeRule, FieldRule, RoleProfile, literal_globs
from cairn.policy.scope import Scope

GLOBS = (
    ("acme/assistant",),
    ("acme/a.b", "acme/x+y"),
    ("acme/region_*", "acme/product"),
    ("acme/team?", "acme/(g)", "acme/[c]"),
    ("*",),
)
DOMAINS = [
    "acme/assistant",
    "acme/assistantx",
    "acme/assistant\n",
    "\nacme/assistant",
    "acme/a.b",
    "acme/aXb",
    "acme/x+y",
    "acme/xxy",
    "acme/region_north",
    "acme/region_",
    "acme/product",
    "acme/team1",
    "acme/team?",
    "acme/(g)",
    "acme/g",
    "acme/[c]",
    "acme/c",
    "",
    None,
]


def _scope(domains: tuple[str, ...], source: tuple[str, ...], to: tuple[str, ...]) -> Scope:
    profile = RoleProfile(
        name="probe",
        domains=domains,
        sensitivity_ceiling="high",
        namespaces=("public",),
        max_hops=2,
        edges=(EdgeRule(type="HAS_FACT", direction="out", from_domains=source, to_domains=to),),
        fields={"Fact": (FieldRule(domains=("*",), fields=("*",)),)},
    )
    return Scope.from_profile(profile)


def _node(domain: str | None) -> dict[str, object]:
    return {"domain": domain, "roles_allowed": ["probe"], "namespaces": ["public"], "sensitivity": "low"}


def test_literal_globs_are_those_without_a_wildcard() -> None:
    assert literal_globs(("acme/a.b", "acme/region_*", "acme/team?", "acme/(g)")) == ["acme/a.b", "acme/(g)"]


def test_the_shortcuts_give_the_regex_verdict(driver: Driver) -> None:
    pairs = [{"a": _node(a), "b": _node(b)} for a, b in itertools.product(DOMAINS, repeat=2)]
    query = f"""
    UNWIND $pairs AS p
    WITH p.a AS a, p.b AS b, $edge_rules['HAS_FACT'][0] AS rule
    WITH a, b, rule, {acl_visible("a")} AS visible, {acl_visible("b")} AS ends
    RETURN a.domain AS a, b.domain AS b, visible,
           coalesce(a.domain, '') =~ $domain_re AS visible_by_regex,
           visible AND ends AND {edge_allowed_between_visible("HAS_FACT", "a", "b", "out")} AS edge,
           visible AND ends AND coalesce(a.domain, '') =~ rule.from_re
             AND coalesce(b.domain, '') =~ rule.to_re AS edge_by_regex
    """
    disagreements = []
    seen: set[tuple[bool, bool]] = set()
    for domains, source, to in itertools.product(GLOBS, repeat=3):
        scope = _scope(domains, source, to)
        records, _, _ = driver.execute_query(query, {**scope.cypher_params(), "pairs": pairs})
        for r in records:
            seen.add((r["visible"], r["edge"]))
            if r["visible"] != r["visible_by_regex"] or r["edge"] != r["edge_by_regex"]:
                disagreements.append((domains, source, to, r["a"], r["b"], r["visible"], r["edge"]))
    assert disagreements == []
    assert seen == {(True, True), (True, False), (False, False)}  # the grid tells them apart
