"""Issue 12 #4, as an attacker with write rights: every write outside the caller's scope is
refused and leaves the whole graph unchanged (checksum before/after), for the writer and for a
writer narrowed by headers, against content only director and exec may read."""

from __future__ import annotations

from typing import Any

import pytest
from neo4j import Driver
from starlette.testclient import TestClient

from cairn.ingest.correspondence.collisions import default_log_path
from cairn.ingest.correspondence.sync import sync_bytes
from cairn.memory.dossiers import blocks, curation
from cairn.memory.dossiers.models import InputError
from cairn.memory.factors.journal import update_factor
from cairn.memory.factors.models import FactorError
from cairn.policy.passport import headers_for
from cairn.policy.profiles import PolicyRegistry
from cairn.policy.scope import Scope
from cairn.runtime.settings import Settings
from cairn.schema.checksum import graph_checksum
from tests.e2e.adversarial.scoped_write_support import (
    HIDDEN_DECISION,
    HIDDEN_DECISION_2,
    HIDDEN_EVENT,
    INGEST,
    NARROW,
    WRITERS,
    as_writer,
    decision,
    event,
    refused,
    remove,
    transition,
)
from tests.e2e.conftest import gql

pytestmark = [pytest.mark.parametrize("who", sorted(WRITERS)), pytest.mark.usefixtures("acme")]


def stored(driver: Driver, rid: str) -> dict[str, Any]:
    records, _, _ = driver.execute_query("MATCH (n:Entity {id: $id}) RETURN properties(n) AS p", id=rid)
    return dict(records[0]["p"]) if records else {}


def test_the_writer_can_write_inside_its_scope(
    who: str, client: TestClient, acme: Driver, registry: PolicyRegistry
) -> None:
    """The control: the same mutation, in scope, writes (so the refusals below are not vacuous)."""
    rid = f"acme-test-own-{who}"
    try:
        body = gql(client, INGEST, as_writer(registry, who), p={"decisions": [decision(rid)]})
        assert body.get("errors") is None, body
        assert body["data"]["ingestOrgMemory"]["nodesCreated"] == 1
        assert stored(acme, rid)["rationale"] == "attacker text"
    finally:
        remove(acme, rid)


def test_overwriting_a_hidden_decision_is_refused(
    who: str, client: TestClient, acme: Driver, registry: PolicyRegistry
) -> None:
    before = stored(acme, HIDDEN_DECISION)
    problems = refused(client, acme, as_writer(registry, who), {"decisions": [decision(HIDDEN_DECISION)]})
    assert stored(acme, HIDDEN_DECISION) == before
    text = " ".join(problems)
    assert before["option"] not in text and "Decision" not in text


def test_relabelling_a_hidden_event_as_a_decision_is_refused(
    who: str, client: TestClient, acme: Driver, registry: PolicyRegistry
) -> None:
    problems = refused(client, acme, as_writer(registry, who), {"decisions": [decision(HIDDEN_EVENT)]})
    assert "Event" not in " ".join(problems)


@pytest.mark.parametrize(
    "attach",
    [
        lambda new: {"decisions": [decision(new, based_on=[HIDDEN_DECISION])]},
        lambda new: {"decisions": [decision(new, supported_by=[HIDDEN_EVENT])]},
        lambda new: {"decisions": [decision(new, led_to=[HIDDEN_DECISION])]},
        lambda new: {"events": [event(new, led_to=[HIDDEN_DECISION])]},
        lambda new: {"events": [event(new, **{"x-extra": {"alias_of_decision": HIDDEN_DECISION}})]},
        lambda new: {"decisions": [decision(new)], "transitions": [transition("t-x", new, HIDDEN_DECISION)]},
        lambda new: {"decisions": [decision(new)], "transitions": [transition("t-x", HIDDEN_DECISION, new)]},
        lambda new: {"transitions": [transition("t-x", HIDDEN_DECISION_2, HIDDEN_DECISION)]},
        lambda new: {
            "aliases": [
                {
                    "id": "al-x",
                    "decision_id": HIDDEN_DECISION,
                    "event_id": HIDDEN_EVENT,
                    "domain_from": "acme/product",
                    "domain_to": "acme/product",
                }
            ]
        },
    ],
    ids=["based_on", "supported_by", "led_to", "event_led_to", "alias_of", "from", "to", "both", "alias"],
)
def test_an_edge_to_a_hidden_node_is_refused(
    who: str, attach: Any, client: TestClient, acme: Driver, registry: PolicyRegistry
) -> None:
    problems = refused(client, acme, as_writer(registry, who), attach("acme-test-attacher"))
    assert any("does not exist" in p for p in problems), problems


