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

PORT = 18112
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
TOPICS = ("diet and cooking", "running and training", "travel plans", "python tooling", "cloud costs")
QUESTIONS = (
    "why is our AI readiness score so low?",
    "what changed since last month?",
    "what if data quality improves to 4?",
    "why can't we do predictive maintenance?",
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


def start_service(settings: Settings) -> subprocess.Popen[bytes]:
    env = {**os.environ, "CAIRN_PORT": str(PORT), "CAIRN_LOG_LEVEL": "WARNING"}
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
            {"query": SEARCH, "variables": {"q": rng.choice(TOPICS)}},
            headers_for(registry, "staff"),
        )
    if kind < 0.8:
        return (
            "dossiers",
            {"query": DOSSIERS, "variables": {"q": rng.choice(TOPICS)}},
            headers_for(registry, "staff"),
        )
    if kind < 0.95:
        return (
            "question",
            {"query": QUESTION, "variables": {"t": rng.choice(QUESTIONS)}},
            headers_for(registry, "manager"),
        )
    packet = {
        "packet_id": f"load-{n}",
        "cluster_label": rng.choice(TOPICS),
        "facts": [f"Load fact {n} about {rng.choice(TOPICS)}", f"Another detail {n}"],
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
    counter = 0

    async def client(k: int) -> None:
        nonlocal counter
        rng = random.Random(seed * 1000 + k)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{PORT}", timeout=120) as http:
            while time.perf_counter() < deadline:
                counter += 1
                kind, body, headers = request_for(rng, registry, counter)
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
    }


def main(argv: list[str] | None = None) -> None:
    args = argparse.ArgumentParser()
    args.add_argument("--seconds", type=float, default=30.0)
    args.add_argument("--soak-minutes", type=float, default=0.0)
    opts = args.parse_args(argv if argv is not None else [])
    with running_neo4j() as settings:
        registry = PolicyRegistry.load(settings.policy_file)
        fresh_start(settings)
        service = start_service(settings)
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
    }
    table = [
        "# mixed load against cairn serve (loopback)",
        "",
        "| clients | requests | errors | req/s | p50 ms | p95 ms | p99 ms |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in [*levels, *([soak] if soak else [])]:
        table.append(
            f"| {row['clients']} | {row['requests']} | {row['errors']} | {row['rps']} | {row['p50_ms']} | "
            f"{row['p95_ms']} | {row['p99_ms']} |"
        )
    table += [
        "",
        f"RSS after the warm-up (10 s at 8 and at 32 clients) {memory_warm:.0f} MB, "
        f"after the 8/32-client levels "
        f"{memory_levels:.0f} MB, at the end {memory_end:.0f} MB: "
        f"end/warm-up {memory_end / memory_warm:.3f}, "
        f"end/after-levels {memory_end / memory_levels:.3f} (soak {opts.soak_minutes} min)",
    ]
    for row in levels:
        kinds = ", ".join(f"{k} {v} ms" for k, v in row["p50_ms_by_kind"].items())
        table.append(f"p50 by kind at {row['clients']} clients: {kinds}")
    if soak:
        curve = ", ".join(f"{t}: {m:.0f}" for t, m in soak["rss_samples"])
        table += ["", f"RSS during the soak (s: MB): {curve}"]
    write_results("load", result, table)


if __name__ == "__main__":
    main(sys.argv[1:])
