"""Multi-vector voting (note 000 Phase 3): every fact of a packet votes for the dossiers it resembles.

All query vectors go to Neo4j in ONE round trip (``UNWIND $queries ... CALL (q) {...}``): per
fact, the top 10 stored facts from the fact vector index with cosine >= 0.4 (exact cosine,
see ``OVERFETCH``), each hit a vote for the dossier holding that fact. Dossiers are ranked
by hits, then by score sum, then by id (so equal votes always break the same way).

Scores. Neo4j reports cosine similarity rescaled to [0, 1] as ``(1 + cos) / 2``; the note's
thresholds are on plain cosine, so they are converted on the way in and out and every score
this package reports is plain cosine.

Only dossiers that are ``active`` and carry exactly the packet's access fields may receive a
packet: appending a restricted fact to a public dossier would put its text into a summary
that less privileged roles read, and a public fact in a restricted dossier would vanish from
their view.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from neo4j import ManagedTransaction
from numpy.typing import NDArray

from cairn.memory.dossiers.models import Access
from cairn.schema.nodes import vector_index_name

FACT_INDEX = vector_index_name("Fact")
TOP_K_PER_FACT = 10
VOTE_THRESHOLD = 0.4  # plain cosine, as in note 000


def index_score(cosine: float) -> float:
    """Neo4j's vector score for a plain cosine."""
    return (1.0 + cosine) / 2.0


def plain_cosine(score: float) -> float:
    """Plain cosine for a Neo4j vector score."""
    return 2.0 * score - 1.0


# Neo4j 5.26 vector indexes quantize the stored vectors (``vector.quantization.enabled`` is on
# by default), so the index's own scores and order are approximate: near neighbours swap
# places and a fact at cosine 0.40 can land either side of the threshold. Each query
# therefore over-fetches ``OVERFETCH`` x k candidates from the index and rescores them with
# exact cosine over the stored float vectors before the threshold and the top-k cut. In
# bench/dossier_routing.py at 100k facts, recall@10 against exact search is about 0.90 for
# the index alone and about 0.98 as voted; it costs about 3 ms per 5-fact packet.
OVERFETCH = 2

VOTE_QUERY = """
UNWIND $queries AS q
CALL (q) {
  CALL db.index.vector.queryNodes($index, $fetch, q.vec) YIELD node
  WITH node AS f, vector.similarity.cosine(node.embedding, q.vec) AS score
  WHERE score >= $min_score
  ORDER BY score DESC, f.id
  LIMIT $k
  MATCH (d:Dossier)-[:HAS_FACT]->(f)
  WHERE d.status = 'active'
    AND d.domain = $access.domain AND d.sensitivity = $access.sensitivity
    AND d.namespaces = $access.namespaces AND d.roles_allowed = $access.roles_allowed
  RETURN d.id AS dossier_id, d.title AS title, f.id AS fact_id, score
}
RETURN q.i AS fact_index, dossier_id, title, fact_id, score
"""


@dataclass(frozen=True)
class Hit:
    fact_index: int  # which fact of the packet
    dossier_id: str
    fact_id: str  # the stored fact it matched
    score: float  # plain cosine


@dataclass(frozen=True)
class Candidate:
    dossier_id: str
    title: str
    hits: int  # (packet fact, stored fact) pairs above the threshold
    score_sum: float
    supporters: int  # distinct packet facts with at least one hit
    best: float

    def as_json(self) -> dict[str, Any]:
        return {
            "dossier_id": self.dossier_id,
            "title": self.title,
            "hits": self.hits,
            "score_sum": round(self.score_sum, 4),
            "supporters": self.supporters,
            "best": round(self.best, 4),
        }


@dataclass(frozen=True)
class Decision:
    action: Literal["append", "create"]
    target: str | None
    reason: str
    decided_by: str = "rule"

    def as_json(self) -> dict[str, Any]:
        return {
            "action": self.action,
            "target": self.target,
            "reason": self.reason,
            "decided_by": self.decided_by,
        }


def vote_params(
    vectors: NDArray[np.float32],
    access: Access,
    threshold: float = VOTE_THRESHOLD,
    k: int = TOP_K_PER_FACT,
) -> dict[str, Any]:
    return {
        "queries": [{"i": i, "vec": [float(x) for x in v]} for i, v in enumerate(vectors)],
        "index": FACT_INDEX,
        "k": k,
        "fetch": OVERFETCH * k,
        "min_score": index_score(threshold),
        "access": access.props(),
    }


def run_vote(
    tx: ManagedTransaction, vectors: NDArray[np.float32], access: Access
) -> tuple[list[Hit], dict[str, str]]:
    """One round trip: every hit of every fact, and the titles of the dossiers hit."""
    result = tx.run(VOTE_QUERY, vote_params(vectors, access))
    hits: list[Hit] = []
    titles: dict[str, str] = {}
    for r in result:
        hits.append(Hit(int(r["fact_index"]), r["dossier_id"], r["fact_id"], plain_cosine(r["score"])))
        titles[r["dossier_id"]] = r["title"] or ""
    return hits, titles


def tally(hits: Sequence[Hit], titles: dict[str, str]) -> list[Candidate]:
    """Votes per dossier, best first: hits, then score sum (to 6 decimals), then dossier id."""
    acc: dict[str, list[Hit]] = {}
    for h in hits:
        acc.setdefault(h.dossier_id, []).append(h)
    candidates = [
        Candidate(
            dossier_id=did,
            title=titles.get(did, ""),
            hits=len(hs),
            score_sum=math.fsum(h.score for h in hs),  # exactly rounded: independent of row order
            supporters=len({h.fact_index for h in hs}),
            best=max(h.score for h in hs),
        )
        for did, hs in acc.items()
    ]
    # sums equal to 6 decimals are a tie (float noise must not decide), broken by id
    candidates.sort(key=lambda c: (-c.hits, -round(c.score_sum, 6), c.dossier_id))
    return candidates


DECISION_RULE = (
    "append to the top-voted dossier when more than half of the packet's facts have a hit "
    "(cosine >= 0.4) in it; otherwise create a new dossier"
)


def decide(candidates: Sequence[Candidate], n_facts: int) -> Decision:
    """The deterministic append-or-create rule (see ``DECISION_RULE``).

    Why a majority of *facts*, not of hits: one fact can match many stored facts of a big
    dossier, while a vague fact ("it is healthy") matches weakly everywhere. Counting the
    packet facts that found the dossier at all asks the question the note asks — do these
    facts belong to that story — and lets the specific facts outvote the vague one. A strict
    majority means a two-fact packet appends only when both facts agree, so one shared
    detail cannot pull an unrelated fact into a dossier.
    """
    if not candidates:
        return Decision("create", None, "no stored fact within cosine 0.4 of any packet fact")
    best = candidates[0]
    needed = n_facts // 2 + 1
    if best.supporters >= needed:
        return Decision(
            "append",
            best.dossier_id,
            f"{best.supporters} of {n_facts} facts voted for it "
            f"({best.hits} hits, score sum {best.score_sum:.2f})",
        )
    return Decision(
        "create",
        None,
        f"the top-voted dossier had {best.supporters} of {n_facts} facts behind it; {needed} needed",
    )