@pytest.mark.parametrize(
    "field,value",
    [
        ("domain", "other/elsewhere"),
        ("sensitivity", "high"),
        ("namespaces", ["confidential"]),
        ("roles_allowed", ["director", "exec"]),
    ],
)
def test_creating_outside_the_profile_is_refused(
    who: str, field: str, value: Any, client: TestClient, acme: Driver, registry: PolicyRegistry
) -> None:
    if who == "writer" and field in ("sensitivity", "namespaces"):
        value = {"sensitivity": "medium", "namespaces": ["internal"]}[field]  # inside: plain writer
        body = gql(
            client,
            INGEST,
            as_writer(registry, who),
            p={"decisions": [decision("acme-t-in", **{field: value})]},
        )
        remove(acme, "acme-t-in")
        assert body.get("errors") is None, body
        return
    problems = refused(
        client, acme, as_writer(registry, who), {"decisions": [decision("acme-t-out", **{field: value})]}
    )
    assert any(f"field '{field}'" in p for p in problems), problems


def test_narrowed_writer_cannot_create_in_a_domain_its_headers_dropped(
    who: str, client: TestClient, acme: Driver, registry: PolicyRegistry
) -> None:
    payload = {"decisions": [decision("acme-t-corp", domain="acme/corporate")]}
    if who == "writer":
        body = gql(client, INGEST, as_writer(registry, who), p=payload)
        remove(acme, "acme-t-corp")
        assert body.get("errors") is None, body
        return
    assert any(
        "outside this role's domains" in p for p in refused(client, acme, as_writer(registry, who), payload)
    )


def test_a_transition_in_a_foreign_domain_is_refused(
    who: str, client: TestClient, acme: Driver, registry: PolicyRegistry
) -> None:
    a, b = "acme-t-a", "acme-t-b"
    t = {**transition("t-foreign", a, b), "domain": "other/place"}
    problems = refused(
        client, acme, as_writer(registry, who), {"decisions": [decision(a), decision(b)], "transitions": [t]}
    )
    assert any("field 'domain'" in p for p in problems)


def test_correspondence_sections_outside_the_scope_are_refused(
    who: str, client: TestClient, acme: Driver, registry: PolicyRegistry
) -> None:
    mutation = 'mutation($m: String!) { syncCorrespondence(source: "attack", markdown: $m) { source } }'
    markdown = (
        "# Board letters\n\n*Access: domain=acme/corporate; sensitivity=high; namespaces=confidential; "
        "roles=director,exec*\n\n---\n\n## I — A letter\n\n*Mallory · 2026-01-05*\n\nPlanted text.\n"
    )
    before = graph_checksum(acme)
    body = gql(client, mutation, as_writer(registry, who), m=markdown)
    assert body.get("data") is None and body["errors"][0]["extensions"]["code"] == "INVALID_INPUT", body
    assert graph_checksum(acme) == before


def test_correspondence_sync_does_not_link_to_a_hidden_section(
    who: str, acme: Driver, registry: PolicyRegistry, settings: Settings
) -> None:
    """A section readable only by director/exec, then the writer appends a reply to it."""
    hidden = (
        "# Board\n\n*Access: domain=acme/correspondence; sensitivity=low; namespaces=internal; "
        "roles=director,exec*\n\n---\n\n## I — Secret\n\n*Dana · 2026-01-05*\n\nHidden words.\n"
    )
    log = default_log_path(settings)
    try:
        sync_bytes(acme, hidden.encode(), "board", collision_log=log)
        before = stored(acme, "section:board:1")
        writer = Scope.from_profile(registry.roles["writer"], domains=("acme/correspondence",))
        reply = (
            "# Board\n\n*Access: domain=acme/correspondence; sensitivity=low; namespaces=internal; "
            "roles=writer,director,exec*\n\n---\n\n## I — Planted\n\n*Mallory · 2026-01-05*\n\n"
            "Overwrite?\n\n---\n\n"
            "## II — Reply\n\n*Mallory · 2026-01-06*\n\nAs said in § I.\n"
        )
        sync_bytes(acme, reply.encode(), "board", collision_log=log, writer=writer)
        assert stored(acme, "section:board:1") == before
        records, _, _ = acme.execute_query(
            "MATCH (:Section)-[r:RESPONDS_TO]->(:Section {id: 'section:board:1'}) RETURN count(r) AS c"
        )
        assert records[0]["c"] == 0
    finally:
        acme.execute_query("MATCH (s:Section {source: 'board'}) DETACH DELETE s")


