"""Dossier routing at 10k and 100k stored facts: latency, index recall and ingest throughput.

For each size the store holds N facts in N/10 dossiers. Stored vectors are seeded directly
(embedding 100k texts on 2 cores would take most of the time budget): each is a real
all-MiniLM-L6-v2 embedding of one of 2 000 templated fact sentences plus Gaussian noise
(cosine about 0.8 to its sentence), so the store has the clustered shape of real fact
embeddings rather than the uniform spread of random vectors. Queries are always real
embeddings of fresh 5-fact packets.

Measured, per size (all in the same run, interleaved packet by packet):
- routing: ``preview_route`` — batch-embed the 5 facts, ONE Cypher round trip of vector
  queries (top 10, cosine >= 0.4), tally, decide. p50/p95.
- floor (a): the same batch embedding plus an exact numpy search of the same vectors held
  in memory, then the same tally and rule.
- note design (b): note 000's ``search_similar_facts`` per fact — embed each fact alone,
  read every stored embedding, score them one by one in Python — run on fewer packets.
- recall@10 of the vector index against exact numpy top-10 over the same vectors.
- ingest: ``ingest_packets`` (embedding, vote under the routing lock, writes, journal, one
  transaction per packet) in facts/s, against raw embedding throughput on the same texts.

Run: ``.venv/bin/python -m bench.dossier_routing [SIZE ...]`` (own Neo4j: CAIRN_TEST_* env).
"""

from __future__ import annotations

import itertools
import os
import random
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial
from typing import Any

from bench.common import running_neo4j, summary, use_bench_neo4j, wipe_graph, write_results

use_bench_neo4j("dossiers", 17701, 17501)

import numpy as np  # settings above must be in place first
from neo4j import Driver
from numpy.typing import NDArray

from cairn.graph.dossiers import FACT_VECTOR_INDEX
from cairn.memory.dossiers.governor import ingest_packets, preview_route, read_vote
from cairn.memory.dossiers.models import FactPacket, parse_packet
from cairn.memory.dossiers.voting import (
    OVERFETCH,
    TOP_K_PER_FACT,
    VOTE_THRESHOLD,
    Hit,
    decide,
    tally,
)
from cairn.runtime.database import sync_driver
from cairn.runtime.embedder import Embedder, get_embedder
from cairn.schema.migrate import migrate

NAME = "dossier_routing"
SIZES = (10_000, 100_000)
FACTS_PER_DOSSIER = 10
BASE_SENTENCES = 2_000
NOISE_STD = 0.038  # per component: cosine to the base sentence about 0.8
ROUTE_SAMPLES = 60
NOTE_SAMPLES = {10_000: 3, 100_000: 1}
RECALL_QUERIES = 100
INGEST_PACKETS = 60
WARMUP = 3
BATCH = 2_000
SETTLE_S = 0.05
SEED = 20251215

SEED_DOSSIERS = """
UNWIND $rows AS row
CREATE (d:Entity:Dossier {id: row.id})
SET d += $access, d.title = row.title, d.summary = '', d.status = 'active', d.created_at = datetime(),
    d.last_updated = datetime(), d.centroid_sum = row.centroid_sum
"""
SEED_FACTS = """
UNWIND $rows AS row
MATCH (d:Dossier {id: row.dossier})
CREATE (f:Entity:Fact {id: row.id})
SET f += $access, f.text = row.text, f.embedding = row.vec, f.embedding_model = $model,
    f.fact_type = 'narrative', f.created_at = datetime(), f.added_at = datetime()
CREATE (d)-[:HAS_FACT]->(f)
"""
# The index alone (its own, quantized, order) and the index as the vote uses it (over-fetch,
# exact rescoring): both against exact numpy top-10 over the same stored vectors.
INDEX_TOP10 = """
UNWIND $queries AS q
CALL (q) {
  CALL db.index.vector.queryNodes($index, 10, q.vec) YIELD node
  RETURN collect(node.id) AS ids
}
RETURN q.i AS i, ids
"""
VOTE_TOP10 = """
UNWIND $queries AS q
CALL (q) {
  CALL db.index.vector.queryNodes($index, $fetch, q.vec) YIELD node
  WITH node, vector.similarity.cosine(node.embedding, q.vec) AS score
  ORDER BY score DESC, node.id
  LIMIT 10
  RETURN collect(node.id) AS ids
}
RETURN q.i AS i, ids
"""
NOTE_SCAN = (
    "MATCH (d:Dossier)-[:HAS_FACT]->(f:Fact) RETURN f.id AS fact_id, d.id AS dossier_id, f.embedding AS e"
)
ACCESS = {
    "domain": "acme/assistant",
    "sensitivity": "low",
    "namespaces": ["internal"],
    "roles_allowed": ["director", "exec", "manager", "staff", "writer"],
}

