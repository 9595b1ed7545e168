"""The org search reads only the nodes it can rank (decisions and events), however many other
entities (facts, journal entries) the store holds."""

from __future__ import annotations

from typing import Any

from neo4j import Driver

from cairn.graph.org import SEARCH_QUERY
from cairn.memory.dossiers.governor import process_fact_packet
from cairn.memory.org_search import SEARCHABLE_LABELS
from cairn.policy.scope import Scope
from cairn.runtime.embedder import DIMENSIONS, Embedder
from tests.e2e.conftest import load_acme


def _scanned(plan: dict[str, Any]) -> int:
    """Rows of the plan's scans, summed."""
    rows = int(plan.get("rows", 0)) if "Scan" in str(plan.get("operatorType")) else 0
    return rows + sum(_scanned(c) for c in plan.get("children", []))


def test_org_search_scans_only_decisions_and_events(driver: Driver, embedder: Embedder) -> None:
    load_acme(driver)
    process_fact_packet(
        driver,
        {
            "cluster_label": "Diet",
            "facts": ["User is vegetarian", "User avoids meat"],
            "source_block_id": "b",
        },
        embedder=embedder,
    )
    ranked = driver.execute_query("MATCH (n:Entity) WHERE n:Decision OR n:Event RETURN count(n) AS n")[0][0][
        "n"
    ]
    others = driver.execute_query("MATCH (n:Entity) WHERE NOT (n:Decision OR n:Event) RETURN count(n) AS n")[
        0
    ][0]["n"]
    assert ranked > 0 and others > 0
    params = {
        **Scope.system().cypher_params(),
        **Scope.system().search_vector_params(),
        "vector": [1.0] + [0.0] * (DIMENSIONS - 1),
        "k": 5,
        "threshold": -1.0,
        "labels": list(SEARCHABLE_LABELS),
    }
    with driver.session() as session:
        profile = session.run("PROFILE " + SEARCH_QUERY, params).consume().profile
    assert profile is not None
    assert _scanned(profile) == ranked
