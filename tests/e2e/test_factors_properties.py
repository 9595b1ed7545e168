"""Readiness and what-if on random dependency graphs, against a reference computed with networkx.

The reference is the path definition (walk visible nodes; blocked if an unmet edge is reached,
undetermined if a hidden node is reached, else ready); the service computes the same thing by
fetching a scoped subgraph from Neo4j and propagating flags. Cycles: refused by the loader with
nothing written, and harmless (no looping) if one is put in the graph by hand.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import networkx as nx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from neo4j import Driver

from cairn.ingest.factors import ingest_factor_payload, load_demo_factors
from cairn.ingest.fixtures import FixtureError
from cairn.memory.factors.dependencies import DepEdge, DepGraph, DepNode
from cairn.memory.factors.models import FactorError
from cairn.memory.factors.questions import what_if, why_blocked
from cairn.policy.acl import MAX_HOPS
from cairn.policy.profiles import PolicyRegistry
from cairn.policy.scope import Scope
from cairn.runtime.embedder import Embedder
from cairn.runtime.settings import Settings
from cairn.schema.checksum import graph_checksum
from tests.e2e.conftest import wipe

ACCESS = {
    "domain": "acme/assessment",
    "sensitivity": "low",
    "namespaces": ["internal"],
    "roles_allowed": ["staff", "manager", "director", "exec", "writer"],
}
HIDDEN_ACCESS = {**ACCESS, "sensitivity": "medium", "roles_allowed": ["manager", "writer"]}


@pytest.fixture(scope="module")
def staff(settings: Settings) -> Scope:
    """Staff's view with the deepest hop budget a profile may have: the reference below walks
    without a hop limit, and the graphs are kept shallower than it (hop limits and edge rules
    have their own test, tests/e2e/adversarial/test_factor_edges.py)."""
    return replace(
        Scope.from_profile(PolicyRegistry.load(settings.policy_file).roles["staff"]), max_hops=MAX_HOPS
    )


def ids(nodes: Any) -> list[str]:
    return [n.id for n in nodes]


def reference_statuses(
    nodes: dict[str, float | None],
    hidden: set[str],
    edges: list[tuple[str, str, float]],
    overrides: dict[str, float],
) -> dict[str, str]:
    """Path definition with networkx: walk visible nodes; blocked if an unmet edge is reached,
    else undetermined if a hidden node is reached, else ready."""
    values = {**nodes, **overrides}
    g = nx.DiGraph()
    g.add_nodes_from(n for n in nodes if n not in hidden)
    g.add_edges_from((a, b) for a, b, _ in edges if a not in hidden and b not in hidden)
    out: dict[str, str] = {}
    for n in g.nodes:
        reach = nx.descendants(g, n) | {n}
        reached = [(a, b, m) for a, b, m in edges if a in reach]
        if any(b not in hidden and (values[b] is None or values[b] < m) for _, b, m in reached):  # type: ignore[operator]
            out[n] = "blocked"
        elif any(b in hidden for _, b, _ in reached):
            out[n] = "undetermined"
        else:
            out[n] = "ready"
    return out


@st.composite
def graphs(draw: st.DrawFn, acyclic: bool = True) -> dict[str, Any]:
    nf = draw(st.integers(2, 5))  # an option and a chain of factors: at most MAX_HOPS edges
    no = draw(st.integers(0, 3))
    factors = [f"f{i}" for i in range(nf)]
    options = [f"o{i}" for i in range(no)]
    values = {f: draw(st.one_of(st.none(), st.integers(0, 100).map(float))) for f in factors}
    hidden = {n for n in factors + options if draw(st.integers(0, 4)) == 0}
    edges: list[tuple[str, str, float]] = []
    for j, src in enumerate(factors):
        for tgt in factors[:j] if acyclic else factors:
            if tgt != src and draw(st.integers(0, 2)) == 0:
                edges.append((src, tgt, float(draw(st.integers(0, 100)))))
    for src in options:
        for tgt in factors:
            if draw(st.integers(0, 2)) == 0:
                edges.append((src, tgt, float(draw(st.integers(0, 100)))))
    target = draw(st.sampled_from(factors))
    value = float(draw(st.integers(0, 100)))
    return {
        "factors": factors,
        "options": options,
        "values": values,
        "hidden": hidden,
        "edges": edges,
        "target": target,
        "value": value,
    }


def payload(g: dict[str, Any]) -> dict[str, Any]:
    def access(n: str) -> dict[str, Any]:
        return HIDDEN_ACCESS if n in g["hidden"] else ACCESS

    return {
        "factors": [{"id": f, "name": f"Factor {f}", "category": "c", **access(f)} for f in g["factors"]],
        "options": [{"id": o, "name": f"Option {o}", **access(o)} for o in g["options"]],
        "depends_on": [{"source": a, "target": b, "min_value": m} for a, b, m in g["edges"]],
        "sessions": [{"id": "s1", "started_at": "2024-10-01T00:00:00Z", **ACCESS}],
        "journal": [
            {
                "id": f"je-{f}",
                "factor": f,
                "timestamp": "2024-10-02T00:00:00Z",
                "value": v,
                "confidence": 0.5,
                "rationale": "test",
                "session": "s1",
            }
            for f, v in g["values"].items()
            if v is not None
        ],
    }


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(g=graphs())
def test_what_if_equals_a_python_reference_on_random_dags(
    driver: Driver, embedder: Embedder, staff: Scope, g: dict[str, Any]
) -> None:
    wipe(driver)
    ingest_factor_payload(driver, payload(g), embedder=embedder)
    before_sum = graph_checksum(driver)
    if g["target"] in g["hidden"]:
        with pytest.raises(FactorError):
            what_if(driver, staff, g["target"], g["value"])
        return
    result = what_if(driver, staff, g["target"], g["value"])
    assert graph_checksum(driver) == before_sum
    nodes = {**g["values"], **{o: None for o in g["options"]}}
    before = reference_statuses(nodes, g["hidden"], g["edges"], {})
    after = reference_statuses(nodes, g["hidden"], g["edges"], {g["target"]: g["value"]})
    changed = {n for n in before if before[n] != after[n]}
    assert set(ids(result.unblocked)) == {n for n in changed if after[n] == "ready"}
    assert set(ids(result.blocked)) == {n for n in changed if before[n] == "ready"}
    assert {c.node.id for c in result.other_changes} == {
        n for n in changed if "ready" not in (before[n], after[n])
    }


@settings(max_examples=200, deadline=None)
@given(g=graphs(acyclic=False))
def test_readiness_rule_matches_reference_even_on_cyclic_graphs(g: dict[str, Any]) -> None:
    """The in-memory evaluator terminates on any digraph and agrees with the path definition."""
    visible = [n for n in g["factors"] + g["options"] if n not in g["hidden"]]
    graph = DepGraph(
        [DepNode(n, "Factor", n, value=g["values"].get(n)) for n in visible],
        [DepEdge(a, None if b in g["hidden"] else b, m) for a, b, m in g["edges"] if a not in g["hidden"]],
    )
    nodes = {**g["values"], **{o: None for o in g["options"]}}
    overrides = {g["target"]: g["value"]} if g["target"] not in g["hidden"] else {}
    assert graph.statuses(overrides) == reference_statuses(nodes, g["hidden"], g["edges"], overrides)


@settings(max_examples=200, deadline=None)
@given(g=graphs(acyclic=False), copies=st.data())
def test_how_many_hidden_prerequisites_a_node_has_changes_nothing(
    g: dict[str, Any], copies: st.DataObject
) -> None:
    """Repeating every hidden edge (with other thresholds) leaves the graph and every answer as is."""
    visible = [n for n in g["factors"] + g["options"] if n not in g["hidden"]]
    nodes = [DepNode(n, "Factor", n, value=g["values"].get(n)) for n in visible]
    edges = [DepEdge(a, None if b in g["hidden"] else b, m) for a, b, m in g["edges"] if a not in g["hidden"]]
    more = [
        DepEdge(e.source, None, m)
        for e in edges
        if e.target is None
        for m in copies.draw(st.lists(st.floats(0, 100), max_size=3))
    ]
    once, many = DepGraph(nodes, edges), DepGraph(nodes, [*edges, *more])
    assert once.out == many.out and once.statuses() == many.statuses()
    assert all(sum(e.target is None for e in out) <= 1 for out in many.out.values())
    for n in visible:
        found, hidden = many.blockers(n)
        assert (found, hidden) == once.blockers(n)
        assert len(hidden) == len({h.source for h in hidden})  # one entry per visible node


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(g=graphs(), back=st.data())
def test_cyclic_depends_on_is_refused_with_nothing_written(
    driver: Driver, embedder: Embedder, g: dict[str, Any], back: st.DataObject
) -> None:
    factor_edges = [(a, b, m) for a, b, m in g["edges"] if a.startswith("f")]
    if not factor_edges:
        factor_edges = [("f1", "f0", 10.0)]
        g["edges"].append(factor_edges[0])
    a, b, _ = back.draw(st.sampled_from(factor_edges))
    g["edges"].append((b, a, 5.0))  # closes a cycle
    wipe(driver)
    before = graph_checksum(driver)
    with pytest.raises(FixtureError, match="cycle"):
        ingest_factor_payload(driver, payload(g), embedder=embedder)
    assert graph_checksum(driver) == before


def test_a_cycle_already_in_the_graph_does_not_hang_the_questions(driver: Driver, staff: Scope) -> None:
    wipe(driver)
    load_demo_factors(driver)
    driver.execute_query(  # bypass the loader, as a careless manual edit might
        "MATCH (a:Factor {id: 'data_governance'}), (b:Factor {id: 'data_quality'}) "
        "MERGE (a)-[:DEPENDS_ON {min_value: 10.0}]->(b)"
    )
    assert why_blocked(driver, staff, "basic_forecasting_annual").status == "ready"
    assert what_if(driver, staff, "data_quality", 5).blocked  # governance now needs quality >= 10
    wipe(driver)
