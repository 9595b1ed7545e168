"""Correspondence sync against the real Neo4j: append-only, idempotent, collisions kept and logged."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from neo4j import Driver
from typer.testing import CliRunner

from cairn.cli import app as cli
from cairn.ingest.correspondence.parser import CorrespondenceError
from cairn.ingest.correspondence.sync import SyncReport, reembed, sync_file
from cairn.ingest.correspondence.watch import watch_file
from cairn.runtime.embedder import MAX_TOKENS, Embedder
from cairn.runtime.settings import REPO_ROOT, get_settings
from cairn.schema.section_text import embeddable_text

FIXTURE = REPO_ROOT / "fixtures" / "correspondence" / "acme-letters.md"
ROMAN = ["", "I", "II", "III", "IV", "V", "VI", "VII", "VIII", "IX", "X", "XI", "XII", "XIII", "XIV", "XV"]

DELETE_SECTIONS = "MATCH (s:Section) DETACH DELETE s"
SECTIONS = """
MATCH (s:Section)
RETURN s.id AS id, s.source AS source, s.ordinal AS ordinal, s.section_number AS number,
       s.filed_id AS filed_id, s.filed_number AS filed_number, s.collision AS collision, s.body AS body,
       s.created_at AS created_at, s.embedding AS embedding, s.embedding_model AS model,
       s.sensitivity AS sensitivity, s.namespaces AS namespaces, s.roles_allowed AS roles
