"""Fixture ingest against the real Neo4j: counts, edge properties, idempotence, refusals."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from neo4j import Driver
from typer.testing import CliRunner

from cairn.cli import app
from cairn.ingest.fixtures import FixtureError, FixtureSet, Problem, load_fixture_dir
from cairn.ingest.org_memory import ingest_fixture_dir
from cairn.runtime.embedder import BATCH_SIZE, PASS, get_embedder
from cairn.runtime.settings import REPO_ROOT
from cairn.schema.checksum import graph_checksum
from tests.e2e.conftest import wipe

ACME = REPO_ROOT / "fixtures" / "acme"
DESCOPE = "acme-corp-descope-onprem-2024"
UNIFY = "acme-corp-unify-cloud-platform-2022"
DESCOPE_ALIAS_EVENT = "acme-e-alias-descope-onprem-2024"
MISSING = "acme-corp-no-such-decision-2099"
NEW_DECISION = "acme-corp-test-only-new-decision-2026"


# --- helpers ---------------------------------------------------------------------------


def label_count(driver: Driver, label: str) -> int:
    records, _, _ = driver.execute_query(f"MATCH (n:`{label}`) RETURN count(n) AS c")
    return int(records[0]["c"])


def rel_count(driver: Driver, rel_type: str | None = None) -> int:
    pattern = f"[r:`{rel_type}`]" if rel_type else "[r]"
    records, _, _ = driver.execute_query(f"MATCH ()-{pattern}->() RETURN count(r) AS c")
    return int(records[0]["c"])


def counts(driver: Driver) -> dict[str, int]:
    return {
        "Decision": label_count(driver, "Decision"),
        "Event": label_count(driver, "Event"),
        "Entity": label_count(driver, "Entity"),
        "CAUSAL_PRECEDES": rel_count(driver, "CAUSAL_PRECEDES"),
        "ALIAS_OF": rel_count(driver, "ALIAS_OF"),
        "all_rels": rel_count(driver),
    }


def read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def write_json(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def copy_with_new_decision(acme_dir: Path, tmp_path: Path) -> Path:
    """A copy of the demo set plus one extra valid decision, so any partial write would show."""
    root = tmp_path / "acme"
    shutil.copytree(acme_dir, root)
    decision = read_json(root / "decisions" / f"{DESCOPE}.json")
    decision.update(id=NEW_DECISION, supported_by=[], based_on=[UNIFY], led_to=[])
    write_json(root / "decisions" / f"{NEW_DECISION}.json", decision)
    return root


def dangling_transition(root: Path) -> None:
    path = root / "transitions" / "trans-acme-a1-to-a2.json"
    data = read_json(path)
    data["to"] = MISSING
    write_json(path, data)


def malformed_json(root: Path) -> int:
    """Drop the colon after "option" in one decision; return the 1-based line of the damage."""
    path = root / "decisions" / f"{DESCOPE}.json"
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    lineno = next(i for i, line in enumerate(lines, 1) if line.lstrip().startswith('"option":'))
    lines[lineno - 1] = lines[lineno - 1].replace('"option":', '"option"', 1)
    path.write_text("".join(lines), encoding="utf-8")
    return lineno


def wrong_type(root: Path) -> None:
    path = root / "decisions" / f"{DESCOPE}.json"
    data = read_json(path)
    data["importance"] = "high"
    write_json(path, data)


def alias_mismatch(root: Path) -> None:
    """The descope alias event now claims to project the unify decision; its alias edge disagrees."""
    path = root / "events" / f"{DESCOPE_ALIAS_EVENT}.json"
    data = read_json(path)
    data["x-extra"]["alias_of_decision"] = UNIFY
    write_json(path, data)


def causal_cycle(root: Path) -> None:
    """unify -> descope exists (transition trans-acme-a1-to-a3); add descope -> unify."""
    write_json(
        root / "transitions" / "trans-acme-a3-back-to-a1.json",
        {
            "id": "trans-acme-a3-back-to-a1",
            "from": DESCOPE,
            "to": UNIFY,
            "relation": "causal",
            "reason": "test-only back edge",
            "timestamp": "2024-03-01T00:00:00Z",
            "domain": "acme/corporate",
            "x-extra": {},
        },
    )


def check_dangling(problems: list[Problem], _: Any) -> None:
    assert problems == [
        Problem(
            "transitions/trans-acme-a1-to-a2.json",
            "trans-acme-a1-to-a2",
            "to",
            f"refers to '{MISSING}', which does not exist",
        )
    ]


def check_malformed(problems: list[Problem], lineno: int) -> None:
    assert len(problems) == 1
    p = problems[0]
    assert p.file == f"decisions/{DESCOPE}.json"
    assert p.message.startswith(f"malformed JSON at line {lineno} col ")
    assert f"decisions/{DESCOPE}.json: malformed JSON at line {lineno}" in str(p)


def check_wrong_type(problems: list[Problem], _: Any) -> None:
    assert len(problems) == 1
    p = problems[0]
    assert (p.file, p.record_id, p.field) == (f"decisions/{DESCOPE}.json", DESCOPE, "importance")
    assert "number" in p.message
    assert str(p).startswith(f"decisions/{DESCOPE}.json [id={DESCOPE}] field 'importance': ")


def check_alias_mismatch(problems: list[Problem], _: Any) -> None:
    assert problems == [
        Problem(
            "edges/aliases/alias-acme-a3-to-product.json",
            "alias-acme-a3-to-product",
            "event_id",
            f"event '{DESCOPE_ALIAS_EVENT}' has x-extra.alias_of_decision='{UNIFY}', not '{DESCOPE}'",
        )
    ]


def check_cycle(problems: list[Problem], _: Any) -> None:
    assert len(problems) == 1
    p = problems[0]
    assert p.message.startswith("causal edges form a cycle: ")
    cycle = p.message.removeprefix("causal edges form a cycle: ").split(" -> ")
    assert cycle[0] == cycle[-1]
    assert {DESCOPE, UNIFY} <= set(cycle)


BAD_SETS: dict[str, tuple[Callable[[Path], Any], Callable[[list[Problem], Any], None]]] = {
    "dangling_edge": (dangling_transition, check_dangling),
    "malformed_json": (malformed_json, check_malformed),
    "wrong_field_type": (wrong_type, check_wrong_type),
    "alias_mismatch": (alias_mismatch, check_alias_mismatch),
    "causal_cycle": (causal_cycle, check_cycle),
}


# --- counts and properties ---------------------------------------------------------------


@pytest.fixture(scope="module")
def acme_set() -> FixtureSet:
    """The demo set as parsed and validated, the source of every expected number below."""
    return load_fixture_dir(ACME)


def test_demo_set_has_the_documented_size(acme_set: FixtureSet) -> None:
    assert len(acme_set.decisions) == 26
    assert len(acme_set.events) == 41
    assert len(acme_set.transitions) == 21
    assert len(acme_set.aliases) == 10
    assert len(acme_set.causal_edges()) == 64


def test_counts_per_label_and_relationship_type(
    empty_db: Driver, acme_dir: Path, acme_set: FixtureSet
) -> None:
    report = ingest_fixture_dir(empty_db, acme_dir)

    expected = {
        "Decision": len(acme_set.decisions),
        "Event": len(acme_set.events),
        "Entity": len(acme_set.decisions) + len(acme_set.events),
        "CAUSAL_PRECEDES": len(acme_set.causal_edges()),
        "ALIAS_OF": len(acme_set.aliases),
        "all_rels": len(acme_set.causal_edges()) + len(acme_set.aliases),
    }
    assert counts(empty_db) == expected
    assert (report.decisions, report.events, report.causal_edges, report.aliases) == (26, 41, 64, 10)
    assert expected["Decision"] == 26 and expected["Event"] == 41
    assert expected["CAUSAL_PRECEDES"] == 64 and expected["ALIAS_OF"] == 10


def test_every_causal_edge_carries_its_relation(acme_db: Driver, acme_set: FixtureSet) -> None:
    records, _, _ = acme_db.execute_query(
        "MATCH (a)-[r:CAUSAL_PRECEDES]->(b) "
        "RETURN a.id AS a, b.id AS b, r.id AS id, r.relation AS relation, r.relations AS relations"
    )
    stored = {(r["a"], r["b"]): (r["id"], r["relation"], tuple(r["relations"])) for r in records}
    expected = {(e.from_id, e.to_id): (e.id, e.relation, e.relations) for e in acme_set.causal_edges()}
    assert stored == expected

    # Transitions keep their own relation ('causal', 'replaces', 'requires'), also where a
    # decision field states the same pair.
    for t in acme_set.transitions:
        assert stored[(t.from_id, t.to_id)][1] == t.relation, t.id
    assert {t.relation for t in acme_set.transitions} == {"causal", "replaces", "requires"}
    assert stored[(UNIFY, DESCOPE)] == ("trans-acme-a1-to-a3", "causal", ("based_on", "causal"))
    # An edge that came from supported_by is named so, also when the event's led_to states it too.
    support = "acme-e-onprem-support-cost-2023"
    assert stored[(support, DESCOPE)] == (f"{support}>{DESCOPE}", "supported_by", ("led_to", "supported_by"))
    from_support = [e for e in acme_set.causal_edges() if "supported_by" in e.relations]
    assert len(from_support) > 1
    for e in from_support:
        expected_relation = "causal" if "causal" in e.relations else "supported_by"
        assert stored[(e.from_id, e.to_id)][1] == expected_relation, (e.from_id, e.to_id)
    # The demo set also has based_on and led_to pairs stated by nothing stronger, so every
    # name survives the merge somewhere.
    assert {v[1] for v in stored.values()} == {
        "causal",
        "supported_by",
        "based_on",
        "led_to",
        "replaces",
        "requires",
    }
    assert any("based_on" in v[2] for v in stored.values())
    assert any("led_to" in v[2] for v in stored.values())


def test_causal_edge_properties(acme_db: Driver) -> None:
    records, _, _ = acme_db.execute_query(
        "MATCH (:Entity {id: $a})-[r:CAUSAL_PRECEDES]->(:Entity {id: $b}) RETURN properties(r) AS p",
        a=UNIFY,
        b=DESCOPE,
    )
    assert len(records) == 1
    props = records[0]["p"]
    assert props["reason"].startswith("With every cloud customer on one platform")
    assert props["domain"] == "acme/corporate"
    assert props["timestamp"].iso_format().startswith("2024-02-08T18:00:00")
    assert json.loads(props["x_extra"]) == {}


def test_alias_edges_run_decision_to_event(acme_db: Driver, acme_set: FixtureSet) -> None:
    records, _, _ = acme_db.execute_query(
        "MATCH (d)-[r:ALIAS_OF]->(e) RETURN labels(d) AS dl, d.id AS d, labels(e) AS el, e.id AS e, "
        "r.id AS id, r.scope AS scope, r.domain_from AS df, r.domain_to AS dt"
    )
    stored = {r["id"]: r for r in records}
    assert set(stored) == {a.id for a in acme_set.aliases}
    for a in acme_set.aliases:
        row = stored[a.id]
        assert "Decision" in row["dl"] and "Event" in row["el"]
        assert (row["d"], row["e"]) == (a.decision_id, a.event_id)
        assert (row["scope"], row["df"], row["dt"]) == (a.scope, a.domain_from, a.domain_to)


def test_vertex_properties(acme_db: Driver) -> None:
    records, _, _ = acme_db.execute_query(
        "MATCH (d:Decision {id: $id}) RETURN properties(d) AS p, labels(d) AS l", id=DESCOPE
    )
    props, labels = records[0]["p"], records[0]["l"]
    assert sorted(labels) == ["Decision", "Entity"]
    assert props["importance"] == 0.95
    assert props["sensitivity"] == "high"
    assert props["roles_allowed"] == ["director", "exec"]
    assert props["timestamp"].iso_format().startswith("2024-02-08T18:00:00")
    assert json.loads(props["x_extra"])["kpi_tracking_id"] == "KPI-PORT-2024-02"
    assert "created_at" in props

    records, _, _ = acme_db.execute_query(
        "MATCH (e:Event {id: $id}) RETURN e.alias_of_decision AS a", id=DESCOPE_ALIAS_EVENT
    )
    assert records[0]["a"] == DESCOPE


# --- idempotence -------------------------------------------------------------------------


def test_ingest_twice_changes_nothing(empty_db: Driver, acme_dir: Path) -> None:
    ingest_fixture_dir(empty_db, acme_dir)
    first_counts, first_sum = counts(empty_db), graph_checksum(empty_db)

    ingest_fixture_dir(empty_db, acme_dir)

    assert counts(empty_db) == first_counts
    assert graph_checksum(empty_db) == first_sum


@pytest.mark.parametrize("rel", ["ALIAS_OF", "CAUSAL_PRECEDES"])
def test_an_edge_that_regains_a_property_is_counted_updated(
    empty_db: Driver, acme_dir: Path, rel: str
) -> None:
    """A stored edge without a property its record sets (written before the property existed, or
    by hand) is changed by the next ingest, and the report says so: a comparison with a missing
    property is null, not true, so the alias upsert once counted such an edge unchanged."""
    ingest_fixture_dir(empty_db, acme_dir)
    empty_db.execute_query(
        f"MATCH ()-[r:{rel}]->() WITH r ORDER BY r.id LIMIT 1 REMOVE r.domain_from, r.x_extra"
    )

    report = ingest_fixture_dir(empty_db, acme_dir)

    assert report.edges.updated == 1
    assert report.nodes.updated == 0
    (missing,) = empty_db.execute_query(
        f"MATCH ()-[r:{rel}]->() WHERE r.x_extra IS NULL RETURN count(r) AS n"
    )[0]
    assert missing["n"] == 0


def test_a_reload_embeds_through_the_sessions_memory(empty_db: Driver, acme_dir: Path) -> None:
    """Every pass of the process-wide model goes through the session's memory of vectors
    (tests/e2e/conftest.py remembered_model), at any pass size: the suite wipes and
    reloads the demo org dozens of times, and the crash tests hand that memory to the runs they
    kill, so a load that bypassed it (e9183eb sent every ``embed`` past ``_submit``) paid the
    model again each time: the crash tests alone took twice the CPU (user 301 s against 127-147 s)."""
    model = get_embedder()
    ingest_fixture_dir(empty_db, acme_dir)
    wipe(empty_db)
    before = model.passes
    ingest_fixture_dir(empty_db, acme_dir)
    texts = [f"said once in the session, number {n}" for n in range(BATCH_SIZE + 1)]
    first = model.embed(texts)
    assert model.passes == before + -(-len(texts) // PASS)  # the new texts only, in passes of PASS
    for size in (BATCH_SIZE, PASS):
        assert np.array_equal(model.embed(texts, size), first)
    assert model.passes == before + -(-len(texts) // PASS)


def test_checksum_sees_a_single_property_change(acme_db: Driver) -> None:
    """Guards the idempotence test: the checksum is not blind to edits."""
    before = graph_checksum(acme_db)
    acme_db.execute_query(
        "MATCH (:Entity {id: $a})-[r:CAUSAL_PRECEDES]->(:Entity {id: $b}) SET r.reason = 'x'",
        a=UNIFY,
        b=DESCOPE,
    )
    assert graph_checksum(acme_db) != before


# --- refusals ----------------------------------------------------------------------------


@pytest.mark.parametrize("case", sorted(BAD_SETS))
def test_bad_set_is_refused_and_nothing_is_written(
    case: str, acme_db: Driver, acme_dir: Path, tmp_path: Path
) -> None:
    corrupt, check = BAD_SETS[case]
    root = copy_with_new_decision(acme_dir, tmp_path)
    detail = corrupt(root)
    before = graph_checksum(acme_db)

    with pytest.raises(FixtureError) as info:
        ingest_fixture_dir(acme_db, root)

    check(info.value.problems, detail)
    for problem in info.value.problems:
        assert str(problem) in str(info.value)
    assert graph_checksum(acme_db) == before
    assert label_count(acme_db, "Entity") == 67


@pytest.mark.parametrize("case", sorted(BAD_SETS))
def test_bad_set_leaves_an_empty_database_empty(
    case: str, empty_db: Driver, acme_dir: Path, tmp_path: Path
) -> None:
    corrupt, check = BAD_SETS[case]
    root = copy_with_new_decision(acme_dir, tmp_path)
    detail = corrupt(root)

    with pytest.raises(FixtureError) as info:
        ingest_fixture_dir(empty_db, root)

    check(info.value.problems, detail)
    assert label_count(empty_db, "Entity") == 0
    assert rel_count(empty_db) == 0


def test_the_good_copy_with_the_extra_decision_ingests(
    empty_db: Driver, acme_dir: Path, tmp_path: Path
) -> None:
    """The base of every bad set is itself valid, so each refusal is down to its one defect."""
    root = copy_with_new_decision(acme_dir, tmp_path)
    report = ingest_fixture_dir(empty_db, root)
    assert (report.decisions, report.events) == (27, 41)
    assert label_count(empty_db, "Decision") == 27


def test_every_problem_is_reported_in_one_run(acme_db: Driver, acme_dir: Path, tmp_path: Path) -> None:
    root = copy_with_new_decision(acme_dir, tmp_path)
    dangling_transition(root)
    wrong_type(root)
    before = graph_checksum(acme_db)
    with pytest.raises(FixtureError) as info:
        ingest_fixture_dir(acme_db, root)
    # Per-record problems and reference problems come in one report (issue 14: one run shows all).
    assert [(p.file, p.field) for p in info.value.problems] == [
        (f"decisions/{DESCOPE}.json", "importance"),
        ("transitions/trans-acme-a1-to-a2.json", "to"),
    ]
    assert graph_checksum(acme_db) == before


def test_partial_set_closing_a_cycle_with_stored_edges_is_refused(acme_db: Driver, tmp_path: Path) -> None:
    root = tmp_path / "partial"
    (root / "transitions").mkdir(parents=True)
    causal_cycle(root)  # descope -> unify, while unify -> descope is already stored
    before = graph_checksum(acme_db)
    try:
        with pytest.raises(FixtureError):
            ingest_fixture_dir(acme_db, root)
        assert graph_checksum(acme_db) == before
    finally:
        acme_db.execute_query(
            "MATCH (:Entity {id: $a})-[r:CAUSAL_PRECEDES]->(:Entity {id: $b}) DELETE r", a=DESCOPE, b=UNIFY
        )


# --- CLI ---------------------------------------------------------------------------------


def _flat(text: str) -> str:
    """Undo the console's line wrapping."""
    return " ".join(text.split())


