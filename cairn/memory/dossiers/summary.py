"""Extractive, deterministic dossier summaries: the facts nearest the dossier's centroid.

No model writes these: the summary is made of the dossier's own sentences, so it can never
state something the facts do not, and the same facts always give the same summary. Each
dossier keeps ``centroid_sum`` (the sum of its fact embeddings), updated incrementally as
facts arrive; the summary is its ``SUMMARY_FACTS`` facts most similar to that centroid, in
the order they were added (ties go to the earlier fact), one sentence each.
``extractive_summary`` is the rule in numpy for summaries made at read time.

Kept incrementally (``cypher.SUMMARY_POOL_RANKED``). Re-ranking every fact of a dossier on
each append makes a packet's write cost grow with the dossier. Instead a dossier keeps
``summary_pool``: the ids of its ``POOL_FACTS`` most central facts as of the last change. An
append re-ranks only that pool and the new facts against the new centroid, a fixed cost. The
summary is therefore exact while a dossier holds at most ``POOL_FACTS`` facts; beyond that a
fact that left the pool can no longer return to the summary until the pool is rebuilt from all
facts (a dossier with no pool -- written before pools, or after a merge or a split -- gets one
at its next change). ``cypher`` is ``cairn.graph.dossiers``, where the queries live.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

SUMMARY_FACTS = 3
POOL_FACTS = 32

# The summary's sizes as parameters of the queries that choose it (``cypher.SUMMARY_POOL_RANKED``,
# ``cypher.CENTRAL_FACT_TEXTS``).
SUMMARY_PARAMS: dict[str, Any] = {"summary_facts": SUMMARY_FACTS, "pool_facts": POOL_FACTS}


def centroid_sum(vectors: Sequence[Sequence[float]]) -> NDArray[np.float64] | None:
    """The sum of a dossier's fact vectors, added in the order given (None for no vectors)."""
    if len(vectors) == 0:
        return None
    total: NDArray[np.float64] = np.asarray(vectors, dtype=np.float64).sum(axis=0)
    return total


def join_sentences(texts: Sequence[str]) -> str:
    return " ".join(t if t.endswith((".", "!", "?")) else t + "." for t in texts)


def extractive_summary(texts: Sequence[str], vectors: NDArray[np.float32], size: int = SUMMARY_FACTS) -> str:
    """The ``size`` facts most similar to the centroid of all facts, in the order given."""
    if not texts:
        return ""
    matrix = np.asarray(vectors, dtype=np.float64)
    centroid = matrix.sum(axis=0)
    norms = np.linalg.norm(matrix, axis=1) * (np.linalg.norm(centroid) or 1.0)
    centrality = (matrix @ centroid) / np.where(norms == 0, 1.0, norms)
    ranked = np.argsort(-centrality, kind="stable")[:size]
    return join_sentences([texts[i] for i in sorted(int(i) for i in ranked)])


def summary_of(rows: Sequence[Mapping[str, Any]]) -> str:
    """The summary of stored facts given as ``{text, embedding}`` rows, in stored order."""
    kept = [r for r in rows if r.get("embedding") is not None]
    if not kept:
        return ""
    vectors = np.asarray([r["embedding"] for r in kept], dtype=np.float32)
    return extractive_summary([str(r["text"]) for r in kept], vectors)