ORDER BY s.section_number
"""


@pytest.fixture
def db(empty_db: Driver) -> Driver:
    return empty_db


def letter(filed: str, author: str = "Ana Ortiz", text: str | None = None) -> str:
    body = text or f"Letter filed as {filed} by {author}, about item {filed.lower()} of the plan."
    return f"## {filed} — About {filed}\n\n*{author} · 2026-02-01*\n\n{body}\n\n---\n\n"


def write(path: Path, *parts: str) -> Path:
    path.write_text("# Letters\n\n" + "".join(parts), encoding="utf-8")
    return path


def sections(driver: Driver) -> list[dict[str, Any]]:
    records, _, _ = driver.execute_query(SECTIONS)
    return [r.data() for r in records]


def graph_digest(driver: Driver) -> str:
    nodes = sections(driver)
    rels, _, _ = driver.execute_query(
        "MATCH (a:Section)-[r]->(b:Section) RETURN a.id AS a, type(r) AS t, b.id AS b ORDER BY a, b"
    )
    blob = json.dumps([nodes, [r.data() for r in rels]], default=str, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def log_lines(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def sync(driver: Driver, path: Path, log: Path, embedder: Embedder, **kw: Any) -> SyncReport:
    return sync_file(driver, path, collision_log=log, embedder=embedder, **kw)


# --- the sample correspondence ------------------------------------------------------------------


def test_sync_then_resync_changes_nothing_and_leaves_the_markdown_alone(
    db: Driver, tmp_path: Path, embedder: Embedder
) -> None:
    md = tmp_path / "acme-letters.md"
    shutil.copyfile(FIXTURE, md)
    before = md.read_bytes()
    mtime = md.stat().st_mtime_ns
    log = tmp_path / "collisions.jsonl"

    first = sync(db, md, log, embedder)
    assert len(first.created) == first.sections_in_file == 43
    assert first.unchanged == 0 and first.conflicts == []
    assert [s["number"] for s in sections(db)] == list(range(1, 44))
    digest, log_bytes = graph_digest(db), log.read_bytes()

    second = sync(db, md, log, embedder)
    assert second.created == [] and second.conflicts == [] and second.unchanged == 43
    assert second.collisions_logged == 0
    assert graph_digest(db) == digest
    assert log.read_bytes() == log_bytes
    assert md.read_bytes() == before and md.stat().st_mtime_ns == mtime
    assert first.file_sha256 == second.file_sha256 == hashlib.sha256(before).hexdigest()


def test_collisions_are_kept_as_data_and_logged_with_both_numbers(
    db: Driver, tmp_path: Path, embedder: Embedder
) -> None:
    log = tmp_path / "log" / "collisions.jsonl"
    report = sync(db, FIXTURE, log, embedder, source="acme-letters")
    assert [(c.section_number, c.filed_id, c.filed_number) for c in report.collisions] == [
        (15, "XIV", 14),
        (23, "XXIV", 24),
        (40, "XXXVIII", 38),
    ]
    stored = {s["number"]: s for s in sections(db)}
    assert [n for n, s in stored.items() if s["collision"]] == [15, 23, 40]
    assert stored[14]["filed_id"] == stored[15]["filed_id"] == "XIV"  # never corrected
    assert stored[24]["filed_id"] == "XXIV" and stored[24]["collision"] is False
    entries = log_lines(log)
    assert [(e["filed_id"], e["filed_number"], e["canonical_number"]) for e in entries] == [
        ("XIV", 14, 15),
        ("XXIV", 24, 23),
        ("XXXVIII", 38, 40),
    ]
    # Ids are opaque (they encode no position); the log names the stored section's id.
    fifteenth = report.collisions[0]
    assert entries[0]["section_id"] == fifteenth.id and re.fullmatch(r"section:[0-9a-f]{32}", fifteenth.id)
    assert entries[0]["author"] == "Marta Reyes" and entries[0]["line"] == 220

    log.unlink()  # e.g. a crash between the commit and the log write: the next sync heals it
    assert sync(db, FIXTURE, log, embedder, source="acme-letters").collisions_logged == 3
    assert len(log_lines(log)) == 3

    # A run killed half-way through writing its last line: the fragment stays a line of its
    # own (not a JSON object, so not an entry) and the lost entry is written again, whole.
    whole = log.read_text(encoding="utf-8").splitlines(keepends=True)
    log.write_text("".join(whole[:2]) + whole[2][:25], encoding="utf-8")
    assert sync(db, FIXTURE, log, embedder, source="acme-letters").collisions_logged == 1
    lines = log.read_text(encoding="utf-8").splitlines()
    assert lines[2] == whole[2][:25]
    assert [json.loads(x)["canonical_number"] for x in lines[:2] + lines[3:]] == [15, 23, 40]


def test_access_fields_and_responses_are_stored(db: Driver, tmp_path: Path, embedder: Embedder) -> None:
    sync(db, FIXTURE, tmp_path / "c.jsonl", embedder)
    stored = {s["number"]: s for s in sections(db)}
    assert (stored[1]["sensitivity"], stored[1]["namespaces"]) == ("low", ["internal", "public"])
    assert "external" in stored[1]["roles"]
    assert (stored[17]["sensitivity"], stored[17]["namespaces"]) == ("medium", ["internal"])
    assert stored[29]["sensitivity"] == "high" and "staff" not in stored[29]["roles"]
    assert stored[24]["namespaces"] == ["internal"]
    edges, _, _ = db.execute_query(
        "MATCH (a:Section)-[:RESPONDS_TO]->(b:Section) RETURN a.section_number AS a, b.section_number AS b"
    )
    pairs = {(r["a"], r["b"]) for r in edges}
    assert {(16, 15), (41, 40), (39, 38), (43, 18)} <= pairs  # "Re: § XIV" → the later XIV
    assert (16, 14) not in pairs and (41, 38) not in pairs


def test_the_embedding_is_the_body_without_tags_and_names_its_model(
    db: Driver, tmp_path: Path, embedder: Embedder
) -> None:
    sync(db, FIXTURE, tmp_path / "c.jsonl", embedder)
    records, _, _ = db.execute_query(
        "MATCH (s:Section {section_number: 12}) RETURN s.title AS t, s.body AS b, s.embedding AS e, "
        "s.embedding_model AS m, s.exec_decisions AS d"
    )
    row = records[0]
    assert row["m"] == embedder.name
    assert row["d"] == [
        "AI credits are sold as annual committed bundles; "
        "usage above the bundle is billed monthly at list price."
    ]
    stored = np.asarray(row["e"], dtype=np.float32)
    clean = embedder.embed([embeddable_text(row["t"], row["b"])])[0]
    raw = embedder.embed([row["t"] + "\n" + row["b"]])[0]
    assert float(stored @ clean) > 0.999
    assert float(stored @ raw) < 0.99  # the decision and tags are not in the vector


def test_windows_and_batches_that_do_not_line_up_give_each_section_its_own_vector(
    db: Driver, tmp_path: Path, embedder: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(get_settings(), "correspondence_embed_window", 3)  # windows of 3 ...
    monkeypatch.setattr(get_settings(), "correspondence_write_batch", 2)  # ... written in transactions of 2
    texts = [f"Letter {i} is about {topic}." for i, topic in enumerate(("GPUs", "pricing", "Sydney") * 3)]
    md = write(tmp_path / "l.md", *(letter(ROMAN[i + 1], text=t) for i, t in enumerate(texts)))
    report = sync(db, md, tmp_path / "c.jsonl", embedder)
    assert [c.section_number for c in report.created] == list(range(1, 10))
    records, _, _ = db.execute_query(
        "MATCH (s:Section) RETURN s.title AS t, s.body AS b, s.embedding AS e ORDER BY s.section_number"
    )
    assert [r["b"] for r in records] == texts  # file order
    expected = embedder.embed([embeddable_text(r["t"], r["b"]) for r in records])
    got = np.asarray([r["e"] for r in records], dtype=np.float32)
    assert np.allclose((got * expected).sum(axis=1), 1.0, atol=1e-3)


def test_a_section_longer_than_the_window_is_embedded_as_its_opening(
    db: Driver, tmp_path: Path, embedder: Embedder
) -> None:
    opening = " ".join(f"The plan for region {i} depends on capacity and on pricing." for i in range(40))
    assert embedder.token_counts([opening])[0] > MAX_TOKENS
    same_title = "## {} — The capacity plan\n\n*Ana Ortiz · 2026-02-01*\n\n{}\n\n---\n\n"
    md = write(
        tmp_path / "l.md",
        same_title.format("I", opening + " The tail says Sydney."),
        same_title.format("II", opening + " The tail says Frankfurt, a different ending."),
    )
    sync(db, md, tmp_path / "c.jsonl", embedder)
    first, second = (np.asarray(s["embedding"], dtype=np.float32) for s in sections(db))
    assert float(first @ second) > 0.9999  # truncated: the tails past the window are not embedded
    assert [s["body"] for s in sections(db)][1].endswith("a different ending.")  # but stored whole


# --- appends, edits, refusals -------------------------------------------------------------------


def test_an_append_adds_only_the_new_sections(db: Driver, tmp_path: Path, embedder: Embedder) -> None:
    md = write(tmp_path / "l.md", *(letter(ROMAN[i]) for i in range(1, 6)))
    log = tmp_path / "c.jsonl"
    sync(db, md, log, embedder)
    before = {s["id"]: s for s in sections(db)}

    with md.open("a", encoding="utf-8") as f:
        f.write(letter("VI", "Ben Ngata") + letter("VI", "Cy Park") + letter("IX"))
    report = sync(db, md, log, embedder)
    assert [(c.ordinal, c.section_number, c.filed_id, c.collision) for c in report.created] == [
        (6, 6, "VI", False),
        (7, 7, "VI", True),
        (8, 8, "IX", True),
    ]
    assert report.unchanged == 5
    after = {s["id"]: s for s in sections(db)}
    assert all(after[i] == s for i, s in before.items())  # untouched, created_at included
    assert [(e["filed_id"], e["canonical_number"]) for e in log_lines(log)] == [("VI", 7), ("IX", 8)]


def test_an_edited_old_section_is_a_conflict_and_is_not_applied(
    db: Driver, tmp_path: Path, embedder: Embedder
) -> None:
    md = write(tmp_path / "l.md", *(letter(ROMAN[i]) for i in range(1, 4)))
    log = tmp_path / "c.jsonl"
    sync(db, md, log, embedder)
    original = {s["ordinal"]: s["body"] for s in sections(db)}

    edited = md.read_text(encoding="utf-8").replace("about item ii of", "about the REVISED item ii of")
    md.write_text(edited + letter("IV"), encoding="utf-8")
    report = sync(db, md, log, embedder)
    assert [(c.ordinal, c.kind, c.filed_id, c.line) for c in report.conflicts] == [(2, "edited", "II", 11)]
    assert [c.section_number for c in report.created] == [4]  # the append still goes in
    stored = {s["ordinal"]: s["body"] for s in sections(db)}
    assert stored[2] == original[2] and "REVISED" not in stored[2]
    assert sync(db, md, log, embedder).conflicts == report.conflicts  # reported every time, never applied


def test_removed_inserted_and_re_permissioned_sections_are_conflicts(
    db: Driver, tmp_path: Path, embedder: Embedder
) -> None:
    parts = [letter(ROMAN[i]) for i in range(1, 5)]
    md = write(tmp_path / "l.md", *parts)
    log = tmp_path / "c.jsonl"
    sync(db, md, log, embedder)
    digest = graph_digest(db)

    write(md, *parts[:3])
    assert [(c.ordinal, c.kind) for c in sync(db, md, log, embedder).conflicts] == [(4, "missing")]

    write(md, parts[0], letter("X", text="An inserted letter."), *parts[1:])
    kinds = [(c.ordinal, c.kind) for c in sync(db, md, log, embedder).conflicts]
    assert kinds == [(2, "edited"), (3, "edited"), (4, "edited"), (5, "duplicate")]

    restricted = parts[1].replace("\n\nLetter", "\n\n*Access: sensitivity=medium*\n\nLetter")
    write(md, parts[0], restricted, *parts[2:])
    assert [(c.ordinal, c.kind) for c in sync(db, md, log, embedder).conflicts] == [(2, "edited")]
    assert graph_digest(db) == digest

    write(tmp_path / "defaults.md", *parts)
    report = sync(db, tmp_path / "defaults.md", log, embedder, source="l")
    assert report.conflicts == []
    changed_defaults = "*Access: namespaces=internal,public*\n\n"
    (tmp_path / "defaults.md").write_text(
        "# Letters\n\n" + changed_defaults + "".join(parts), encoding="utf-8"
    )
    report = sync(db, tmp_path / "defaults.md", log, embedder, source="l")
    assert {c.kind for c in report.conflicts} == {"access_changed"} and len(report.conflicts) == 4
    assert graph_digest(db) == digest


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("no-sections.md", b"# Letters\n\nNothing numbered here yet.\n"),
        (
            "empty-heading.md",
            ("## I — Hello\n\n*A · 2026-01-01*\n\nText.\n\n## II — Nothing\n\n---\n").encode(),
        ),
        ("binary.md", bytes(range(256)) * 4),
    ],
)
def test_malformed_input_is_refused_and_nothing_is_written(
    db: Driver, tmp_path: Path, embedder: Embedder, name: str, content: bytes
) -> None:
    md = tmp_path / name
    md.write_bytes(content)
    log = tmp_path / "c.jsonl"
    with pytest.raises(CorrespondenceError) as info:
        sync(db, md, log, embedder)
    assert info.value.problems and str(md) in str(info.value)
    assert sections(db) == [] and not log.exists()
    assert md.read_bytes() == content


def test_a_half_written_append_is_refused_and_the_store_is_unchanged(
    db: Driver, tmp_path: Path, embedder: Embedder
) -> None:
    md = write(tmp_path / "l.md", letter("I"), letter("II"))
    log = tmp_path / "c.jsonl"
    sync(db, md, log, embedder)
    digest = graph_digest(db)
    with md.open("a", encoding="utf-8") as f:
        f.write("## III — Coming soon\n\n*Ana Ortiz · 2026-02-02*\n")
    with pytest.raises(CorrespondenceError, match="line 19: section 'III' has a heading but no body"):
        sync(db, md, log, embedder)
    assert graph_digest(db) == digest


# --- re-embedding -------------------------------------------------------------------------------


def test_reembed_touches_only_sections_embedded_with_another_model(
    db: Driver, tmp_path: Path, embedder: Embedder
) -> None:
    md = write(tmp_path / "l.md", *(letter(ROMAN[i]) for i in range(1, 6)))
    sync(db, md, tmp_path / "c.jsonl", embedder)
    before = {s["number"]: s for s in sections(db)}
    db.execute_query(
        "MATCH (s:Section) WHERE s.section_number IN [2, 4] "
        "SET s.embedding_model = 'old-model', s.embedding = [x IN range(1, 384) | 0.0]"
    )
    assert sync(db, md, tmp_path / "c.jsonl", embedder).stale_embeddings == 2
    assert reembed(db, embedder) == 2
    after = {s["number"]: s for s in sections(db)}
    for n in (1, 3, 5):
        assert after[n] == before[n]
    for n in (2, 4):
        assert after[n]["model"] == embedder.name
        assert np.allclose(after[n]["embedding"], before[n]["embedding"], atol=1e-5)
        assert {k: v for k, v in after[n].items() if k != "embedding"} == {
            k: v for k, v in before[n].items() if k != "embedding"
        }
    assert reembed(db, embedder) == 0


# --- watching -----------------------------------------------------------------------------------


def test_watch_follows_appends_and_reports_a_bad_state(
    db: Driver, tmp_path: Path, embedder: Embedder
) -> None:
    md = write(tmp_path / "l.md", letter("I"))
    reports: list[SyncReport] = []
    errors: list[Exception] = []
    got = threading.Event()
    stop = threading.Event()

    def on_report(r: SyncReport) -> None:
        reports.append(r)
        got.set()

    def on_error(e: Exception) -> None:
        errors.append(e)
        got.set()

    thread = threading.Thread(
        target=watch_file,
        args=(db, md),
        kwargs={
            "collision_log": tmp_path / "c.jsonl",
            "on_report": on_report,
            "on_error": on_error,
            "stop": stop,
            "embedder": embedder,
            "interval": 0.05,
        },
    )
    thread.start()
    try:
        for change in (letter("II"), "## III — Half\n", "\n*Ana · 2026-02-02*\n\nNow complete.\n"):
            assert got.wait(30)
            got.clear()
            with md.open("a", encoding="utf-8") as f:
                f.write(change)
        assert got.wait(30)
    finally:
        stop.set()
        thread.join(10)
    assert not thread.is_alive()
    assert [len(r.created) for r in reports] == [1, 1, 1]
    assert len(errors) == 1 and "no body" in str(errors[0])
    assert [s["number"] for s in sections(db)] == [1, 2, 3]


# --- the CLI -------------------------------------------------------------------------------------


def test_cli_ingest_reports_and_refuses(db: Driver, tmp_path: Path) -> None:
    runner = CliRunner()
    log = tmp_path / "c.jsonl"
    ok = runner.invoke(cli, ["ingest", "correspondence", str(FIXTURE), "--collision-log", str(log)])
    assert ok.exit_code == 0, ok.output
    assert "43 created" in ok.output and "collision" in ok.output
    again = runner.invoke(cli, ["ingest", "correspondence", str(FIXTURE), "--collision-log", str(log)])
    assert again.exit_code == 0 and "0 created, 43 unchanged" in again.output
    bad = tmp_path / "bad.md"
    bad.write_bytes(b"\x00\x01binary")
    refused = runner.invoke(cli, ["ingest", "correspondence", str(bad), "--collision-log", str(log)])
    assert refused.exit_code == 2
    assert "nothing was written" in refused.output and "binary" in refused.output
    tail = runner.invoke(cli, ["correspondence", "tail", "-n", "2", "--role", "external"])
    assert tail.exit_code == 0 and "Questions for the second quarter" in tail.output
    search = runner.invoke(cli, ["correspondence", "search", "pricing", "--role", "external"])
    assert search.exit_code == 2 and "FORBIDDEN_SEARCH" in search.output


# --- property: canonical numbers ----------------------------------------------------------------

FILED = st.one_of(
    st.integers(1, 15).map(lambda n: ROMAN[n]),
    st.integers(1, 40).map(str),
)
APPENDS = st.lists(
    st.tuples(st.sampled_from(["alpha", "beta"]), st.lists(FILED, min_size=1, max_size=3)),
    min_size=1,
    max_size=4,
)


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(appends=APPENDS)
def test_any_sequence_of_appends_numbers_sections_1_to_n(
    driver: Driver, tmp_path_factory: pytest.TempPathFactory, embedder: Embedder, appends: list[Any]
) -> None:
    driver.execute_query(DELETE_SECTIONS)
    folder = tmp_path_factory.mktemp("appends")
    files = {name: folder / f"{name}.md" for name in ("alpha", "beta")}
    written: dict[str, list[str]] = {"alpha": [], "beta": []}
    for name, filed in appends:
        first = len(written[name])  # each letter's text is distinct: a repeat is a real "duplicate"
        written[name].extend([letter(f, text=f"{name} letter {first + i}.") for i, f in enumerate(filed)])
        write(files[name], *written[name])
        report = sync(driver, files[name], folder / "c.jsonl", embedder)
        assert report.conflicts == [] and len(report.created) == len(filed)
        resync = sync(driver, files[name], folder / "c.jsonl", embedder)
        assert resync.created == []
    stored = sections(driver)
    assert [s["number"] for s in stored] == list(range(1, len(stored) + 1))
    assert len(stored) == sum(len(filed) for _, filed in appends)
    for source in ("alpha", "beta"):
        mine = [s for s in stored if s["source"] == source]
        assert [s["ordinal"] for s in mine] == list(range(1, len(mine) + 1))  # file order = number order
    assert all(s["collision"] == (s["filed_number"] != s["number"]) for s in stored)
    logged = {e["section_id"] for e in log_lines(folder / "c.jsonl")}
    assert logged == {s["id"] for s in stored if s["collision"]}