def test_cli_refuses_a_bad_set_with_exit_code_2(acme_db: Driver, acme_dir: Path, tmp_path: Path) -> None:
    root = copy_with_new_decision(acme_dir, tmp_path)
    dangling_transition(root)
    before = graph_checksum(acme_db)

    result = CliRunner().invoke(app, ["ingest", "fixtures", str(root)])

    assert result.exit_code == 2, result.output
    out = _flat(result.output)
    assert "1 problem(s) in the fixture set" in out
    assert "transitions/trans-acme-a1-to-a2.json" in out
    assert "field 'to'" in out
    assert f"refers to '{MISSING}', which does not exist" in out
    assert graph_checksum(acme_db) == before


def test_cli_reports_the_malformed_file_and_line(acme_db: Driver, acme_dir: Path, tmp_path: Path) -> None:
    root = copy_with_new_decision(acme_dir, tmp_path)
    lineno = malformed_json(root)
    result = CliRunner().invoke(app, ["ingest", "fixtures", str(root)])
    assert result.exit_code == 2, result.output
    assert f"decisions/{DESCOPE}.json: malformed JSON at line {lineno}" in _flat(result.output)


def test_cli_output_names_the_record_id(acme_db: Driver, acme_dir: Path, tmp_path: Path) -> None:
    root = copy_with_new_decision(acme_dir, tmp_path)
    wrong_type(root)
    result = CliRunner().invoke(app, ["ingest", "fixtures", str(root)])
    assert result.exit_code == 2
    assert f"[id={DESCOPE}] field 'importance'" in _flat(result.output)


def test_cli_ingests_the_demo_set(empty_db: Driver, acme_dir: Path) -> None:
    result = CliRunner().invoke(app, ["ingest", "fixtures", str(acme_dir)])
    assert result.exit_code == 0, result.output
    assert "ingested 26 decisions, 41 events, 64 causal edges, 10 alias overlays" in _flat(result.output)
    assert label_count(empty_db, "Entity") == 67
