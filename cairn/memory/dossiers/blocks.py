"""Conversation blocks: storing a block with its turns, and its sticky tags (docs/design.md §Gardener).

A block arrives with its turns and the facts already extracted from them; the facts wait
on the block (``pending_facts``) until the gardener classifies and routes them. After
gardening, the ``Block`` node keeps its tags — ``global_tags`` (a list) and
``section_rules`` (JSON) — stored once per block and referenced by every fact that came
from it, while the turns themselves are deleted.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from neo4j import Driver

from cairn.graph import dossiers as cypher
from cairn.memory.dossiers.models import Access, BlockInput, InputError, Problem, parse_block
from cairn.policy.preselector import mask
from cairn.policy.scope import Scope
from cairn.policy.writes import TAKEN_ID, kept_on_update, stored_ids


def block_node_id(block_id: str) -> str:
    return f"blk-{block_id}"


def turn_node_id(block_id: str, turn_index: int) -> str:
    return f"turn-{block_id}-{turn_index}"


@dataclass(frozen=True)
class BlockMetadata:
    block_id: str
    global_tags: list[str]
    section_rules: list[dict[str, Any]]
    processed_at: str | None
    turns: int  # turns still stored (0 once gardened)
    facts: int  # facts that name this block as their source
    fields: dict[str, Any]

    def as_json(self) -> dict[str, Any]:
        return {
            "block_id": self.block_id,
            "global_tags": self.global_tags,
            "section_rules": self.section_rules,
            "processed_at": self.processed_at,
            "turns": self.turns,
            "facts": self.facts,
        }


@dataclass(frozen=True)
class BlockIngestReport:
    block_id: str
    turns: int
    facts: int


def _as_block(block: BlockInput | Mapping[str, Any], where: str = "") -> BlockInput:
    return block if isinstance(block, BlockInput) else parse_block(block, where)


def _turn_rows(block: BlockInput) -> list[dict[str, Any]]:
    return [
        {
            "id": turn_node_id(block.block_id, int(t.turn_index or 0)),
            "props": {
                "turn_index": t.turn_index,
                "turn_id": t.turn_id,
                "user_text": t.user_text,
                "assistant_text": t.assistant_text,
                **block.access.props(),
            },
        }
        for t in block.numbered_turns
    ]


def processed_block_ids(driver: Driver, block_ids: Iterable[str]) -> set[str]:
    """Those of ``block_ids`` that were gardened already."""
    records, _, _ = driver.execute_query(cypher.PROCESSED_BLOCKS, block_ids=sorted(set(block_ids)))
    return {str(r["block_id"]) for r in records}


def ingest_blocks(
    driver: Driver, blocks: Sequence[BlockInput | Mapping[str, Any]], writer: Scope | None = None
) -> list[BlockIngestReport]:
    """Store blocks with their turns and pending facts; one transaction per block.

    Every block is validated first, and a block that was already gardened is refused (its
    turns would come back and never be gardened again); on any problem nothing is written.
    """
    parsed = [_as_block(b, f"blocks[{i}]: " if len(blocks) > 1 else "") for i, b in enumerate(blocks)]
    for b in parsed:
        b.access.check_writer(writer, "block", f"{b.block_id}.access", edges=("PART_OF",))
    seen: set[str] = set()
    problems = []
    for b in parsed:
        if b.block_id in seen:
            problems.append(Problem(b.block_id, "block listed twice"))
        seen.add(b.block_id)
    # A stored block the writer cannot read is neither overwritten nor described (gardened or not).
    hidden = stored_ids(driver, writer or Scope.system(), [block_node_id(b) for b in seen]).hidden
    taken = {b for b in seen if block_node_id(b) in hidden}
    problems += [Problem(bid, f"block id {TAKEN_ID}") for bid in sorted(taken)]
    problems += [
        Problem(bid, "already gardened; its turns were deleted")
        for bid in sorted(processed_block_ids(driver, seen - taken))
    ]
    if problems:
        raise InputError("block", problems)
    reports = []
    for b in parsed:
        props = {
            "block_id": b.block_id,
            "pending_facts": json.dumps([f.model_dump(mode="json") for f in b.items]),
            "last_turn": max((int(t.turn_index or 0) for t in b.numbered_turns), default=None),
            **b.access.props(),
        }
        turns = _turn_rows(b)
        keep_observed_at = _keep_unreadable(driver, writer, block_node_id(b.block_id), props, turns)
        driver.execute_query(
            cypher.WRITE_BLOCK,
            id=block_node_id(b.block_id),
            props=props,
            observed_at=b.timestamp.isoformat() if b.timestamp else None,
            keep_observed_at=keep_observed_at,
            turns=turns,
            now=_now(),
        )
        reports.append(BlockIngestReport(b.block_id, len(b.turns), len(b.facts)))
    return reports


def _keep_unreadable(
    driver: Driver, writer: Scope | None, node_id: str, props: dict[str, Any], turns: list[dict[str, Any]]
) -> bool:
    """Resending a stored block (one not gardened yet) sets only the fields its writer may read on
    the block and on each stored turn (``cairn.policy.writes.kept_on_update``): the others are
    dropped from ``props`` and the turn rows, in place, and keep their stored values. Returns
    whether the block's ``observed_at`` is kept."""
    if writer is None or writer.unrestricted:
        return False
    stored = stored_ids(driver, writer, [node_id, *(t["id"] for t in turns)])
    keep_observed_at = False
    rows = [("Block", node_id, props)] + [("Turn", t["id"], t["props"]) for t in turns]
    for label, rid, fields in rows:
        if rid not in stored.visible:
            continue  # a new node: written whole (a hidden one was refused as taken)
        domains = {str(fields.get("domain") or ""), stored.domains.get(rid, "")}
        hidden = kept_on_update(
            writer, label, domains, [*fields, *(("observed_at",) if label == "Block" else ())]
        )
        for name in hidden:
            fields.pop(name, None)
        keep_observed_at = keep_observed_at or (label == "Block" and "observed_at" in hidden)
    return keep_observed_at


