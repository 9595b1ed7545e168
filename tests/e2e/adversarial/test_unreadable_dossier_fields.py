"""Curation and routing leave alone the dossier fields their writer cannot read (destroy, alter, oracle).

``archiveDossier`` and ``mergeDossiers`` set a dossier's ``status`` (and ``merged_into``) and
refresh its ``last_updated``; a merge, and a fact packet appended to a stored dossier, re-choose
its ``summary``. None of this asked the writer's field rules: a writer whose rules hide a
dossier's ``status`` archived it (altering a field it cannot read), and learnt the hidden status
from the answer (``alreadyDone`` for an archived one) or the error ("dossier ... is merged, not
active"); one whose rules hide ``summary`` or ``last_updated`` overwrote them. Now a change that
must set or read a hidden field is refused in words that depend on the writer's rules alone, and
one that only refreshes a hidden field leaves it as stored (``cairn.policy.writes``:
``unreadable_set_problems``, ``kept_on_update``). The demo's writer reads every field: these
probes serve a policy whose writer's ``Dossier`` rule hides some.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from neo4j import Driver
from starlette.testclient import TestClient

from cairn.app import create_app
from cairn.memory.dossiers.curation import archive_dossier, merge_dossiers
from cairn.memory.dossiers.governor import process_fact_packet
from cairn.policy.profiles import PolicyRegistry
from cairn.policy.scope import Scope
from cairn.runtime.embedder import get_embedder
from cairn.runtime.settings import Settings
from cairn.schema.nodes import DECLARED_FIELDS, EMBEDDING_DIMENSIONS
from tests.e2e.adversarial.conftest import demo_roles_with
from tests.e2e.adversarial.test_unwalkable_dossier_writes import ACCESS
from tests.e2e.conftest import gql, passport, wipe

HIDDEN_SUMMARY = "ZQXHIDDENSUMMARY"
OLD_TIME = "1999-01-01T00:00:00Z"
ARCHIVE = "mutation($d: ID!) { archiveDossier(id: $d) { op dossierIds movedFactIds alreadyDone } }"
MERGE = """mutation($s: ID!, $t: ID!) {
  mergeDossiers(sourceId: $s, targetId: $t) { op movedFactIds alreadyDone } }"""
STORED = (
    "MATCH (d:Dossier {id: $id}) RETURN d.status AS status, d.merged_into AS merged_into,"
    " d.summary AS summary, toString(d.last_updated) AS last_updated"
)
# Dossiers stored by the operator, each with one fact: (id, status, merged_into).
DOSSIERS = [
    ("zz-active-a", "active", None),
    ("zz-active-b", "active", None),
    ("zz-active-c", "active", None),
    ("zz-archived", "archived", None),
    ("zz-merged", "merged", "zz-active-c"),
]
CREATE = """
UNWIND $rows AS row
CREATE (d:Entity:Dossier {id: row.id, status: row.status, merged_into: row.merged_into,
        title: 'Notes', summary: $summary, last_updated: datetime($old)})
SET d += $access
CREATE (f:Entity:Fact {id: row.id + '-fact', text: 'A fact of ' + row.id, embedding: row.vector,
        added_at: datetime($old)})
