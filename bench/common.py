"""Shared benchmark plumbing: an isolated Neo4j, percentiles, and result files."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import statistics
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).parent / "results"
WIPE = "MATCH (n:Entity) CALL (n) { DETACH DELETE n } IN TRANSACTIONS OF 10000 ROWS"


def wipe_graph(driver: Any) -> None:
    """Delete every Cairn node of the benchmark's own database (schema and version stay)."""
    with driver.session() as session:  # CALL ... IN TRANSACTIONS needs an implicit transaction
        session.run(WIPE).consume()


def use_bench_neo4j(name: str, bolt: int, http: int) -> None:
    """Point settings at a benchmark-only embedded Neo4j (own data dir and ports).

    A bench wipes its graph, so it never takes a user's database settings (CAIRN_DATA_DIR, the
    ports, NEO4J_URI) from the environment: only CAIRN_BENCH_DATA_DIR, CAIRN_BENCH_BOLT_PORT,
    CAIRN_BENCH_HTTP_PORT, or an external server named by CAIRN_BENCH_NEO4J_URI.
    """
    os.environ.pop("NEO4J_URI", None)
    if os.environ.get("CAIRN_BENCH_NEO4J_URI"):
        os.environ["NEO4J_URI"] = os.environ["CAIRN_BENCH_NEO4J_URI"]
    else:
        os.environ["CAIRN_DATA_DIR"] = os.environ.get("CAIRN_BENCH_DATA_DIR", f"/tmp/cairn-bench-{name}")
        os.environ["CAIRN_BOLT_PORT"] = os.environ.get("CAIRN_BENCH_BOLT_PORT", str(bolt))
        os.environ["CAIRN_HTTP_PORT"] = os.environ.get("CAIRN_BENCH_HTTP_PORT", str(http))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("CAIRN_LOG_LEVEL", "WARNING")


@contextmanager
def running_neo4j() -> Iterator[Any]:
    from cairn.runtime import neo4j_server
    from cairn.runtime.settings import get_settings

    settings = get_settings()
    started = False
    if settings.embedded and not neo4j_server.status(settings).running:
        neo4j_server.start(settings)
        started = True
    try:
        yield settings
    finally:
        if started:
            neo4j_server.stop(settings)


def neo4j_pid(settings: Any) -> int | None:
    """The embedded server's process id (None for an external server)."""
    from cairn.runtime import neo4j_server

    return neo4j_server.status(settings).pid if settings.embedded else None


def jvm_cpu_s(pid: int | None) -> dict[str, float]:
    """CPU seconds a JVM has used so far, split into its JIT compiler threads ("jit": C1/C2
    compiling hot code) and everything else ("work": Bolt workers running statements, commits,
    GC, index threads); empty when the process cannot be read (no pid, not Linux)."""
    out = {"jit": 0.0, "work": 0.0}
    if pid is None:
        return {}
    tick = os.sysconf("SC_CLK_TCK")
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return {}
    for task in tasks:
        try:
            name = (task / "comm").read_text()
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # the thread ended meanwhile
            continue
        seconds = (int(fields[11]) + int(fields[12])) / tick  # utime + stime
        out["jit" if "CompilerThre" in name else "work"] += seconds
    return out


# The line Neo4j writes to debug.log when it drops a cached plan whose statistics have moved
# (the statement is planned again on its next run).
REPLAN = "Discarded stale query from the query cache"


def replans(settings: Any) -> int | None:
    """How many cached plans the embedded server has dropped so far (None for an external
    server): the bench counts them around its ingests to show each statement is planned once."""
    if not settings.embedded:
        return None
    log = settings.neo4j_home / "logs" / "debug.log"
    try:
        with log.open(errors="replace") as lines:
            return sum(REPLAN in line for line in lines)
    except OSError:
        return None


def scratch_dir(prefix: str) -> Path:
    """A fresh temporary folder, removed when the bench process exits."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def summary(samples_ms: list[float]) -> dict[str, float]:
    return {
        "n": len(samples_ms),
        "p50_ms": round(pct(samples_ms, 50), 3),
        "p95_ms": round(pct(samples_ms, 95), 3),
        "mean_ms": round(statistics.fmean(samples_ms), 3) if samples_ms else float("nan"),
    }


def write_results(name: str, data: dict[str, Any], table: list[str]) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps(data, indent=2, sort_keys=True))
    path = RESULTS / f"{name}.md"
    path.write_text("\n".join(table) + "\n")
    print("\n".join(table))
    return path