SUBJECTS = [
    "User",
    "The user",
    "My manager",
    "The team",
    "Our client",
    "The new hire",
    "My partner",
    "The landlord",
]
TOPICS = [
    (
        "prefers",
        ["vegetarian food", "dark mode", "morning meetings", "trains over flights", "written updates"],
    ),
    ("is learning", ["Japanese", "the cello", "Rust", "watercolour painting", "to sail", "statistics"]),
    ("works on", ["the billing service", "the mobile app", "a grant proposal", "the garden shed", "a novel"]),
    ("avoids", ["dairy", "late-night calls", "long flights", "spreadsheets", "caffeine after noon"]),
    (
        "plans to visit",
        ["Kyoto in April", "Lisbon in June", "the coast", "her parents", "the Alps in winter"],
    ),
    ("is worried about", ["the server costs", "the deadline", "a knee injury", "the budget review", "rent"]),
]
WHEN = ["", " every week", " this quarter", " since last year", " on weekends", " at the moment"]
QUERY_FACTS = [
    "User is strictly vegetarian",
    "User avoids meat and fish",
    "The team deploys the billing service on Fridays",
    "User is studying Japanese for a trip",
    "The budget review is next month",
    "User runs three times a week",
    "Our client wants weekly written updates",
    "The mobile app crashes on older phones",
    "User prefers trains to planes in Europe",
    "The landlord plans to raise the rent",
    "My partner is learning to sail",
    "User drinks no coffee after lunch",
    "The new hire is learning Rust",
    "User is writing a novel in the evenings",
    "The server costs doubled this quarter",
]


def base_sentences() -> list[str]:
    combos = [
        f"{s} {verb} {obj}{w}"
        for s, (verb, objs), w in itertools.product(SUBJECTS, TOPICS, WHEN)
        for obj in objs
    ]
    random.Random(SEED).shuffle(combos)
    return combos[:BASE_SENTENCES]


def packets_of(rng: random.Random, count: int, tag: str) -> list[FactPacket]:
    """Fresh 5-fact packets of real sentences (each fact varied so no two packets are equal)."""
    out = []
    for n in range(count):
        facts = [
            f"{f} ({tag} {n}.{i})" if rng.random() < 0.3 else f
            for i, f in enumerate(rng.sample(QUERY_FACTS, 5))
        ]
        out.append(
            parse_packet(
                {"cluster_label": f"bench {tag} {n}", "facts": facts, "source_block_id": f"{tag}-{n}"}
            )
        )
    return out


