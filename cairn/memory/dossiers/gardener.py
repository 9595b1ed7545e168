"""The gardener (notes 000 Phase 2 and 001): a fact classifier and router, not a chunker.

``split_incoherent_dossiers`` (run by ``garden_all`` after the blocks) splits a dossier whose
facts no longer cohere -- grown through packet-level follows, merges, or written before
routing checked coherence -- into coherent parts, journalled ABOUT each dossier involved.

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
from neo4j import Driver, ManagedTransaction
from numpy.typing import NDArray

from cairn.errors import EXIT_FAILED, CairnError
from cairn.graph import dossiers as cypher
from cairn.memory.dossiers.adjudicator import Adjudicator
from cairn.memory.dossiers.blocks import block_node_id, tags_shown
from cairn.memory.dossiers.governor import PACKET_EDGES, RoutingResult, dossier_id_for, process_fact_packet
from cairn.memory.dossiers.journal import Entry, write_entries
from cairn.memory.dossiers.lock import keyed, keyed_lock, take_lock
from cairn.memory.dossiers.models import MAX_LABEL_CHARS, Access, FactItem, FactPacket
from cairn.memory.dossiers.summary import SUMMARY_PARAMS
from cairn.memory.dossiers.tagging import Classification, classify_facts
from cairn.memory.dossiers.voting import KAPPA_JOIN, cluster_facts
from cairn.policy.preselector import mask
from cairn.policy.scope import Scope
from cairn.runtime.embedder import Embedder, get_embedder

GROUP_COSINE = 0.4  # the routing threshold: facts that would vote for each other belong together
LABEL_WORDS = 3
# A dossier of at least SPLIT_MIN_FACTS facts whose coherence (mean cosine of its facts to
# their centroid) is below SPLIT_COHERENCE no longer tells one story: it is split in two
# (spherical 2-means), and each part again while it stays that large and incoherent. The
# bar sits below routing's KAPPA_JOIN, so a dossier that routing keeps is never split.
SPLIT_MIN_FACTS = 8
SPLIT_COHERENCE = KAPPA_JOIN - 0.08
SPLIT_ROUNDS = 10

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


class BlockNotFound(CairnError, LookupError):
    """No block with this id is stored (an API caller is not told the id back)."""

    exit_code = EXIT_FAILED

    def __init__(self, message: str) -> None:
        super().__init__("NOT_FOUND", message)

    @property
    def public_message(self) -> str:
        return "no such block"


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
    return " ".join(w.capitalize() for w in words)[:MAX_LABEL_CHARS] or "Notes"


def group_facts(texts: Sequence[str], vectors: NDArray[np.float32]) -> list[FactGroup]:
    """The block's facts grouped by meaning (``voting.cluster_facts`` at ``GROUP_COSINE``), each
    group labelled. Same facts in the same order, same groups."""
    return [
        FactGroup(group_label([texts[i] for i in idx], vectors[idx]), tuple(idx))
        for idx in cluster_facts(vectors, GROUP_COSINE)
    ]


@dataclass(frozen=True)
class Split:
    """One split: the source dossier and, per part, its dossier id and facts (the source's first)."""

    source: str
    parts: tuple[tuple[str, tuple[str, ...]], ...]

    def as_json(self) -> dict[str, Any]:
        return {"source": self.source, "parts": [{"dossier_id": d, "facts": list(f)} for d, f in self.parts]}


def coherence(vectors: NDArray[np.float32]) -> float:
    """Mean cosine of unit vectors to their centroid: |sum| / count."""
    return float(np.linalg.norm(np.asarray(vectors, dtype=np.float64).sum(axis=0))) / max(len(vectors), 1)


def _two_means(vectors: NDArray[np.float32]) -> list[list[int]]:
    """Spherical 2-means, seeded deterministically with the two least similar facts. Returns
    the two parts in order of their first fact."""
    sims = np.round(vectors @ vectors.T, 6)
    a, b = divmod(int(np.argmin(sims)), len(vectors))
    centres = np.stack([vectors[a], vectors[b]]).astype(np.float64)
    labels = np.full(len(vectors), -1)
    for _ in range(SPLIT_ROUNDS):
        new = np.argmax(np.round(vectors @ centres.T, 6), axis=1)
        if (new == labels).all():
            break
        labels = new
        for k in (0, 1):
            if (labels == k).any():
                total = vectors[labels == k].sum(axis=0)
                centres[k] = total / (np.linalg.norm(total) or 1.0)
    parts = [[i for i in range(len(vectors)) if labels[i] == k] for k in (0, 1)]
    return sorted((p for p in parts if p), key=lambda p: p[0])


def split_parts(vectors: NDArray[np.float32]) -> list[list[int]]:
    """The coherent parts of a dossier's facts (indexes in stored order, oldest part first).

    A part is split again while it has at least ``SPLIT_MIN_FACTS`` facts and coherence below
    ``SPLIT_COHERENCE``; a split leaving a part of one fact is not made (an outlier is no topic).
    """
    done: list[list[int]] = []
    todo = [list(range(len(vectors)))]
    while todo:
        part = todo.pop()
        if len(part) < SPLIT_MIN_FACTS or coherence(vectors[part]) >= SPLIT_COHERENCE:
            done.append(part)
            continue
        halves = _two_means(vectors[part])
        if len(halves) < 2 or min(len(h) for h in halves) < 2:
            done.append(part)
            continue
        todo += [[part[i] for i in h] for h in halves]
    return sorted(done, key=lambda p: p[0])


def _split_one(tx: ManagedTransaction, dossier_id: str) -> Split | None:
    take_lock(tx)
    rows = list(tx.run(cypher.LOAD_DOSSIER_FACTS, id=dossier_id))
    if len(rows) < SPLIT_MIN_FACTS:
        return None
    vectors = np.asarray([r["embedding"] for r in rows], dtype=np.float32)
    parts = split_parts(vectors)
    if len(parts) < 2:
        return None
    ids = [str(r["id"]) for r in rows]
    texts = [str(r["text"]) for r in rows]
    # Keyed with the database's secret, and named like any packet's dossier: no "split" in an id,
    # and no id a reader computes from the ids it sees (lock.keyed).
    named_parts = json.dumps([dossier_id, [[ids[i] for i in p] for p in parts]])
    key, applied = keyed_lock(tx, "split", named_parts)
    if applied is not None:
        return None
    dossier = rows[0]["dossier"]
    access = Access(
        domain=dossier["domain"],
        sensitivity=dossier["sensitivity"],
        namespaces=tuple(dossier.get("namespaces") or ()),
        roles_allowed=tuple(dossier.get("roles_allowed") or ()),
    )
    named = [
        (dossier_id if n == 0 else dossier_id_for(keyed(tx, "split part", key, str(n))), p)
        for n, p in enumerate(parts)
    ]
    now = datetime.now(UTC).isoformat()
    tx.run(
        cypher.WRITE_SPLIT,
        source=dossier_id,
        parts=[
            {
                "dossier_id": did,
                "title": dossier.get("title")
                if did == dossier_id
                else group_label([texts[i] for i in p], vectors[p]),
                "fact_ids": [ids[i] for i in p],
                "centroid_sum": [float(x) for x in np.asarray(vectors[p], dtype=np.float64).sum(axis=0)],
            }
            for did, p in named
        ],
        create_props={"status": "active", **access.props()},
        now=now,
    ).consume()
    result = tx.run(cypher.SPLIT_SUMMARIES, ids=[did for did, _ in named], **SUMMARY_PARAMS)
    summaries = {str(r["dossier_id"]): (r["previous"] or "", r["summary"]) for r in result}
    before = coherence(vectors)
    entries = [
        Entry(
            "split",
            (dossier_id, did),
            previous_value=summaries[dossier_id][0],
            new_value=summaries[did][1],
            rationale=f"{len(ids)} facts at coherence {before:.2f} (< {SPLIT_COHERENCE:.2f}): "
            f"{len(p)} of them, at coherence {coherence(vectors[p]):.2f}, moved to their own dossier",
            details={"source": dossier_id, "part": did, "fact_ids": [ids[i] for i in p]},
        )
        for did, p in named[1:]
    ]
    write_entries(tx, key, entries, access, now)
    return Split(dossier_id, tuple((did, tuple(ids[i] for i in p)) for did, p in named))


def split_incoherent_dossiers(driver: Driver, dossier_ids: Sequence[str] | None = None) -> list[Split]:
    """Split every (or each named) active dossier whose facts no longer cohere; one transaction
    per dossier, under the routing lock, journalled (``split``) ABOUT the source and each part."""
    records, _, _ = driver.execute_query(
        cypher.SPLIT_CANDIDATES,
        ids=None if dossier_ids is None else list(dossier_ids),
        min_facts=SPLIT_MIN_FACTS,
    )
    splits = []
    with driver.session() as session:
        for r in records:
            done = session.execute_write(_split_one, str(r["id"]))
            if done is not None:
                splits.append(done)
    return splits


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
    records, _, _ = driver.execute_query(cypher.LOAD_BLOCK, block_id=block_id)
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
    access.check_writer(writer, "block", edges=PACKET_EDGES, routes=True)  # it routes the block's facts
    report = GardenReport(block_id)
    if props.get("processed_at") is not None:
        report.already_processed = True
        return report
    facts = [FactItem.model_validate(f) for f in json.loads(props.get("pending_facts") or "[]")]
    classification = classify_facts(facts, props.get("last_turn"))
    now = datetime.now(UTC).isoformat()
    driver.execute_query(
        cypher.SAVE_BLOCK_TAGS,
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
                    driver,
                    packet,
                    embedder=model,
                    adjudicator=adjudicator,
                    vectors=vectors[idx],
                    writer=writer,  # its field rules decide what an append refreshes
                )
            )
    records, _, _ = driver.execute_query(cypher.FINISH_BLOCK, id=block_node_id(block_id), now=now)
    report.facts_processed = len(facts)
    report.global_tags, report.section_rules = _tags_shown(classification, access.domain, writer)
    report.turns_deleted = int(records[0]["n"]) if records else 0
    return report


