"""The ask meta's hidden-edge count says nothing of a hidden node's degree (red-team pass, 2026-11-26).

``policy_trace.counts.hidden_edges`` counted every edge the walk met and could not show: two
visible decisions that both lead to one hidden decision gave ``hidden_vertices`` 1 and
``hidden_edges`` 2, telling a caller how connected a node it may not see is (and the bundle's
``neighbours_scanned`` did the same). README "Threat model: reads", disclosed by design (1),
allows the count of what the walk withheld, with reasons, not its shape: hidden edges are now
counted once per withheld neighbour. Checked as a differential for staff (no
``can_see_withheld_counts``, one hop) and a director (two hops): one edge into a hidden event,
or three (a second from the anchor, one from a node the walk reaches), give the same answer,
meta and prose.
"""

from __future__ import annotations

from typing import Any

import pytest
from neo4j import Driver
from starlette.testclient import TestClient

from cairn.ingest.org_memory import ingest_payload
from cairn.policy.profiles import PolicyRegistry
from tests.e2e.conftest import gql, passport, wipe

ASK = """query($i: ID!) { ask(anchorId: $i) { envelope { text permissionsNote citedIds causes moreCauses }
  response meta evidence { id fields } } }"""
# Per request, not per graph: the request id and the stage timings.
VARYING = ("request_id", "trace_id", "ts_utc", "stage_latencies_ms", "latency_ms_total", "href")
ROLES = ["staff", "writer", "director", "exec", "manager"]


def decision(rid: str, when: str, roles: list[str] = ROLES) -> dict[str, Any]:
    return {
        "id": rid,
        "timestamp": f"2024-05-{when}T00:00:00Z",
        "option": f"Option {rid}",
        "rationale": f"Because of {rid}",
        "decision_maker": "Operator",
        "domain": "acme/product",
        "importance": 0.5,
        "sensitivity": "low",
        "namespaces": ["internal"],
        "roles_allowed": roles,
    }


def edge(a: str, b: str) -> dict[str, Any]:
    transition = {"id": f"t-{a}-{b}", "from": a, "to": b, "relation": "led_to", "reason": "probe"}
    return {**transition, "domain": "acme/product"}


def hidden_event() -> dict[str, Any]:
    fields = decision("zz-hidden", "03", ["exec"])
    return {
        **{k: v for k, v in fields.items() if k not in ("option", "rationale", "decision_maker")},
        "summary": "E",
    }


def load(driver: Driver, edges: list[tuple[str, str]]) -> None:
    wipe(driver)
    decisions = [decision("zz-a", "01"), decision("zz-b", "02")]
    payload = {
        "decisions": decisions,
        "events": [hidden_event()],
        "transitions": [edge(a, b) for a, b in edges],
    }
    ingest_payload(driver, payload)


# A second edge from the anchor to the hidden event (an alias projection: staff walks one hop)
# and one from zz-b (a director walks two).
MORE = {
    "aliases": [
        {
            "id": "zz-alias",
            "type": "alias_event",
            "decision_id": "zz-a",
            "event_id": "zz-hidden",
            "scope": "projection",
            "domain_from": "acme/product",
            "domain_to": "acme/product",
        }
    ],
    "transitions": [edge("zz-b", "zz-hidden")],
}


def stable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: stable(v) for k, v in value.items() if k not in VARYING}
    if isinstance(value, list):
        return [stable(v) for v in value]
    return value


# zz-a leads to zz-b and to the hidden event.
ONE = [("zz-a", "zz-b"), ("zz-a", "zz-hidden")]


def differences(a: Any, b: Any, path: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        return [d for k in sorted(set(a) | set(b)) for d in differences(a.get(k), b.get(k), f"{path}.{k}")]
    return [] if a == b else [f"{path}: {a!r} != {b!r}"]


@pytest.mark.parametrize("role", ["staff", "director"])
def test_more_edges_into_a_hidden_node_answer_alike(
    role: str, driver: Driver, client: TestClient, registry: PolicyRegistry
) -> None:
    answers = []
    load(driver, ONE)
    for more in (None, MORE):
        if more is not None:  # the same nodes (their created_at too), two more edges
            ingest_payload(driver, more)
        body = gql(client, ASK, passport(registry, role), i="zz-a")
        assert "errors" not in body, body
        answers.append(stable(body["data"]["ask"]))
    counts = answers[0]["meta"]["policy_trace"]["counts"]
    assert counts == {"hidden_vertices": 1, "hidden_edges": 1}, counts
    assert answers[0] == answers[1], differences(answers[0], answers[1])
    wipe(driver)
