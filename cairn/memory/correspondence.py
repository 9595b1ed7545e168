"""Reading the correspondence on a caller's behalf: semantic search, linear tail, divergence.

Two ways in (docs/design.md §Two ways in): residents search the semantic neighbourhood; external callers
read the flow in order. A role whose profile says ``can_search: false`` gets the linear
tail only, and search or divergence is refused with ``FORBIDDEN_SEARCH`` (the code the GraphQL
``CanSearch`` permission uses too).

Every query applies the vertex ACL and the filters inside Cypher, before ranking, so a
section the caller may not see is never scored, counted or returned, and a filter never
ranks hidden sections. Ranking is exact cosine over those candidates (not the approximate
vector index, which can only post-filter): a correspondence has thousands of sections,
and bench/correspondence_sync.py measures the exact scan against numpy. Scores are
Neo4j's ``vector.similarity.cosine``, i.e. (1 + cos) / 2 in [0, 1]. Results are masked
with the scope's field rules, and a role that may not see ``exec_tags``/``exec_decisions``
does not read them in the title or body either. Section numbers (``section_number``,
``from_section``, ``responds_to``/``responded_by``) are the caller's own: dense over the
sections it may see, so a gap never tells that a hidden section sits there.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from neo4j import Driver, RoutingControl

from cairn.errors import CairnError
from cairn.ingest.correspondence.parser import DEFAULT_DOMAIN, without_governance
from cairn.policy.acl import acl_visible, step_allowed
from cairn.policy.passport import Caller
from cairn.policy.preselector import mask
from cairn.policy.scope import Scope
from cairn.runtime.embedder import Embedder, get_embedder

MAX_K = 100
MAX_TAIL = 500
MAX_BEINGS = 20
ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


# The section as the caller may see it: no embedding; links to visible sections only. Numbers
# here are canonical; ``_view`` turns them into the caller's own (see ``Numbering``).
_ANSWERS = step_allowed("RESPONDS_TO", "s", "t", "out", "t")
_ANSWERED_BY = step_allowed("RESPONDS_TO", "t", "s", "in", "t")
PROJECTION = f"""s {{.*, embedding: null,
  responds_to: [(s)-[:RESPONDS_TO]->(t:Section) WHERE {_ANSWERS} | t.section_number],
  responded_by: [(t:Section)-[:RESPONDS_TO]->(s) WHERE {_ANSWERED_BY} | t.section_number]}}"""

# The canonical numbers of every section the caller may see, ascending: the caller's numbering.
VISIBLE_NUMBERS = f"""
CALL () {{
  MATCH (v:Section)
  WHERE v.section_number IS NOT NULL AND {acl_visible("v")}
  WITH v ORDER BY v.section_number
  RETURN collect(v.section_number) AS numbers
}}"""

FILTERS = """
  AND ($authors IS NULL OR toLower(s.author) IN $authors)
  AND ($exec_tags IS NULL OR any(t IN coalesce(s.exec_tags, []) WHERE t IN $exec_tags))
  AND ($status_tags IS NULL OR any(t IN coalesce(s.status_tags, []) WHERE t IN $status_tags))
  AND ($date_from IS NULL OR (s.date IS NOT NULL AND s.date >= $date_from))
  AND ($date_to IS NULL OR (s.date IS NOT NULL AND s.date <= $date_to))"""

SEARCH_QUERY = f"""
{VISIBLE_NUMBERS}
MATCH (s:Section)
WHERE s.embedding IS NOT NULL AND {acl_visible("s")}{FILTERS}
WITH numbers, s, vector.similarity.cosine(s.embedding, $vector) AS score
WITH numbers, collect({{s: s, score: score}}) AS hits
WITH numbers, hits, size(hits) AS total
UNWIND hits AS hit
WITH numbers, total, hit.s AS s, hit.score AS score
ORDER BY score DESC, s.section_number ASC
LIMIT $k
RETURN numbers, total, collect({{props: {PROJECTION}, score: score}}) AS hits
"""

# ``$from_section`` is a number in the caller's own numbering (1 = the first section it may see).
TAIL_QUERY = f"""
{VISIBLE_NUMBERS}
WITH numbers, CASE WHEN $from_section IS NULL THEN numbers[-$n..]
                   ELSE numbers[$from_section - 1..$from_section - 1 + $n] END AS window
