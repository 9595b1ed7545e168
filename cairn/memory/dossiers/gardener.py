"""The gardener (notes 000 Phase 2 and 001): a fact classifier and router, not a chunker.

``garden_block`` takes a stored block's pending facts, classifies them with the three
heuristics (``tagging``), stores the tags once on the ``Block``, groups the narrative facts
by meaning, routes each group to the governor as a fact packet, and finally deletes the
block's turns. Facts, tags and provenance stay.

Each step is idempotent (tags are SET, packets carry content keys the governor recognises,
deleting turns twice deletes nothing), so a gardening run that stops half-way is finished by
running it again; only the last step marks the block processed.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np
from neo4j import Driver
from numpy.typing import NDArray

from cairn.memory.dossiers.adjudicator import Adjudicator
from cairn.memory.dossiers.blocks import block_node_id
from cairn.memory.dossiers.governor import RoutingResult, process_fact_packet
from cairn.memory.dossiers.models import Access, FactItem, FactPacket
from cairn.memory.dossiers.tagging import Classification, classify_facts
from cairn.policy.scope import Scope
from cairn.runtime.embedder import Embedder, get_embedder

GROUP_COSINE = 0.4  # the routing threshold: facts that would vote for each other belong together
LABEL_WORDS = 3

LOAD_BLOCK = """
MATCH (b:Block {block_id: $block_id})
RETURN properties(b) AS props
"""

UNPROCESSED_BLOCKS = """
MATCH (b:Block)
WHERE b.processed_at IS NULL
RETURN b.block_id AS block_id ORDER BY coalesce(b.observed_at, b.created_at), b.block_id
"""

SAVE_TAGS = """
MATCH (b:Block {id: $id})
SET b.global_tags = $global_tags, b.section_rules = $section_rules
WITH b
UNWIND $tag_facts AS row
MERGE (f:Entity:Fact {id: row.id})
ON CREATE SET f.created_at = datetime($now), f.added_at = datetime($now)
SET f += row.props
MERGE (f)-[:FROM_BLOCK]->(b)
"""

FINISH_BLOCK = """
MATCH (b:Block {id: $id})
OPTIONAL MATCH (t:Turn)-[:PART_OF]->(b)
WITH b, collect(t) AS turns
SET b.processed_at = datetime($now)
REMOVE b.pending_facts
WITH b, turns, size(turns) AS n
FOREACH (t IN turns | DETACH DELETE t)
RETURN n
"""

# note 000 Phase 6 validation queries, on the graph.
DOSSIER_COUNT = "MATCH (d:Dossier) RETURN count(d) AS n"
FACT_DISTRIBUTION = """
MATCH (d:Dossier)
OPTIONAL MATCH (d)-[:HAS_FACT]->(f:Fact)
RETURN d.id AS id, d.title AS title, d.status AS status, count(f) AS facts
ORDER BY facts DESC, d.id
"""
PROVENANCE_COUNTS = """
MATCH (j:JournalEntry)-[:ABOUT]->(d:Dossier)
RETURN d.id AS id, j.op AS op, count(j) AS n
ORDER BY d.id, op
"""
EMBEDDING_COVERAGE = """
MATCH (:Dossier)-[:HAS_FACT]->(f:Fact)
RETURN count(DISTINCT f) AS total, count(DISTINCT CASE WHEN f.embedding IS NOT NULL THEN f END) AS embedded
"""

# Words that never make a good dossier title (function words, the subject "user", generic verbs).
_STOPWORDS = frozenset(
    re.findall(
        r"\S+",
        """
        a an the and or but if then so of to in on at by for with from about as into over under is
        are was were be been being am do does did has have had having it its this that these those
        there here i me my we our you your he she they them their his her user users user's not no
        also very really just still too quite rather prefers prefer likes like wants want needs
        need uses use avoids avoid loves love hates hate enjoys enjoy follows follow tends usually
        often always never all any some more most much many can could would should will
        """,
    )
)
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9+#-]*")


class BlockNotFound(LookupError):
    """No block with this id is stored."""


@dataclass(frozen=True)
class FactGroup:
    label: str
    indexes: tuple[int, ...]


@dataclass
class GardenReport:
    block_id: str
    already_processed: bool = False
    facts_processed: int = 0
    global_tags: list[str] = field(default_factory=list)
    section_rules: list[dict[str, Any]] = field(default_factory=list)
    routed: list[RoutingResult] = field(default_factory=list)
    turns_deleted: int = 0

    def as_json(self) -> dict[str, Any]:
        return {
            "block_id": self.block_id,
            "already_processed": self.already_processed,
            "facts_processed": self.facts_processed,
            "global_tags": self.global_tags,
            "section_rules": self.section_rules,
            "dossiers": [{"dossier_id": r.dossier_id, "action": r.action} for r in self.routed],
            "turns_deleted": self.turns_deleted,
        }


def _content_words(text: str) -> list[str]:
    words = [w.lower() for w in _WORD.findall(text)]
    return [w for w in words if w not in _STOPWORDS and not w.endswith("ly")] or [
        w for w in words if w not in _STOPWORDS
    ]


def group_label(texts: Sequence[str], vectors: NDArray[np.float32]) -> str:
    """A short deterministic title: words shared by several facts, then the most central fact's words."""
    centre = int(np.argmax(np.round(vectors @ vectors.mean(axis=0), 6))) if len(texts) > 1 else 0
    counts = Counter(w for t in texts for w in dict.fromkeys(_content_words(t)))
    shared = [w for w, n in sorted(counts.items(), key=lambda kv: -kv[1]) if n > 1]
    words = list(dict.fromkeys([*shared, *_content_words(texts[centre])]))[:LABEL_WORDS]
    return " ".join(w.capitalize() for w in words) or "Notes"


