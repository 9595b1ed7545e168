"""A node's ``masked`` list names the fields its rule withholds, whatever the node holds there:
listing only the non-empty ones told a caller which hidden rationales exist (docs/design.md
§Pre-Selector)."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cairn.policy.preselector import mask
from cairn.policy.profiles import FieldRule, RoleProfile
from cairn.policy.scope import Scope
from cairn.schema.nodes import DECLARED_FIELDS

SHOWN = ("option", "timestamp", "domain", "tags")


def scope(shown: tuple[str, ...]) -> Scope:
    profile = RoleProfile(
        name="r",
        domains=("acme/*",),
        sensitivity_ceiling="high",
        namespaces=("public",),
        max_hops=2,
        edges=(),
        fields={"Decision": (FieldRule(domains=("*",), fields=shown),)},
    )
    return Scope.from_profile(profile)


SCOPE = scope(SHOWN)
hidden_values = st.dictionaries(
    st.sampled_from(sorted(DECLARED_FIELDS["Decision"] - {"id", *SHOWN})),
    st.none() | st.text(max_size=5) | st.floats(0, 1) | st.lists(st.text(max_size=3), max_size=2),
)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(a=hidden_values, b=hidden_values)
def test_masked_is_the_same_whatever_the_hidden_fields_hold(a: dict[str, Any], b: dict[str, Any]) -> None:
    s = SCOPE
    base = {"id": "d1", "option": "Adopt", "domain": "acme/product"}
    shown_a, masked_a = mask("Decision", {**base, **a}, s)
    shown_b, masked_b = mask("Decision", {**base, **b}, s)
    assert masked_a == masked_b
    assert "rationale" in masked_a
    assert shown_a == shown_b == {"id": "d1", "option": "Adopt", "domain": "acme/product"}


def test_a_rule_showing_every_field_masks_nothing() -> None:
    shown, masked = mask("Decision", {"id": "d1", "option": "Adopt", "rationale": "r"}, scope(("*",)))
    assert masked == () and shown["rationale"] == "r"
