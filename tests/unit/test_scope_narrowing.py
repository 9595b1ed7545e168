"""Headers only narrow: for any profile and any optional header values, the scope is a subset."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from cairn.policy.profiles import SENSITIVITY_RANK, EdgeRule, FieldRule, RoleProfile, Sensitivity, matches
from cairn.policy.scope import Scope, intersect_domains

DOMAIN_NAMES = ("acme/corporate", "acme/product", "acme/region_emea", "acme/region_apac", "other/x")
GLOBS = ("acme/*", "acme/product", "acme/region_*", "acme/region_emea", "other/*", "*", "acme/corporate")

globs = st.lists(st.sampled_from(GLOBS), min_size=1, max_size=4, unique=True).map(tuple)


@st.composite
def profiles(draw: st.DrawFn) -> RoleProfile:
    return RoleProfile(
        name="r",
        domains=draw(globs),
        sensitivity_ceiling=draw(st.sampled_from(("low", "medium", "high"))),
        namespaces=tuple(
            draw(st.lists(st.sampled_from(("public", "internal", "confidential")), min_size=1, unique=True))
        ),
        max_hops=draw(st.integers(1, 6)),
        edges=tuple(
            EdgeRule(type=t, direction="both", from_domains=("acme/*",), to_domains=("acme/*",))
            for t in draw(
                st.lists(st.sampled_from(("CAUSAL_PRECEDES", "ALIAS_OF", "DEPENDS_ON")), unique=True)
            )
        ),
        fields={"Decision": (FieldRule(domains=("*",), fields=("*",)),)},
    )


@settings(max_examples=500)
@given(
    p=profiles(),
    domains=st.none() | globs,
    edges=st.none()
    | st.lists(st.sampled_from(("CAUSAL_PRECEDES", "ALIAS_OF", "RESPONDS_TO")), unique=True).map(tuple),
    hops=st.none() | st.integers(0, 6),
    ceiling=st.none() | st.sampled_from(("low", "medium", "high")),
    namespaces=st.none()
    | st.lists(st.sampled_from(("public", "internal", "confidential", "secret")), unique=True).map(tuple),
)
def test_headers_never_widen(p: RoleProfile, domains, edges, hops, ceiling, namespaces) -> None:  # type: ignore[no-untyped-def]
    s = Scope.from_profile(
        p, domains=domains, edge_types=edges, max_hops=hops, ceiling=ceiling, namespaces=namespaces
    )
    assert s.ceiling <= SENSITIVITY_RANK[p.sensitivity_ceiling]
    assert s.max_hops <= p.max_hops
    assert set(s.edges) <= set(p.edges)
    assert set(s.namespaces) <= set(p.namespaces)
    for name in DOMAIN_NAMES:
        if matches(name, s.domains):
            assert matches(name, p.domains), (name, s.domains, p.domains)
            if domains is not None:
                assert matches(name, domains)


def test_broad_domain_request_keeps_the_granted_globs() -> None:
    assert intersect_domains(("acme/*",), ("acme/product", "acme/region_*")) == (
        "acme/product",
        "acme/region_*",
    )
    assert intersect_domains(("acme/region_emea",), ("acme/region_*",)) == ("acme/region_emea",)
    assert intersect_domains(("acme/corporate",), ("acme/product",)) == ()


def one_rule_profile(
    rule: EdgeRule, domains: tuple[str, ...], ceiling: Sensitivity, max_hops: int
) -> RoleProfile:
    """A profile whose only edge rule is ``rule``, public namespace, no field rules."""
    return RoleProfile(
        name="r",
        domains=domains,
        sensitivity_ceiling=ceiling,
        namespaces=("public",),
        max_hops=max_hops,
        edges=(rule,),
        fields={},
    )


@settings(max_examples=500)
@given(scope_domains=globs, from_domains=globs, to_domains=globs)
def test_a_rule_marked_as_covering_the_scope_admits_every_domain_the_scope_sees(
    scope_domains: tuple[str, ...], from_domains: tuple[str, ...], to_domains: tuple[str, ...]
) -> None:
    """acl.edge_allowed_from skips a rule's regex for an in-scope end when the rule covers the
    scope (``from_all`` / ``to_all``): that must never admit a domain the regex would refuse."""
    rule = EdgeRule(
        type="CAUSAL_PRECEDES", direction="both", from_domains=from_domains, to_domains=to_domains
    )
    profile = one_rule_profile(rule, scope_domains, "high", 3)
    params = Scope.from_profile(profile).cypher_params()
    (cypher_rule,) = params["edge_rules"]["CAUSAL_PRECEDES"]  # type: ignore[index]
    for name in DOMAIN_NAMES:
        if matches(name, scope_domains):
            if cypher_rule["from_all"]:
                assert matches(name, from_domains), (name, scope_domains, from_domains)
            if cypher_rule["to_all"]:
                assert matches(name, to_domains), (name, scope_domains, to_domains)
    # And the flag is not vacuous: a rule with the scope's own globs covers it.
    same = Scope.from_profile(
        profile.model_copy(update={"edges": (rule.model_copy(update={"from_domains": scope_domains}),)})
    )
    assert same.cypher_params()["edge_rules"]["CAUSAL_PRECEDES"][0]["from_all"]  # type: ignore[index]


def test_a_glob_with_a_line_break_is_left_to_the_regex() -> None:
    rule = EdgeRule(type="ALIAS_OF", direction="out", from_domains=("acme/*",), to_domains=("acme/*",))
    profile = one_rule_profile(rule, ("acme/x\r*",), "low", 1)
    params = Scope.from_profile(profile).cypher_params()
    assert params["edge_rules"]["ALIAS_OF"][0]["from_all"] is False  # type: ignore[index]
    assert params["sensitivities"] == ["low"]
