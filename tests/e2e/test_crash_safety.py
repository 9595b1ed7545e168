"""Kill the ingest (SIGKILL) or the Neo4j server mid-way, re-run, and find every unit exactly once.

Three bulk ingests are tried through the real CLI: a fixture set, a file of fact packets and a
correspondence file. Each writes one unit of work per transaction with ids derived from the
input, so a killed run leaves whole units behind, never half of one, and a re-run completes the
set. The runs that are killed (and the ones that meet the dead server) are processes of their
own, forked from one warm process that has imported the CLI and loaded the model once
(tests/e2e/warm_cli.py); the runs nothing interrupts (the reference, the completing re-run, the
idempotent one) go through the same CLI in this process, whose model is already loaded (a
process each would import torch and load the model again for nothing the property needs) and
embed through the session's memory of vectors. The killed runs take the vectors this process
already made from a file instead of embedding the same texts again (a text not there is embedded
by the child's own model): what is written does not depend on where a vector came from, and the
kills, which wait for writes to progress, still land inside a transaction or between two. The
strongest check is the last one: the graph after several kills and a re-run is the graph an
uninterrupted run writes (timestamps aside), so no dossier is half-written and no journal entry
is missing or doubled.

The three outage tests share one SIGKILL of the server and one start after it (the `outage`
fixture): the three ingests run at once, each paused once past its first write, so all three
meet the same dead server mid-way; each test checks what its own process said and that a
re-run completes its ingest.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from neo4j import Driver
from neo4j.time import DateTime
from typer.testing import CliRunner

from bench.correspondence_sync import generate as generate_letters
from cairn.cli import app
from cairn.ingest.correspondence import collisions
from cairn.runtime import neo4j_server
from cairn.runtime.database import sync_driver
from cairn.runtime.settings import Settings, get_settings
from tests.conftest import MemoEmbedder
from tests.e2e.conftest import wipe
from tests.e2e.warm_cli import VECTORS_ENV, Run, WarmCLI

pytestmark = pytest.mark.restarts

# The fixture runs write FIXTURE_BATCH records per transaction (default 500): DECISIONS and
# EVENTS span ten node transactions and four of edges, as 2,000 decisions and 3,000 events
# would at the default, for two fifths of the writes and vectors.
DECISIONS = 800
EVENTS = 1200
FIXTURE_BATCH = 200
KILLS = 2  # every one must land mid-way (issue 13: at least two mid-way kills per ingest)
# The fixture set's texts repeat every TEXTS records (ids, edges and units stay one per record):
# the reference run embeds 4 x TEXTS texts instead of two per record, and what is written per unit,
# and when a kill lands, does not depend on how many distinct texts the vectors came from.
TEXTS = 100
PACKETS = 150
# The correspondence runs write LETTER_BATCH sections per transaction (default 256) and embed
# LETTER_WINDOW per model call (default 512, two batches): LETTERS spans eight transactions and
# four windows, as 2,048 letters would at the defaults, for a fraction of the embedding.
LETTERS = 250
LETTER_BATCH = 32
LETTER_WINDOW = 64
# CAIRN_NEO4J_RETRY_S of the runs that meet the killed server (default 15). The driver retries a
# failed transaction after 1 s +- 20%, then 2 s, 4 s..., until the window has passed: a window of
# 0.5 s is exactly one retry (3 s was two or three, the runs giving up 3-8 s after the kill).
RETRY_S = "0.5"
OUTAGE_MESSAGE = "lost the connection to Neo4j"
LOG = "collisions.jsonl"


# --- the three ingests --------------------------------------------------------------------------


def write_big_fixture_set(root: Path, seed: int = 3) -> None:
    rng = random.Random(seed)
    for sub in ("decisions", "events", "transitions"):
        (root / sub).mkdir(parents=True)
    access = {
        "domain": "acme/product",
        "sensitivity": "low",
        "namespaces": ["internal"],
        "roles_allowed": ["staff", "director"],
        "importance": 0.5,
        "tags": ["load"],
    }
    decisions = [
        {
            "id": f"crash-d{i}",
            "option": f"Decision {i % TEXTS}",
            "rationale": f"Reason {i % TEXTS}",
            "decision_maker": "CTO",
            "timestamp": "2024-01-01T00:00:00Z",
            "supported_by": [f"crash-e{i}"] if i < EVENTS else [],
            **access,
        }
        for i in range(DECISIONS)
    ]
    events = [
        {"id": f"crash-e{i}", "summary": f"Event {i % TEXTS}", "timestamp": "2023-12-01T00:00:00Z", **access}
        for i in range(EVENTS)
    ]
    transitions = [
        {
            "id": f"crash-t{i}",
            "from": f"crash-d{i}",
            "to": f"crash-d{i + 1 + rng.randrange(3)}",
            "relation": "causal",
            "domain": "acme/product",
        }
        for i in range(DECISIONS - 4)
    ]
    (root / "decisions" / "all.json").write_text(json.dumps(decisions))
    (root / "events" / "all.json").write_text(json.dumps(events))
    (root / "transitions" / "all.json").write_text(json.dumps(transitions))


PACKET_TOPICS = (
    "vegetarian cooking",
    "marathon training",
    "python tooling",
    "cloud cost control",
    "travel to Japan",
    "home espresso",
    "gardening tomatoes",
    "learning Spanish",
)


def write_packets(path: Path, seed: int = 5) -> None:
    """Packets on a few topics: some create a dossier, most append, some repeat a stored fact."""
    rng = random.Random(seed)
    lines = []
    for n in range(PACKETS):
        topic = rng.choice(PACKET_TOPICS)
        facts = [f"About {topic}: detail number {rng.randint(1, 60)} of {topic}" for _ in range(4)]
        lines.append(
            json.dumps(
                {
                    "packet_id": f"crash-p{n:03d}",
                    "cluster_label": topic,
                    "facts": facts,
                    "source_block_id": f"crash-block-{n % 10}",
                    "timestamp": "2026-03-01T00:00:00Z",
                }
            )
        )
    path.write_text("\n".join(lines) + "\n")


def write_letters(path: Path, seed: int = 11) -> None:
    path.write_text("# Crash letters\n\n" + generate_letters(LETTERS, random.Random(seed)), encoding="utf-8")


@dataclass(frozen=True)
class Ingest:
    """One bulk ingest: how to prepare its input, run it, and watch its progress in the store."""

    name: str
    prepare: Callable[[Path], Path]
    args: Callable[[Path, Path], list[str]]  # (input, work dir) -> CLI arguments
    progress_query: str
    total: int
    settings: dict[str, int] = field(default_factory=dict)  # Settings fields its runs override

    def progress(self, driver: Driver) -> int:
        return int(driver.execute_query(self.progress_query)[0][0]["c"])

    @property
    def env(self) -> dict[str, str]:
        """The overridden settings as the environment of a run in a process of its own."""
        return {str(Settings.model_fields[k].alias): str(v) for k, v in self.settings.items()}


def _fixture_input(work: Path) -> Path:
    write_big_fixture_set(work / "big")
    return work / "big"


def _packet_input(work: Path) -> Path:
    write_packets(work / "packets.jsonl")
    return work / "packets.jsonl"


def _letter_input(work: Path) -> Path:
    write_letters(work / "crash-letters.md")
    return work / "crash-letters.md"


FIXTURES = Ingest(
    "fixtures",
    _fixture_input,
    lambda src, _work: ["ingest", "fixtures", str(src)],
    "MATCH (n:Entity) WHERE n.id STARTS WITH 'crash-' RETURN count(n) AS c",
    DECISIONS + EVENTS,
    {"fixture_write_batch": FIXTURE_BATCH},
)
PACKETS_INGEST = Ingest(
    "packets",
    _packet_input,
    lambda src, _work: ["ingest", "packets", str(src)],
    "MATCH (j:JournalEntry {seq: 0}) WHERE j.work_key STARTS WITH 'crash-p' RETURN count(j) AS c",
    PACKETS,
)
LETTERS_INGEST = Ingest(
    "correspondence",
    _letter_input,
    lambda src, work: ["ingest", "correspondence", str(src), "--collision-log", str(work / LOG)],
    "MATCH (s:Section) RETURN count(s) AS c",
    LETTERS,
    {"correspondence_write_batch": LETTER_BATCH, "correspondence_embed_window": LETTER_WINDOW},
)
INGESTS = [FIXTURES, PACKETS_INGEST, LETTERS_INGEST]


def cli_process(cli: WarmCLI, args: list[str], work: Path, **env: str) -> Run:
    """The command in a process of its own (a fork of the warm CLI), output to a file in ``work``,
    with ``env`` on top of the test's environment."""
    work.mkdir(parents=True, exist_ok=True)
    return cli.run(args, work / f"cli-{time.monotonic_ns()}.out", COLUMNS="300", **env)