UNWIND window AS number
MATCH (s:Section {{section_number: number}})
WHERE {acl_visible("s")}
WITH numbers, s ORDER BY s.section_number
RETURN numbers, collect({PROJECTION}) AS sections
"""

DIVERGENCE_QUERY = f"""
{VISIBLE_NUMBERS}
UNWIND range(0, size($beings) - 1) AS i
CALL (i) {{
  MATCH (s:Section)
  WHERE toLower(s.author) = $beings[i] AND s.embedding IS NOT NULL AND {acl_visible("s")}
  WITH s, vector.similarity.cosine(s.embedding, $vector) AS score
  ORDER BY score DESC, s.section_number ASC
  LIMIT $k
  RETURN collect({{props: {PROJECTION}, score: score}}) AS hits
}}
WITH numbers, i, hits ORDER BY i
RETURN numbers, collect(hits) AS by_being
"""


class CorrespondenceRefused(CairnError):
    """A read refused before touching the graph; ``code`` is stable for clients."""


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


@dataclass(frozen=True)
class Numbering:
    """The caller's own section numbers: 1..n over the sections it may see, in canonical order.

    Canonical numbers are dense over the whole store, so showing them would reveal how many
    sections are hidden and where; the caller's numbers are dense over what it sees and say
    nothing about the rest. A role that sees every section gets the canonical numbers.
    """

    canonical: tuple[int, ...]  # ascending

    def of(self, number: int | None) -> int | None:
        if number is None:
            return None
        i = bisect_left(self.canonical, number)
        return i + 1 if i < len(self.canonical) and self.canonical[i] == number else None


def _view(
    reader: Reader, numbering: Numbering, props: dict[str, Any], score: float | None = None
) -> SectionView:
    fields, masked = mask("Section", props, reader.scope)
    for name in ("responds_to", "responded_by"):
        if name in fields:
            fields[name] = [n for n in map(numbering.of, fields[name]) if n is not None]
    allowed = reader.scope.visible_fields("Section", str(props.get("domain", "")))
    if allowed is None or "section_number" in allowed:  # mask() drops the canonical number
        fields["section_number"] = numbering.of(props.get("section_number"))
        masked = tuple(m for m in masked if m != "section_number")
    tags, decisions = "exec_tags" in masked, "exec_decisions" in masked
    if tags or decisions:
        for name in ("title", "body"):
            if isinstance(fields.get(name), str):
                fields[name] = without_governance(fields[name], tags=tags, decisions=decisions)
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
    if not records:
        return SearchResult([], 0)
    numbering = Numbering(tuple(records[0]["numbers"]))
    hits = [_view(reader, numbering, h["props"], h["score"]) for h in records[0]["hits"]]
    return SearchResult(hits, int(records[0]["total"]))


def linear_tail(
    driver: Driver, reader: Reader, n: int = 30, from_section: int | None = None
) -> list[SectionView]:
    """The last ``n`` visible sections (or ``n`` from the caller's number ``from_section``), oldest first."""
    _check_range("n", n, MAX_TAIL)
    if from_section is not None and from_section < 1:
        raise CorrespondenceRefused("INVALID_ARGUMENT", "from_section must be a positive section number")
    params = {**reader.scope.cypher_params(), "n": n, "from_section": from_section}
    records, _, _ = driver.execute_query(TAIL_QUERY, params, routing_=RoutingControl.READ)
    if not records:
        return []
    numbering = Numbering(tuple(records[0]["numbers"]))
    return [_view(reader, numbering, props) for props in records[0]["sections"]]


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
    numbering = Numbering(tuple(records[0]["numbers"]) if records else ())
    by_being: list[list[dict[str, Any]]] = records[0]["by_being"] if records else []
    return {
        name: [_view(reader, numbering, h["props"], h["score"]) for h in by_being[i]]
        for i, name in enumerate(names)
    }
