"""`ask` latency against the raw Cypher of the same traversal, at 1k, 10k and 100k nodes.

Baseline: one unfiltered Cypher query returning the anchor and its k-hop neighbours — what
a resolver with no policy would run — at k=1 (staff and director asks, one hop) and k=3 (exec
asks, three hops). The ask pipeline adds the ACL in Cypher, masking, selector, budget gate,
templater, meta and the trace (encoded on the request path, compressed and written by the
trace writer thread). Each ask is timed right after the raw query on the same
anchor, so both see the same load. Goal: ask p50 within 2x of raw at the same k, and flat
(within 1.3x) from 1k to 100k nodes. Throughput is measured over HTTP against a real uvicorn
on loopback with 1, 8 and 32 concurrent clients.

``BENCH_ASK_SIZES=1000,10000`` limits the sizes (and skips throughput unless 100k is among
them); ``BENCH_ASK_N`` sets the number of timed asks per series.

``python -m bench ask_latency --digest`` times nothing: it loads the demo org and the 10k bench
graph side by side and prints a digest of every answer (envelope, response, caller meta,
evidence and the encoded trace, with the clock, latencies and request ids held fixed) over
every demo Decision/Event anchor and 400 bench anchors, for staff, manager and director at
one hop, director at two and exec at one to three. A change to the ask path that is meant
to leave answers alone leaves this digest alone.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import random
import shutil
import sys
import threading
import time
from contextlib import ExitStack
from datetime import UTC, datetime
from typing import Any

from bench.common import pct, running_neo4j, scratch_dir, summary, use_bench_neo4j, wipe_graph, write_results

use_bench_neo4j("ask", 17710, 17510)

import httpx
import uvicorn
from neo4j import Driver

from cairn.app import create_app
from cairn.ingest.org_memory import ingest_fixture_dir
from cairn.memory import ask as ask_module
from cairn.memory import trace as bundles
from cairn.memory.ask import AskService
from cairn.policy.passport import headers_for, verify
from cairn.policy.preselector import AnchorNotVisible
from cairn.policy.profiles import PolicyRegistry
from cairn.runtime.collector import tuned_collector
from cairn.runtime.database import read, sync_driver
from cairn.runtime.llm import LLMClient
from cairn.runtime.logging import configure_logging
from cairn.runtime.settings import REPO_ROOT, Settings
from cairn.schema.migrate import migrate

SIZES = tuple(int(n) for n in os.environ.get("BENCH_ASK_SIZES", "1000,10000,100000").split(","))
ASKS = int(os.environ.get("BENCH_ASK_N", "150"))
WARMUP = 20
RPS_SECONDS = 8.0
DOMAINS = ("acme/corporate", "acme/product", "acme/region_emea", "acme/region_apac")
ROLE_SETS = (["staff", "manager", "director", "exec"], ["manager", "director", "exec"], ["director", "exec"])

CREATE = {
    "Decision": "UNWIND $rows AS r CREATE (n:Entity:Decision) SET n = r",
    "Event": "UNWIND $rows AS r CREATE (n:Entity:Event) SET n = r",
}
LINK = """
UNWIND $rows AS r
MATCH (a:Entity {id: r.a}) MATCH (b:Entity {id: r.b})
CALL (a, b, r) {
  WITH a, b, r WHERE r.t = 'CAUSAL_PRECEDES' CREATE (a)-[:CAUSAL_PRECEDES {relation: 'causal'}]->(b)
  UNION
  WITH a, b, r WHERE r.t = 'ALIAS_OF' CREATE (a)-[:ALIAS_OF]->(b)
}
"""
RAW_ONE_HOP = """
MATCH (a:Entity {id: $id})
OPTIONAL MATCH (a)-[r]-(n:Entity)
RETURN a {.*, embedding: null} AS anchor, collect({type: type(r), node: n {.*, embedding: null}}) AS hood
"""
# The same neighbourhood as an exec ask at three hops: every node within three edges, with
# the edges that reach it (no ACL, no caps).
RAW_THREE_HOPS = """
MATCH (a:Entity {id: $id})
OPTIONAL MATCH p = (a)-[*1..3]-(n:Entity)
WITH a, n, collect(DISTINCT last(relationships(p))) AS via
RETURN a {.*, embedding: null} AS anchor,
       collect({types: [r IN via | type(r)], node: n {.*, embedding: null}}) AS hood
