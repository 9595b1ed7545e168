"""The demo dossiers (fixtures/dossiers): blocks gardened into dossiers, then a few fact packets.

``load_demo_dossiers`` is what ``cairn serve --demo`` calls. It is idempotent: blocks that
were gardened already are skipped (their turns are gone and must not come back) and every
packet carries a ``packet_id`` the governor recognises, so a second run writes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from neo4j import Driver

from cairn.memory.dossiers.blocks import ingest_blocks, processed_block_ids
from cairn.memory.dossiers.files import read_blocks, read_packets
from cairn.memory.dossiers.gardener import garden_block
from cairn.memory.dossiers.governor import ingest_packets
from cairn.runtime.embedder import Embedder, get_embedder
from cairn.runtime.settings import REPO_ROOT

DEMO_DIR = REPO_ROOT / "fixtures" / "dossiers"


@dataclass(frozen=True)
class DemoReport:
    blocks_gardened: int
    packets_applied: int
    packets_already_applied: int


def load_demo_dossiers(driver: Driver, embedder: Embedder | None = None, root: Path = DEMO_DIR) -> DemoReport:
    """Ingest and garden the demo blocks, then route the demo packets (safe to run repeatedly)."""
    model = embedder or get_embedder()
    blocks = read_blocks(root / "blocks.json")
    packets = read_packets(root / "packets.jsonl")
    done = processed_block_ids(driver, [b.block_id for b in blocks])
    fresh = [b for b in blocks if b.block_id not in done]
    ingest_blocks(driver, fresh)
    for b in fresh:
        garden_block(driver, b.block_id, embedder=model)
    results = ingest_packets(driver, packets, embedder=model)
    repeated = sum(1 for r in results if r.action == "already_applied")
    return DemoReport(len(fresh), len(results) - repeated, repeated)
