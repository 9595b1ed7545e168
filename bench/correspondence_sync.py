"""Correspondence sync throughput, the cost of a no-change resync, and search latency.

On a generated 5,000-section file (deterministic; realistic bodies, ~1% duplicate filed
numbers and skips, exec/status tags, references, 10% restricted sections):

- full sync: sections/s end to end against raw embedding of the same section texts (the same
  model's ``Embedder.embed`` over all of them in one call, its fastest path, timed just before and
  just after the sync; the baseline is their mean), and the time spent inside the embedder during
  the sync;
- how many section texts exceed the model's window (256 word pieces; truncated, see the README);
- resync with no change: time and ratio against the full sync (goal: far below 1);
- an append of 50 sections to the synced file;
- search: ``semantic_search`` (exact cosine in Cypher over the ACL-prefiltered sections)
  against exact numpy search over the same vectors (the baseline), as the operator and as
  staff (ACL filter) and with a filter; plus the approximate vector index
  (``db.index.vector.queryNodes``, unfiltered) with its recall@10 against numpy.
"""

from __future__ import annotations

import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.common import running_neo4j, summary, use_bench_neo4j, write_results

use_bench_neo4j("correspondence", 17713, 17513)

import numpy as np
from neo4j import Driver

from cairn.ingest.correspondence.parser import parse_bytes
from cairn.ingest.correspondence.sync import sync_file
from cairn.memory.correspondence import Filters, Reader, semantic_search
from cairn.policy.profiles import PolicyRegistry
from cairn.policy.scope import Scope
from cairn.runtime.database import sync_driver
from cairn.runtime.embedder import MAX_TOKENS, PASS, Embedder, get_embedder
from cairn.schema.migrate import migrate
from cairn.schema.nodes import vector_index_name

NAME = "correspondence_sync"
SECTIONS = 5_000
APPEND = 50
RESYNCS = 5
QUERIES = 40
K = 10
SEED = 7

WIPE = "MATCH (s:Section) CALL (s) { DETACH DELETE s } IN TRANSACTIONS OF 5000 ROWS"
VECTORS = "MATCH (s:Section) RETURN s.section_number AS n, s.embedding AS e ORDER BY n"
ANN = f"""
CALL db.index.vector.queryNodes('{vector_index_name("Section")}', $k, $q) YIELD node, score
RETURN node.section_number AS n ORDER BY score DESC
"""

AUTHORS = (
    "Dana Okafor",
    "Priya Raman",
    "Marta Reyes (external advisor)",
    "Atlas",
    "Jonas Weber",
    "Lena Fischer",
)
TOPICS = (
    "on-prem connector sunset",
    "EU-only inference",
    "AI credit bundles",
    "GPU capacity in Frankfurt",
    "assistant general availability",
    "Sydney latency",
    "Japanese localization",
    "data governance for customer prompts",
    "extended support for banks",
    "security questionnaires",
    "evaluation coverage",
    "works council approval",
    "pricing guardrails",
    "subprocessor list",
    "the inference team budget",
    "public-sector pipeline",
)
SENTENCES = (
    "We discussed {t} again this week and the picture is clearer than it was.",
    "The numbers on {t} moved by {n}% since the last letter, mostly for reasons we expected.",
    "I would not decide {t} on cost alone; customers read it as a signal about priorities.",
    "Two customers asked about {t} in their renewal calls, and one made it a condition.",
    "If we change course on {t}, the people who built the current plan deserve a clear reason.",
    "My proposal for {t} is small: try it with {n} customers and review in a month.",
    "The risk with {t} is not the work itself but the dependencies we have not named yet.",
    "Finance asked for a forecast on {t}; we can give a range, not a number.",
    "Nobody disagrees about {t}; we disagree about the order in which to do things.",
    "I wrote up the options for {t} so that the next letter can choose between them.",
)
STATUSES = ("EXPERIMENT PENDING", "OPEN", "DECIDED", "GOVERNANCE RULE CANDIDATE")


