"""Correspondence search against the raw vector index and exact search, in the same run.

Results: bench/results/correspondence_search.md (5,000 sections), and
correspondence_search_100k.md for ``--sizes 100000`` (a suffix per size list).

For each size (default 5,000 sections; ``--sizes 5000,100000``) the bench writes synthetic
``Section`` nodes straight into its own Neo4j (no parsing, no model): their embeddings are
**random unit vectors clustered around 64 random topic directions** (384 dimensions, Gaussian
noise of 0.06 per dimension around the centre, then normalised; cosine within a topic about
0.4, across topics about 0), not MiniLM embeddings; queries are drawn the same way. Half the
sections respond to an earlier one. 20% of them (at random) have sensitivity ``low`` and are
visible to the ``staff`` role of fixtures/policy/roles.yaml; the rest are ``high``. The Section
vector index is the one ``cairn.schema.migrate`` creates (no quantization).

Per query, interleaved so every measure sees the same load:

- ``raw_index``: ``db.index.vector.queryNodes`` with k=10, returning id and score (the baseline);
- ``exact_*``: the exact scan (``SEARCH_EXACT``: ACL, cosine over every visible section, top 10);
- ``search_*``: ``semantic_search`` (index, oversampled, ACL and filters before ranking, exact
  re-score, the caller's numbering and total), as the operator (sees all) and as staff (20%);
  ``search_staff_first_after_a_change``: the same with the per-scope counts dropped, i.e. the
  first search of a scope after the store changed, which makes one pass over the visible
  sections (10 queries).

``--exact-queries N`` times the exact scan on the first N queries only (it takes seconds at
100k). Recall@10 is against exact numpy search over the same vectors, with the role's mask applied.
With ``--quantized`` a second pass rebuilds the index with Neo4j's default quantization to
show the recall the quantized index gives Cairn's search.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.common import running_neo4j, summary, use_bench_neo4j, write_results

use_bench_neo4j("correspondence-search", 17714, 17514)

import numpy as np
from neo4j import Driver

from cairn.graph.correspondence import SEARCH_EXACT
from cairn.memory import correspondence as corr
from cairn.policy.profiles import PolicyRegistry
from cairn.policy.scope import Scope
from cairn.runtime.database import sync_driver
from cairn.schema import migrate as schema

NAME = "correspondence_search"
SIZES = (5_000,)
QUERIES = 40
WARMUP = 5
COLD = 10  # queries that also time a search with the per-scope counts dropped
K = 10
SEED = 7
TOPICS = 64
NOISE = 0.06
VISIBLE_SHARE = 0.2
BATCH = 1_000

WIPE = "MATCH (s:Section) CALL (s) { DETACH DELETE s } IN TRANSACTIONS OF 5000 ROWS"
LOAD = """
UNWIND $rows AS r
CREATE (s:Entity:Section {id: r.id, section_number: r.n, ordinal: r.n, source: 'bench', embedding: r.e,
  embedding_model: 'synthetic', domain: 'acme/correspondence', sensitivity: r.sensitivity,
  namespaces: ['internal'], roles_allowed: ['staff', 'manager', 'director', 'exec'], author: 'Atlas',
  title: 'Section ' + toString(r.n), body: 'Body of section ' + toString(r.n), date: '2026-01-01',
  exec_tags: [], exec_decisions: [], status_tags: []})
