"""Reading the correspondence on a caller's behalf: semantic search, linear tail, divergence.

Two ways in (note 002): residents search the semantic neighbourhood; external callers
read the flow in order. A role whose profile says ``can_search: false`` gets the linear
tail only, and search or divergence is refused with ``FORBIDDEN_SEARCH`` (the code the GraphQL
``CanSearch`` permission uses too).

Every query applies the vertex ACL and the filters inside Cypher, before ranking, so a
section the caller may not see is never scored, counted or returned, and a filter never
ranks hidden sections. Ranking is exact cosine over those candidates (not the approximate
vector index, which can only post-filter): a correspondence has thousands of sections,
and bench/correspondence_sync.py measures the exact scan against numpy. Scores are
Neo4j's ``vector.similarity.cosine``, i.e. (1 + cos) / 2 in [0, 1]. Results are masked
with the scope's field rules; ``responds_to``/``responded_by`` list only the canonical
numbers of sections the caller may see along an allowlisted ``RESPONDS_TO`` edge.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from neo4j import Driver, RoutingControl

from cairn.ingest.correspondence.parser import DEFAULT_DOMAIN
from cairn.policy.acl import acl_visible
from cairn.policy.passport import Caller
from cairn.policy.preselector import mask
from cairn.policy.scope import Scope
from cairn.runtime.embedder import Embedder, get_embedder

MAX_K = 100
MAX_TAIL = 500
MAX_BEINGS = 20
ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def _edge_ok(src: str, dst: str, direction: str) -> str:
    return f"""($unrestricted OR any(rule IN $rules WHERE rule.type = 'RESPONDS_TO' AND rule.{direction}
      AND coalesce({src}.domain, '') =~ rule.from_re AND coalesce({dst}.domain, '') =~ rule.to_re))"""


# The section as the caller may see it: no embedding; links to visible sections only.
PROJECTION = f"""s {{.*, embedding: null,
  responds_to: [(s)-[:RESPONDS_TO]->(t:Section) WHERE {acl_visible("t")} AND {_edge_ok("s", "t", "out")}
                | t.section_number],
  responded_by: [(t:Section)-[:RESPONDS_TO]->(s) WHERE {acl_visible("t")} AND {_edge_ok("t", "s", "in")}
                 | t.section_number]}}"""

FILTERS = """
  AND ($authors IS NULL OR toLower(s.author) IN $authors)
  AND ($exec_tags IS NULL OR any(t IN coalesce(s.exec_tags, []) WHERE t IN $exec_tags))
  AND ($status_tags IS NULL OR any(t IN coalesce(s.status_tags, []) WHERE t IN $status_tags))
  AND ($date_from IS NULL OR (s.date IS NOT NULL AND s.date >= $date_from))
  AND ($date_to IS NULL OR (s.date IS NOT NULL AND s.date <= $date_to))"""

SEARCH_QUERY = f"""
MATCH (s:Section)
WHERE s.embedding IS NOT NULL AND {acl_visible("s")}{FILTERS}
WITH s, vector.similarity.cosine(s.embedding, $vector) AS score
WITH collect({{s: s, score: score}}) AS hits
WITH hits, size(hits) AS total
UNWIND hits AS hit
WITH total, hit.s AS s, hit.score AS score
ORDER BY score DESC, s.section_number ASC
LIMIT $k
RETURN total, {PROJECTION} AS props, score
"""

TAIL_QUERY = f"""
MATCH (s:Section)
WHERE s.section_number IS NOT NULL AND {acl_visible("s")}
  AND ($from_section IS NULL OR s.section_number >= $from_section)
WITH s ORDER BY CASE WHEN $from_section IS NULL THEN -s.section_number ELSE s.section_number END
LIMIT $n
RETURN {PROJECTION} AS props
ORDER BY props.section_number
"""

DIVERGENCE_QUERY = f"""
UNWIND range(0, size($beings) - 1) AS i
CALL (i) {{
  MATCH (s:Section)
  WHERE toLower(s.author) = $beings[i] AND s.embedding IS NOT NULL AND {acl_visible("s")}
  WITH s, vector.similarity.cosine(s.embedding, $vector) AS score
  ORDER BY score DESC, s.section_number ASC
  LIMIT $k
  RETURN collect({{props: {PROJECTION}, score: score}}) AS hits
}}
RETURN i, hits
ORDER BY i
"""


class CorrespondenceRefused(Exception):
    """A read refused before touching the graph; ``code`` is stable for clients."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Reader:
    """Who is reading: the scope to filter by and whether the role may search at all."""

    scope: Scope
    can_search: bool

    @classmethod
    def of(cls, caller: Caller) -> Reader:
        return cls(caller.scope, caller.profile.can_search)

    @classmethod
    def system(cls) -> Reader:
        """Everything, unmasked: for operator tools, never for a caller's read."""
        return cls(Scope.system(), True)


