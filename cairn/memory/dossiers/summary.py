"""Extractive, deterministic dossier summaries: the facts nearest the dossier's centroid.

No model writes these: the summary is made of the dossier's own sentences, so it can never
state something the facts do not, and the same facts always give the same summary. Each
dossier keeps ``centroid_sum`` (the sum of its fact embeddings), updated incrementally as
facts arrive; the summary is its ``SUMMARY_FACTS`` facts most similar to that centroid, in
the order they were added (ties go to the earlier fact), one sentence each.
``extractive_summary`` is the rule in numpy for summaries made at read time.

Kept incrementally (``CENTRAL_POOL``). Re-ranking every fact of a dossier on each append makes
a packet's write cost grow with the dossier. Instead a dossier keeps ``summary_pool``: the ids
of its ``POOL_FACTS`` most central facts as of the last change. An append re-ranks only that
pool and the new facts against the new centroid, a fixed cost. The summary is therefore exact
while a dossier holds at most ``POOL_FACTS`` facts; beyond that a fact that left the pool can
no longer return to the summary until the pool is rebuilt from all facts (a dossier with no
pool -- written before pools, or after a merge or a split -- gets one at its next change).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

SUMMARY_FACTS = 3
POOL_FACTS = 32

# Cypher subquery body over a bound dossier ``d`` (its ``centroid_sum`` already advanced) and a
# list ``new_ids`` of facts just added to it: the new pool (ids, most central first) and the
# texts of its ``SUMMARY_FACTS`` most central facts in the order they were added.
CENTRAL_POOL = f"""
  WITH d, CASE WHEN d.summary_pool IS NULL
              THEN COLLECT {{ MATCH (d)-[:HAS_FACT]->(x:Fact) RETURN x.id }}
              ELSE d.summary_pool + new_ids END AS ids
  UNWIND ids AS fid
  WITH DISTINCT d, fid
  MATCH (f:Fact {{id: fid}})
  WHERE f.embedding IS NOT NULL
  WITH f, vector.similarity.cosine(f.embedding, d.centroid_sum) AS centrality
  ORDER BY centrality DESC, f.added_at, f.id
  LIMIT {POOL_FACTS}
  WITH collect(f) AS ranked
  CALL (ranked) {{
    UNWIND ranked[0..{SUMMARY_FACTS}] AS f
    WITH f ORDER BY f.added_at, f.id
    RETURN collect(f.text) AS central
  }}
  RETURN [f IN ranked | f.id] AS pool, central
"""

# Cypher subquery body over a bound dossier ``d``: the texts of its most central facts.
CENTRAL_FACTS = f"""
  MATCH (d)-[:HAS_FACT]->(f:Fact)
  WHERE f.embedding IS NOT NULL
  WITH f, vector.similarity.cosine(f.embedding, d.centroid_sum) AS centrality
  ORDER BY centrality DESC, f.added_at, f.id
  LIMIT {SUMMARY_FACTS}
  WITH f ORDER BY f.added_at, f.id
  RETURN collect(f.text) AS central
"""

# Cypher expression: the summary text made of a list ``central`` (same as ``join_sentences``).
SUMMARY_TEXT = """reduce(s = '', t IN central |
  s + CASE WHEN s = '' THEN '' ELSE ' ' END
    + CASE WHEN t ENDS WITH '.' OR t ENDS WITH '!' OR t ENDS WITH '?' THEN t ELSE t + '.' END)"""

# Cypher subquery body over a bound dossier ``d``: the sum of its fact embeddings, computed
# from the facts (for dossiers written before ``centroid_sum`` existed, and after a merge).
CENTROID_FROM_FACTS = """
  MATCH (d)-[:HAS_FACT]->(f:Fact)
  WHERE f.embedding IS NOT NULL
  WITH collect(f.embedding) AS es
  RETURN CASE WHEN size(es) = 0 THEN null
    ELSE reduce(acc = [x IN es[0] | 0.0], e IN es | [i IN range(0, size(e) - 1) | acc[i] + e[i]]) END
    AS centroid_sum
"""


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
