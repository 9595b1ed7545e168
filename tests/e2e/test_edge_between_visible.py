"""``acl.edge_allowed_between_visible``: between two visible nodes, the verdict of ``edge_allowed``.

Fact search checks every candidate's HAS_FACT edge with the cheaper form (rules looked up by
type, a rule covering the whole scope accepting a visible end without its regex). Evaluated by
Neo4j for every role of the fixture policy, narrowed scopes among them, on every edge type and
walk, over ends in each domain a rule or a role names (globs made concrete), a domain no one
names and none: wherever both ends are visible the two predicates agree, and the cheap one is
never used without the ends' check (that conjunction is what is compared).
"""

from __future__ import annotations

import itertools

import pytest
from neo4j import Driver

from cairn.policy.acl import acl_visible, edge_allowed, edge_allowed_between_visible
from cairn.policy.profiles import SENSITIVITY_RANK, PolicyRegistry
from cairn.policy.scope import Scope
from cairn.runtime.settings import REPO_ROOT
from cairn.schema.catalog import RELATION_TYPES

REGISTRY = PolicyRegistry.load(REPO_ROOT / "fixtures" / "policy" / "roles.yaml")
ROLES = sorted(REGISTRY.roles)


def scopes() -> list[tuple[str, Scope]]:
    out = []
    for name in ROLES:
        profile = REGISTRY.roles[name]
        out.append((name, Scope.from_profile(profile)))
        for domain in profile.domains:  # narrowed to one of its domains, and to a concrete one inside it
            out.append((f"{name}@{domain}", Scope.from_profile(profile, domains=(domain,))))
            concrete = domain.replace("*", "north").replace("?", "x")
            if concrete != domain:
                out.append((f"{name}@{concrete}", Scope.from_profile(profile, domains=(concrete,))))
    return out


def domains() -> list[str | None]:
    named: set[str] = set()
    for profile in REGISTRY.roles.values():
        named.update(profile.domains)
        for rule in profile.edges:
            named.update(rule.from_domains)
            named.update(rule.to_domains)
    concrete = {d.replace("*", "north").replace("?", "x") for d in named}
    return [*sorted(concrete), "elsewhere/nobody", None]


SCOPES = scopes()
NAMESPACES = sorted({ns for p in REGISTRY.roles.values() for ns in p.namespaces})


def _node(domain: str | None) -> dict[str, object]:
    return {"domain": domain, "roles_allowed": ROLES, "namespaces": NAMESPACES, "sensitivity": "low"}


@pytest.mark.parametrize("walk", ["out", "in"])
@pytest.mark.parametrize("rel", sorted(RELATION_TYPES))
def test_same_verdict_as_edge_allowed_between_visible_ends(driver: Driver, rel: str, walk: str) -> None:
    assert "low" in SENSITIVITY_RANK
    pairs = [{"a": _node(a), "b": _node(b)} for a, b in itertools.product(domains(), repeat=2)]
    query = f"""
    UNWIND $pairs AS p
    WITH p.a AS a, p.b AS b
    WITH a, b, {acl_visible("a")} AND {acl_visible("b")} AS ends
    RETURN a.domain AS a, b.domain AS b, ends,
           ends AND {edge_allowed(rel, "a", "b", walk)} AS full,
           ends AND {edge_allowed_between_visible(rel, "a", "b", walk)} AS cheap
    """
    disagreements = []
    visible_pairs = allowed = 0
    for label, scope in SCOPES:
        records, _, _ = driver.execute_query(query, {**scope.cypher_params(), "pairs": pairs})
        for r in records:
            visible_pairs += bool(r["ends"])
            allowed += bool(r["full"])
            if r["full"] != r["cheap"]:
                disagreements.append((label, r["a"], r["b"], r["full"], r["cheap"]))
    assert disagreements == []
    assert visible_pairs > 0  # the grid reaches visible ends, so the comparison is not vacuous


def test_some_edge_is_allowed_and_some_refused_in_the_grid(driver: Driver) -> None:
    """The grid tells the predicates apart: some visible pairs are allowed, some refused."""
    pairs = [{"a": _node(a), "b": _node(b)} for a, b in itertools.product(domains(), repeat=2)]
    verdicts: set[bool] = set()
    for _, scope in SCOPES:
        for rel in sorted(RELATION_TYPES):
            records, _, _ = driver.execute_query(
                f"""UNWIND $pairs AS p WITH p.a AS a, p.b AS b
                WHERE {acl_visible("a")} AND {acl_visible("b")}
                RETURN {edge_allowed_between_visible(rel, "a", "b", "out")} AS ok""",
                {**scope.cypher_params(), "pairs": pairs},
            )
            verdicts.update(bool(r["ok"]) for r in records)
    assert verdicts == {True, False}


def test_refuses_anything_but_an_edge_type_and_a_plain_walk() -> None:
    with pytest.raises(ValueError):
        edge_allowed_between_visible("type(r)", "a", "b", "out")
    with pytest.raises(ValueError):
        edge_allowed_between_visible("HAS_FACT", "a", "b", "outgoing")