def group_facts(texts: Sequence[str], vectors: NDArray[np.float32]) -> list[FactGroup]:
    """Greedy single-pass clustering in fact order: join the nearest group if its centroid is
    within ``GROUP_COSINE``, else start a new group. Same facts in the same order, same groups."""
    members: list[list[int]] = []
    sums: list[NDArray[np.float64]] = []
    for i, vec in enumerate(vectors):
        best, best_sim = -1, GROUP_COSINE
        for g, total in enumerate(sums):
            centroid = total / (np.linalg.norm(total) or 1.0)
            sim = float(centroid @ vec)
            if sim >= best_sim:
                best, best_sim = g, sim
        if best < 0:
            members.append([i])
            sums.append(np.asarray(vec, dtype=np.float64).copy())
        else:
            members[best].append(i)
            sums[best] += vec
    return [FactGroup(group_label([texts[i] for i in idx], vectors[idx]), tuple(idx)) for idx in members]


def _tag_fact_rows(block_id: str, classification: Classification, access: Access) -> list[dict[str, Any]]:
    """Facts that became tags stay as facts of the block (not embedded: they route nowhere)."""
    return [
        {
            "id": f"fact-{block_id}-tag-{n}",
            "props": {
                "text": fact.text,
                "fact_type": f"tag:{tag.kind}",
                "confidence": fact.confidence,
                "source_block_id": block_id,
                "source_turn_id": fact.turn_id,
                "turn_index": fact.resolved_turn_index,
                "tag": tag.tag,
                **access.props(),
            },
        }
        for n, (fact, tag) in enumerate(classification.tag_facts)
    ]


