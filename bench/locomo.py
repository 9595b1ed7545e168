"""LoCoMo evidence recall: Cairn's fact search against flat dense and BM25 over the same facts.

Reads the development split from a path (never copied into the repository; CC BY-NC 4.0,
Maharana et al., ACL 2024) and follows the measure in its README: for each conversation,
start from a clean database, ingest its observations the way a user of the API would (one
fact packet per session and speaker through ``ingest_packets``; each fact's ``turn_id`` is
its dia_id(s), the packet's timestamp the session date, the same access for every fact),
then ask its questions (categories 1-4) through ``FactRetriever.search`` with a role's Scope.
recall(q, k) = |evidence ids covered by the dia_ids of the first k facts| / |evidence ids|.

Baselines in the same run, over the conversation's observation facts: exact cosine with the
same embedding model object (numpy) and BM25Okapi over lower-cased word tokens. Also timed:
ingest facts/s against raw embedding of the same texts, retrieval p50 against the dense
search's (both include embedding the question; both timed under the collector tuning of the warm
service, ``cairn.runtime.collector``, as bench/ask_latency.py does), and dossier sizes. Nothing is
timed before every conversation has been ingested and searched once (``--warm-ups``): a fresh
Neo4j JVM compiles its write path over several ingests, which a running service has done long
before; the "clean database" between conversations deletes data only (indexes and constraints
stay), and the report counts the plans Neo4j made again during the timed ingests. Fusion
variants named in ``VARIANTS`` run over the same ingested data, so the table shows what each choice
is worth.

The file is read by ``bench.locomo_data``, which meets the public ``locomo10.json``'s known
irregularities on purpose (typo'd, padded or packed evidence ids, ids naming no turn, questions
without evidence, other date forms, oversized packets) and counts each in the results (``quirks``)
beside the oracle's recall (every fact returned), so a held-out file is scored as this one is.

    python -m bench.locomo --data ../shared/data/locomo/locomo-dev.json
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray
from rank_bm25 import BM25Okapi

from bench.common import (
    jvm_cpu_s,
    neo4j_pid,
    replans,
    running_neo4j,
    use_bench_neo4j,
    wipe_graph,
    write_results,
)
from bench.locomo_data import CATEGORIES, Question, Quirks, dia_ids, packets_of, questions_of

use_bench_neo4j("locomo", 17795, 17595)

from cairn.memory.dossiers.facts import FactRetriever, FusionConfig
from cairn.memory.dossiers.governor import ingest_packets
from cairn.policy.profiles import PolicyRegistry
from cairn.policy.scope import Scope
from cairn.runtime.collector import tuned_collector
from cairn.runtime.database import sync_driver
from cairn.runtime.embedder import Embedder, get_embedder
from cairn.schema.migrate import migrate

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo" / "locomo-dev.json"
KS = (5, 10, 25)
ROLE = "staff"  # any role: every fact carries the default access, visible to all roles
WARM_UP_QUESTIONS = 20
WORD = re.compile(r"\w+")
DOSSIERS = """
MATCH (d:Dossier {status: 'active'})
RETURN d.id AS id, COUNT { (d)-[:HAS_FACT]->(:Fact) } AS facts
"""

# The Cairn configurations compared; "cairn" (the defaults) is the system under test.
VARIANTS: dict[str, FusionConfig] = {
    "cairn": FusionConfig(),
    "cairn_previous": FusionConfig(name_weight=0.0, distinct_sources=False),
    "cairn_no_names": FusionConfig(name_weight=0.0),
    "cairn_no_distinct_sources": FusionConfig(distinct_sources=False),
    "cairn_content_encoded": FusionConfig(content_vector="encoded"),
    "cairn_question_only": FusionConfig(content_weight=0.0),
    "cairn_content0.5": FusionConfig(content_weight=0.5),
    "cairn_dense_only": FusionConfig(text_weight=0.0, neighbour_weight=0.0),
    "cairn_rrf_no_expansion": FusionConfig(fusion="rrf", neighbour_weight=0.0, drop_question_words=False),
    "cairn_rrf": FusionConfig(fusion="rrf"),
    "cairn_score_text0.5": FusionConfig(text_weight=0.5),
    "cairn_prf3": FusionConfig(feedback=3),
    "cairn_rrf_prf3": FusionConfig(fusion="rrf", feedback=3),
    "cairn_uncentred": FusionConfig(centre=0.0),
    "cairn_centre0.5": FusionConfig(centre=0.5),
    # session diversity: a session's n-th fact in the list counts 0.95**(n-1) (0.9**(n-1)) of its score
    "cairn_session0.95": FusionConfig(block_decay=0.95, distinct_sources=False),
    "cairn_session0.9": FusionConfig(block_decay=0.9, distinct_sources=False),
    # the default before dossier mates (2026-11-27); and mates of the top 3 fused facts at 0.05, 0.15
    "cairn_no_dossier": FusionConfig(dossier_weight=0.0),
    "cairn_dossier0.05_3": FusionConfig(dossier_weight=0.05, dossier_seeds=3),
    "cairn_dossier0.15_3": FusionConfig(dossier_weight=0.15, dossier_seeds=3),
    "cairn_when_mates": FusionConfig(when_mates=True),
}


def recall(ranked: Sequence[frozenset[str]], evidence: frozenset[str], k: int) -> float:
    covered: set[str] = set()
    for ids in ranked[:k]:
        covered |= ids
    return len(evidence & covered) / len(evidence)


def cpu_ms(before: dict[str, float], after: dict[str, float]) -> dict[str, int]:
    """CPU milliseconds between two ``jvm_cpu_s`` readings, per thread group."""
    return {k: round((after[k] - v) * 1000) for k, v in before.items()}


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    started = time.perf_counter()
    out = fn()
    return out, (time.perf_counter() - started) * 1000


class Scores:
    """Per-system recall samples by k and category."""

    def __init__(self) -> None:
        self.samples: dict[str, dict[str, dict[str, list[float]]]] = {}

    def add(self, system: str, q: Question, ranked: Sequence[frozenset[str]]) -> None:
        by_k = self.samples.setdefault(system, {str(k): {} for k in KS})
        for k in KS:
            value = recall(ranked, q.evidence, k)
            for cat in ("all", q.category):
                by_k[str(k)].setdefault(cat, []).append(value)

    def table(self) -> dict[str, dict[str, dict[str, float]]]:
        return {
            system: {
                k: {cat: round(statistics.fmean(v), 4) for cat, v in sorted(cats.items())}
                for k, cats in by_k.items()
            }
            for system, by_k in self.samples.items()
        }


def run_conversation(
    driver: Any,
    embedder: Embedder,
    scope: Scope,
    conv: dict[str, Any],
    scores: Scores,
    variants: dict[str, FusionConfig],
    pid: int | None = None,
    gc_young: int = 0,
    count_replans: Callable[[], int | None] = lambda: None,
) -> dict[str, Any]:
    """Ingest one conversation into a clean graph and score every system on its questions; the
    recall of this conversation alone is kept too, so a parameter chosen on some conversations can
    be checked on the others (bench/results/locomo_sweep.md)."""
    own = Scores()

    def add(system: str, q: Question, ranked: Sequence[frozenset[str]]) -> None:
        scores.add(system, q, ranked)
        own.add(system, q, ranked)

    wipe_graph(driver)
    quirks = Quirks()
    packets, facts = packets_of(conv, quirks)
    questions = questions_of(conv, quirks)
    every_turn = frozenset().union(*(f.dia_ids for f in facts))
    for q in questions:  # the ceiling of any fact retriever: every fact returned
        own.add("oracle", q, [every_turn])
    texts = [f.text for f in facts]
    # Raw embedding is timed just before and just after the ingest (mean of both), so a change in
    # the shared machine's load during the ingest counts the same for both sides.
    _, before_ms = timed(lambda: embedder.embed(texts))
    cpu_before, replans_before = jvm_cpu_s(pid), count_replans()
    _, ingest_ms = timed(lambda: ingest_packets(driver, packets, embedder=embedder))
    cpu_after, replans_after = jvm_cpu_s(pid), count_replans()
    print(f"{conv['sample_id']}: {len(facts)} facts ingested in {ingest_ms / 1000:.1f}s", flush=True)
    matrix, after_ms = timed(lambda: embedder.embed(texts))
    embed_ms = (before_ms + after_ms) / 2
    bm25 = BM25Okapi([WORD.findall(t.lower()) for t in texts])
    latency: dict[str, list[float]] = {"dense": [], "cairn": []}
    retrievers = {name: FactRetriever(driver, embedder, cfg) for name, cfg in variants.items()}
    with tuned_collector(gc_young):  # the questions as `cairn serve` answers them (cairn/app.py)
        for q in questions:
            order, ms = timed(lambda q=q: dense_search(embedder, matrix, q.text))
            latency["dense"].append(ms)
            add("dense", q, [facts[i].dia_ids for i in order])
            lexical = np.argsort(-bm25.get_scores(WORD.findall(q.text.lower())), kind="stable")
            add("bm25", q, [facts[i].dia_ids for i in lexical])
            # the other variants reuse the question's vector (embedded once, only if one runs)
            vector = embedder.embed([q.text])[0] if len(retrievers) > 1 else None
            for name, retriever in retrievers.items():
                if name == "cairn":  # timed like the dense search: embedding the question included
                    result, ms = timed(lambda r=retriever, q=q: r.search(scope, q.text, top_k=max(KS)))
                    latency["cairn"].append(ms)
                else:
                    result = retriever.search(scope, q.text, top_k=max(KS), query_vector=vector)
                add(name, q, [dia_ids(h.fact.get("source_turn_ids") or []) for h in result.hits])
    records, _, _ = driver.execute_query(DOSSIERS)
    sizes = sorted((int(r["facts"]) for r in records), reverse=True)
    stored = sum(sizes)
    return {
        "sample_id": conv["sample_id"],
        "facts": len(facts),
        "stored_facts": stored,
        "questions": len(questions),
        "questions_by_category": {cat: sum(q.category == cat for q in questions) for cat in CATEGORIES}
        | {"all": len(questions)},
        "ingest_ms": ingest_ms,
        "embed_ms": embed_ms,
        # Neo4j's CPU during the ingest (embedded server only): its JIT compiler threads and the rest
        "ingest_neo4j_cpu_ms": cpu_ms(cpu_before, cpu_after),
        # plans Neo4j dropped and made again during the ingest (embedded server only)
        "ingest_replans": None if replans_after is None else replans_after - (replans_before or 0),
        "dossiers": len(sizes),
        "dossier_sizes": sizes,
        "largest_dossier_share": round(sizes[0] / stored, 4) if stored else 0.0,
        "latency_ms": latency,
        "recall": {system: table for system, table in own.table().items() if system != "oracle"},
        "oracle_recall": own.table()["oracle"]["25"] if questions else {},
        "quirks": quirks.as_json(),
    }


def warm_up(
    driver: Any, embedder: Embedder, scope: Scope, convs: Sequence[dict[str, Any]], pid: int | None = None
) -> list[dict[str, Any]]:
    """Throw-away ingests and searches before anything is timed, one per conversation in ``convs``:
    the model's first batches, Neo4j's page cache, query plans and its JIT warm up here, so the
    ingest and latency figures are nearer a running service's. One conversation was not enough:
    over the next five ingests a fresh JVM spent 7.7 ms of Neo4j CPU per fact, half of it
    compiling, falling ingest by ingest as the server's write path (kernel, record store, GBPTree
    and Lucene writers) reached C2 for the first time; after five it spent 3.3 ms (docs/design.md
    §Dossier queries, "JIT"). Each ingest's Neo4j CPU is returned, so the cold JVM's cost stays in
    the report."""
    cpu: list[dict[str, Any]] = []
    for conv in convs:
        wipe_graph(driver)
        packets, facts = packets_of(conv)
        before = jvm_cpu_s(pid)
        ingest_packets(driver, packets, embedder=embedder)
        after = jvm_cpu_s(pid)
        cpu.append({"facts": len(facts), **cpu_ms(before, after)})
        matrix = embedder.embed([f.text for f in facts])
        retriever = FactRetriever(driver, embedder)
        for q in questions_of(conv)[:WARM_UP_QUESTIONS]:
            dense_search(embedder, matrix, q.text)
            retriever.search(scope, q.text, top_k=max(KS))
    wipe_graph(driver)
    return cpu


def dense_search(embedder: Embedder, matrix: NDArray[np.float32], question: str) -> NDArray[np.intp]:
    """Exact cosine (the embedder's vectors are normalised) over every fact, best first."""
    q = embedder.embed([question])[0]
    return np.argsort(-(matrix @ q), kind="stable")


def warm_up_note(warm_ups: int) -> str:
    """What the timed ingests followed: a fresh JVM compiles Neo4j's write path over its first
    ingests (docs/design.md §Dossier queries), so without a warm-up the ratio is a cold start's."""
    if warm_ups == 0:
        return "no throw-away ingest first, so Neo4j's JVM was still compiling its write path"
    return (
        f"after {warm_ups} throw-away ingest(s) and searches, one per conversation, so Neo4j's JVM "
        "has compiled most of its write path, as a running service's has"
    )


def neo4j_cpu_note(data: dict[str, Any]) -> str:
    """Neo4j's CPU per ingested fact, the share of it its JIT compiler threads took, and how many
    plans it made again; then the same CPU over the warm-up's ingests (a fresh JVM)."""
    cpu = [c["ingest_neo4j_cpu_ms"] for c in data["per_conversation"] if c.get("ingest_neo4j_cpu_ms")]
    if not cpu:
        return ""
    jit = sum(c["jit"] for c in cpu)
    total = jit + sum(c["work"] for c in cpu)
    note = (
        f" Neo4j CPU during the ingests: {total / data['facts']:.1f} ms per fact, "
        f"{jit / total if total else 0.0:.0%} of it in its JIT compiler threads"
    )
    replanned = [c["ingest_replans"] for c in data["per_conversation"] if c.get("ingest_replans") is not None]
    if replanned:
        # The wipe deletes data only (indexes and constraints stay, as in a running service) and
        # the ingest statements keep their plans (KEEP_PLAN), so none is planned again.
        note += f"; plans made again during the ingests: {sum(replanned)} (Neo4j's debug.log)"
    warm = [c for c in data.get("warm_up_neo4j_cpu_ms", []) if "jit" in c]
    if warm:
        note += (
            ". Over the warm-up's ingests (a fresh JVM, one per conversation, in order): "
            + ", ".join(f"{(c['jit'] + c['work']) / c['facts']:.1f}" for c in warm)
            + " ms per fact, JIT "
            + ", ".join(f"{c['jit'] / max(1, c['jit'] + c['work']):.0%}" for c in warm)
        )
    return note + "."


def quirks_note(counts: dict[str, int]) -> str:
    """Every irregularity met, with its count and what was done (``Quirks.MEANING``)."""
    met = [f"{counts[kind]} {meaning}" for kind, meaning in Quirks.MEANING.items() if counts.get(kind)]
    return "; ".join(met) if met else "nothing normalised or skipped"


def markdown(data: dict[str, Any]) -> list[str]:
    recall_table = data["recall"]
    lines = [
        f"# LoCoMo evidence recall ({data['data']})",
        "",
        f"Data: `{data['data']}` ({data['conversations']} conversations, {data['facts']} facts, "
        f"{data['questions']} questions, categories 1-4). Measure: the README next to the data "
        "(evidence dia_ids covered by the first k facts). One run; every system over the same facts.",
        "Categories: 1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop.",
        "",
        "| system | k=5 | k=10 | k=25 | multi-hop @10 | temporal @10 | open-domain @10 | single-hop @10 |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for system, by_k in recall_table.items():
        at10 = by_k["10"]
        lines.append(
            f"| {system} | {by_k['5']['all']:.3f} | {at10['all']:.3f} | {by_k['25']['all']:.3f} | "
            + " | ".join(f"{at10.get(c, float('nan')):.3f}" for c in CATEGORIES)
            + " |"
        )
    lines += [
        "",
        "Variants (all over the same ingested graph): `cairn` is the default `FusionConfig` "
        "(the dense query is the question's vector plus its content words' vector, pooled from the "
        "question's own token vectors in its one forward pass; rescaled-score fusion of the vector index "
        "and the Neo4j full-text index, question words "
        "left out of the full-text query; facts within 3 turns of a top-10 hit in its session get 0.3 of "
        "its score; a third list, the dense candidates that name one of the question's names, at 0.25; "
        "facts whose source turns are all cited higher up listed after those that cite a new turn; "
        "the dense query centred: minus the mean vector of the visible facts; "
        "the other facts of a top-5 fused fact's dossier get 0.1 of its score, except for a question "
        'whose first word is "when"; '
        "one round trip); `cairn_when_mates` is the default before when questions lost their mates "
        "(2026-11-27), `cairn_no_dossier` the default before dossier mates (2026-11-27), "
        "`cairn_dossier0.05_3` and `cairn_dossier0.15_3` lift the top 3's mates by 0.05 and 0.15; "
        "`cairn_session0.95` and `cairn_session0.9` list a session's n-th fact at 0.95**(n-1) (0.9**(n-1)) "
        "of its score, without distinct sources; "
        "`cairn_uncentred` is the default before centring (2026-11-27), "
        "`cairn_centre0.5` subtracts half the mean, every other variant is centred; "
        "`cairn_previous` is the default before the named list and the distinct "
        "sources (2026-11-26), `cairn_no_names` and `cairn_no_distinct_sources` leave out one of them; "
        "`cairn_content_encoded` embeds the content words as a second text (a second forward pass; "
        "the default before 2026-11-27 pools the question's own token vectors over them), "
        "`cairn_question_only` embeds the question alone (the previous "
        "default), `cairn_content0.5` adds half the content words' vector; "
        "`cairn_dense_only` is the vector list alone (with the content words) through the same Cypher; "
        "`cairn_rrf_no_expansion` is plain RRF; `cairn_rrf` fuses ranks (RRF k=20) where the default "
        "fuses rescaled scores (cosine min-max over the list, BM25 over its best); `text0.5` halves the "
        "full-text share; `*prf3` add a third list, the query moved to the mean of its top 3 dense hits. "
        "Earlier sweeps are in "
        "`locomo_sweep.md`.",
        "",
        f"- Ingest ({warm_up_note(data.get('warm_ups', 1))}; "
        "the graph is wiped between conversations, its schema kept): "
        f"{data['ingest_facts_per_s']:.1f} facts/s vs raw embedding of the same texts "
        f"{data['raw_embed_facts_per_s']:.1f} facts/s (ratio {data['ingest_vs_raw_embedding']:.2f})."
        + neo4j_cpu_note(data),
        f"- Retrieval p50 (embedding the question included): cairn {data['cairn_p50_ms']:.1f} ms, "
        f"flat dense {data['dense_p50_ms']:.1f} ms (ratio {data['retrieval_p50_vs_dense']:.2f}).",
        f"- Dossiers per conversation: {', '.join(str(c['dossiers']) for c in data['per_conversation'])}; "
        f"largest dossier share (max over conversations): {data['largest_dossier_share']:.3f}.",
        f"- Oracle (every fact returned, the ceiling of any fact retriever): "
        f"{data['oracle_recall'].get('all', float('nan')):.3f}.",
        f"- The data as read: {quirks_note(data['quirks'])}.",
        "",
        "| conversation | facts | stored | dossiers | largest share | sizes (top 5) |",
        "|---|---|---|---|---|---|",
    ]
    for c in data["per_conversation"]:
        lines.append(
            f"| {c['sample_id']} | {c['facts']} | {c['stored_facts']} | {c['dossiers']} | "
            f"{c['largest_dossier_share']:.3f} | {c['dossier_sizes'][:5]} |"
        )
    lines += [
        "",
        "Recall per conversation (k=10 / k=25 / multi-hop @10), to check a choice made on some "
        "conversations against the others:",
        "",
        "| system | " + " | ".join(c["sample_id"] for c in data["per_conversation"]) + " |",
        "|---|" + "---|" * len(data["per_conversation"]),
    ]
    for system in recall_table:
        cells = []
        for c in data["per_conversation"]:
            by_k = c["recall"][system]
            mh = by_k["10"].get("1")
            cells.append(
                f"{by_k['10']['all']:.3f} / {by_k['25']['all']:.3f} / " + ("-" if mh is None else f"{mh:.3f}")
            )
        lines.append(f"| {system} | " + " | ".join(cells) + " |")
    return lines


def main(
    argv: list[str] | None = None,
    variants: dict[str, FusionConfig] | None = None,
    results: str = "locomo",
    extra: Callable[[dict[str, Any]], list[str]] | None = None,
) -> dict[str, Any]:
    """Run the bench; ``variants`` (default ``VARIANTS``) are the Cairn configurations it may run,
    ``results`` names the files written in bench/results/, and ``extra`` adds lines to the
    markdown from the data (bench/locomo_loo.py uses all three)."""
    known = VARIANTS if variants is None else variants
    parser = argparse.ArgumentParser(prog="python -m bench.locomo", description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="locomo-dev.json (not vendored)")
    parser.add_argument("--limit", type=int, default=None, help="only the first N conversations")
    parser.add_argument(
        "--variants", default=",".join(known), help="comma-separated Cairn variants (cairn is always run)"
    )
    parser.add_argument(
        "--warm-ups",
        type=int,
        default=None,
        help="throw-away ingests and searches before timing (default: each conversation once)",
    )
    parser.add_argument(
        "--no-warm-up", action="store_true", help="skip the throw-away ingests and searches before timing"
    )
    args = parser.parse_args(argv)
    chosen = {"cairn", *args.variants.split(",")}
    unknown = chosen - set(known)
    if unknown:
        parser.error(f"unknown variants: {sorted(unknown)}; known: {sorted(known)}")
    conversations = json.loads(args.data.read_text())[: args.limit]
    embedder = get_embedder()
    embedder.embed(["warm up"])
    scores = Scores()
    per: list[dict[str, Any]] = []
    with running_neo4j() as settings, sync_driver(settings) as driver:
        migrate(driver)
        pid = neo4j_pid(settings)
        scope = Scope.from_profile(PolicyRegistry.load(settings.policy_file).roles[ROLE])
        warm_ups = len(conversations) if args.warm_ups is None else args.warm_ups
        warm_ups = 0 if args.no_warm_up or not conversations else warm_ups
        cycle = [conversations[i % len(conversations)] for i in range(warm_ups)]
        warm_cpu = warm_up(driver, embedder, scope, cycle, pid)
        for conv in conversations:
            variants = {name: cfg for name, cfg in known.items() if name in chosen}
            per.append(
                run_conversation(
                    driver,
                    embedder,
                    scope,
                    conv,
                    scores,
                    variants,
                    pid,
                    settings.gc_young,
                    lambda: replans(settings),
                )
            )
            print(f"{conv['sample_id']}: {json.dumps(scores.table()['cairn']['10'])}", flush=True)
        wipe_graph(driver)
    facts = sum(c["facts"] for c in per)
    ingest_rate = facts / (sum(c["ingest_ms"] for c in per) / 1000)
    embed_rate = facts / (sum(c["embed_ms"] for c in per) / 1000)
    cairn_p50 = statistics.median(ms for c in per for ms in c["latency_ms"]["cairn"])
    dense_p50 = statistics.median(ms for c in per for ms in c["latency_ms"]["dense"])
    for c in per:
        del c["latency_ms"]
    oracle = {
        cat: round(
            sum(c["oracle_recall"].get(cat, 0.0) * c["questions_by_category"].get(cat, 0) for c in per)
            / max(1, sum(c["questions_by_category"].get(cat, 0) for c in per)),
            4,
        )
        for cat in ("all", *CATEGORIES)
    }
    data = {
        "data": args.data.name,
        "conversations": len(per),
        "facts": facts,
        "questions": sum(c["questions"] for c in per),
        "recall": scores.table(),
        "variants": {name: repr(replace(cfg)) for name, cfg in known.items() if name in chosen},
        "ingest_facts_per_s": round(ingest_rate, 1),
        "raw_embed_facts_per_s": round(embed_rate, 1),
        "ingest_vs_raw_embedding": round(ingest_rate / embed_rate, 3),
        "largest_dossier_share": max(c["largest_dossier_share"] for c in per),
        "cairn_p50_ms": round(cairn_p50, 2),
        "dense_p50_ms": round(dense_p50, 2),
        "retrieval_p50_vs_dense": round(cairn_p50 / dense_p50, 3),
        "warm_ups": warm_ups,
        "warm_up_neo4j_cpu_ms": warm_cpu,
        "oracle_recall": oracle,
        "quirks": {kind: sum(c["quirks"]["counts"][kind] for c in per) for kind in Quirks.MEANING},
        "per_conversation": per,
    }
    write_results(results, data, markdown(data) + (extra(data) if extra else []))
    return data


if __name__ == "__main__":
    main()