"""
RAW = {"1": RAW_ONE_HOP, "3": RAW_THREE_HOPS}


def generate(driver: Driver, n: int, seed: int = 7) -> list[str]:
    """A random org of ``n`` decisions/events with ~2 causal edges per node and some aliases."""
    rng = random.Random(seed)
    wipe_graph(driver)
    nodes: list[dict[str, Any]] = []
    for i in range(n):
        label = "Decision" if rng.random() < 0.4 else "Event"
        text = (
            {
                "option": f"Decision {i} on platform item {rng.randint(0, 999)}",
                "rationale": f"because {i}",
                "decision_maker": "CTO",
            }
            if label == "Decision"
            else {
                "summary": f"Event {i} observed in segment {rng.randint(0, 99)}",
                "description": f"details {i}",
            }
        )
        nodes.append(
            {
                "id": f"g{i}",
                "_label": label,
                "domain": rng.choice(DOMAINS),
                "sensitivity": rng.choice(("low", "low", "medium", "high")),
                "namespaces": rng.choice((["internal"], ["public", "internal"], ["confidential"])),
                "roles_allowed": rng.choice(ROLE_SETS),
                "importance": round(rng.random(), 2),
                "timestamp": f"20{rng.randint(20, 25)}-0{rng.randint(1, 9)}-1{rng.randint(0, 9)}T00:00:00Z",
                "x_extra": "{}",
                "tags": ["bench"],
                **text,
            }
        )
    for label, query in CREATE.items():
        rows = [{k: v for k, v in d.items() if k != "_label"} for d in nodes if d["_label"] == label]
        for i in range(0, len(rows), 5000):
            driver.execute_query(query, rows=rows[i : i + 5000])
    links = []
    for i in range(1, n):
        for _ in range(2):
            j = rng.randrange(0, i)
            if nodes[j]["_label"] == "Decision" and nodes[i]["_label"] == "Event" and rng.random() < 0.1:
                links.append({"a": f"g{j}", "b": f"g{i}", "t": "ALIAS_OF"})
            else:
                links.append({"a": f"g{j}", "b": f"g{i}", "t": "CAUSAL_PRECEDES"})
    for i in range(0, len(links), 5000):
        driver.execute_query(LINK, rows=links[i : i + 5000])
    visible = [
        d["id"]
        for d in nodes
        if "staff" in d["roles_allowed"]
        and d["sensitivity"] == "low"
        and "confidential" not in d["namespaces"]
        and d["domain"] != "acme/corporate"
    ]
    return rng.sample(visible, min(len(visible), ASKS + WARMUP))


def time_paired(
    settings: Settings, registry: PolicyRegistry, role: str, anchors: list[str], hops: str
) -> tuple[list[float], list[float], list[float]]:
    """Raw Cypher and ask on the same anchor, one after the other, anchor by anchor.

    Paired so that both series see the same load: on a shared machine a series timed minutes
    after the other measures the machine, not the pipeline. Both go through the same driver,
    the sync one the service uses, and the raw query takes the same one-round-trip read as the
    ask's walk (docs/design.md §One driver model), so the ratio is not flattered by a COMMIT
    round trip only the baseline pays. Also returns the bytes
    of each ask's trace file, once the trace writer has flushed them."""
    root = scratch_dir("cairn-bench-traces-")
    raw: list[float] = []
    asks: list[float] = []
    with sync_driver(settings) as driver, ExitStack() as warm:
        asker = AskService(driver, LLMClient(settings), root)
        for i, anchor in enumerate(anchors):
            caller = verify({**headers_for(registry, role), "X-Max-Hops": hops}, registry, None)
            t = time.perf_counter()
            read(driver, RAW[hops], {"id": anchor})
            raw_ms = (time.perf_counter() - t) * 1000
            t = time.perf_counter()
            asker.ask(caller, anchor)
            if i == WARMUP - 1:
                warm.enter_context(tuned_collector(settings.gc_young))  # as `cairn serve` (cairn/app.py)
            if i >= WARMUP:
                raw.append(raw_ms)
                asks.append((time.perf_counter() - t) * 1000)
    bundles.flush()
    sizes = [float(p.stat().st_size) for p in root.rglob(bundles.TRACE_FILE)]
    shutil.rmtree(root, ignore_errors=True)
    return raw, asks, sizes