@dataclass(frozen=True)
class Filters:
    """Search filters; each is applied before ranking. Tags match if any given tag is present."""

    authors: tuple[str, ...] = ()
    exec_tags: tuple[str, ...] = ()
    status_tags: tuple[str, ...] = ()
    date_from: str | None = None  # ISO date, inclusive
    date_to: str | None = None  # ISO date, inclusive

    def params(self) -> dict[str, Any]:
        for name, value in (("date_from", self.date_from), ("date_to", self.date_to)):
            if value is not None and not ISO_DATE.match(value):
                raise CorrespondenceRefused("INVALID_ARGUMENT", f"{name} must be an ISO date (YYYY-MM-DD)")
        return {
            "authors": [a.strip().lower() for a in self.authors] or None,
            "exec_tags": [normalise_exec_tag(t) for t in self.exec_tags] or None,
            "status_tags": [" ".join(t.split()).upper() for t in self.status_tags] or None,
            "date_from": self.date_from,
            "date_to": self.date_to,
        }

    def fields(self) -> tuple[str, ...]:
        """The section fields these filters read."""
        used = (
            ("author", bool(self.authors)),
            ("exec_tags", bool(self.exec_tags)),
            ("status_tags", bool(self.status_tags)),
            ("date", self.date_from is not None or self.date_to is not None),
        )
        return tuple(name for name, on in used if on)


def normalise_exec_tag(tag: str) -> str:
    """``gov``, ``EXEC:GOV`` and ``[EXEC:GOV]`` all mean ``EXEC:GOV``."""
    core = tag.strip().strip("[]").upper()
    return core if core.startswith("EXEC:") else f"EXEC:{core}"


@dataclass(frozen=True)
class SectionView:
    """One section as the reader may see it; masked fields are absent from ``fields``."""

    id: str
    fields: dict[str, Any]
    masked: tuple[str, ...]
    score: float | None = None


@dataclass(frozen=True)
class SearchResult:
    hits: list[SectionView]
    total: int  # visible sections that passed the filters (hidden ones are never counted)


def _view(reader: Reader, props: dict[str, Any], score: float | None = None) -> SectionView:
    fields, masked = mask("Section", props, reader.scope)
    return SectionView(str(props["id"]), fields, masked, None if score is None else round(float(score), 6))


def _require_search(reader: Reader) -> None:
    if not reader.can_search:
        raise CorrespondenceRefused(
            "FORBIDDEN_SEARCH", "this role reads the correspondence in order only (linear tail)"
        )


def _check_filter_fields(reader: Reader, filters: Filters) -> None:
    """A filter on a field the role may not see would leak it through which sections match."""
    allowed = reader.scope.visible_fields("Section", DEFAULT_DOMAIN)
    hidden = [f for f in filters.fields() if allowed is not None and f not in allowed]
    if hidden:
        raise CorrespondenceRefused("FILTER_NOT_ALLOWED", f"this role may not filter on {', '.join(hidden)}")


def _check_range(name: str, value: int, top: int) -> None:
    if not 1 <= value <= top:
        raise CorrespondenceRefused("INVALID_ARGUMENT", f"{name} must be between 1 and {top}")


def _vector(query: str | Sequence[float], embedder: Embedder | None) -> list[float]:
    if isinstance(query, str):
        if not query.strip():
            raise CorrespondenceRefused("INVALID_ARGUMENT", "the query is empty")
        return (embedder or get_embedder()).embed_one(query)
    return [float(x) for x in query]


def semantic_search(
    driver: Driver,
    reader: Reader,
    query: str | Sequence[float],
    k: int = 10,
    filters: Filters | None = None,
    embedder: Embedder | None = None,
) -> SearchResult:
    """The k visible sections nearest ``query`` (text, or an already embedded vector)."""
    _require_search(reader)
    filters = filters or Filters()
    _check_range("k", k, MAX_K)
    _check_filter_fields(reader, filters)
    params = {**reader.scope.cypher_params(), **filters.params(), "k": k}
    params["vector"] = _vector(query, embedder)
    records, _, _ = driver.execute_query(SEARCH_QUERY, params, routing_=RoutingControl.READ)
    hits = [_view(reader, r["props"], r["score"]) for r in records]
    return SearchResult(hits, int(records[0]["total"]) if records else 0)


def linear_tail(
    driver: Driver, reader: Reader, n: int = 30, from_section: int | None = None
) -> list[SectionView]:
    """The last ``n`` visible sections, or ``n`` from canonical number ``from_section`` on; oldest first."""
    _check_range("n", n, MAX_TAIL)
    if from_section is not None and from_section < 1:
        raise CorrespondenceRefused("INVALID_ARGUMENT", "from_section must be a positive section number")
    params = {**reader.scope.cypher_params(), "n": n, "from_section": from_section}
    records, _, _ = driver.execute_query(TAIL_QUERY, params, routing_=RoutingControl.READ)
    return [_view(reader, r["props"]) for r in records]


def being_divergence(
    driver: Driver,
    reader: Reader,
    question: str | Sequence[float],
    beings: Sequence[str],
    k: int = 3,
    embedder: Embedder | None = None,
) -> dict[str, list[SectionView]]:
    """Per named author (in the order given), their ``k`` visible sections nearest the question."""
    _require_search(reader)
    _check_range("k", k, MAX_K)
    names = list(dict.fromkeys(b.strip() for b in beings if b.strip()))
    if not names or len(names) > MAX_BEINGS:
        raise CorrespondenceRefused("INVALID_ARGUMENT", f"name between 1 and {MAX_BEINGS} authors")
    _check_filter_fields(reader, Filters(authors=tuple(names)))
    params = {
        **reader.scope.cypher_params(),
        "beings": [n.lower() for n in names],
        "k": k,
        "vector": _vector(question, embedder),
    }
    records, _, _ = driver.execute_query(DIVERGENCE_QUERY, params, routing_=RoutingControl.READ)
    by_index = {int(r["i"]): r["hits"] for r in records}
    return {
        name: [_view(reader, h["props"], h["score"]) for h in by_index.get(i, [])]
        for i, name in enumerate(names)
    }
