"""Kill the ingest (SIGKILL) or the Neo4j server mid-way, re-run, and find every unit exactly once.

The fixture ingest writes in batches, one transaction each, with MERGE on ids: a killed
run leaves whole batches behind, never half a record, and the re-run completes the set
without duplicating anything.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from neo4j import Driver

from cairn.runtime import neo4j_server
from cairn.runtime.database import sync_driver
from cairn.runtime.settings import Settings
from tests.conftest import wipe

DECISIONS = 600
EVENTS = 900
KILLS = 2


def write_big_fixture_set(root: Path, seed: int = 3) -> tuple[int, int]:
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
            "option": f"Decision {i}",
            "rationale": f"Reason {i}",
            "decision_maker": "CTO",
            "timestamp": "2024-01-01T00:00:00Z",
            "supported_by": [f"crash-e{i}"] if i < EVENTS else [],
            **access,
        }
        for i in range(DECISIONS)
    ]
    events = [
        {"id": f"crash-e{i}", "summary": f"Event {i}", "timestamp": "2023-12-01T00:00:00Z", **access}
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
    edges = DECISIONS + len({(t["from"], t["to"]) for t in transitions})
    return DECISIONS + EVENTS, edges


def counts(driver: Driver) -> tuple[int, int]:
    nodes = driver.execute_query("MATCH (n:Entity) WHERE n.id STARTS WITH 'crash-' RETURN count(n) AS c")[0][
        0
    ]["c"]
    rels = driver.execute_query(
        "MATCH (a:Entity)-[r:CAUSAL_PRECEDES]->() WHERE a.id STARTS WITH 'crash-' RETURN count(r) AS c"
    )[0][0]["c"]
    return int(nodes), int(rels)


def ingest_process(root: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "cairn.cli", "ingest", "fixtures", str(root)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=os.environ.copy(),
    )


def test_sigkilled_ingest_rerun_leaves_every_unit_exactly_once(driver: Driver, tmp_path: Path) -> None:
    wipe(driver)
    expected_nodes, expected_edges = write_big_fixture_set(tmp_path / "big")
    partial_states = []
    for _ in range(KILLS):
        proc = ingest_process(tmp_path / "big")
        # Kill as soon as some but not all of the writes are in: a real mid-way crash.
        before = counts(driver)
        deadline = time.monotonic() + 300
        while proc.poll() is None and time.monotonic() < deadline:
            now = counts(driver)
            if now != before and now != (expected_nodes, expected_edges):
                proc.send_signal(signal.SIGKILL)
                break
            time.sleep(0.02)
        proc.wait(timeout=60)
        partial_states.append(counts(driver))
    assert any(0 < n < expected_nodes or 0 < e < expected_edges for n, e in partial_states), partial_states

    final = ingest_process(tmp_path / "big")
    out, _ = final.communicate(timeout=600)
    assert final.returncode == 0, out.decode()
    assert counts(driver) == (expected_nodes, expected_edges)
    duplicates = driver.execute_query(
        "MATCH (n:Entity) WHERE n.id STARTS WITH 'crash-' "
        "WITH n.id AS id, count(*) AS c WHERE c > 1 RETURN count(*) AS d"
    )[0][0]["d"]
    assert duplicates == 0


def test_neo4j_killed_mid_ingest_is_reported_and_recovered(
    driver: Driver, settings: Settings, tmp_path: Path
) -> None:
    if not settings.embedded:
        pytest.skip("kills the embedded server")
    wipe(driver)
    expected = write_big_fixture_set(tmp_path / "big")
    proc = ingest_process(tmp_path / "big")
    while proc.poll() is None and counts(driver) == (0, 0):
        time.sleep(0.02)
    pid = neo4j_server.status(settings).pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    out, _ = proc.communicate(timeout=600)
    text = out.decode()
    # The ingest must not claim success for work that was not committed.
    assert proc.returncode != 0 or "ingested" in text
    if proc.returncode != 0:
        assert "ingested" not in text
        assert "Neo4j" in text or "unavailable" in text.lower() or "connect" in text.lower()
    (Path(settings.neo4j_home) / "run" / "cairn-neo4j.pid").unlink(missing_ok=True)
    neo4j_server.start(settings)
    rerun = ingest_process(tmp_path / "big")
    out, _ = rerun.communicate(timeout=600)
    assert rerun.returncode == 0, out.decode()
    with sync_driver(settings) as fresh:
        assert counts(fresh) == expected
