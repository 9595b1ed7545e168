"""Dossier routing on LoCoMo: dossier sizes, duplicates skipped, ingest speed vs raw embedding.

Reads the LoCoMo development split from a path (never copied into the repo; see
``../shared/data/locomo/README.md``: CC BY-NC 4.0, Maharana et al., ACL 2024). Per
conversation, in a clean database, the observation facts are ingested the way an API user
would: one fact packet per session and speaker (fact ``turn_id`` = the dia_id(s), packet
timestamp = the session date) through ``ingest_packets``. Reported per conversation and
overall:

- dossier count, size distribution and the largest dossier's share of the stored facts
  (target: at most 15%), before and after the gardener's ``split_incoherent_dossiers``;
- facts skipped as duplicates, and how many of those had a text different from the fact
  they were folded into;
- ingest facts/s against raw embedding of the same texts with the same model object and the
  same batches (``governor.embed_chunks``), measured before and after the ingest and averaged.

Run: ``python -m bench.locomo_routing --data ../shared/data/locomo/locomo-dev.json``
(own Neo4j: CAIRN_TEST_* env, as bench.dossier_routing).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.common import running_neo4j, use_bench_neo4j, wipe_graph, write_results

use_bench_neo4j("locomo-routing", 17703, 17503)

from neo4j import Driver  # settings above must be in place first

from cairn.graph.dossiers import FACT_DISTRIBUTION
from cairn.memory.dossiers.gardener import split_incoherent_dossiers
from cairn.memory.dossiers.governor import embed_chunks, ingest_packets
from cairn.memory.dossiers.models import FactPacket, parse_packet
from cairn.runtime.database import sync_driver
from cairn.runtime.embedder import Embedder, get_embedder
from cairn.schema.migrate import migrate

NAME = "locomo_routing"
DEFAULT_DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "locomo" / "locomo-dev.json"
SESSION_DATE = "%I:%M %p on %d %B, %Y"  # "1:56 pm on 8 May, 2023"
TARGET_SHARE = 0.15

SURVIVOR_TEXTS = "UNWIND $ids AS id MATCH (f:Fact {id: id}) RETURN f.id AS id, f.text AS text"


def conversation_packets(conv: dict[str, Any]) -> list[FactPacket]:
    """One packet per session and speaker, sessions in order."""
    sessions = conv["conversation"]
    observations = conv["observation"]
    packets = []
    for key in sorted(observations, key=lambda k: int(k.split("_")[1])):
        n = int(key.split("_")[1])
        when = datetime.strptime(sessions[f"session_{n}_date_time"], SESSION_DATE)
        for speaker, facts in observations[key].items():
            items = [
                {"text": text, "turn_id": "; ".join(dia) if isinstance(dia, list) else dia}
                for text, dia in facts
                if text.strip()
            ]
            if items:
                packets.append(
                    parse_packet(
                        {
                            "cluster_label": f"{speaker}, session {n}",
                            "facts": items,
                            "source_block_id": f"{conv['sample_id']}-s{n}-{speaker}",
                            "timestamp": when.isoformat(),
                        }
                    )
                )
    return packets


def raw_embedding_seconds(embedder: Embedder, packets: list[FactPacket]) -> float:
    """The texts ``ingest_packets`` embeds, one model call per chunk it cuts them into."""
    batches = [[f.text for p in chunk for f in p.facts] for chunk in embed_chunks(packets)]
    started = time.perf_counter()
    for batch in batches:
        embedder.embed(batch)
    return time.perf_counter() - started


def sizes(driver: Driver) -> list[int]:
    return [int(r["facts"]) for r in driver.execute_query(FACT_DISTRIBUTION)[0] if r["status"] == "active"]


def measure(driver: Driver, embedder: Embedder, conv: dict[str, Any]) -> dict[str, Any]:
    wipe_graph(driver)
    packets = conversation_packets(conv)
    n_facts = sum(len(p.facts) for p in packets)
    raw_before = raw_embedding_seconds(embedder, packets)
    started = time.perf_counter()
    results = ingest_packets(driver, packets, embedder=embedder)
    ingest_s = time.perf_counter() - started
    raw_after = raw_embedding_seconds(embedder, packets)
    raw_s = (raw_before + raw_after) / 2
    skipped = [s for r in results for s in r.skipped]
    survivors = {
        r["id"]: r["text"]
        for r in driver.execute_query(SURVIVOR_TEXTS, ids=[s.duplicate_of for s in skipped])[0]
    }
    different = [s for s in skipped if survivors.get(s.duplicate_of) != s.text]
    routed = sorted(sizes(driver), reverse=True)
    splits = split_incoherent_dossiers(driver)
    after = sorted(sizes(driver), reverse=True)
    stored = sum(routed)
    return {
        "conversation": conv["sample_id"],
        "packets": len(packets),
        "facts": n_facts,
        "stored_facts": stored,
        "dossiers": len(routed),
        "sizes": routed,
        "largest_share": round(routed[0] / stored, 4),
        "splits": len(splits),
        "dossiers_after_split": len(after),
        "largest_share_after_split": round(after[0] / stored, 4),
        "multi_dossier_packets": sum(1 for r in results if len(r.placements) > 1),
        "skipped_duplicates": len(skipped),
        "skipped_with_different_text": len(different),
        "different_text_examples": [[s.text, survivors.get(s.duplicate_of)] for s in different[:3]],
        "ingest_facts_per_s": round(n_facts / ingest_s, 1),
        "raw_embedding_facts_per_s": round(n_facts / raw_s, 1),
        "ingest_vs_raw_embedding": round(raw_s / ingest_s, 3),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="bench.locomo_routing", description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="locomo-dev.json")
    parser.add_argument("--only", nargs="*", default=None, help="conversation ids (default: all)")
    args = parser.parse_args(argv if argv is not None else [])
    if not args.data.exists():
        print(f"no LoCoMo data at {args.data}; skipped")
        return
    data = json.loads(args.data.read_text())
    conversations = [c for c in data if not args.only or c["sample_id"] in args.only]
    embedder = get_embedder()
    embedder.embed(["warm-up"])
    rows = []
    with running_neo4j() as settings, sync_driver(settings) as driver:
        migrate(driver)
        for conv in conversations:
            rows.append(measure(driver, embedder, conv))
            print(
                json.dumps({k: v for k, v in rows[-1].items() if k != "different_text_examples"}), flush=True
            )
        wipe_graph(driver)
    facts = sum(r["facts"] for r in rows)
    overall = {
        "facts": facts,
        "dossiers": sum(r["dossiers"] for r in rows),
        "largest_share": max(r["largest_share"] for r in rows),
        "largest_share_after_split": max(r["largest_share_after_split"] for r in rows),
        "skipped_duplicates": sum(r["skipped_duplicates"] for r in rows),
        "skipped_with_different_text": sum(r["skipped_with_different_text"] for r in rows),
        "ingest_vs_raw_embedding": round(statistics.fmean(r["ingest_vs_raw_embedding"] for r in rows), 3),
    }
    table = [
        "# Dossier routing on LoCoMo (development split)",
        "",
        f"Command: `python -m bench.locomo_routing --data {args.data}`; one packet per session and speaker,",
        "`ingest_packets`, a clean database per conversation. Largest share = facts of the biggest",
        f"dossier / facts stored (target <= {TARGET_SHARE:.0%}). Ingest ratio = raw embedding time of the",
        "same texts in the same batches with the same model object (mean of a run before and after)",
        "/ ingest time.",
        "",
        "| conversation | facts | dossiers | largest share | after split (splits) "
        "| packets over >1 dossier | duplicates skipped (different text) | ingest / raw embedding |",
        "|---|---|---|---|---|---|---|---|",
        *(
            f"| {r['conversation']} | {r['facts']} | {r['dossiers']} | {r['largest_share']:.3f} "
            f"| {r['largest_share_after_split']:.3f} ({r['splits']}) "
            f"| {r['multi_dossier_packets']} of {r['packets']} "
            f"| {r['skipped_duplicates']} ({r['skipped_with_different_text']}) "
            f"| {r['ingest_vs_raw_embedding']:.2f}x |"
            for r in rows
        ),
        f"| all | {facts} | {overall['dossiers']} | max {overall['largest_share']:.3f} "
        f"| max {overall['largest_share_after_split']:.3f} | | {overall['skipped_duplicates']} "
        f"({overall['skipped_with_different_text']}) | mean {overall['ingest_vs_raw_embedding']:.2f}x |",
        "",
        "Dossier sizes: " + "; ".join(f"{r['conversation']}: {r['sizes']}" for r in rows),
        "",
        "Duplicates skipped with a different text (examples): "
        + "; ".join(f"{a!r} -> {b!r}" for r in rows for a, b in r["different_text_examples"]),
    ]
    write_results(NAME, {"overall": overall, "conversations": rows}, table)


if __name__ == "__main__":
    main(sys.argv[1:])