SET f += $access
CREATE (d)-[:HAS_FACT]->(f)
"""


def unit(seed: int) -> list[float]:
    v = np.random.default_rng(seed).standard_normal(EMBEDDING_DIMENSIONS)
    return [float(x) for x in v / np.linalg.norm(v)]


def stored(driver: Driver, did: str) -> dict[str, Any]:
    return dict(driver.execute_query(STORED, id=did).records[0].data())


@pytest.fixture
def store(driver: Driver) -> Iterator[Driver]:
    wipe(driver)
    rows = [
        {"id": d, "status": s, "merged_into": m, "vector": unit(n)} for n, (d, s, m) in enumerate(DOSSIERS)
    ]
    driver.execute_query(CREATE, rows=rows, summary=HIDDEN_SUMMARY, old=OLD_TIME, access=ACCESS)
    yield driver
    wipe(driver)


def policy_hiding(tmp_path_factory: pytest.TempPathFactory, hidden: set[str]) -> Path:
    fields = sorted(DECLARED_FIELDS["Dossier"] - hidden)
    return demo_roles_with(tmp_path_factory, "writer", {"Dossier": [{"domains": ["*"], "fields": fields}]})


def served(settings: Settings, path: Path) -> tuple[TestClient, dict[str, str]]:
    headers = passport(PolicyRegistry.load(path), "writer")
    return TestClient(create_app(settings.model_copy(update={"policy_file": path}))), headers


def test_a_writer_that_cannot_read_the_status_may_not_archive_or_merge(
    store: Driver, settings: Settings, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Refused alike whatever the status holds: an active dossier is not archived (altered),
    an archived one does not answer ``alreadyDone``, a merged one is not named as merged."""
    client, headers = served(settings, policy_hiding(tmp_path_factory, {"status"}))
    before = {d: stored(store, d) for d, _, _ in DOSSIERS}
    with client:
        archives = [gql(client, ARCHIVE, headers, d=d) for d in ("zz-active-a", "zz-archived", "zz-merged")]
        merges = [
            gql(client, MERGE, headers, s=s, t=t)
            for s, t in (
                ("zz-active-a", "zz-active-b"),
                ("zz-merged", "zz-active-b"),
                ("zz-active-b", "zz-archived"),
            )
        ]
    for answers in (archives, merges):
        assert all(a.get("data") is None for a in answers), answers
        errors = [a["errors"] for a in answers]
        assert errors[0][0]["extensions"]["code"] == "DOSSIER_CONFLICT", errors
        assert all(e == errors[0] for e in errors), errors  # nothing depends on the stored status
        assert "status" in errors[0][0]["message"]
        text = json.dumps(errors)
        assert "archived" not in text and "merged," not in text and "active" not in text
    assert {d: stored(store, d) for d, _, _ in DOSSIERS} == before


def test_a_writer_that_cannot_read_merged_into_may_not_merge(
    store: Driver, settings: Settings, tmp_path_factory: pytest.TempPathFactory
) -> None:
    client, headers = served(settings, policy_hiding(tmp_path_factory, {"merged_into"}))
    with client:
        body = gql(client, MERGE, headers, s="zz-active-a", t="zz-active-b")
    assert body.get("data") is None and "merged_into" in body["errors"][0]["message"], body
    assert stored(store, "zz-active-a")["status"] == "active"