def _sizes(values: list[float]) -> dict[str, int]:
    ordered = sorted(values)
    if not ordered:
        return {"n": 0, "mean": 0, "p50": 0, "p95": 0, "max": 0}
    return {
        "n": len(ordered),
        "mean": round(sum(ordered) / len(ordered)),
        "p50": round(pct(ordered, 50)),
        "p95": round(pct(ordered, 95)),
        "max": round(ordered[-1]),
    }


def throughput(settings: Settings, registry: PolicyRegistry, anchors: list[str]) -> dict[str, Any]:
    port = 18111
    config = uvicorn.Config(
        create_app(settings.model_copy(update={"port": port})),
        host="127.0.0.1",
        port=port,
        log_level="warning",
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    query = "query($id: ID!) { ask(anchorId: $id) { envelope { text } } }"
    out: dict[str, Any] = {}
    try:
        for clients in (1, 8, 32):
            out[str(clients)] = asyncio.run(_load(port, registry, anchors, query, clients))
    finally:
        server.should_exit = True
        thread.join(timeout=30)
    return out


async def _load(
    port: int, registry: PolicyRegistry, anchors: list[str], query: str, clients: int
) -> dict[str, Any]:
    deadline = time.perf_counter() + RPS_SECONDS
    latencies: list[float] = []
    errors = 0

    async def client(k: int) -> None:
        nonlocal errors
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=60) as http:
            i = k
            while time.perf_counter() < deadline:
                t = time.perf_counter()
                r = await http.post(
                    "/graphql",
                    json={"query": query, "variables": {"id": anchors[i % len(anchors)]}},
                    headers=headers_for(registry, "staff"),
                )
                if r.status_code != 200 or "errors" in r.json():
                    errors += 1
                latencies.append((time.perf_counter() - t) * 1000)
                i += clients

    started = time.perf_counter()
    await asyncio.gather(*(client(k) for k in range(clients)))
    elapsed = time.perf_counter() - started
    return {
        "clients": clients,
        "requests": len(latencies),
        "errors": errors,
        "rps": round(len(latencies) / elapsed, 1),
        **summary(latencies),
    }


DIGEST_CASES = (
    ("staff", 1),
    ("manager", 1),
    ("director", 1),
    ("director", 2),
    ("exec", 1),
    ("exec", 2),
    ("exec", 3),
)
GENERATED = "n.id =~ 'g[0-9]+'"  # the ids generate() gives


class _FixedClock:
    """``datetime`` for the ask module while digesting: one fixed time of day."""

    @staticmethod
    def now(tz: Any = None) -> datetime:
        return datetime(2026, 1, 1, tzinfo=UTC)