# The last file of vectors written, by how many texts the session's memory held then (it only
# grows, so the same count is the same content): the three outage runs share one file.
_SAVED: dict[int, Path] = {}


def known_vectors(embedder: MemoEmbedder, work: Path) -> dict[str, str]:
    """The environment that lets a killed run reuse the vectors this process has (warm_cli.VECTORS_ENV)."""
    held = len(embedder._seen)
    if held not in _SAVED:
        work.mkdir(parents=True, exist_ok=True)
        _SAVED.clear()
        _SAVED[held] = embedder.save(work / "vectors.npz")
    return {VECTORS_ENV: str(_SAVED[held])}


def run_to_end(ingest: Ingest, args: list[str]) -> str:
    """An uninterrupted run of the same CLI command, in this process, with the ingest's settings."""
    with pytest.MonkeyPatch.context() as patch:
        for name, value in ingest.settings.items():
            patch.setattr(get_settings(), name, value)
        result = CliRunner().invoke(app, args, env={"COLUMNS": "300"})
    assert result.exit_code == 0, f"{result.output}\n{result.exception!r}"
    return result.output


# --- what "the same graph" means ----------------------------------------------------------------

# Float vectors: checked for presence, not compared bit for bit. The store sends a marker in
# their place, so the shape of a graph of thousands of embedded nodes is read without them.
VOLATILE = ("embedding", "centroid_sum")
PRESENT = "<vector>"