def test_archive_and_merge_keep_the_times_and_summary_the_writer_cannot_read(
    store: Driver, settings: Settings, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """A writer that reads the status but not ``last_updated`` nor ``summary`` archives and
    merges; the hidden fields keep their stored values, and no journal entry or answer quotes
    the hidden summary."""
    client, headers = served(settings, policy_hiding(tmp_path_factory, {"last_updated", "summary"}))
    with client:
        archived = gql(client, ARCHIVE, headers, d="zz-active-a")
        merged = gql(client, MERGE, headers, s="zz-active-b", t="zz-active-c")
    assert "errors" not in archived and "errors" not in merged, (archived, merged)
    assert merged["data"]["mergeDossiers"]["movedFactIds"] == ["zz-active-b-fact"]
    for did, status in (("zz-active-a", "archived"), ("zz-active-b", "merged"), ("zz-active-c", "active")):
        row = stored(store, did)
        assert row["status"] == status
        assert row["last_updated"].startswith("1999-01-01"), (did, row)
        assert row["summary"] == HIDDEN_SUMMARY, (did, row)
    assert stored(store, "zz-active-b")["merged_into"] == "zz-active-c"
    quoted = store.execute_query(
        "MATCH (j:JournalEntry) WHERE j.previous_value CONTAINS $s OR j.new_value CONTAINS $s RETURN j.id",
        s=HIDDEN_SUMMARY,
    ).records
    assert not quoted, quoted
    assert HIDDEN_SUMMARY not in json.dumps([archived, merged])


LINK = "mutation($a: ID!, $b: ID!) { linkDossiers(a: $a, b: $b) { op alreadyDone } }"


@pytest.mark.parametrize("hidden", ["roles_allowed", "namespaces", "sensitivity"])
def test_a_writer_that_cannot_read_the_access_fields_is_not_told_they_differ(
    hidden: str, store: Driver, settings: Settings, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """A merge or a link of two dossiers needs their access fields equal; the refusal "cannot
    merge dossiers with different access fields" told a writer whose rules hide one of them that
    it differs. Two dossiers it may read, one pair equal and one differing only in the hidden
    field, now get the same refusal, naming only the field its rules hide."""
    store.execute_query(
        "MATCH (d:Dossier {id: 'zz-active-c'}) SET d.roles_allowed = d.roles_allowed + 'exec',"
        " d.namespaces = d.namespaces + 'public', d.sensitivity = 'medium'"
    )
    client, headers = served(settings, policy_hiding(tmp_path_factory, {hidden}))
    before = {d: stored(store, d) for d, _, _ in DOSSIERS}
    with client:
        answers = [
            [gql(client, MERGE, headers, s="zz-active-a", t=t) for t in ("zz-active-b", "zz-active-c")],
            [gql(client, LINK, headers, a="zz-active-a", b=b) for b in ("zz-active-b", "zz-active-c")],
        ]
    for same, different in answers:
        assert same == different, (same, different)
        assert same.get("data") is None and hidden in same["errors"][0]["message"], same
        assert "different" not in json.dumps(same)
    assert {d: stored(store, d) for d, _, _ in DOSSIERS} == before
    assert not store.execute_query("MATCH (j:JournalEntry) RETURN j").records


def test_the_operator_still_refreshes_them(store: Driver) -> None:
    archive_dossier(store, "zz-active-a")
    merge_dossiers(store, "zz-active-b", "zz-active-c")
    assert not stored(store, "zz-active-a")["last_updated"].startswith("1999")
    target = stored(store, "zz-active-c")
    assert not target["last_updated"].startswith("1999") and target["summary"] != HIDDEN_SUMMARY


OTTERS = ["Sea otters hold hands while they sleep", "Sea otters keep a favourite stone in a pouch"]


def test_a_packet_appended_to_a_stored_dossier_keeps_its_hidden_summary(
    driver: Driver, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Routing a writer's packet into a stored dossier refreshed its summary and time; where the
    writer's rules hide them they stay as stored (and no ``summary_updated`` entry quotes them)."""
    wipe(driver)
    model = get_embedder()
    first = {"cluster_label": "Otters", "facts": OTTERS, "source_block_id": "b1", "access": ACCESS}
    target = process_fact_packet(driver, first, embedder=model).dossier_id
    driver.execute_query(
        "MATCH (d:Dossier {id: $id}) SET d.summary = $s, d.last_updated = datetime($t)",
        id=target,
        s=HIDDEN_SUMMARY,
        t=OLD_TIME,
    )
    registry = PolicyRegistry.load(policy_hiding(tmp_path_factory, {"last_updated", "summary"}))
    writer = Scope.from_profile(registry.roles["writer"])
    more = ["Sea otters wrap themselves in kelp so they do not drift apart while sleeping"]
    packet = {"cluster_label": "Otters", "facts": more, "source_block_id": "b2", "access": ACCESS}
    result = process_fact_packet(driver, packet, embedder=model, writer=writer)
    assert (result.dossier_id, result.action) == (target, "appended"), result
    row = stored(driver, target)
    assert row["summary"] == HIDDEN_SUMMARY and row["last_updated"].startswith("1999-01-01"), row
    assert HIDDEN_SUMMARY not in json.dumps(result.as_json())
    assert not driver.execute_query("MATCH (j:JournalEntry {op: 'summary_updated'}) RETURN j").records
    # The entry left out leaves no gap: the packet's entries are numbered from 0 (``seq`` and id)
    # as if it had never been planned, so its first, the idempotency marker, is ``-0``.
    entries, _, _ = driver.execute_query(
        "MATCH (j:JournalEntry {work_key: $key}) RETURN j.seq AS seq, j.id AS id, j.op AS op ORDER BY seq",
        key=result.packet_key,
    )
    assert [(e["seq"], e["id"], e["op"]) for e in entries] == [
        (n, f"je-{result.packet_key}-{n}", "fact_added") for n in range(len(more))
    ]
    wipe(driver)
