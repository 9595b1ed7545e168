"""An update leaves alone what its writer cannot read (destroy, alter, oracle).

``ingestOrgMemory`` upserted a stored node or edge with ``SET n += props``: the writer's
``x_extra`` map replaced the stored one whole, so keys past its whitelist (an operator's note on
an alias projection, a key only directors read) were dropped, and a field its rules hide (a
rationale, a timestamp) was overwritten with whatever it sent. Now an update sets only the fields
the writer's rules show on the node and replaces only the ``x_extra`` keys it may read; the rest
keeps its stored value (``cairn.policy.writes.kept_on_update``, ``merged_extra``), a key it could
not read back is refused, and its answer (counts, warnings, errors) is the same whatever the
hidden keys and fields hold. The operator's load still replaces the map whole.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from neo4j import Driver
from starlette.testclient import TestClient

from cairn.app import create_app
from cairn.ingest.org_memory import ingest_payload
from cairn.memory.dossiers.blocks import ingest_block
from cairn.policy.profiles import PolicyRegistry
from cairn.runtime.settings import Settings
from cairn.schema.nodes import DECLARED_FIELDS
from tests.e2e.adversarial.conftest import demo_roles_with
from tests.e2e.conftest import gql, passport, wipe

INGEST = """mutation($p: JSON!) { ingestOrgMemory(payload: $p) { decisions events causalEdges aliases
  nodesCreated nodesUpdated nodesUnchanged edgesCreated edgesUpdated edgesUnchanged warnings } }"""
SECRET = "ZQXHIDDENKEYVALUE"
HIDDEN_TEXT = "ZQXHIDDENRATIONALE"
ACCESS = {
    "domain": "acme/product",
    "importance": 0.5,
    "sensitivity": "low",
    "namespaces": ["internal"],
    "roles_allowed": ["writer", "director", "exec"],
}


def decision(rid: str, **over: Any) -> dict[str, Any]:
    return {
        "id": rid,
        "timestamp": "2024-05-01T00:00:00Z",
        "option": f"Option of {rid}",
        "rationale": "visible rationale",
        "decision_maker": "Operator",
        **ACCESS,
        **over,
    }


def event(rid: str, **over: Any) -> dict[str, Any]:
    """The projection of zz-keyed (alias_of_decision is a key every demo writer reads)."""
    return {
        "id": rid,
        "timestamp": "2024-05-02T00:00:00Z",
        "summary": f"Event {rid}",
        "x-extra": {"alias_of_decision": "zz-keyed"},
        **ACCESS,
        **over,
    }


def alias(rid: str, d: str, e: str, extra: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": rid,
        "type": "alias_event",
        "decision_id": d,
        "event_id": e,
        "scope": "projection",
        "domain_from": "acme/product",
        "domain_to": "acme/product",
        "x-extra": extra,
    }


def transition(a: str, b: str, extra: dict[str, Any]) -> dict[str, Any]:
    edge = {"id": f"t-{a}-{b}", "from": a, "to": b, "relation": "led_to", "reason": "probe"}
    return {**edge, "domain": "acme/product", "x-extra": extra}


# Stored by the operator: "zz-keyed" carries a key the writer may not read, "zz-plain" does not;
# the alias and transition carry an operator note (the demo's alias projections do).
OPERATOR = {
    "decisions": [
        decision("zz-keyed", **{"x-extra": {"visibility_note": "old", "zqx_directors_only": SECRET}}),
        decision("zz-plain", **{"x-extra": {"visibility_note": "old"}}),
        decision("zz-cause"),
    ],
    "events": [event("zz-alias-event")],
    "aliases": [alias("zz-alias", "zz-keyed", "zz-alias-event", {"note": SECRET})],
    "transitions": [transition("zz-cause", "zz-keyed", {"note": SECRET})],
}


def stored_extra(driver: Driver, rid: str) -> dict[str, Any]:
    rows = driver.execute_query("MATCH (n:Entity {id: $id}) RETURN n.x_extra AS x", id=rid).records
    return dict(json.loads(rows[0]["x"]))


def stored_edge_extra(driver: Driver, rel: str) -> dict[str, Any]:
    rows = driver.execute_query(f"MATCH ()-[r:{rel}]->() RETURN r.x_extra AS x").records
    return dict(json.loads(rows[0]["x"]))


@pytest.fixture
def org(driver: Driver) -> Iterator[Driver]:
    wipe(driver)
    ingest_payload(driver, OPERATOR)
    yield driver
    wipe(driver)


@pytest.fixture(scope="module")
def app(settings: Settings) -> Iterator[tuple[TestClient, PolicyRegistry]]:
    with TestClient(create_app(settings)) as client:
        yield client, PolicyRegistry.load(settings.policy_file)


def test_keys_the_writer_cannot_read_survive_its_update(org: Driver, app: Any) -> None:
    client, registry = app
    payload = {
        "decisions": [decision("zz-keyed", **{"x-extra": {"visibility_note": "new"}})],
        "events": [event("zz-alias-event")],
        "aliases": [alias("zz-alias", "zz-keyed", "zz-alias-event", {})],
        "transitions": [transition("zz-cause", "zz-keyed", {"visibility_note": "edge"})],
    }
    body = gql(client, INGEST, passport(registry, "writer"), p=payload)
    assert "errors" not in body, body
    assert SECRET not in json.dumps(body)
    assert stored_extra(org, "zz-keyed") == {"visibility_note": "new", "zqx_directors_only": SECRET}
    assert stored_edge_extra(org, "ALIAS_OF") == {"note": SECRET}
    assert stored_edge_extra(org, "CAUSAL_PRECEDES") == {"note": SECRET, "visibility_note": "edge"}


def test_the_answer_does_not_depend_on_hidden_keys(org: Driver, app: Any) -> None:
    """Two nodes that differ only in a key the writer cannot read answer the same write alike: a
    count of updated nodes must not tell that the map it sent differs from the stored one."""
    client, registry = app
    answers = []
    for rid in ("zz-keyed", "zz-plain"):
        same = {"decisions": [decision(rid, **{"x-extra": {"visibility_note": "old"}})]}
        body = gql(client, INGEST, passport(registry, "writer"), p=same)
        assert "errors" not in body, body
        answers.append(body["data"]["ingestOrgMemory"])
    assert answers[0] == answers[1]
    assert answers[0]["nodesUnchanged"] == 1 and answers[0]["nodesUpdated"] == 0


def test_a_key_the_writer_cannot_read_back_is_refused(org: Driver, app: Any) -> None:
    client, registry = app
    for payload in (
        {"decisions": [decision("zz-keyed", **{"x-extra": {"zqx_directors_only": "overwritten"}})]},
        {"decisions": [decision("zz-new", **{"x-extra": {"note": "placed"}})]},
        {"aliases": [alias("zz-alias", "zz-keyed", "zz-alias-event", {"note": "overwritten"})]},
    ):
        body = gql(client, INGEST, passport(registry, "writer"), p=payload)
        assert body["errors"][0]["extensions"]["code"] == "INVALID_INPUT", body
        assert SECRET not in json.dumps(body)
    assert stored_extra(org, "zz-keyed")["zqx_directors_only"] == SECRET
    assert stored_edge_extra(org, "ALIAS_OF") == {"note": SECRET}
    assert not org.execute_query("MATCH (n {id: 'zz-new'}) RETURN n").records


def test_the_operator_still_replaces_the_map(org: Driver) -> None:
    ingest_payload(org, {"decisions": [decision("zz-keyed", **{"x-extra": {"visibility_note": "op"}})]})
    assert stored_extra(org, "zz-keyed") == {"visibility_note": "op"}


HIDDEN_FIELDS = {"rationale", "timestamp"}
STORED = (
    "MATCH (d:Decision {id: 'zz-keyed'}) RETURN d.option AS o, d.rationale AS r, toString(d.timestamp) AS t"
)


def test_fields_the_writer_cannot_read_keep_their_stored_value(
    org: Driver, settings: Settings, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """A writer whose rules hide a decision's rationale and time updates its option: the stored
    rationale and time stay, its own values for them are not stored, and its answer is the same
    as on a twin node whose hidden fields hold something else."""
    org.execute_query(
        "MATCH (d:Decision {id: 'zz-keyed'}) SET d.rationale = $r, d.timestamp = datetime($t)",
        r=HIDDEN_TEXT,
        t="1999-01-01T00:00:00Z",
    )
    path = demo_roles_with(
        tmp_path_factory,
        "writer",
        {"Decision": [{"domains": ["*"], "fields": sorted(DECLARED_FIELDS["Decision"] - HIDDEN_FIELDS)}]},
    )
    registry = PolicyRegistry.load(path)
    answers = []
    with TestClient(create_app(settings.model_copy(update={"policy_file": path}))) as client:
        for rid in ("zz-keyed", "zz-plain"):
            over = {
                "option": "Rewritten option",
                "rationale": "writer text",
                "timestamp": "2024-09-09T00:00:00Z",
            }
            payload = {"decisions": [decision(rid, **over, **{"x-extra": {"visibility_note": "old"}})]}
            body = gql(client, INGEST, passport(registry, "writer"), p=payload)
            assert "errors" not in body, body
            assert HIDDEN_TEXT not in json.dumps(body) and "1999" not in json.dumps(body)
            answers.append(body["data"]["ingestOrgMemory"])
    row = org.execute_query(STORED).records[0]
    assert (row["o"], row["r"]) == ("Rewritten option", HIDDEN_TEXT)
    assert row["t"].startswith("1999-01-01"), row["t"]
    assert answers[0] == answers[1]


INGEST_BLOCK = "mutation($b: JSON!) { ingestBlock(block: $b) { blockId turns facts } }"
TURN = (
    "MATCH (t:Turn)-[:PART_OF]->(:Block {block_id: 'zz_block'})"
    " RETURN t.user_text AS u, t.assistant_text AS a"
)


def test_a_resent_block_keeps_the_turn_fields_its_writer_cannot_read(
    driver: Driver, settings: Settings, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """``ingestBlock`` resending a block not gardened yet rewrote its turns whole: a writer whose
    rules hide a turn's ``assistant_text`` overwrote it. Now it sets only what it may read."""
    wipe(driver)
    first = {"block_id": "zz_block", "turns": [{"user": "first question", "assistant": HIDDEN_TEXT}]}
    ingest_block(driver, first)
    path = demo_roles_with(
        tmp_path_factory,
        "writer",
        {"Turn": [{"domains": ["*"], "fields": sorted(DECLARED_FIELDS["Turn"] - {"assistant_text"})}]},
    )
    registry = PolicyRegistry.load(path)
    resent = {"block_id": "zz_block", "turns": [{"user": "edited question", "assistant": "writer text"}]}
    with TestClient(create_app(settings.model_copy(update={"policy_file": path}))) as client:
        body = gql(client, INGEST_BLOCK, passport(registry, "writer"), b=resent)
    assert "errors" not in body and HIDDEN_TEXT not in json.dumps(body), body
    rows = driver.execute_query(TURN).records
    assert [(r["u"], r["a"]) for r in rows] == [("edited question", HIDDEN_TEXT)]
    wipe(driver)