def _tags_shown(
    classification: Classification, domain: str, writer: Scope | None
) -> tuple[list[str], list[dict[str, Any]]]:
    """The block's new tags and section rules as the writer's rules show the stored ``Block``
    fields (an operator, ``writer`` None, sees them whole): the answer tells no more than a read
    of the block would (docs/design.md §Policy module, "Derived fields")."""
    if writer is None:
        return classification.global_tags, classification.section_rules
    stored = {
        "domain": domain,
        "global_tags": classification.global_tags,
        "section_rules": json.dumps(classification.section_rules),
    }
    return tags_shown(mask("Block", stored, writer)[0])


def unprocessed_blocks(driver: Driver) -> list[str]:
    records, _, _ = driver.execute_query(cypher.UNPROCESSED_BLOCKS)
    return [str(r["block_id"]) for r in records]


@dataclass
class MigrationReport:
    """A gardening run (docs/design.md §Gardener): what ran, and the validation counts."""

    gardened: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    dossiers: int = 0
    fact_distribution: list[dict[str, Any]] = field(default_factory=list)
    provenance: list[dict[str, Any]] = field(default_factory=list)
    facts_total: int = 0
    facts_embedded: int = 0
    splits: list[Split] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {
            "gardened": self.gardened,
            "failed": self.failed,
            "dossiers": self.dossiers,
            "fact_distribution": self.fact_distribution,
            "provenance": self.provenance,
            "facts_total": self.facts_total,
            "facts_embedded": self.facts_embedded,
            "splits": [s.as_json() for s in self.splits],
        }


def validation_counts(driver: Driver, report: MigrationReport | None = None) -> MigrationReport:
    """Fill in the validation counts (operator view: every dossier, no scope)."""
    report = report or MigrationReport()
    report.dossiers = int(driver.execute_query(cypher.DOSSIER_COUNT)[0][0]["n"])
    report.fact_distribution = [r.data() for r in driver.execute_query(cypher.FACT_DISTRIBUTION)[0]]
    report.provenance = [r.data() for r in driver.execute_query(cypher.PROVENANCE_COUNTS)[0]]
    coverage = driver.execute_query(cypher.EMBEDDING_COVERAGE)[0][0]
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
    """Garden every unprocessed block (oldest first), then split dossiers that no longer cohere;
    a failing block is reported, not fatal."""
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
    report.splits = split_incoherent_dossiers(driver)
    return validation_counts(driver, report)