def digest(settings: Settings, registry: PolicyRegistry) -> dict[str, str]:
    """The answer digest of ``--digest`` (see the module docstring); wipes the bench graph."""
    traces: list[bytes] = []
    # Held fixed or captured: the time of day, stage latencies and the trace (encoded, not written).
    setattr(ask_module, "datetime", _FixedClock)  # noqa: B010 (a module global of the ask, patched)
    setattr(ask_module, "_ms", lambda since: 0.0)  # noqa: B010
    setattr(  # noqa: B010
        bundles,
        "submit_trace",
        lambda root, caller, files: traces.append(bundles._json(files() if callable(files) else files)),
    )
    with sync_driver(settings) as driver:
        with driver.session() as session:
            session.run("MATCH (n) CALL (n) { DETACH DELETE n } IN TRANSACTIONS OF 10000 ROWS").consume()
        migrate(driver)
        ingest_fixture_dir(driver, REPO_ROOT / "fixtures" / "acme")
        # The time of the load is a shown field: held fixed, so two loads digest alike.
        driver.execute_query("MATCH (n:Entity) SET n.created_at = datetime('2026-01-01T00:00:00Z')")
        global wipe_graph
        keep, wipe_graph = wipe_graph, lambda driver: None  # the bench graph beside the demo org
        try:
            generate(driver, 10_000)
        finally:
            wipe_graph = keep
        demo = [
            r["id"]
            for r in driver.execute_query(
                f"MATCH (n:Entity) WHERE (n:Decision OR n:Event) AND NOT {GENERATED} "
                "RETURN n.id AS id ORDER BY id"
            )[0]
        ]
        generated = [
            r["id"]
            for r in driver.execute_query(
                f"MATCH (n:Entity) WHERE {GENERATED} RETURN n.id AS id ORDER BY id"
            )[0]
        ]
        root = scratch_dir("cairn-bench-traces-")  # stays empty: traces are captured
        asker = AskService(driver, LLMClient(settings), root)
        out: dict[str, str] = {}
        total = hashlib.sha256()
        for graph, ids in (("demo", demo), ("bench", random.Random(11).sample(generated, 400))):
            for role, hops in DIGEST_CASES:
                h = hashlib.sha256()
                for anchor in ids:
                    caller = verify({**headers_for(registry, role), "X-Max-Hops": str(hops)}, registry, None)
                    try:
                        result = asker.ask(caller, anchor)
                    except AnchorNotVisible:
                        h.update(f"{anchor}:notvisible\n".encode())
                        continue
                    evidence = [[n.id, n.label, n.hop, n.fields, list(n.masked)] for n in result.evidence]
                    answer = {
                        "env": result.envelope,
                        "resp": result.response,
                        "meta": result.meta,
                        "ev": evidence,
                    }
                    blob = json.dumps(answer, sort_keys=True, default=str).encode() + traces.pop()
                    for value in (caller.request_id, caller.trace_id):
                        blob = blob.replace(value.encode(), b"REQ")
                    h.update(anchor.encode() + b"\n" + blob + b"\n")
                out[f"{graph}:{role}:{hops}"] = h.hexdigest()[:16]
                total.update(h.digest())
        out["total"] = total.hexdigest()[:16]
    shutil.rmtree(root, ignore_errors=True)
    return out


