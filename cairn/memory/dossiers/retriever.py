"""Reading dossiers on a caller's behalf (note 000 Phase 4): search, one dossier, its history.

Every query filters by the caller's Scope inside Cypher before anything is scored, ranked
or counted: a dossier is a result only if the dossier and at least one matching fact are
visible, its score is the best cosine over its *visible* facts, and only visible facts and
journal entries are returned, masked by the role's field rules. Search uses exact cosine
(``vector.similarity.cosine``) over the ACL-filtered facts rather than the approximate
index, because post-filtering an index top-k could let hidden facts crowd out visible ones
(a caller would then see fewer results than exist) — exactness costs one pass over the
visible facts, which the benchmark measures for the routing path.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from neo4j import Driver

from cairn.memory.dossiers.voting import VOTE_THRESHOLD, index_score, plain_cosine
from cairn.policy.acl import acl_visible
from cairn.policy.preselector import mask
from cairn.policy.scope import Scope
from cairn.runtime.embedder import Embedder, get_embedder


def edge_allowed(rel: str, src: str, dst: str) -> str:
    """Cypher predicate: the scope may walk a ``rel`` edge stored from ``src`` to ``dst``."""
    return f"""($unrestricted OR any(rule IN $rules WHERE rule.type = '{rel}'
  AND coalesce({src}.domain, '') =~ rule.from_re AND coalesce({dst}.domain, '') =~ rule.to_re))"""


SEARCH_QUERY = f"""
MATCH (d:Dossier)-[:HAS_FACT]->(f:Fact)
WHERE d.status IN $statuses AND f.embedding IS NOT NULL
  AND {acl_visible("d")} AND {acl_visible("f")} AND {edge_allowed("HAS_FACT", "d", "f")}
