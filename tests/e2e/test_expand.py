"""The Pre-Selector walk the server runs (``preselect``), as the system, over the demo org."""

from __future__ import annotations

import pytest
from neo4j import Driver

from cairn.policy.preselector import (
    AnchorNotVisible,
    CandidateEdge,
    CandidateSet,
    PolicyTrace,
    preselect,
    scope_params,
)
from cairn.policy.scope import Scope
from cairn.policy.walk import EXPAND_QUERIES
from cairn.runtime.database import read
from cairn.schema.nodes import INTERNAL_FIELDS

DESCOPE = "acme-corp-descope-onprem-2024"
DESCOPE_ALIAS_EVENT = "acme-e-alias-descope-onprem-2024"
ALIAS_EDGE = CandidateEdge(source=DESCOPE, target=DESCOPE_ALIAS_EVENT, type="ALIAS_OF", relation=None)


def expand(driver: Driver, anchor: str, hops: int = 1) -> tuple[CandidateSet, PolicyTrace]:
    """``preselect`` with the system scope (everything, unmasked)."""
    return preselect(driver, Scope.system(), anchor, hops=hops)


def neighbours(driver: Driver, node_id: str) -> set[str]:
    records, _, _ = driver.execute_query(
        "MATCH (:Entity {id: $id})--(n:Entity) RETURN DISTINCT n.id AS id", id=node_id
    )
    return {str(r["id"]) for r in records}


def test_decision_reaches_its_alias_event_over_alias_of(acme_db: Driver) -> None:
    candidates, trace = expand(acme_db, DESCOPE)

    assert candidates.anchor.id == DESCOPE
    assert candidates.anchor.label == "Decision"
    by_id = candidates.by_id()
    assert DESCOPE_ALIAS_EVENT in by_id
    event = by_id[DESCOPE_ALIAS_EVENT]
    assert (event.label, event.hop) == ("Event", 1)

    alias_edges = [e for e in candidates.edges if e.type == "ALIAS_OF"]
    assert alias_edges == [ALIAS_EDGE]  # decision -> event, never the other way round
    assert "ALIAS_OF" in trace.edge_types_used
    assert trace.withheld_ids == [] and trace.hidden_vertices == 0


def test_alias_event_reaches_its_decision_over_alias_of(acme_db: Driver) -> None:
    candidates, trace = expand(acme_db, DESCOPE_ALIAS_EVENT)

    assert (candidates.anchor.id, candidates.anchor.label) == (DESCOPE_ALIAS_EVENT, "Event")
    by_id = candidates.by_id()
    assert DESCOPE in by_id
    assert by_id[DESCOPE].label == "Decision"
    assert [e for e in candidates.edges if e.type == "ALIAS_OF"] == [ALIAS_EDGE]
    # The decision is in the result, so the reference to it stays visible on the event.
    assert candidates.anchor.fields["alias_of_decision"] == DESCOPE
    assert candidates.anchor.masked == ()
    assert trace.withheld_ids == []


def test_system_scope_sees_every_neighbour_unmasked(acme_db: Driver) -> None:
    for anchor in (DESCOPE, DESCOPE_ALIAS_EVENT):
        candidates, _ = expand(acme_db, anchor)
        assert {n.id for n in candidates.nodes} == neighbours(acme_db, anchor), anchor
        assert all(n.hop == 1 and n.masked == () for n in candidates.nodes)
        # Every edge touches the anchor and its other end is a returned node.
        ids = {n.id for n in candidates.nodes}
        for e in candidates.edges:
            assert anchor in (e.source, e.target)
            assert ({e.source, e.target} - {anchor}) <= ids


def test_causal_edges_keep_direction_and_relation(acme_db: Driver) -> None:
    candidates, _ = expand(acme_db, DESCOPE_ALIAS_EVENT)
    causal = {(e.source, e.target): e.relation for e in candidates.edges if e.type == "CAUSAL_PRECEDES"}
    # The alias event's led_to entries, stored as event -> decision.
    assert causal[(DESCOPE_ALIAS_EVENT, "acme-prod-pivot-cloud-only-tiers-2024")] is not None
    assert (DESCOPE_ALIAS_EVENT, "acme-prod-sunset-onprem-connectors-2024") in causal
    records, _, _ = acme_db.execute_query(
        "MATCH (a:Entity {id: $id})-[r:CAUSAL_PRECEDES]-(b) "
        "RETURN startNode(r).id AS s, endNode(r).id AS t, r.relation AS rel",
        id=DESCOPE_ALIAS_EVENT,
    )
    assert causal == {(r["s"], r["t"]): r["rel"] for r in records}