def seed_store(
    driver: Driver, base: NDArray[np.float32], texts: list[str], start: int, stop: int, model: str
) -> None:
    """Facts ``start..stop-1`` (and their dossiers) with noisy copies of the base embeddings."""
    rng = np.random.default_rng(SEED + start)
    for lo in range(start, stop, BATCH):
        hi = min(stop, lo + BATCH)
        idx = np.arange(lo, hi)
        vecs = base[idx % len(base)] + rng.normal(0, NOISE_STD, (hi - lo, base.shape[1])).astype(np.float32)
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        dossiers = sorted({int(i) // FACTS_PER_DOSSIER for i in idx if i % FACTS_PER_DOSSIER == 0})
        # Each dossier's centroid sum, stored as every dossier the governor writes has it (a
        # dossier without one has it summed from its facts by each vote that reaches it, which a
        # seeded store of 10 facts per dossier made most of the vote's and the ingest's time).
        sums = {d: vecs[idx // FACTS_PER_DOSSIER == d].astype(np.float64).sum(axis=0) for d in dossiers}
        driver.execute_query(
            SEED_DOSSIERS,
            rows=[
                {"id": f"bench-dos-{d}", "title": f"bench dossier {d}", "centroid_sum": sums[d].tolist()}
                for d in dossiers
            ],
            access=ACCESS,
        )
        rows = [
            {
                "id": f"bench-fact-{int(i)}",
                "dossier": f"bench-dos-{int(i) // FACTS_PER_DOSSIER}",
                "text": texts[int(i) % len(texts)],
                "vec": v.tolist(),
            }
            for i, v in zip(idx, vecs, strict=True)
        ]
        driver.execute_query(SEED_FACTS, rows=rows, access=ACCESS, model=model)


def stored_matrix(driver: Driver) -> tuple[list[str], list[str], NDArray[np.float32]]:
    """Every stored fact vector, its id and its dossier (what the floor searches in memory)."""
    records, _, _ = driver.execute_query(NOTE_SCAN)
    ids = [r["fact_id"] for r in records]
    dossiers = [r["dossier_id"] for r in records]
    return ids, dossiers, np.asarray([r["e"] for r in records], dtype=np.float32)


def floor_route(
    embedder: Embedder, packet: FactPacket, matrix: NDArray[np.float32], ids: list[str], dossiers: list[str]
) -> None:
    """Baseline (a): the same batch embedding, exact numpy top-10 per fact, the same tally and rule."""
    vectors = embedder.embed([f.text for f in packet.facts])
    sims = vectors @ matrix.T
    top = np.argpartition(-sims, TOP_K_PER_FACT, axis=1)[:, :TOP_K_PER_FACT]
    hits = [
        Hit(qi, dossiers[j], ids[j], float(sims[qi, j]))
        for qi in range(len(vectors))
        for j in top[qi]
        if sims[qi, j] >= VOTE_THRESHOLD
    ]
    decide(tally(hits, {}), len(packet.facts))


def note_route(driver: Driver, embedder: Embedder, packet: FactPacket) -> None:
    """Baseline (b): note 000's design — per fact: embed alone, read all embeddings, score each in Python."""
    hits: list[Hit] = []
    for qi, fact in enumerate(packet.facts):
        q = embedder.embed([fact.text])[0]
        results = []
        for r in driver.execute_query(NOTE_SCAN)[0]:
            e = np.asarray(r["e"], dtype=np.float32)
            similarity = float(np.dot(q, e) / (np.linalg.norm(q) * np.linalg.norm(e)))
            if similarity >= VOTE_THRESHOLD:
                results.append((r["fact_id"], r["dossier_id"], similarity))
        results.sort(key=lambda x: x[2], reverse=True)
        hits += [Hit(qi, d, f, s) for f, d, s in results[:TOP_K_PER_FACT]]
    decide(tally(hits, {}), len(packet.facts))


def vote_only(driver: Driver, vectors: NDArray[np.float32], packet: FactPacket) -> None:
    with driver.session() as session:
        candidates = session.execute_read(read_vote, vectors, packet)
    decide(candidates, len(packet.facts))


def timed(fn: Callable[[], Any]) -> float:
    """Wall time of ``fn`` in ms, started from a quiet machine.

    torch and the BLAS behind numpy keep their worker threads spinning for a while after a
    call; on 2 cores that steals from whatever runs next, so every timed call first waits
    ``SETTLE_S`` for them to park.
    """
    time.sleep(SETTLE_S)
    started = time.perf_counter()
    fn()
    return (time.perf_counter() - started) * 1000


def recall_at_10(
    driver: Driver, embedder: Embedder, matrix: NDArray[np.float32], ids: list[str], rng: random.Random
) -> dict[str, float]:
    pool = QUERY_FACTS + base_sentences()[:200]
    texts = [f"{f} {rng.choice(WHEN)}".strip() for f in rng.choices(pool, k=RECALL_QUERIES)]
    queries = embedder.embed(texts)
    params = {
        "queries": [{"i": i, "vec": q.tolist()} for i, q in enumerate(queries)],
        "index": FACT_VECTOR_INDEX,
        "fetch": OVERFETCH * TOP_K_PER_FACT,
    }
    exact = np.argsort(-(queries @ matrix.T), axis=1)[:, :10]
    out = {}
    for name, query in (("index_alone", INDEX_TOP10), ("as_voted", VOTE_TOP10)):
        records, _, _ = driver.execute_query(query, params)
        found = {r["i"]: set(r["ids"]) for r in records}
        out[name] = round(
            float(
                np.mean(
                    [len(found.get(i, set()) & {ids[j] for j in exact[i]}) / 10 for i in range(len(queries))]
                )
            ),
            4,
        )
    return out


def ingest_throughput(driver: Driver, embedder: Embedder, rng: random.Random, size: int) -> dict[str, float]:
    packets = packets_of(rng, INGEST_PACKETS, f"ingest{size}")
    texts = [f.text for p in packets for f in p.facts]
    embedder.embed(texts[:64])  # warm
    raw_ms = timed(lambda: embedder.embed(texts))
    ingest_ms = timed(lambda: ingest_packets(driver, packets, embedder=embedder))
    raw = len(texts) / (raw_ms / 1000)
    ingested = len(texts) / (ingest_ms / 1000)
    return {
        "facts": len(texts),
        "raw_embed_facts_per_s": round(raw, 1),
        "ingest_facts_per_s": round(ingested, 1),
    }


def measure(driver: Driver, embedder: Embedder, size: int, rng: random.Random) -> dict[str, Any]:
    ids, dossiers, matrix = stored_matrix(driver)
    packets = packets_of(rng, ROUTE_SAMPLES + WARMUP, f"route{size}")
    ours: list[float] = []
    floor: list[float] = []
    paired: list[float] = []
    parts: dict[str, list[float]] = {"embed": [], "vote_round_trip": [], "numpy_search": []}
    for n, p in enumerate(packets):
        route = partial(preview_route, driver, p, embedder)
        exact = partial(floor_route, embedder, p, matrix, ids, dossiers)
        if n % 2:  # alternate which goes first, so neither always inherits the other's aftermath
            b, a = timed(exact), timed(route)
        else:
            a, b = timed(route), timed(exact)
        if n < WARMUP:
            continue
        ours.append(a)
        floor.append(b)
        paired.append(a / b)
        # the same steps apart, so the search cost can be told from the (shared) embedding cost
        texts = [f.text for f in p.facts]
        parts["embed"].append(timed(lambda texts=texts: embedder.embed(texts)))
        vectors = embedder.embed(texts)
        parts["vote_round_trip"].append(timed(lambda v=vectors, p=p: vote_only(driver, v, p)))
        parts["numpy_search"].append(timed(lambda v=vectors: np.argpartition(-(v @ matrix.T), 10, axis=1)))
    note = [timed(lambda p=p: note_route(driver, embedder, p)) for p in packets[: NOTE_SAMPLES.get(size, 2)]]
    result: dict[str, Any] = {
        "stored_facts": len(ids),
        "routing": summary(ours),
        "floor_numpy": summary(floor),
        "note_per_fact_scan": summary(note),
        "breakdown": {k: summary(v) for k, v in parts.items()},
        "recall_at_10": recall_at_10(driver, embedder, matrix, ids, rng),
        "routing_vs_floor_paired_median": round(float(np.median(paired)), 3),
        "ingest": ingest_throughput(driver, embedder, rng, size),
    }
    result["routing_vs_floor_p50"] = round(result["routing"]["p50_ms"] / result["floor_numpy"]["p50_ms"], 3)
    result["note_vs_routing_p50"] = round(
        result["note_per_fact_scan"]["p50_ms"] / result["routing"]["p50_ms"], 1
    )
    ingest = result["ingest"]
    result["ingest_vs_raw_embedding"] = round(
        ingest["ingest_facts_per_s"] / ingest["raw_embed_facts_per_s"], 3
    )
    return result


def main(argv: list[str] | None = None) -> None:
    sizes = tuple(int(a) for a in (argv if argv is not None else sys.argv[1:])) or SIZES
    rng = random.Random(SEED)
    embedder = get_embedder()
    texts = base_sentences()
    base = embedder.embed(texts)
    results: dict[str, Any] = {
        "sizes": {},
        "load_average_at_start": list(os.getloadavg()),
        "cpus": os.cpu_count(),
    }
    with running_neo4j() as settings, sync_driver(settings) as driver:
        migrate(driver)
        wipe_graph(driver)
        seeded = 0
        for size in sorted(sizes):
            started = time.perf_counter()
            seed_store(driver, base, texts, seeded, size, embedder.name)
            seeded = size
            seed_s = time.perf_counter() - started
            print(f"seeded {size} facts in {seed_s:.0f}s", flush=True)
            results["sizes"][str(size)] = {
                "seed_s": round(seed_s, 1),
                **measure(driver, embedder, size, rng),
                "load_average_after": round(os.getloadavg()[0], 2),
            }
            print(results["sizes"][str(size)], flush=True)
        wipe_graph(driver)
    results["goals"] = {  # issue 15's targets
        "recall_at_10": ">= 0.95",
        "routing_vs_floor_p50": "<= 1.0 at 100k",
        "ingest_vs_raw_embedding": ">= 0.8",
    }
    results["finished"] = datetime.now(UTC).isoformat(timespec="minutes")
    results["command"] = "python -m bench.dossier_routing " + " ".join(str(s) for s in sorted(sizes))
    table = [
        "# Dossier routing (5-fact packets)",
        "",
        "| stored facts | routing p50/p95 ms | floor (a) p50/p95 ms | routing/floor p50 | note (b) p50 ms "
        "| note/routing | recall@10 voted (index) | ingest facts/s | raw embed facts/s | ingest/raw |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for size, r in results["sizes"].items():
        table.append(
            f"| {size} | {r['routing']['p50_ms']:.1f} / {r['routing']['p95_ms']:.1f} "
            f"| {r['floor_numpy']['p50_ms']:.1f} / {r['floor_numpy']['p95_ms']:.1f} "
            f"| {r['routing_vs_floor_p50']:.2f} (paired {r['routing_vs_floor_paired_median']:.2f}) "
            f"| {r['note_per_fact_scan']['p50_ms']:.0f} "
            f"| {r['note_vs_routing_p50']:.0f}x | {r['recall_at_10']['as_voted']:.3f} "
            f"({r['recall_at_10']['index_alone']:.3f}) "
            f"| {r['ingest']['ingest_facts_per_s']:.0f} | {r['ingest']['raw_embed_facts_per_s']:.0f} "
            f"| {r['ingest_vs_raw_embedding']:.2f} |"
        )
    table += [
        "",
        "| stored facts | embed 5 facts p50 ms | vote round trip p50 ms | numpy exact search p50 ms |",
        "|---|---|---|---|",
    ]
    for size, r in results["sizes"].items():
        b = r["breakdown"]
        table.append(
            f"| {size} | {b['embed']['p50_ms']:.1f} | {b['vote_round_trip']['p50_ms']:.1f} "
            f"| {b['numpy_search']['p50_ms']:.1f} |"
        )
    table += [
        "",
        f"Goals (issue 15): recall@10 >= 0.95, routing p50 <= 1.0x floor at 100k, ingest >= 0.8x raw "
        "embedding (raw: `Embedder.embed` of the same texts, the product's own path). "
        f"Finished {results['finished']} UTC; command `{results['command']}`. "
        f"Load average at start: {results['load_average_at_start'][0]:.1f} on {results['cpus']} CPUs; "
        "after each size: "
        + ", ".join(f"{size}: {r['load_average_after']:.1f}" for size, r in results["sizes"].items())
        + " (other work on the machine slows the embedder and shifts the ratios).",
    ]
    write_results(NAME, results, table)


if __name__ == "__main__":
    main()