def ingest_block(
    driver: Driver, block: BlockInput | Mapping[str, Any], writer: Scope | None = None
) -> BlockIngestReport:
    return ingest_blocks(driver, [block], writer)[0]


def save_block_metadata(
    driver: Driver, block_id: str, global_tags: Sequence[str], section_rules: Sequence[Mapping[str, Any]]
) -> None:
    """Store a block's tags once, on the block (creating a bare block with default access if absent)."""
    driver.execute_query(
        cypher.SAVE_BLOCK_METADATA,
        id=block_node_id(block_id),
        block_id=block_id,
        access=Access().props(),
        global_tags=list(global_tags),
        section_rules=json.dumps([dict(r) for r in section_rules]),
    )


def tags_shown(fields: Mapping[str, Any]) -> tuple[list[str], list[dict[str, Any]]]:
    """A masked ``Block``'s tags and section rules (stored as JSON text); empty where hidden."""
    rules = fields.get("section_rules")
    return list(fields.get("global_tags") or []), json.loads(rules) if isinstance(rules, str) else []


def get_block_metadata(driver: Driver, scope: Scope, block_id: str) -> BlockMetadata | None:
    """The block's tags and counts as the scope may see them; None when absent or hidden."""
    records, _, _ = driver.execute_query(
        cypher.BLOCK_METADATA, {**scope.cypher_params(), "block_id": block_id}
    )
    if not records:
        return None
    r = records[0]
    fields, _ = mask("Block", {k: v for k, v in r["props"].items() if k != "pending_facts"}, scope)
    global_tags, section_rules = tags_shown(fields)
    processed = fields.get("processed_at")
    return BlockMetadata(
        block_id=block_id,
        global_tags=global_tags,
        section_rules=section_rules,
        processed_at=None if processed is None else str(processed),
        turns=int(r["turns"]),
        facts=int(r["facts"]),
        fields=fields,
    )


def _now() -> str:
    return datetime.now(UTC).isoformat()