def test_two_hops_reach_further(acme_db: Driver) -> None:
    one, _ = expand(acme_db, DESCOPE, hops=1)
    two, _ = expand(acme_db, DESCOPE, hops=2)
    hop1 = {n.id for n in one.nodes}
    assert {n.id for n in two.nodes if n.hop == 1} == hop1
    hop2 = {n.id for n in two.nodes if n.hop == 2}
    assert hop2, "the demo graph has nodes two hops from the descope decision"
    assert not hop2 & (hop1 | {DESCOPE})


def test_unknown_anchor_is_not_visible(acme_db: Driver) -> None:
    with pytest.raises(AnchorNotVisible):
        expand(acme_db, "acme-corp-no-such-decision-2099")


def _capped_walk(driver: Driver, anchor: str, hops: int, cap: int) -> dict[str, int]:
    """The walk's node set worked out in Python: every neighbour at the first hop; beyond it, per
    frontier node and edge type, the ``cap`` edges to the most important neighbours (ties by id)."""
    seen, frontier, reached_at = {anchor}, [anchor], {}
    for hop in range(1, hops + 1):
        reached: set[str] = set()
        for node in frontier:
            records, _, _ = driver.execute_query(
                "MATCH (:Entity {id: $id})-[r]-(n:Entity) "
                "RETURN type(r) AS type, n.id AS id, coalesce(n.importance, 0.0) AS importance",
                id=node,
            )
            by_type: dict[str, list[tuple[float, str]]] = {}
            for r in records:
                by_type.setdefault(r["type"], []).append((-r["importance"], r["id"]))
            for rows in by_type.values():
                kept = sorted(rows) if hop == 1 else sorted(rows)[:cap]
                reached.update(node_id for _, node_id in kept)
        frontier = sorted(reached - seen)
        seen.update(frontier)
        reached_at.update(dict.fromkeys(frontier, hop))
    return reached_at


def test_the_neighbour_cap_keeps_the_most_important_beyond_the_first_hop(acme_db: Driver) -> None:
    """docs/design.md §Queries by capability: the cap sorts only a group over it; what it keeps
    is still the most important neighbours per frontier node and edge type."""
    records, _, _ = acme_db.execute_query("MATCH (n:Decision) RETURN n.id AS id ORDER BY id")
    anchors = [r["id"] for r in records]
    capped = 0
    for anchor in anchors:
        for hops, cap in ((2, 1), (3, 1), (3, 2)):
            candidates, _ = preselect(acme_db, Scope.system(), anchor, hops=hops, cap=cap)
            walked = {n.id: n.hop for n in candidates.nodes}
            expected = _capped_walk(acme_db, anchor, hops, cap)
            assert walked == expected, (anchor, hops, cap)
            uncapped, _ = preselect(acme_db, Scope.system(), anchor, hops=hops)
            capped += len(uncapped.nodes) > len(walked)
    assert capped, "the demo org has frontier nodes over the cap, so the cap was exercised"


def test_the_walk_sends_internal_fields_only_as_nulls_and_only_for_nodes_holding_them(driver: Driver) -> None:
    """A node's properties leave the walk as stored, less the internal ones (vectors, hashes): a
    node holding one sends every internal name as null (``walk.NODE_PROPS``), a node holding none
    sends no null entry at all, rather than one per internal name to be decoded and dropped."""
    ids = ("walk-props-lean", "walk-props-vector", "walk-props-far")
    driver.execute_query(
        "CREATE (a:Entity:Decision {id: $ids[0], option: 'lean', importance: 0.5})"
        "-[:CAUSAL_PRECEDES {relation: 'causal'}]->"
        "(b:Entity:Event {id: $ids[1], summary: 'held', embedding: [0.5, 0.25], content_hash: 'x'})"
        "-[:CAUSAL_PRECEDES {relation: 'causal'}]->(:Entity:Event {id: $ids[2], summary: 'far'})",
        ids=list(ids),
    )
    try:
        for anchor in ids:
            params = {**scope_params(Scope.system()), "anchor": anchor, "cap": 25}
            record = read(driver, EXPAND_QUERIES[2], params)[0]
            rows = {record["id"]: record["props"], **{row[0]: row[3] for row in record["nodes"]}}
            assert set(rows) == set(ids)
            for node_id, props in rows.items():
                nulls = {k for k, v in props.items() if v is None}
                assert nulls == (set(INTERNAL_FIELDS) if node_id == ids[1] else set()), (anchor, node_id)
                assert "embedding" not in preselect(driver, Scope.system(), node_id)[0].anchor.fields
            assert rows[ids[0]] == {"id": ids[0], "option": "lean", "importance": 0.5}
    finally:
        driver.execute_query("MATCH (n:Entity) WHERE n.id IN $ids DETACH DELETE n", ids=list(ids))
