"""The context assembler: group-by-block hydration (docs/design.md §Reading dossiers).

Retrieved chunks (or dossier facts) are grouped by the block they came from; each block's
global tags are written once, in its header, and a section rule's tag is put only on the
chunks whose turn falls inside the rule's range. Tags are paid for once per block, not once
per chunk. Block metadata is read through the caller's Scope: a block the caller may not
see contributes no tags.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from neo4j import Driver

from cairn.graph import dossiers as cypher
from cairn.memory.dossiers.blocks import tags_shown
from cairn.memory.dossiers.retriever import DossierView
from cairn.policy.preselector import mask
from cairn.policy.scope import Scope

_TRAILING_INT = re.compile(r"(\d+)$")


@dataclass(frozen=True)
class Chunk:
    block_id: str
    text: str
    turn_index: int | None = None

    @classmethod
    def of(cls, raw: Mapping[str, Any]) -> Chunk:
        """From a retrieved chunk dict: ``block_id``, ``text`` and ``turn_index`` or ``turn_id``."""
        turn = raw.get("turn_index")
        if turn is None and (m := _TRAILING_INT.search(str(raw.get("turn_id") or ""))):
            turn = int(m.group(1))
        return cls(str(raw["block_id"]), str(raw["text"]), None if turn is None else int(turn))


@dataclass(frozen=True)
class _Meta:
    global_tags: list[str]
    section_rules: list[dict[str, Any]]


def _metadata(driver: Driver, scope: Scope, block_ids: Sequence[str]) -> dict[str, _Meta]:
    records, _, _ = driver.execute_query(
        cypher.BLOCK_TAGS_FOR_CHUNKS, {**scope.cypher_params(), "block_ids": list(block_ids)}
    )
    out = {}
    for r in records:
        fields, _ = mask("Block", r["props"], scope)
        out[r["block_id"]] = _Meta(*tags_shown(fields))
    return out


def section_tags(turn_index: int | None, rules: Sequence[Mapping[str, Any]]) -> list[str]:
    """Tags of the section rules whose [start_turn, end_turn] contains ``turn_index``."""
    if turn_index is None:
        return []
    return [
        str(r.get("tag") or r.get("rule"))
        for r in rules
        if int(r.get("start_turn", 0)) <= turn_index <= int(r.get("end_turn", -1))
    ]


def hydrate_chunks_with_metadata(
    driver: Driver, scope: Scope, chunks: Sequence[Chunk | Mapping[str, Any]]
) -> str:
    """Chunks grouped by block (first-seen order): one header with the block's tags, then its chunks."""
    items = [c if isinstance(c, Chunk) else Chunk.of(c) for c in chunks]
    order = list(dict.fromkeys(c.block_id for c in items))
    meta = _metadata(driver, scope, order)
    parts: list[str] = []
    for block_id in order:
        m = meta.get(block_id, _Meta([], []))
        parts.append(f"\n### Context Block: {block_id}")
        if m.global_tags:
            parts.append(f"Active Rules: {', '.join(m.global_tags)}")
        for c in items:
            if c.block_id != block_id:
                continue
            tags = section_tags(c.turn_index, m.section_rules)
            prefix = "".join(f"[{t}] " for t in tags)
            parts.append(f"  {prefix}{c.text}")
        parts.append("")
    return "\n".join(parts)


def hydrate_dossiers(driver: Driver, scope: Scope, dossiers: Sequence[DossierView]) -> str:
    """Each dossier's facts hydrated by their source block (facts without a block are listed plainly)."""
    parts: list[str] = []
    for d in dossiers:
        parts.append(f"## {d.title}")
        if d.summary:
            parts.append(f"Summary: {d.summary}")
        with_block = [f for f in d.facts if f.get("source_block_id")]
        parts += [f"  {f.get('text', '')}" for f in d.facts if not f.get("source_block_id")]
        chunks = [
            Chunk(str(f["source_block_id"]), str(f.get("text", "")), f.get("turn_index")) for f in with_block
        ]
        if chunks:
            parts.append(hydrate_chunks_with_metadata(driver, scope, chunks))
    return "\n".join(parts)