def main() -> None:
    configure_logging()  # at CAIRN_LOG_LEVEL (WARNING here), as `cairn serve` would: no stage logs
    results: dict[str, Any] = {"sizes": {}}
    with running_neo4j() as settings:
        registry = PolicyRegistry.load(settings.policy_file)
        if "--digest" in sys.argv[1:]:
            print(json.dumps(digest(settings, registry), indent=1))
            return
        with sync_driver(settings) as driver:
            migrate(driver)
        for n in SIZES:
            with sync_driver(settings) as driver:
                t = time.perf_counter()
                anchors = generate(driver, n)
                gen_s = time.perf_counter() - t
            raw, staff, bytes_staff = time_paired(settings, registry, "staff", anchors, "1")
            raw_d, director, bytes_director = time_paired(settings, registry, "director", anchors, "1")
            raw3, exec3, bytes_exec = time_paired(settings, registry, "exec", anchors, "3")
            results["sizes"][str(n)] = {
                "generate_s": round(gen_s, 1),
                "raw": summary(raw),
                "raw_director_pairs": summary(raw_d),
                "ask_staff": summary(staff),
                "ask_director": summary(director),
                "raw_k3": summary(raw3),
                "ask_exec_k3": summary(exec3),
                "trace_bytes": {
                    "staff": _sizes(bytes_staff),
                    "director": _sizes(bytes_director),
                    "exec_k3": _sizes(bytes_exec),
                },
            }
            print(n, results["sizes"][str(n)], flush=True)
        if 100_000 in SIZES:
            results["throughput_at_100k"] = throughput(settings, registry, anchors)
    sizes = results["sizes"]
    small, large = sizes[str(SIZES[0])], sizes[str(SIZES[-1])]
    command = f"BENCH_ASK_SIZES={','.join(map(str, SIZES))} BENCH_ASK_N={ASKS} python -m bench ask_latency"
    results["command"] = command
    table = [
        "# ask latency vs raw Cypher (k=1)",
        "",
        f"Command: `{command}`. Ratios are ask p50 / raw p50 of the same run, each ask timed right",
        "after the raw query on the same anchor; times in ms (context only: the machine is shared).",
        "",
        "| nodes | raw p50 | raw p95 | staff p50 | p95 | ratio p50 | director p50 | p95 | ratio p50 |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for n, row in sizes.items():
        table.append(
            f"| {n} | {row['raw']['p50_ms']} | {row['raw']['p95_ms']} | {row['ask_staff']['p50_ms']} | "
            f"{row['ask_staff']['p95_ms']} | {row['ask_staff']['p50_ms'] / row['raw']['p50_ms']:.2f}x | "
            f"{row['ask_director']['p50_ms']} | {row['ask_director']['p95_ms']} | "
            f"{row['ask_director']['p50_ms'] / row['raw_director_pairs']['p50_ms']:.2f}x |"
        )
    table += [
        "",
        "# ask latency vs raw Cypher (k=3, exec)",
        "",
        "| nodes | raw p50 | raw p95 | exec p50 | p95 | ratio p50 |",
        "|---|---|---|---|---|---|",
    ]
    for n, row in sizes.items():
        raw3, exec3 = row["raw_k3"], row["ask_exec_k3"]
        table.append(
            f"| {n} | {raw3['p50_ms']} | {raw3['p95_ms']} | {exec3['p50_ms']} | {exec3['p95_ms']} | "
            f"{exec3['p50_ms'] / raw3['p50_ms']:.2f}x |"
        )
    table += [
        "",
        "# trace file per ask (bytes, one gzip'd file, written off the request path)",
        "",
        "| nodes | staff mean | p50 | p95 | max | director mean | p50 | p95 | max "
        "| exec k=3 mean | p50 | p95 | max |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for n, row in sizes.items():
        cells = [
            f"{t['mean']} | {t['p50']} | {t['p95']} | {t['max']}"
            for t in (row["trace_bytes"][k] for k in ("staff", "director", "exec_k3"))
        ]
        table.append(f"| {n} | " + " | ".join(cells) + " |")
    growth = large["ask_staff"]["p50_ms"] / small["ask_staff"]["p50_ms"]
    results["growth_staff_p50"] = round(growth, 3)
    table += ["", f"ask p50 growth {SIZES[0]} → {SIZES[-1]} nodes (staff): {growth:.2f}x"]
    if "throughput_at_100k" not in results:
        write_results("ask_latency", results, table)
        return
    table += [
        "",
        "| clients | requests | errors | req/s | p50 ms | p95 ms |",
        "|---|---|---|---|---|---|",
    ]
    for row in results["throughput_at_100k"].values():
        table.append(
            f"| {row['clients']} | {row['requests']} | {row['errors']} | {row['rps']} | {row['p50_ms']} | "
            f"{row['p95_ms']} |"
        )
    write_results("ask_latency", results, table)


if __name__ == "__main__":
    main()