def test_dossier_curation_of_a_hidden_dossier_answers_as_missing(
    who: str, acme: Driver, registry: PolicyRegistry
) -> None:
    """The dossier path refuses through the same policy predicate (cairn.policy.writes)."""
    acme.execute_query(
        "CREATE (:Entity:Dossier {id: 'dos-hidden', title: 't', domain: 'acme/corporate', "
        "sensitivity: 'high', "
        "namespaces: ['confidential'], roles_allowed: ['director', 'exec'], archived: false})"
    )
    writer = Scope.from_profile(registry.roles["writer"], **_narrowing(who))
    try:
        before = graph_checksum(acme)
        with pytest.raises(curation.CurationError) as hidden:
            curation.archive_dossier(acme, "dos-hidden", "attack", writer)
        with pytest.raises(curation.CurationError) as missing:
            curation.archive_dossier(acme, "dos-never", "attack", writer)
        assert str(hidden.value).replace("dos-hidden", "X") == str(missing.value).replace("dos-never", "X")
        assert graph_checksum(acme) == before
    finally:
        remove(acme, "dos-hidden")


def test_factor_journal_cannot_join_a_hidden_session(
    who: str, acme: Driver, registry: PolicyRegistry
) -> None:
    acme.execute_query(
        "CREATE (:Entity:Factor {id: 'f-open', name: 'open', scale: '0-100', domain: 'acme/product', "
        "sensitivity: 'low', namespaces: ['internal'], roles_allowed: ['writer', 'director', 'exec']}) "
        "CREATE (:Entity:Session {id: 'sess-hidden', domain: 'acme/corporate', sensitivity: 'high', "
        "namespaces: ['confidential'], roles_allowed: ['director', 'exec']}) "
        "CREATE (:Entity:Decision {id: 'dec-hidden-x', domain: 'acme/corporate', sensitivity: 'high', "
        "namespaces: ['confidential'], roles_allowed: ['director', 'exec']})"
    )
    writer = Scope.from_profile(registry.roles["writer"], **_narrowing(who))
    try:
        before = graph_checksum(acme)
        messages = []
        for sid in ("sess-hidden", "dec-hidden-x"):
            with pytest.raises(FactorError) as info:
                update_factor(acme, writer, "f-open", 50, rationale="r", confidence=0.5, session_id=sid)
            messages.append(str(info.value).replace(sid, "X"))
        assert messages[0] == messages[1] and "session" not in messages[0].replace("session_id", "")
        assert graph_checksum(acme) == before
    finally:
        remove(acme, "f-open", "sess-hidden", "dec-hidden-x")


def _narrowing(who: str) -> dict[str, Any]:
    if who == "writer":
        return {}
    return {
        "domains": tuple(NARROW["X-Domain-Scopes"].split(",")),
        "ceiling": NARROW["X-Sensitivity-Ceiling"],
        "namespaces": (NARROW["X-User-Namespaces"],),
    }


def test_the_staff_role_cannot_write_at_all(who: str, client: TestClient, registry: PolicyRegistry) -> None:
    body = gql(client, INGEST, headers_for(registry, "staff"), p={"decisions": [decision("acme-t-staff")]})
    assert body["errors"][0]["extensions"]["code"] == "FORBIDDEN_WRITE"


def test_ingest_block_cannot_overwrite_a_hidden_block(
    who: str, acme: Driver, registry: PolicyRegistry
) -> None:
    hidden = {"domain": "acme/assistant", "sensitivity": "high", "namespaces": ["confidential"]}
    secret = {"block_id": "blk-secret", "turns": [{"turn_index": 1, "user": "hidden words"}]}
    blocks.ingest_block(acme, {**secret, "access": {**hidden, "roles_allowed": ["director", "exec"]}})
    writer = Scope.from_profile(registry.roles["writer"], **_narrowing(who))
    mine = {"domain": "acme/assistant", "namespaces": ["internal"], "roles_allowed": ["writer"]}
    attack = {"turns": [{"turn_index": 1, "user": "planted"}], "access": mine}
    try:
        before = graph_checksum(acme)
        with pytest.raises(InputError) as taken:
            blocks.ingest_block(acme, {**attack, "block_id": "blk-secret"}, writer)
        assert "blk-secret" in str(taken.value) and "hidden" not in str(taken.value)
        assert graph_checksum(acme) == before
    finally:
        remove(acme, blocks.block_node_id("blk-secret"), blocks.turn_node_id("blk-secret", 1))
