"""Reading dossiers on a caller's behalf (docs/design.md §Reading dossiers): search, one dossier, its history.

Every query filters by the caller's Scope inside Cypher before anything is scored, ranked
or counted: a dossier is a result only if the dossier and at least one matching fact are
visible, its score is the best cosine over its *visible* facts, and only visible facts and
journal entries are returned, masked by the role's field rules. A stored summary quotes
facts; when some of a dossier's facts are hidden from the caller, the summary shown is
recomputed from the visible facts alone.

Search ranks by exact cosine. It first asks the fact vector index for a generous candidate
list (rescored exactly, then ACL-filtered); that answer is complete once the list reaches
below the threshold (everything above it was fetched, hidden facts included, and the hidden
ones were then dropped), and the fetch grows until it does. Only if it still does not is the
exact scan over every visible fact run. Either way hidden facts never count, score or crowd
out a visible one: they cost only time.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from neo4j import Driver

from cairn.errors import CairnError
from cairn.graph import dossiers as cypher
from cairn.graph.dossiers import index_score, plain_cosine
from cairn.memory.dossiers.summary import summary_of
from cairn.memory.dossiers.voting import VOTE_THRESHOLD
from cairn.policy.preselector import mask
from cairn.policy.scope import Scope
from cairn.runtime.database import Vector, read
from cairn.runtime.embedder import Embedder, get_embedder

# The index is asked for FIRST_FETCH candidates, then four times as many while its answer is not
# complete, up to MAX_FETCH; past that the exact scan runs (see the module docstring).
FIRST_FETCH = 100
MAX_FETCH = 3_200
# A search result shows the newest facts of each dossier (and how many it has); the dossier
# itself shows them all. Without the cap a search over a dossier of 700 facts took 300 ms.
FACTS_PER_SEARCH_RESULT = 10

# ``centroid_sum`` (the routing centroid, see ``summary``) is machinery, never returned.


@dataclass(frozen=True)
class DossierView:
    """A dossier as one caller may see it: masked fields, visible facts, optional score/history."""

    id: str
    fields: dict[str, Any]
    masked: tuple[str, ...]
    facts: list[dict[str, Any]] = field(default_factory=list)
    score: float | None = None
    history: list[dict[str, Any]] = field(default_factory=list)
    fact_count: int = 0  # visible facts; ``facts`` holds only the newest in a search result

    @property
    def title(self) -> str:
        return str(self.fields.get("title") or "")

    @property
    def summary(self) -> str:
        return str(self.fields.get("summary") or "")


@dataclass(frozen=True)
class SearchResult:
    total: int  # visible dossiers above the threshold (before the top-k cut)
    dossiers: list[DossierView]


@dataclass(frozen=True)
class _Facts:
    shown: list[dict[str, Any]]  # masked, ready to return; the newest ones when capped
    count: int  # visible facts in all
    summary: str | None  # None: the stored summary may be shown; else the one to show instead


def _facts(row: dict[str, Any], scope: Scope) -> _Facts:
    shown = [mask("Fact", r, scope)[0] for r in row["facts"]]
    partial = row["summary_rows"] is not None
    return _Facts(shown, int(row["visible_count"]), summary_of(row["summary_rows"]) if partial else None)


def _entry(props: dict[str, Any], scope: Scope) -> dict[str, Any]:
    fields, _ = mask("JournalEntry", props, scope)
    if isinstance(fields.get("details"), str):
        fields["details"] = json.loads(fields["details"])
    return fields


def _visible_facts(
    driver: Driver, scope: Scope, dossier_ids: Sequence[str], limit: int | None = None
) -> dict[str, _Facts]:
    params = {**scope.cypher_params(), "ids": list(dossier_ids), "limit": limit}
    return _facts_by_dossier([r["row"] for r in read(driver, cypher.VISIBLE_FACTS, params)], scope)


def _facts_by_dossier(rows: Sequence[dict[str, Any]], scope: Scope) -> dict[str, _Facts]:
    """``VISIBLE_FACTS`` rows (``cairn.graph.dossiers``) by dossier id."""
    return {r["dossier_id"]: _facts(r, scope) for r in rows}


def _view(
    props: dict[str, Any], facts: _Facts | None, scope: Scope, score: float | None = None
) -> DossierView:
    """The dossier masked for the scope; its summary never quotes a fact the scope cannot see."""
    fields, masked = mask("Dossier", props, scope)
    if facts is not None and facts.summary is not None and "summary" in fields:
        fields["summary"] = facts.summary
    shown, count = ([], 0) if facts is None else (facts.shown, facts.count)
    return DossierView(str(props["id"]), fields, masked, shown, score, fact_count=count)


def header_views(rows: Sequence[dict[str, Any]], scope: Scope) -> dict[str, DossierView]:
    """``DOSSIER_HEADER_ROW`` maps (``cairn.graph.dossiers``) as masked views by dossier id, the
    summary rebuilt when facts are hidden."""
    out = {}
    for r in rows:
        summary = r["summary_rows"]
        facts = _Facts([], int(r["visible_count"]), None if summary is None else summary_of(summary))
        out[str(r["props"]["id"])] = _view(r["props"], facts, scope)
    return out


class DossierFilterRefused(CairnError):
    """A search filter refused before any query; ``where`` names it (extension ``filter``)."""

    where_key = "filter"


def _check_archived_filter(scope: Scope, include_archived: bool) -> None:
    """``include_archived`` chooses by a dossier's ``status``: a role that may not see it in
    some domain it reaches would read it off what the choice adds, so it keeps the default
    view (active dossiers only). Decided from the scope alone, before any query
    (docs/design.md §Correspondence, "Filters read only what the caller sees")."""
    if not include_archived:
        return
    shown = scope.fields_shown_everywhere("Dossier")
    if shown is not None and "status" not in shown:
        raise DossierFilterRefused(
            "FILTER_NOT_ALLOWED",
            "filter include_archived is not allowed: this role may not see the dossier field status",
            "include_archived",
        )


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
    _check_archived_filter(scope, include_archived)
    vec = (embedder or get_embedder()).embed([query])[0]
    params = {
        **scope.cypher_params(),
        "vec": Vector(float(x) for x in vec),
        "min_score": index_score(threshold),
        "top_k": max(0, top_k),
        "statuses": ["active", "archived"] if include_archived else ["active"],
        "limit": FACTS_PER_SEARCH_RESULT,
    }
    record = _search(driver, params)  # the found dossiers' visible facts too, in the same query
    top = record["top"]
    facts = _facts_by_dossier(record["facts"], scope)
    views = [_view(t["props"], facts.get(t["props"]["id"]), scope, plain_cosine(t["score"])) for t in top]
    return SearchResult(int(record["total"]), views)


def _search(driver: Driver, params: dict[str, Any]) -> dict[str, Any]:
    """The index answer if it is complete (see the module docstring), else the exact scan."""
    fetch = FIRST_FETCH
    while fetch <= MAX_FETCH:
        indexed = {**params, "index": cypher.FACT_VECTOR_INDEX, "fetch": fetch}
        records = read(driver, cypher.DOSSIER_SEARCH_INDEXED, indexed)
        record = records[0].data()
        if record["settled"]:
            return record
        fetch *= 4
    records = read(driver, cypher.DOSSIER_SEARCH_EXACT, params)
    return records[0].data()


def get_dossier_history(driver: Driver, scope: Scope, dossier_id: str) -> list[dict[str, Any]]:
    """Journal entries about the dossier (and any dossier merged into it), oldest first."""
    records, _, _ = driver.execute_query(cypher.DOSSIER_HISTORY, {**scope.cypher_params(), "id": dossier_id})
    return [_entry(r["props"], scope) for r in records]


def get_dossier(driver: Driver, scope: Scope, dossier_id: str) -> DossierView | None:
    """One dossier with its visible facts and history; None when absent or not visible."""
    records, _, _ = driver.execute_query(cypher.ONE_DOSSIER, {**scope.cypher_params(), "id": dossier_id})
    if not records:
        return None
    facts = _visible_facts(driver, scope, [dossier_id]).get(dossier_id)
    view = _view(records[0]["props"], facts, scope)
    return replace(view, history=get_dossier_history(driver, scope, dossier_id))


def _dates(fact: dict[str, Any]) -> str:
    """When a fact was observed (its session's date) and when it was ingested: questions ask "when"."""
    added = f"added: {fact.get('added_at', '')}"
    observed = fact.get("observed_at")
    return f"observed: {str(observed)[:10]}, {added}" if observed else added


def format_for_context(dossiers: Sequence[DossierView]) -> str:
    """The dossiers as a block of LLM context (layout: docs/design.md §Reading dossiers)."""
    if not dossiers:
        return ""
    parts = ["=== FACT DOSSIERS ===", ""]
    for d in dossiers:
        parts.append(f"## {d.title}")
        parts.append(f"Summary: {d.summary}")
        parts.append("")
        capped = d.fact_count > len(d.facts)
        parts.append(f"Facts (newest {len(d.facts)} of {d.fact_count}):" if capped else "Facts:")
        parts += [f"  - {f.get('text', '')} ({_dates(f)})" for f in d.facts]
        if d.score is not None:
            parts.append("")
            parts.append(f"(Score: {d.score:.2f})")
        parts.append("")
    return "\n".join(parts) + "\n"