def _props(var: str) -> str:
    """Cypher: the properties of ``var`` with each float vector it holds replaced by PRESENT."""
    marked = ", ".join(f"{k}: CASE WHEN {var}.{k} IS NULL THEN null ELSE $present END" for k in VOLATILE)
    return f"{var} {{.*, {marked}}}"


def _stable(props: dict[str, Any]) -> dict[str, Any]:
    """A node's or edge's properties without wall-clock times (and without the keys of vectors
    it does not hold)."""
    return {k: v for k, v in props.items() if v is not None and not isinstance(v, DateTime)}


def section_names(driver: Driver) -> dict[str, str]:
    """Each section's random id (new_section_id) -> its place (source, ordinal), which is what
    identifies a section across runs: two runs of the same file draw different ids."""
    records, _, _ = driver.execute_query(
        "MATCH (s:Section) RETURN s.id AS id, s.source AS src, s.ordinal AS o"
    )
    return {r["id"]: f"section@{r['src']}#{r['o']}" for r in records}


def graph_shape(driver: Driver) -> str:
    """sha256 of every Cairn node and relationship, times and vectors left out, section ids
    replaced by their places."""
    named = section_names(driver)
    nodes, _, _ = driver.execute_query(
        f"MATCH (n:Entity) RETURN labels(n) AS l, {_props('n')} AS p", present=PRESENT
    )
    rels, _, _ = driver.execute_query(
        f"MATCH (a:Entity)-[r]->(b:Entity) RETURN a.id AS a, type(r) AS t, b.id AS b, {_props('r')} AS p",
        present=PRESENT,
    )

    def props(p: dict[str, Any]) -> dict[str, Any]:
        return {k: named.get(v, v) if isinstance(v, str) else v for k, v in _stable(p).items()}

    lines = sorted(json.dumps([sorted(r["l"]), props(r["p"])], sort_keys=True, default=str) for r in nodes)
    lines += sorted(
        json.dumps(
            [named.get(r["a"], r["a"]), r["t"], named.get(r["b"], r["b"]), props(r["p"])],
            sort_keys=True,
            default=str,
        )
        for r in rels
    )
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def logged_collisions(path: Path, named: dict[str, str] | None = None) -> list[collisions.Key]:
    """Every whole entry of the collision log, repeats included (a torn line is not an entry);
    section ids replaced by their places when ``named`` (section_names) is given."""
    named = named or {}
    keys = []
    for line in path.read_text(encoding="utf-8").splitlines() if path.exists() else []:
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            continue
        section = str(entry["section_id"])
        keys.append((named.get(section, section), str(entry["filed_id"]), int(entry["canonical_number"])))
    return keys