def garden_block(
    driver: Driver,
    block_id: str,
    *,
    embedder: Embedder | None = None,
    adjudicator: Adjudicator | None = None,
    writer: Scope | None = None,
) -> GardenReport:
    """Classify, tag, group, route, delete turns.

    Raises ``BlockNotFound`` for an unknown block, and for one outside ``writer``'s profile
    (the two are not told apart).
    """
    records, _, _ = driver.execute_query(LOAD_BLOCK, block_id=block_id)
    if not records:
        raise BlockNotFound(f"no block {block_id!r}")
    props = records[0]["props"]
    access = Access(
        domain=props["domain"],
        sensitivity=props["sensitivity"],
        namespaces=tuple(props.get("namespaces") or ()),
        roles_allowed=tuple(props.get("roles_allowed") or ()),
    )
    if writer is not None and access.problems_for(writer):
        raise BlockNotFound(f"no block {block_id!r}")
    report = GardenReport(block_id)
    if props.get("processed_at") is not None:
        report.already_processed = True
        return report
    facts = [FactItem.model_validate(f) for f in json.loads(props.get("pending_facts") or "[]")]
    classification = classify_facts(facts, props.get("last_turn"))
    now = datetime.now(UTC).isoformat()
    driver.execute_query(
        SAVE_TAGS,
        id=block_node_id(block_id),
        global_tags=classification.global_tags,
        section_rules=json.dumps(classification.section_rules),
        tag_facts=_tag_fact_rows(block_id, classification, access),
        now=now,
    )
    narrative = classification.dossier_facts
    model = embedder or get_embedder()
    if narrative:
        vectors = model.embed([f.text for f in narrative])
        observed = props.get("observed_at")
        for group in group_facts([f.text for f in narrative], vectors):
            packet = FactPacket(
                cluster_label=group.label,
                facts=tuple(narrative[i] for i in group.indexes),
                source_block_id=block_id,
                timestamp=observed.to_native() if observed is not None else None,
                access=access,
            )
            idx = list(group.indexes)
            report.routed.append(
                process_fact_packet(
                    driver, packet, embedder=model, adjudicator=adjudicator, vectors=vectors[idx]
                )
            )
    records, _, _ = driver.execute_query(FINISH_BLOCK, id=block_node_id(block_id), now=now)
    report.facts_processed = len(facts)
    report.global_tags = classification.global_tags
    report.section_rules = classification.section_rules
    report.turns_deleted = int(records[0]["n"]) if records else 0
    return report


def unprocessed_blocks(driver: Driver) -> list[str]:
    records, _, _ = driver.execute_query(UNPROCESSED_BLOCKS)
    return [str(r["block_id"]) for r in records]


@dataclass
class MigrationReport:
    """note 000 Phase 6: what ran, and the validation counts."""

    gardened: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    dossiers: int = 0
    fact_distribution: list[dict[str, Any]] = field(default_factory=list)
    provenance: list[dict[str, Any]] = field(default_factory=list)
    facts_total: int = 0
    facts_embedded: int = 0

    def as_json(self) -> dict[str, Any]:
        return {
            "gardened": self.gardened,
            "failed": self.failed,
            "dossiers": self.dossiers,
            "fact_distribution": self.fact_distribution,
            "provenance": self.provenance,
            "facts_total": self.facts_total,
            "facts_embedded": self.facts_embedded,
        }


def validation_counts(driver: Driver, report: MigrationReport | None = None) -> MigrationReport:
    """Fill in note 000's validation counts (operator view: every dossier, no scope)."""
    report = report or MigrationReport()
    report.dossiers = int(driver.execute_query(DOSSIER_COUNT)[0][0]["n"])
    report.fact_distribution = [r.data() for r in driver.execute_query(FACT_DISTRIBUTION)[0]]
    report.provenance = [r.data() for r in driver.execute_query(PROVENANCE_COUNTS)[0]]
    coverage = driver.execute_query(EMBEDDING_COVERAGE)[0][0]
    report.facts_total = int(coverage["total"])
    report.facts_embedded = int(coverage["embedded"])
    return report


def garden_all(
    driver: Driver,
    *,
    embedder: Embedder | None = None,
    adjudicator: Adjudicator | None = None,
    progress: Callable[[str, int, int], None] | None = None,
) -> MigrationReport:
    """Garden every unprocessed block (oldest first); a failing block is reported, not fatal."""
    blocks = unprocessed_blocks(driver)
    report = MigrationReport()
    model = embedder or get_embedder()
    for n, block_id in enumerate(blocks, start=1):
        try:
            garden_block(driver, block_id, embedder=model, adjudicator=adjudicator)
            report.gardened.append(block_id)
        except Exception as exc:  # one bad block must not stop the migration; the reason is kept
            report.failed[block_id] = f"{type(exc).__name__}: {exc}"
        if progress is not None:
            progress(block_id, n, len(blocks))
    return validation_counts(driver, report)