WITH d, max(vector.similarity.cosine(f.embedding, $vec)) AS score
WHERE score >= $min_score
WITH d, score ORDER BY score DESC, d.id
WITH collect({{props: properties(d), score: score}}) AS ranked
RETURN size(ranked) AS total, ranked[0..$top_k] AS top
"""

VISIBLE_FACTS = f"""
UNWIND $ids AS did
MATCH (d:Dossier {{id: did}})-[:HAS_FACT]->(f:Fact)
WHERE {acl_visible("f")} AND {edge_allowed("HAS_FACT", "d", "f")}
WITH did, f ORDER BY f.added_at, f.id
RETURN did AS dossier_id, collect(f {{.*, embedding: null}}) AS facts
"""

ONE_DOSSIER = f"""
MATCH (d:Dossier {{id: $id}})
WHERE {acl_visible("d")}
RETURN properties(d) AS props
"""

# A merged dossier's history continues in the dossier it was merged into.
HISTORY = f"""
MATCH (d:Dossier {{id: $id}})
WHERE {acl_visible("d")}
CALL (d) {{
  MATCH (j:JournalEntry)-[:ABOUT]->(d)
  RETURN j
  UNION
  MATCH (x:Dossier {{merged_into: d.id}})<-[:ABOUT]-(j:JournalEntry)
  WHERE {acl_visible("x")}
  RETURN j
}}
WITH d, j
WHERE {acl_visible("j")} AND {edge_allowed("ABOUT", "j", "d")}
RETURN j {{.*, embedding: null}} AS props
ORDER BY j.timestamp, j.seq, j.id
"""


@dataclass(frozen=True)
class DossierView:
    """A dossier as one caller may see it: masked fields, visible facts, optional score/history."""

    id: str
    fields: dict[str, Any]
    masked: tuple[str, ...]
    facts: list[dict[str, Any]] = field(default_factory=list)
    score: float | None = None
    history: list[dict[str, Any]] = field(default_factory=list)

    @property
    def title(self) -> str:
        return str(self.fields.get("title") or "")

    @property
    def summary(self) -> str:
        return str(self.fields.get("summary") or "")

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "fields": self.fields,
            "masked": list(self.masked),
            "score": None if self.score is None else round(self.score, 4),
            "facts": self.facts,
            "history": self.history,
        }


@dataclass(frozen=True)
class SearchResult:
    total: int  # visible dossiers above the threshold (before the top-k cut)
    dossiers: list[DossierView]


def _masked_facts(rows: Sequence[dict[str, Any]], scope: Scope) -> list[dict[str, Any]]:
    return [mask("Fact", r, scope)[0] for r in rows]


def _entry(props: dict[str, Any], scope: Scope) -> dict[str, Any]:
    fields, _ = mask("JournalEntry", props, scope)
    if isinstance(fields.get("details"), str):
        fields["details"] = json.loads(fields["details"])
    return fields


def visible_facts(
    driver: Driver, scope: Scope, dossier_ids: Sequence[str]
) -> dict[str, list[dict[str, Any]]]:
    records, _, _ = driver.execute_query(VISIBLE_FACTS, {**scope.cypher_params(), "ids": list(dossier_ids)})
    return {r["dossier_id"]: _masked_facts(r["facts"], scope) for r in records}


def retrieve_relevant_dossiers(
    driver: Driver,
    scope: Scope,
    query: str,
    top_k: int = 3,
    threshold: float = VOTE_THRESHOLD,
    *,
    embedder: Embedder | None = None,
    include_archived: bool = False,
) -> SearchResult:
    """Distinct dossiers whose visible facts come within ``threshold`` cosine of the query, best first."""
    vec = (embedder or get_embedder()).embed([query])[0]
    params = {
        **scope.cypher_params(),
        "vec": [float(x) for x in vec],
        "min_score": index_score(threshold),
        "top_k": max(0, top_k),
        "statuses": ["active", "archived"] if include_archived else ["active"],
    }
    records, _, _ = driver.execute_query(SEARCH_QUERY, params)
    record = records[0]
    top = record["top"]
    facts = visible_facts(driver, scope, [t["props"]["id"] for t in top])
    views = []
    for t in top:
        fields, masked = mask("Dossier", t["props"], scope)
        did = str(t["props"]["id"])
        views.append(DossierView(did, fields, masked, facts.get(did, []), plain_cosine(t["score"])))
    return SearchResult(int(record["total"]), views)


def get_dossier_history(driver: Driver, scope: Scope, dossier_id: str) -> list[dict[str, Any]]:
    """Journal entries about the dossier (and any dossier merged into it), oldest first."""
    records, _, _ = driver.execute_query(HISTORY, {**scope.cypher_params(), "id": dossier_id})
    return [_entry(r["props"], scope) for r in records]


def get_dossier(driver: Driver, scope: Scope, dossier_id: str) -> DossierView | None:
    """One dossier with its visible facts and history; None when absent or not visible."""
    records, _, _ = driver.execute_query(ONE_DOSSIER, {**scope.cypher_params(), "id": dossier_id})
    if not records:
        return None
    fields, masked = mask("Dossier", records[0]["props"], scope)
    facts = visible_facts(driver, scope, [dossier_id]).get(dossier_id, [])
    history = get_dossier_history(driver, scope, dossier_id)
    return DossierView(dossier_id, fields, masked, facts, None, history)


def format_for_context(dossiers: Sequence[DossierView]) -> str:
    """The dossiers as a block of LLM context, in note 000's layout."""
    if not dossiers:
        return ""
    parts = ["=== FACT DOSSIERS ===", ""]
    for d in dossiers:
        parts.append(f"## {d.title}")
        parts.append(f"Summary: {d.summary}")
        parts.append("")
        parts.append("Facts:")
        parts += [f"  - {f.get('text', '')} (added: {f.get('added_at', '')})" for f in d.facts]
        if d.score is not None:
            parts.append("")
            parts.append(f"(Score: {d.score:.2f})")
        parts.append("")
    return "\n".join(parts) + "\n"