"""
LINK = """
UNWIND $links AS l
MATCH (a:Section {section_number: l.from}), (b:Section {section_number: l.to})
CREATE (a)-[:RESPONDS_TO]->(b)
"""
RAW = f"""
CALL db.index.vector.queryNodes('{schema.SECTION_INDEX}', $k, $q) YIELD node, score
RETURN node.id AS id, score
"""
QUANTIZED = f"""
CREATE VECTOR INDEX {schema.SECTION_INDEX} FOR (n:Section) ON n.embedding
OPTIONS {{indexConfig: {{`vector.dimensions`: 384, `vector.similarity_function`: 'cosine'}}}}
"""


def unit_vectors(rng: np.random.Generator, centres: np.ndarray, n: int) -> np.ndarray:
    v = centres[rng.integers(0, len(centres), n)] + rng.normal(0, NOISE, (n, centres.shape[1]))
    return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)


def load(
    driver: Driver, n: int, rng: np.random.Generator, centres: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    with driver.session() as session:
        session.run(WIPE).consume()
    vectors = unit_vectors(rng, centres, n)
    visible = rng.random(n) < VISIBLE_SHARE
    for start in range(0, n, BATCH):
        stop = min(n, start + BATCH)
        rows = [
            {
                "id": f"section:bench{i:07d}",
                "n": i + 1,
                "e": vectors[i].tolist(),
                "sensitivity": "low" if visible[i] else "high",
            }
            for i in range(start, stop)
        ]
        driver.execute_query(LOAD, rows=rows)
        links = [
            {"from": i + 1, "to": int(rng.integers(max(1, i - 30), i + 1))}
            for i in range(max(start, 1), stop)
            if rng.random() < 0.5
        ]
        driver.execute_query(LINK, links=links)
    return vectors, visible


def exact_top(vectors: np.ndarray, mask: np.ndarray | None, q: np.ndarray) -> list[str]:
    sims = vectors @ q
    if mask is not None:
        sims = np.where(mask, sims, -np.inf)
    top = np.argsort(-sims, kind="stable")[:K]
    return [f"section:bench{i:07d}" for i in top if np.isfinite(sims[i])]


def rebuild(driver: Driver, create: str) -> float:
    """Drop the Section index and build it with ``create`` over the stored sections; seconds."""
    started = time.perf_counter()
    driver.execute_query(schema.DROP_SECTION_INDEX)
    driver.execute_query(create)
    driver.execute_query(schema.AWAIT_INDEXES)
    return time.perf_counter() - started


def exact_hits(driver: Driver, params: dict[str, Any]) -> list[Any]:
    return list(driver.execute_query(SEARCH_EXACT, params).records[0]["hits"])


def timed_ms(fn: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    result = fn()
    return (time.perf_counter() - started) * 1000, result


def measure(
    driver: Driver,
    vectors: np.ndarray,
    visible: np.ndarray,
    queries: np.ndarray,
    readers: dict[str, Any],
    exact_queries: int,
) -> dict[str, Any]:
    masks = {"operator": None, "staff": visible}
    samples: dict[str, list[float]] = {"raw_index": []}
    recall: dict[str, list[float]] = {"raw_index_unfiltered": []}
    for role in readers:
        samples[f"exact_{role}"], samples[f"search_{role}"] = [], []
        recall[f"search_{role}"], recall[f"exact_{role}"] = [], []
    for i, q in enumerate(queries):
        vector = [float(x) for x in q]
        raw_ms, raw = timed_ms(lambda v=vector: driver.execute_query(RAW, k=K, q=v).records)
        if i >= WARMUP:
            samples["raw_index"].append(raw_ms)
        found_raw = {r["id"] for r in raw}
        recall["raw_index_unfiltered"].append(len(set(exact_top(vectors, None, q)) & found_raw) / K)
        for role, reader in readers.items():
            truth = set(exact_top(vectors, masks[role], q))
            params = {**reader.scope.cypher_params(), **corr.Filters().params(), "k": K, "vector": vector}
            ex: list[Any] = []
            if WARMUP <= i < WARMUP + exact_queries:
                ex_ms, ex = timed_ms(lambda p=params: exact_hits(driver, p))
            s_ms, found = timed_ms(lambda r=reader, v=vector: corr.semantic_search(driver, r, v, K))
            if i >= WARMUP:
                if ex:
                    samples[f"exact_{role}"].append(ex_ms)
                    recall[f"exact_{role}"].append(len(truth & {h["props"]["id"] for h in ex}) / len(truth))
                samples[f"search_{role}"].append(s_ms)
            if role != "operator" and WARMUP <= i < WARMUP + COLD:
                corr._COUNTS.clear()  # the first search of the scope after the store changed
                cold_ms, _ = timed_ms(lambda r=reader, v=vector: corr.semantic_search(driver, r, v, K))
                samples.setdefault(f"search_{role}_first_after_a_change", []).append(cold_ms)
            recall[f"search_{role}"].append(len(truth & {h.id for h in found.hits}) / len(truth))
    stats = {name: summary(values) for name, values in samples.items()}
    base = stats["raw_index"]["p50_ms"]
    return {
        "latency": stats,
        "p50_vs_raw_index": {n: round(s["p50_ms"] / base, 2) for n, s in stats.items() if n != "raw_index"},
        "recall_at_10_vs_exact": {n: round(float(np.mean(v)), 4) for n, v in recall.items()},
    }


def run(driver: Driver, sizes: tuple[int, ...], quantized: bool, exact_queries: int) -> dict[str, Any]:
    rng = np.random.default_rng(SEED)
    centres = rng.normal(0, 1, (TOPICS, 384))
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    registry = PolicyRegistry.load(Path(__file__).resolve().parents[1] / "fixtures" / "policy" / "roles.yaml")
    staff = registry.get("staff")
    assert staff is not None
    readers = {"operator": corr.Reader.system(), "staff": corr.Reader(Scope.from_profile(staff), True)}
    results: dict[str, Any] = {}
    for n in sizes:
        schema.migrate(driver)
        started = time.perf_counter()
        vectors, visible = load(driver, n, rng, centres)
        load_s = time.perf_counter() - started
        # Both variants are built the same way, in one population job over the loaded sections
        # (as `cairn db migrate` rebuilds it), not by the many small online inserts of the load.
        build_s = rebuild(driver, schema.CREATE_SECTION_INDEX)
        queries = unit_vectors(rng, centres, QUERIES + WARMUP)
        entry: dict[str, Any] = {
            "sections": n,
            "visible_to_staff": int(visible.sum()),
            "load_s": round(load_s, 1),
            "index_build_s": {"unquantized": round(build_s, 1)},
            "unquantized": measure(driver, vectors, visible, queries, readers, exact_queries),
        }
        if quantized:
            entry["index_build_s"]["quantized"] = round(rebuild(driver, QUANTIZED), 1)
            entry["quantized"] = measure(driver, vectors, visible, queries, readers, exact_queries)
            driver.execute_query(schema.DROP_SECTION_INDEX)
            schema.migrate(driver)
        results[str(n)] = entry
    return {
        "command": " ".join(["python -m bench correspondence_search", *sys.argv[1:]]),
        "vectors": f"random unit vectors around {TOPICS} topic centres (noise {NOISE}/dim), not MiniLM",
        "k": K,
        "queries": QUERIES,
        "index_config": schema.SECTION_INDEX_CONFIG,
        "oversampling": {
            "fetch_factor": corr.FETCH_FACTOR,
            "min_fetch": corr.MIN_FETCH,
            "restricted_fetch_factor": corr.RESTRICTED_FETCH_FACTOR,
            "max_fetch": corr.MAX_FETCH,
        },
        "sizes": results,
        "cpus": os.cpu_count(),
        "load_average_1m": round(os.getloadavg()[0], 2),
    }


def table(r: dict[str, Any]) -> list[str]:
    lines = [
        f"Command: `{r['command']}` (every ratio is against the raw index query measured in the same run)",
        "",
        f"# Correspondence search, k={r['k']}, {r['queries']} queries per measure",
        "",
        f"Vectors: {r['vectors']}. Index: {r['index_config']}. Oversampling: {r['oversampling']}.",
        "",
    ]
    for size, entry in r["sizes"].items():
        lines += [
            f"## {size} sections ({entry['visible_to_staff']} visible to staff)",
            "",
            f"Index build over the loaded sections, seconds: {entry['index_build_s']}",
            "",
            "| index | measure | p50 ms | p95 ms | p50 / raw index | recall@10 vs exact |",
            "|---|---|---|---|---|---|",
        ]
        for variant in ("unquantized", "quantized"):
            m = entry.get(variant)
            if not m:
                continue
            rec = m["recall_at_10_vs_exact"]
            for name, st in m["latency"].items():
                ratio = m["p50_vs_raw_index"].get(name, 1.0)
                recall = rec.get(name, rec.get("raw_index_unfiltered") if name == "raw_index" else None)
                lines.append(
                    f"| {variant} | {name} | {st['p50_ms']} | {st['p95_ms']} | {ratio}x | "
                    f"{'' if recall is None else recall} |"
                )
        lines.append("")
    return lines


def option(argv: list[str], name: str, default: str) -> str:
    return argv[argv.index(name) + 1] if name in argv else default


def main() -> None:
    argv = sys.argv[1:]
    sizes = tuple(int(s) for s in option(argv, "--sizes", ",".join(map(str, SIZES))).split(","))
    with running_neo4j() as settings, sync_driver(settings) as driver:
        exact_queries = int(option(argv, "--exact-queries", str(QUERIES)))
        result = run(driver, sizes, "--quantized" in argv, exact_queries)
        with driver.session() as session:
            session.run(WIPE).consume()
    suffix = "" if sizes == SIZES else "_" + "_".join(f"{n // 1000}k" for n in sizes)
    write_results(NAME + suffix, result, table(result))


if __name__ == "__main__":
    main()