def assert_whole(driver: Driver) -> None:
    """Invariants that hold after any number of committed units, however the run ended."""
    records, _, _ = driver.execute_query(
        """
        MATCH (d:Dossier)
        OPTIONAL MATCH (d)-[:HAS_FACT]->(f:Fact)
        WITH d, count(f) AS facts
        OPTIONAL MATCH (j:JournalEntry)-[:ABOUT]->(d)
        RETURN d.id AS id, facts, count(j) AS entries, d.summary AS summary
        """
    )
    for r in records:
        assert r["facts"] > 0 and r["entries"] > 0 and r["summary"], r.data()
    orphans, _, _ = driver.execute_query(
        "MATCH (f:Fact) WHERE f.id STARTS WITH 'fact-crash-' AND NOT (:Dossier)-[:HAS_FACT]->(f) "
        "RETURN count(f) AS c"
    )
    assert orphans[0]["c"] == 0
    shared, _, _ = driver.execute_query(
        "MATCH (f:Fact)<-[:HAS_FACT]-(d:Dossier) WITH f, count(d) AS n WHERE n > 1 RETURN count(f) AS c"
    )
    assert shared[0]["c"] == 0
    numbers, _, _ = driver.execute_query(
        "MATCH (s:Section) RETURN count(s) AS n, count(DISTINCT s.section_number) AS distinct, "
        "coalesce(max(s.section_number), 0) AS top, count(s.embedding) AS embedded"
    )
    n = numbers[0]
    assert n["n"] == n["distinct"] == n["top"] == n["embedded"], n.data()  # 1..N, no gap, no repeat
    repeats, _, _ = driver.execute_query(
        "MATCH (n:Entity) WITH n.id AS id, count(*) AS c WHERE c > 1 RETURN count(*) AS d"
    )
    assert repeats[0]["d"] == 0


# --- the tests ----------------------------------------------------------------------------------


