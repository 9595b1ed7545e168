"""Property tests: on generated graphs and generated roles, nothing above the role leaks.

Each example writes a small random org graph (random domains, sensitivities, namespaces,
roles_allowed, causal and alias edges), builds a random role profile, and checks the
Pre-Selector and the search against a reference computed here in Python from the same
data: exactly the reachable visible nodes come back, no field outside the profile has a
value, and no hidden id or hidden text appears anywhere in what is returned.
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from neo4j import Driver

from cairn.memory.org_search import search_org
from cairn.policy.preselector import AnchorNotVisible, expand
from cairn.policy.profiles import SENSITIVITY_RANK, EdgeRule, FieldRule, RoleProfile, matches
from cairn.policy.scope import Scope
from cairn.runtime.database import async_driver
from cairn.runtime.settings import Settings
from tests.conftest import wipe

DOMAINS = ("org/corp", "org/prod", "org/reg_a", "org/reg_b")
NAMESPACES = ("public", "internal", "confidential")
ROLES = ("r1", "r2", "r3")
SENS = ("low", "medium", "high")
DIM = 8

EXAMPLES = 30


@st.composite
def graphs(draw: st.DrawFn) -> dict[str, Any]:
    n = draw(st.integers(min_value=2, max_value=14))
    nodes = []
    for i in range(n):
        label = draw(st.sampled_from(("Decision", "Event")))
        nodes.append(
            {
                "id": f"n{i}",
                "label": label,
                "domain": draw(st.sampled_from(DOMAINS)),
                "sensitivity": draw(st.sampled_from(SENS)),
                "namespaces": draw(
                    st.lists(st.sampled_from(NAMESPACES), min_size=1, max_size=3, unique=True)
                ),
                "roles_allowed": draw(st.lists(st.sampled_from(ROLES), min_size=1, max_size=3, unique=True)),
                "vector": draw(st.lists(st.floats(-1, 1, allow_nan=False), min_size=DIM, max_size=DIM)),
            }
        )
    pairs = draw(
        st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=3 * n, unique=True)
    )
    edges = []
    for a, b in pairs:
        if a == b:
            continue
        if nodes[a]["label"] == "Decision" and nodes[b]["label"] == "Event" and draw(st.booleans()):
            edges.append((f"n{a}", f"n{b}", "ALIAS_OF"))
        else:
            edges.append((f"n{a}", f"n{b}", "CAUSAL_PRECEDES"))
    return {"nodes": nodes, "edges": edges}


domain_globs = st.lists(
    st.sampled_from(("org/*", "org/corp", "org/prod", "org/reg_*", "org/reg_a")),
    min_size=1,
    max_size=3,
    unique=True,
).map(tuple)


@st.composite
def profiles(draw: st.DrawFn) -> RoleProfile:
    rules = tuple(
        EdgeRule(
            type=draw(st.sampled_from(("CAUSAL_PRECEDES", "ALIAS_OF"))),
            direction=draw(st.sampled_from(("out", "in", "both"))),
            from_domains=draw(domain_globs),
            to_domains=draw(domain_globs),
        )
        for _ in range(draw(st.integers(0, 3)))
    )
    field_choice = st.sampled_from((("*",), ("id", "option", "summary"), ("id", "timestamp", "domain")))
    fields = {
        label: (FieldRule(domains=draw(domain_globs), fields=draw(field_choice)),)
        for label in ("Decision", "Event")
    }
    return RoleProfile(
        name=draw(st.sampled_from(ROLES)),
        domains=draw(domain_globs),
        sensitivity_ceiling=draw(st.sampled_from(SENS)),
        namespaces=tuple(draw(st.lists(st.sampled_from(NAMESPACES), min_size=1, max_size=3, unique=True))),
        max_hops=draw(st.integers(1, 3)),
        edges=rules,
        fields=fields,
        x_extra=tuple(draw(st.lists(st.sampled_from(("kpis", "note")), max_size=2, unique=True))),
    )


CREATE_NODES = {
    "Decision": "UNWIND $rows AS row CREATE (n:Entity:Decision) SET n = row",
    "Event": "UNWIND $rows AS row CREATE (n:Entity:Event) SET n = row",
}
CREATE_EDGES = {
    t: f"UNWIND $rows AS row MATCH (a:Entity {{id: row.a}}), (b:Entity {{id: row.b}}) CREATE (a)-[:{t}]->(b)"
    for t in ("CAUSAL_PRECEDES", "ALIAS_OF")
}


def _props(node: dict[str, Any]) -> dict[str, Any]:
    nid = node["id"]
    text = (
        {"option": f"TITLE-{nid}", "rationale": f"RATIONALE-{nid}"}
        if node["label"] == "Decision"
        else {"summary": f"TITLE-{nid}", "description": f"DESCRIPTION-{nid}"}
    )
    return {
        "id": nid,
        "domain": node["domain"],
        "sensitivity": node["sensitivity"],
        "namespaces": node["namespaces"],
        "roles_allowed": node["roles_allowed"],
        "timestamp": "2024-01-01T00:00:00Z",
        "importance": 0.5,
        "x_extra": json.dumps({"kpis": f"KPI-{nid}", "note": f"NOTE-{nid}", "secret": f"XSECRET-{nid}"}),
        "embedding": _unit(node["vector"]),
        **text,
    }


def _unit(v: list[float]) -> list[float]:
    arr = np.array(v, dtype=float)
    norm = np.linalg.norm(arr)
    return [float(x) for x in (arr / norm if norm > 1e-9 else np.eye(DIM)[0])]


def write_graph(driver: Driver, g: dict[str, Any]) -> None:
    wipe(driver)
    for label, query in CREATE_NODES.items():
        rows = [_props(n) for n in g["nodes"] if n["label"] == label]
        driver.execute_query(query, rows=rows)
    for t, query in CREATE_EDGES.items():
        driver.execute_query(query, rows=[{"a": a, "b": b} for a, b, et in g["edges"] if et == t])


def visible(node: dict[str, Any], p: RoleProfile) -> bool:
    return (
        matches(node["domain"], p.domains)
        and p.name in node["roles_allowed"]
        and bool(set(node["namespaces"]) & set(p.namespaces))
        and SENSITIVITY_RANK[node["sensitivity"]] <= SENSITIVITY_RANK[p.sensitivity_ceiling]
    )


def edge_allowed(
    p: RoleProfile, etype: str, src: dict[str, Any], dst: dict[str, Any], outgoing: bool
) -> bool:
    return any(
        r.type == etype
        and (r.direction == "both" or r.direction == ("out" if outgoing else "in"))
        and matches(src["domain"], r.from_domains)
        and matches(dst["domain"], r.to_domains)
        for r in p.edges
    )


def reference_reach(g: dict[str, Any], p: RoleProfile, anchor: str) -> set[str]:
    nodes = {n["id"]: n for n in g["nodes"]}
    seen = {anchor}
    queue = deque([(anchor, 0)])
    while queue:
        cur, hop = queue.popleft()
        if hop == p.max_hops:
            continue
        for a, b, t in g["edges"]:
            for here, there, outgoing in ((a, b, True), (b, a, False)):
                if here != cur or there in seen:
                    continue
                if edge_allowed(p, t, nodes[a], nodes[b], outgoing) and visible(nodes[there], p):
                    seen.add(there)
                    queue.append((there, hop + 1))
    return seen


def allowed_fields(p: RoleProfile, label: str, domain: str) -> set[str] | None:
    for rule in p.fields[label]:
        if matches(domain, rule.domains):
            return None if "*" in rule.fields else set(rule.fields) | {"id"}
    return {"id"}


def check_node_fields(p: RoleProfile, label: str, fields: dict[str, Any], dumped: str) -> None:
    allowed = allowed_fields(p, label, fields.get("domain", "")) if "domain" in fields else None
    if allowed is not None:
        assert set(fields) <= allowed, set(fields) - allowed
    extra = fields.get("x_extra", {})
    assert set(extra) <= set(p.x_extra)
    assert "XSECRET-" not in dumped


@pytest.mark.usefixtures("driver")
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(g=graphs(), p=profiles(), data=st.data())
def test_preselector_returns_exactly_the_visible_reach(
    driver: Driver, g: dict[str, Any], p: RoleProfile, data: st.DataObject
) -> None:
    write_graph(driver, g)
    scope = Scope.from_profile(p)
    nodes = {n["id"]: n for n in g["nodes"]}
    anchor = data.draw(st.sampled_from(sorted(nodes)))
    if not visible(nodes[anchor], p):
        with pytest.raises(AnchorNotVisible):
            expand(driver, anchor, scope, hops=p.max_hops)
        return
    cs, trace = expand(driver, anchor, scope, hops=p.max_hops)
    returned = {cs.anchor.id, *(n.id for n in cs.nodes)}
    assert returned == reference_reach(g, p, anchor)

    hidden = {i for i, n in nodes.items() if not visible(n, p)}
    payload = json.dumps(
        {
            "anchor": cs.anchor.fields,
            "nodes": [n.fields for n in cs.nodes],
            "edges": [e.__dict__ for e in cs.edges],
        }
    )
    for hid in hidden:
        assert f'"{hid}"' not in payload, f"hidden id {hid} leaked"
        assert f"TITLE-{hid}" not in payload and f"RATIONALE-{hid}" not in payload
    for node in [cs.anchor, *cs.nodes]:
        assert visible(nodes[node.id], p)
        check_node_fields(p, node.label, node.fields, payload)
        for name in node.masked:
            assert name.split(".")[0] not in node.fields or name.startswith("x_extra.")
    for e in cs.edges:
        assert e.source in returned and e.target in returned
        src, dst = nodes[e.source], nodes[e.target]
        assert edge_allowed(p, e.type, src, dst, True) or edge_allowed(p, e.type, src, dst, False)
    # The audit trace names only nodes that really are withheld, never a returned one.
    assert not (set(trace.withheld_ids) & returned)


@pytest.mark.usefixtures("driver")
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    g=graphs(),
    p=profiles(),
    q=st.lists(st.floats(-1, 1, allow_nan=False), min_size=DIM, max_size=DIM),
    threshold=st.sampled_from((-1.0, 0.0, 0.3)),
    k=st.integers(1, 5),
)
def test_search_ranks_and_counts_visible_nodes_only(
    driver: Driver,
    settings: Settings,
    g: dict[str, Any],
    p: RoleProfile,
    q: list[float],
    threshold: float,
    k: int,
) -> None:
    write_graph(driver, g)
    scope = Scope.from_profile(p)
    qv = _unit(q)

    async def run() -> Any:
        adriver = async_driver(settings)
        try:
            return await search_org(adriver, scope, qv, k=k, threshold=threshold)
        finally:
            await adriver.close()

    result = asyncio.run(run())
    expected = sorted(
        ((float(np.dot(_unit(n["vector"]), qv)), n["id"]) for n in g["nodes"] if visible(n, p)),
        key=lambda t: (-t[0], t[1]),
    )
    expected = [(s, i) for s, i in expected if s >= threshold - 1e-6]
    assert result.total == len(expected)
    got_ids = [h.node.id for h in result.hits]
    assert len(got_ids) == min(k, len(expected))
    assert all(visible({n["id"]: n for n in g["nodes"]}[i], p) for i in got_ids)
    scores = [h.score for h in result.hits]
    assert scores == sorted(scores, reverse=True)
    for hit, (score, _) in zip(result.hits, expected, strict=False):
        assert abs(hit.score - score) < 1e-4