def roman(n: int) -> str:
    out = []
    for value, sym in (
        (1000, "M"), (900, "CM"), (500, "D"), (400, "CD"), (100, "C"), (90, "XC"),
        (50, "L"), (40, "XL"), (10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I"),
    ):  # fmt: skip
        while n >= value:
            out.append(sym)
            n -= value
    return "".join(out)


def generate(count: int, rng: random.Random, start: int = 1) -> str:
    """``count`` letters filed from ``start`` on, with the slips real authors make."""
    parts = []
    filed = start - 1
    for i in range(start, start + count):
        roll = rng.random()
        filed = filed if roll < 0.01 else filed + 2 if roll < 0.02 else filed + 1
        topic = rng.choice(TOPICS)
        prose = [
            rng.choice(SENTENCES).format(t=topic, n=rng.randint(2, 40)) for _ in range(rng.randint(4, 7))
        ]
        if i > 1 and rng.random() < 0.5:
            prose.insert(0, f"Re: § {roman(rng.randint(max(1, i - 30), i - 1))}.")
        extras = []
        if rng.random() < 0.1:
            extras.append(
                f"[EXEC:{rng.choice(('GOV', 'MICRO'))}] Decision: we go ahead with {topic} as proposed."
            )
        if rng.random() < 0.3:
            extras.append(f"*Status: {rng.choice(STATUSES)}*")
        if rng.random() < 0.1:
            extras.append("*Access: sensitivity=medium*")
        heading = roman(filed) if rng.random() < 0.9 else str(filed)
        date = f"2026-{1 + i % 12:02d}-{1 + i % 28:02d}"
        body = "\n\n".join([" ".join(prose), *extras])
        parts.append(f"## {heading} — On {topic}\n\n*{rng.choice(AUTHORS)} · {date}*\n\n{body}\n\n---\n\n")
    return "".join(parts)


class TimedEmbedder:
    """The real embedder, with the time spent inside ``embed`` added up (the sync's baseline)."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.name = inner.name
        self.seconds = 0.0

    def embed(self, texts: Sequence[str], batch_size: int = PASS) -> Any:
        started = time.perf_counter()
        try:
            return self.inner.embed(texts, batch_size)
        finally:
            self.seconds += time.perf_counter() - started


def wipe_sections(driver: Driver) -> None:
    with driver.session() as session:  # CALL … IN TRANSACTIONS needs an implicit transaction
        session.run(WIPE).consume()


def timed(fn: Any) -> tuple[float, Any]:
    started = time.perf_counter()
    result = fn()
    return time.perf_counter() - started, result


def latency_ms(fn: Any, queries: list[list[float]]) -> list[float]:
    samples = []
    for q in queries:
        started = time.perf_counter()
        fn(q)
        samples.append((time.perf_counter() - started) * 1000)
    return samples


def raw_embedding_s(embedder: Embedder, texts: list[str]) -> float:
    """The baseline: the same model embedding the same texts in one call, nothing else, the
    fastest way it can here (``Embedder.embed``: ONNX Runtime in length-sorted passes; torch in
    passes of 64 took 2-4x its time, docs/design.md §Embedding under load)."""
    started = time.perf_counter()
    embedder.embed(texts)
    return time.perf_counter() - started


def run(driver: Driver, workdir: Path, sections: int = SECTIONS) -> dict[str, Any]:
    rng = random.Random(SEED)
    load_before = os.getloadavg()[0]
    embedder = TimedEmbedder(get_embedder())
    md = workdir / "bench-letters.md"
    md.write_text("# Bench letters\n\n" + generate(sections, rng), encoding="utf-8")
    log = workdir / "collisions.jsonl"
    wipe_sections(driver)
    data = md.read_bytes()

    parse_s, parsed = timed(lambda: parse_bytes(data, str(md)))
    texts = [s.embed_text for s in parsed.sections]
    tokens = embedder.inner.token_counts(texts)
    raw_before = raw_embedding_s(embedder.inner, texts)
    sync_s, report = timed(lambda: sync_file(driver, md, collision_log=log, embedder=embedder))
    embed_s = embedder.seconds
    raw_after = raw_embedding_s(embedder.inner, texts)
    raw_s = (raw_before + raw_after) / 2
    assert len(report.created) == sections and not report.conflicts
    resyncs = []
    for _ in range(RESYNCS):
        seconds, again = timed(lambda: sync_file(driver, md, collision_log=log, embedder=embedder))
        assert again.created == [] and again.unchanged == sections
        resyncs.append(seconds)
    with md.open("a", encoding="utf-8") as f:
        f.write(generate(APPEND, rng, start=sections + 1))
    append_s, appended = timed(lambda: sync_file(driver, md, collision_log=log, embedder=embedder))
    assert len(appended.created) == APPEND
    resync_s = statistics.median(resyncs)

    # search: the same vectors in numpy, queries embedded once up front
    records, _, _ = driver.execute_query(VECTORS)
    numbers = np.asarray([r["n"] for r in records])
    matrix = np.asarray([r["e"] for r in records], dtype=np.float32)
    questions = [f"what did we decide about {rng.choice(TOPICS)} and why?" for _ in range(QUERIES)]
    queries = [[float(x) for x in v] for v in embedder.embed(questions)]

    def numpy_top(q: list[float]) -> list[int]:
        sims = matrix @ np.asarray(q, dtype=np.float32)
        top = np.argpartition(-sims, K)[:K]
        return [int(numbers[i]) for i in top[np.argsort(-sims[top])]]

    registry = PolicyRegistry.load(Path(__file__).resolve().parents[1] / "fixtures" / "policy" / "roles.yaml")
    staff_profile = registry.get("staff")
    assert staff_profile is not None
    operator, staff = Reader.system(), Reader(Scope.from_profile(staff_profile), True)
    filters = Filters(exec_tags=("GOV",))

    recall_exact, recall_ann = [], []
    for q in queries[:10]:
        truth = set(numpy_top(q))
        exact = semantic_search(driver, operator, q, K)
        recall_exact.append(len(truth & {int(h.fields["section_number"]) for h in exact.hits}) / K)
        ann, _, _ = driver.execute_query(ANN, k=K, q=q)
        recall_ann.append(len(truth & {int(r["n"]) for r in ann}) / K)

    latencies = {
        "numpy_exact": latency_ms(numpy_top, queries),
        "search_operator": latency_ms(lambda q: semantic_search(driver, operator, q, K), queries),
        "search_staff_acl": latency_ms(lambda q: semantic_search(driver, staff, q, K), queries),
        "search_staff_filtered": latency_ms(lambda q: semantic_search(driver, staff, q, K, filters), queries),
        "ann_index_unfiltered": latency_ms(lambda q: driver.execute_query(ANN, k=K, q=q), queries),
    }
    stats = {name: summary(samples) for name, samples in latencies.items()}
    baseline = stats["numpy_exact"]["p50_ms"]
    return {
        "sections": sections,
        "file_bytes": len(data),
        "collisions": len(report.collisions),
        "tokens_per_section": {
            "p50": int(statistics.median(tokens)),
            "max": max(tokens),
            "window": MAX_TOKENS,
            "over_window": sum(t > MAX_TOKENS for t in tokens),
        },
        "parse_s": round(parse_s, 3),
        "raw_embedding_s": {"before_sync": round(raw_before, 2), "after_sync": round(raw_after, 2)},
        "raw_embedding_sections_per_s": round(sections / raw_s, 1),
        "embed_inside_sync_s": round(embed_s, 2),
        "full_sync_s": round(sync_s, 2),
        "sync_sections_per_s": round(sections / sync_s, 1),
        "sync_to_raw_embedding_ratio": round(raw_s / sync_s, 3),
        "resync_no_change_s": round(resync_s, 3),
        "resync_to_full_sync_ratio": round(resync_s / sync_s, 4),
        "command": f"python -m bench correspondence_sync --sections {sections}",
        "append_sections": APPEND,
        "append_sync_s": round(append_s, 2),
        "search": stats,
        "search_p50_ratio_vs_numpy": {
            name: round(s["p50_ms"] / baseline, 1) for name, s in stats.items() if name != "numpy_exact"
        },
        "recall_at_10_vs_numpy": {
            "search_exact": round(float(np.mean(recall_exact)), 3),
            "ann_index": round(float(np.mean(recall_ann)), 3),
        },
        "embedding_model": embedder.name,
        "cpus": os.cpu_count(),
        "load_average_1m": [round(load_before, 2), round(os.getloadavg()[0], 2)],  # before, after
    }


def table(r: dict[str, Any]) -> list[str]:
    s = r["search"]
    ratio = r["search_p50_ratio_vs_numpy"]
    raw, tok = r["raw_embedding_s"], r["tokens_per_section"]
    lines = [
        f"Command: `{r['command']}` (ratios against baselines measured in the same run)",
        "",
        f"# Correspondence sync and search ({r['sections']} sections, {r['file_bytes'] // 1024} KiB)",
        "",
        "| measure | value |",
        "|---|---|",
        f"| raw embedding of the same texts (baseline; before / after the sync) | "
        f"{raw['before_sync']} s / {raw['after_sync']} s ({r['raw_embedding_sections_per_s']} sections/s) |",
        f"| full sync | {r['full_sync_s']} s ({r['sync_sections_per_s']} sections/s) |",
        f"| **sync / raw embedding (throughput)** | **{r['sync_to_raw_embedding_ratio']}** |",
        f"| of which inside the embedder | {r['embed_inside_sync_s']} s |",
        f"| word pieces per section: p50 / max (window {tok['window']}) | {tok['p50']} / {tok['max']} "
        f"({tok['over_window']} over the window, truncated) |",
        f"| parse only | {r['parse_s']} s |",
        f"| resync, no change (median of {RESYNCS}) | {r['resync_no_change_s']} s |",
        f"| **resync / full sync** | **{r['resync_to_full_sync_ratio']}** |",
        f"| append {r['append_sections']} sections | {r['append_sync_s']} s |",
        "",
        "| search (k=10) | p50 ms | p95 ms | p50 vs numpy |",
        "|---|---|---|---|",
    ]
    for name, st in s.items():
        lines.append(f"| {name} | {st['p50_ms']} | {st['p95_ms']} | {ratio.get(name, 1.0)}x |")
    rec = r["recall_at_10_vs_numpy"]
    lines += [
        "",
        f"recall@10 against numpy: exact search {rec['search_exact']}, ANN index {rec['ann_index']}",
    ]
    return lines


def sections_option(argv: list[str]) -> int:
    """``--sections N`` (default 5,000): a smaller file while developing."""
    if "--sections" in argv:
        return int(argv[argv.index("--sections") + 1])
    return SECTIONS


def main() -> None:
    with running_neo4j() as settings, sync_driver(settings) as driver, tempfile.TemporaryDirectory() as tmp:
        migrate(driver)
        result = run(driver, Path(tmp), sections_option(sys.argv[1:]))
        wipe_sections(driver)
    write_results(NAME, result, table(result))


if __name__ == "__main__":
    main()