@pytest.mark.parametrize("ingest", INGESTS, ids=lambda i: i.name)
def test_sigkilled_ingest_rerun_writes_what_an_uninterrupted_run_writes(
    ingest: Ingest, driver: Driver, warm_cli: WarmCLI, embedder: MemoEmbedder, tmp_path: Path
) -> None:
    source = ingest.prepare(tmp_path)
    wipe(driver)
    run_to_end(ingest, ingest.args(source, tmp_path / "reference"))
    reference = graph_shape(driver)
    reference_log = sorted(logged_collisions(tmp_path / "reference" / LOG, section_names(driver)))
    assert ingest.progress(driver) == ingest.total

    vectors = known_vectors(embedder, tmp_path / "vectors")
    wipe(driver)
    work = tmp_path / "killed"
    rng = random.Random(f"{ingest.name}-kills")
    killed_at: list[int] = []
    for _ in range(KILLS * 4):
        if len(killed_at) == KILLS:
            break
        done = ingest.progress(driver)
        # A random point: past a random share of what is left, then a random extra delay, so
        # the kill lands inside a transaction or between two.
        target = done + rng.randint(1, max(1, (ingest.total - done) // 2))
        proc = cli_process(warm_cli, ingest.args(source, work), tmp_path / "out", **ingest.env, **vectors)
        deadline = time.monotonic() + 600
        while proc.poll() is None and ingest.progress(driver) < target and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(rng.uniform(0, 0.1))
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
        assert_whole(driver)
        if ingest.progress(driver) == ingest.total:
            # The run finished before its kill landed (its last batches committed within the
            # random delay): the kills start again from an empty store and work folder, so the
            # property is checked on KILLS kills that all landed mid-way.
            wipe(driver)
            shutil.rmtree(work, ignore_errors=True)
            killed_at = []
            continue
        killed_at.append(ingest.progress(driver))
    mid_way = [k for k in killed_at if 0 < k < ingest.total]
    assert len(mid_way) >= 2, f"{ingest.name}: kills landed at {killed_at} of {ingest.total}"
    print(f"{ingest.name}: SIGKILL at {killed_at} of {ingest.total} units")

    run_to_end(ingest, ingest.args(source, work))
    assert ingest.progress(driver) == ingest.total
    assert_whole(driver)
    assert graph_shape(driver) == reference
    log = logged_collisions(work / LOG, section_names(driver))
    assert sorted(log) == reference_log  # every collision logged, none twice
    run_to_end(ingest, ingest.args(source, work))  # and one more run changes nothing
    assert graph_shape(driver) == reference
    assert sorted(logged_collisions(work / LOG, section_names(driver))) == reference_log


@dataclass
class Outage:
    """What one SIGKILL of the server, with the three ingests mid-way, left: each ingest's input
    and work folder, whether its process was still running when the server died, and what it
    said afterwards (exit status, output, seconds from the kill until it gave up)."""

    sources: dict[str, Path]
    work: dict[str, Path]
    running_at_kill: dict[str, bool]
    said: dict[str, tuple[int, str, float]]


@pytest.fixture(scope="module")
def outage(
    driver: Driver,
    settings: Settings,
    warm_cli: WarmCLI,
    embedder: MemoEmbedder,
    tmp_path_factory: pytest.TempPathFactory,
) -> Outage:
    """One kill of the embedded server for the three ingests' outage tests, and one start after
    it (each start costs a server start): the three processes meet the same dead server, each
    on its own ingest, and each test checks its own.

    The three run at once; each is paused (SIGSTOP) as soon as it has written its first unit,
    so that all three are mid-way when the server dies whatever their speeds, and continued
    (SIGCONT) after the kill: each then meets the dead server in the middle of its work, as a
    process that lost the server while busy elsewhere (embedding, between two transactions, or
    waiting on a reply) does."""
    if not settings.embedded:
        pytest.skip("kills the embedded server")
    root = tmp_path_factory.mktemp("outage")
    wipe(driver)
    sources: dict[str, Path] = {}
    work: dict[str, Path] = {}
    procs: dict[str, Run] = {}
    for ingest in INGESTS:
        work[ingest.name] = root / ingest.name
        work[ingest.name].mkdir()
        sources[ingest.name] = ingest.prepare(work[ingest.name])
        # A retry window of RETRY_S instead of the default 15 s: the property is that the
        # command retries, then reports the outage in one line; how long it retries is a setting.
        vectors = known_vectors(embedder, work[ingest.name] / "vectors")
        procs[ingest.name] = cli_process(
            warm_cli,
            ingest.args(sources[ingest.name], work[ingest.name]),
            work[ingest.name] / "out",
            CAIRN_NEO4J_RETRY_S=RETRY_S,
            **ingest.env,
            **vectors,
        )
    waiting = {ingest.name: ingest for ingest in INGESTS}
    while waiting:
        for name, ingest in list(waiting.items()):
            if procs[name].poll() is not None:
                del waiting[name]  # finished or failed before its pause: its test says so
            elif ingest.progress(driver) > 0:
                procs[name].send_signal(signal.SIGSTOP)
                del waiting[name]
        time.sleep(0.02)
    running = {name: proc.poll() is None for name, proc in procs.items()}
    pid = neo4j_server.status(settings).pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    started = time.monotonic()
    for proc in procs.values():
        proc.send_signal(signal.SIGCONT)
    said = {}
    for name, proc in procs.items():
        out, _ = proc.communicate(timeout=600)
        said[name] = (proc.wait(), out.decode(), time.monotonic() - started)
    (Path(settings.neo4j_home) / "run" / "cairn-neo4j.pid").unlink(missing_ok=True)
    neo4j_server.start(settings)
    return Outage(sources, work, running, said)


@pytest.mark.parametrize("ingest", INGESTS, ids=lambda i: i.name)
def test_neo4j_killed_mid_ingest_is_reported_and_recovered(
    ingest: Ingest, outage: Outage, settings: Settings
) -> None:
    assert outage.running_at_kill[ingest.name], "the ingest finished before the server could be killed"
    returncode, text, gave_up_s = outage.said[ingest.name]
    # The driver retries transient errors for CAIRN_NEO4J_RETRY_S, then the command says what happened,
    # in one line, and does not claim success for anything.
    assert returncode == 3, text
    assert OUTAGE_MESSAGE in text and "Traceback" not in text, text
    assert not any(word in text for word in ("ingested", "packet(s):", "created", "unchanged")), text
    print(f"{ingest.name}: gave up {gave_up_s:.0f} s after the kill: {text.strip()[-300:]}")

    source, work = outage.sources[ingest.name], outage.work[ingest.name]
    with sync_driver(settings) as fresh:
        assert_whole(fresh)
        run_to_end(ingest, ingest.args(source, work))
        assert ingest.progress(fresh) == ingest.total
        assert_whole(fresh)
