"""Mixed load against `cairn serve` on loopback: throughput, latency percentiles, errors, memory.

Traffic: asks for every role, org search, dossier search, factor questions, and fact-packet
ingestion by the writer — at 8 and 32 concurrent clients for a fixed time each, then an
optional soak. Memory is the service process's RSS (from /proc) after warm-up and at the end.
The warm-up runs at both concurrency levels (10 s each): the service's memory is its steady
state for the concurrency it serves (one worker thread per concurrent blocking call, each with
its own allocator arena), so a warm-up at lower concurrency would count that as growth.
`python -m bench.load [--seconds 30] [--soak-minutes 10]`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.common import pct, running_neo4j, use_bench_neo4j, wipe_graph, write_results

use_bench_neo4j("load", 17711, 17511)

import httpx

from cairn.policy.passport import headers_for
from cairn.policy.profiles import PolicyRegistry
from cairn.runtime.database import sync_driver
from cairn.runtime.settings import REPO_ROOT, Settings

# The service under load listens on loopback, on CAIRN_BENCH_SERVE_PORT (a bench never takes
# CAIRN_PORT from the environment, so it cannot collide with a `cairn serve` already running).
PORT = int(os.environ.get("CAIRN_BENCH_SERVE_PORT", "18112"))
RSS_SAMPLE_S = 30.0
LEVELS = (8, 32)
WARMUP_S = 10.0
ANCHORS = {
    "staff": ["acme-prod-sunset-onprem-connectors-2024", "acme-emea-frankfurt-region-2022"],
    "manager": ["acme-prod-pivot-cloud-only-tiers-2024", "acme-corp-ai-data-governance-2023"],
    "director": ["acme-corp-adopt-gpu-platform-2023", "acme-corp-descope-onprem-2024"],
    "exec": ["acme-corp-unify-cloud-platform-2022"],
}
ASK = "query($id: ID!) { ask(anchorId: $id) { envelope { text } } }"
SEARCH = "query($q: String!) { search(query: $q, k: 5) { total hits { node { id } score } } }"
DOSSIERS = "query($q: String!) { dossierSearch(query: $q) { __typename } }"
QUESTION = "query($t: String!) { question(text: $t) { __typename } }"
PACKET = "mutation($p: JSON!) { ingestFactPacket(packet: $p) { __typename } }"
# Queries vary (thousands of distinct texts, drawn at random), as a user's do: a service that
# answered a handful of repeated texts from a cache would look faster than it is.
SUBJECTS = (
    "diet and cooking",
    "vegetarian recipes",
    "plant-based protein",
    "running and training",
    "marathon pacing",
    "travel plans",
    "python tooling",
    "cloud costs",
    "team structure",
    "Project Falcon",
    "the on-prem connectors",
    "the Frankfurt region",
    "GPU platform adoption",
    "cloud-only pricing tiers",
    "AI data governance",
    "the platform unification",
    "hiring data scientists",
    "sensor coverage on the presses",
)
ASPECTS = (
    "{s}",
    "what did we decide about {s}",
    "latest on {s}",
    "{s} in {q} {y}",
    "risks of {s}",
    "who owns {s}",
    "{s} budget and timeline",
    "why we changed course on {s}",
)
FACTORS = (
    "data quality",
    "data governance",
    "data infrastructure",
    "sensor data coverage",
    "historical data depth",
    "data integration",
    "ML expertise",
    "ML infrastructure",
    "our AI readiness score",
    "MLOps maturity",
    "executive sponsorship",
    "change readiness",
    "process documentation",
    "AI budget headroom",
)
OPTIONS = (
    "annual demand forecasting",
    "seasonal demand forecasting",
    "simple process automation",
    "ML-driven automation",
    "predictive maintenance",
    "real-time equipment monitoring",
    "quality anomaly alerts",
    "an AI pilot programme",
    "AI workforce planning",
)
QUESTION_FORMS = (
    "why is {f} so low?",
    "how did we arrive at the {f} rating?",
    "what if {f} improves to {n}?",
    "what if {f} drops to {n}?",
    "what changed in {f} since {m}?",
    "what changed since {m}?",
    "why can't we do {o}?",
    "what is blocking {o}?",
    "where are we on the assessment?",
    "where were we last time?",
)
MONTHS = ("January", "February", "March", "April", "May", "June", "last month", "last week", "2025-10-01")


def topic(rng: random.Random) -> str:
    return rng.choice(ASPECTS).format(
        s=rng.choice(SUBJECTS), q=rng.choice(("Q1", "Q2", "Q3", "Q4")), y=rng.randint(2021, 2026)
    )


def question(rng: random.Random) -> str:
    return rng.choice(QUESTION_FORMS).format(
        f=rng.choice(FACTORS), o=rng.choice(OPTIONS), n=rng.randrange(10, 95, 5), m=rng.choice(MONTHS)
    )


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def fresh_start(settings: Settings) -> None:
    """Every run starts from the demo data alone (`serve --demo` loads it) and no old traces,
    so that runs compare: packets written by earlier runs would grow the dossiers it searches."""
    with sync_driver(settings) as driver:
        wipe_graph(driver)
    shutil.rmtree(settings.traces, ignore_errors=True)


def start_service() -> subprocess.Popen[bytes]:
    env = {**os.environ, "CAIRN_HOST": "127.0.0.1", "CAIRN_PORT": str(PORT), "CAIRN_LOG_LEVEL": "WARNING"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "cairn.cli", "serve", "--demo"],
        env=env,
        cwd=REPO_ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{PORT}/ready", timeout=2).status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        if proc.poll() is not None:
            raise RuntimeError("cairn serve exited during start-up")
        time.sleep(1)
    proc.kill()
    raise RuntimeError("cairn serve did not become ready")


def request_for(
    rng: random.Random, registry: PolicyRegistry, n: int
) -> tuple[str, dict[str, Any], dict[str, str]]:
    kind = rng.random()
    if kind < 0.5:
        role = rng.choice(list(ANCHORS))
        return (
            "ask",
            {"query": ASK, "variables": {"id": rng.choice(ANCHORS[role])}},
            headers_for(registry, role),
        )
    if kind < 0.65:
        return (
            "search",
            {"query": SEARCH, "variables": {"q": topic(rng)}},
            headers_for(registry, "staff"),
        )
    if kind < 0.8:
        return (
            "dossiers",
            {"query": DOSSIERS, "variables": {"q": topic(rng)}},
            headers_for(registry, "staff"),
        )
    if kind < 0.95:
        return (
            "question",
            {"query": QUESTION, "variables": {"t": question(rng)}},
            headers_for(registry, "manager"),
        )
    packet = {
        "packet_id": f"load-{n}",
        "cluster_label": rng.choice(SUBJECTS),
        "facts": [f"Load fact {n} about {topic(rng)}", f"Another detail {n}"],
        "source_block_id": f"load-block-{n % 50}",
        "timestamp": "2026-01-01T00:00:00Z",
    }
    return "packet", {"query": PACKET, "variables": {"p": packet}}, headers_for(registry, "writer")


async def run_level(
    registry: PolicyRegistry, clients: int, seconds: float, seed: int, watch_pid: int | None = None
) -> dict[str, Any]:
    """``clients`` concurrent clients for ``seconds``; with ``watch_pid``, its RSS every 30 s."""
    deadline = time.perf_counter() + seconds
    latencies: list[float] = []
    by_kind: dict[str, list[float]] = {}
    errors: list[str] = []
    distinct: dict[str, set[str]] = {}
    counter = 0

    async def client(k: int) -> None:
        nonlocal counter
        rng = random.Random(seed * 1000 + k)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{PORT}", timeout=120) as http:
            while time.perf_counter() < deadline:
                counter += 1
                kind, body, headers = request_for(rng, registry, counter)
                distinct.setdefault(kind, set()).add(repr(body["variables"]))
                t = time.perf_counter()
                r = await http.post("/graphql", json=body, headers=headers)
                latencies.append((time.perf_counter() - t) * 1000)
                by_kind.setdefault(kind, []).append(latencies[-1])
                if r.status_code != 200 or r.json().get("errors"):
                    errors.append(f"{kind}: {r.status_code} {r.text[:200]}")

    rss_samples: list[tuple[float, float]] = []

    async def sample_rss(pid: int) -> None:
        while time.perf_counter() < deadline:
            rss_samples.append((round(time.perf_counter() - started), round(rss_mb(pid), 1)))
            await asyncio.sleep(RSS_SAMPLE_S)

    load_before = os.getloadavg()
    started = time.perf_counter()
    tasks = [client(k) for k in range(clients)]
    if watch_pid is not None:
        tasks.append(sample_rss(watch_pid))
    await asyncio.gather(*tasks)
    elapsed = time.perf_counter() - started
    return {
        "rss_samples": rss_samples,
        "clients": clients,
        "requests": len(latencies),
        "errors": len(errors),
        "error_samples": errors[:5],
        "rps": round(len(latencies) / elapsed, 1),
        "p50_ms": round(pct(latencies, 50), 1),
        "p95_ms": round(pct(latencies, 95), 1),
        "p99_ms": round(pct(latencies, 99), 1),
        "mix": {k: len(v) for k, v in sorted(by_kind.items())},
        "p50_ms_by_kind": {k: round(pct(v, 50), 1) for k, v in sorted(by_kind.items())},
        "p95_ms_by_kind": {k: round(pct(v, 95), 1) for k, v in sorted(by_kind.items())},
        "distinct_requests_by_kind": {k: len(v) for k, v in sorted(distinct.items())},
        # 1-minute load average of the machine (2 cores, shared) before and after the level
        "loadavg_1m": [round(load_before[0], 2), round(os.getloadavg()[0], 2)],
    }


def main(argv: list[str] | None = None) -> None:
    args = argparse.ArgumentParser()
    args.add_argument("--seconds", type=float, default=30.0)
    args.add_argument("--soak-minutes", type=float, default=0.0)
    opts = args.parse_args(argv if argv is not None else [])
    load_at_start = os.getloadavg()  # the machine's own load, before this bench adds any
    with running_neo4j() as settings:
        registry = PolicyRegistry.load(settings.policy_file)
        fresh_start(settings)
        service = start_service()
        try:
            warm = [asyncio.run(run_level(registry, c, WARMUP_S, seed=c + 1)) for c in LEVELS]
            memory_warm = rss_mb(service.pid)
            levels = [asyncio.run(run_level(registry, c, opts.seconds, seed=c)) for c in LEVELS]
            memory_levels = rss_mb(service.pid)
            soak = None
            if opts.soak_minutes > 0:
                soak = asyncio.run(
                    run_level(registry, 8, opts.soak_minutes * 60, seed=99, watch_pid=service.pid)
                )
            memory_end = rss_mb(service.pid)
        finally:
            service.terminate()
            service.wait(timeout=60)
    result = {
        "warmup": warm,
        "levels": levels,
        "soak": soak,
        "rss_mb_after_warmup": round(memory_warm, 1),
        "rss_mb_after_levels": round(memory_levels, 1),
        "rss_mb_end": round(memory_end, 1),
        "rss_ratio": round(memory_end / memory_warm, 3),
        "rss_ratio_soak": round(memory_end / memory_levels, 3),
        "loadavg_at_start": [round(x, 2) for x in load_at_start],
    }
    command = f"python -m bench.load --seconds {opts.seconds:g} --soak-minutes {opts.soak_minutes:g}"
    result["command"] = command
    table = [
        "# mixed load against cairn serve (loopback)",
        "",
        f"`{command}` on {os.cpu_count()} cores; the 1-minute load average before → after each level "
        "is in the last column (the machine is shared, so absolute times move with it; this bench's "
        "own client, service and Neo4j count in it). Load average (1, 5, 15 min) before the bench "
        f"started: {', '.join(f'{x:.2f}' for x in load_at_start)}.",
        "",
        "| clients | requests | errors | req/s | p50 ms | p95 ms | p99 ms | load avg |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in [*levels, *([soak] if soak else [])]:
        table.append(
            f"| {row['clients']} | {row['requests']} | {row['errors']} | {row['rps']} | {row['p50_ms']} | "
            f"{row['p95_ms']} | {row['p99_ms']} | {row['loadavg_1m'][0]} → {row['loadavg_1m'][1]} |"
        )
    table += [
        "",
        f"RSS after the warm-up (10 s at 8 and at 32 clients) {memory_warm:.0f} MB, "
        f"after the 8/32-client levels "
        f"{memory_levels:.0f} MB, at the end {memory_end:.0f} MB: "
        f"end/warm-up {memory_end / memory_warm:.3f}, "
        f"end/after-levels {memory_end / memory_levels:.3f} (soak {opts.soak_minutes} min)",
    ]
    labelled = [(f"{r['clients']} clients", r) for r in levels] + ([("the soak", soak)] if soak else [])
    for label, row in labelled:
        kinds = ", ".join(f"{k} {v} ms" for k, v in row["p50_ms_by_kind"].items())
        table.append(f"p50 by kind at {label}: {kinds}")
    for row in levels:
        kinds = ", ".join(f"{k} {v}" for k, v in row["distinct_requests_by_kind"].items())
        table.append(f"distinct requests by kind at {row['clients']} clients: {kinds}")
    if soak:
        curve = ", ".join(f"{t}: {m:.0f}" for t, m in soak["rss_samples"])
        table += ["", f"RSS during the soak (s: MB): {curve}"]
    write_results("load", result, table)


if __name__ == "__main__":
    main(sys.argv[1:])
