"""Reading the correspondence on a caller's behalf: semantic search, linear tail, divergence.

Two ways in (docs/design.md §Two ways in): residents search the semantic neighbourhood; external callers
read the flow in order. A role whose profile says ``can_search: false`` gets the linear
tail only, and search or divergence is refused with ``FORBIDDEN_SEARCH`` (the code the GraphQL
``CanSearch`` permission uses too).

Every query applies the vertex ACL and the filters inside Cypher, before ranking, so a
section the caller may not see is never scored, counted or returned, and a filter never
ranks hidden sections. Search asks the vector index (unquantized HNSW) for an oversampled set
of neighbours, keeps the visible ones that pass the filters, re-scores them exactly and takes
the best k; when the scope or filters leave too few candidates it asks for more once, or runs
the exact scan (docs/design.md §Correspondence, "Search at index speed"; the queries are in
``cairn.graph.correspondence``). Scores are Neo4j's ``vector.similarity.cosine``, i.e.
(1 + cos) / 2 in [0, 1]. Results are masked with the scope's field rules, and a role that may
not see ``exec_tags``/``exec_decisions``/``knowledge_refs``/``responds_to_filed`` or a section's
access fields does not read them (nor its access line) in the title or body either (the policy
module's mask strips them, for every read of a section).
Section numbers (``section_number``, ``from_section``, ``responds_to``/``responded_by``) are
the caller's own: dense over the sections it may see, so a gap never tells that a hidden
section sits there; search numbers only the sections it returns.
"""

from __future__ import annotations

import json
import re
import threading
from bisect import bisect_left, bisect_right
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any

from neo4j import Driver, RoutingControl

from cairn.errors import CairnError, in_range
from cairn.graph.correspondence import (
    BLOCK_MEMBERS,
    DIVERGENCE_QUERY,
    NUMBER_AND_COUNT,
    SEARCH_EXACT,
    SEARCH_INDEX,
    TAIL_QUERY,
)
from cairn.policy.passport import Caller
from cairn.policy.preselector import mask
from cairn.policy.scope import Scope
from cairn.runtime.database import Vector
from cairn.runtime.embedder import Embedder, get_embedder

MAX_K = 100
MAX_TAIL = 500
LAST_LIST_INDEX = 2**31 - 1
MAX_BEINGS = 20
ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


# Search oversampling (docs/design.md §Correspondence, "Search at index speed"): the index is asked
# for FETCH_FACTOR * k neighbours (at least MIN_FETCH), RESTRICTED_FETCH_FACTOR times more for a
# scope or filter that may hide sections; the answer stands once k of them are visible (or the
# index had no more), else the fetch grows once with the observed visible
# rate, and past MAX_FETCH the exact scan answers instead.
FETCH_FACTOR = 4
MIN_FETCH = 40
RESTRICTED_FETCH_FACTOR = 2
MAX_FETCH = 1000
NUMBER_BLOCK = 64  # canonical numbers per block when numbering the hits (NUMBER_AND_COUNT)
COUNTS_KEPT = 256  # scopes whose visible-section counts are kept (see _number_and_count)
TOTALS_KEPT = 64  # filter sets whose totals are kept per scope


class CorrespondenceRefused(CairnError):
    """A read refused before touching the graph; ``code`` is stable for clients."""


class FilterRefused(CorrespondenceRefused):
    """A filter refused before touching the graph; ``where`` names it (extension ``filter``)."""

    where_key = "filter"


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
            if value is not None and not _is_iso_date(value):
                raise FilterRefused(
                    "INVALID_ARGUMENT",
                    f"filter {name} must be an ISO date (YYYY-MM-DD): {value!r} is not",
                    name,
                )
        return {
            "authors": [a.strip().lower() for a in self.authors] or None,
            "exec_tags": [normalise_exec_tag(t) for t in self.exec_tags] or None,
            "status_tags": [" ".join(t.split()).upper() for t in self.status_tags] or None,
            "date_from": self.date_from,
            "date_to": self.date_to,
        }

    @staticmethod
    def key(params: dict[str, Any]) -> list[Any]:
        """The filter parameters out of a query's parameters (what decides which sections pass)."""
        return [params[n] for n in ("authors", "exec_tags", "status_tags", "date_from", "date_to")]

    def fields(self) -> tuple[str, ...]:
        """The section fields these filters read."""
        return tuple(dict.fromkeys(field for _, field in self.used()))

    def used(self) -> tuple[tuple[str, str], ...]:
        """(filter, the section field it reads) for each filter given."""
        given = (
            ("authors", "author", bool(self.authors)),
            ("exec_tags", "exec_tags", bool(self.exec_tags)),
            ("status_tags", "status_tags", bool(self.status_tags)),
            ("date_from", "date", self.date_from is not None),
            ("date_to", "date", self.date_to is not None),
        )
        return tuple((name, field) for name, field, on in given if on)


def _is_iso_date(value: str) -> bool:
    """``YYYY-MM-DD`` naming a day that exists (``2024-99-99`` does not)."""
    if not ISO_DATE.match(value):
        return False
    try:
        date.fromisoformat(value)
    except ValueError:
        return False
    return True


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
    nothing about the rest. ``ranks`` maps the canonical numbers a read shows to the caller's;
    ``None`` means the caller sees every section, and the canonical numbers are its own (they
    are dense: allocated max + 1 by the sync, never deleted).
    """

    ranks: Mapping[int, int] | None

    @classmethod
    def dense(cls, canonical: Sequence[int]) -> Numbering:
        """From every canonical number the caller may see, ascending."""
        return cls({number: i + 1 for i, number in enumerate(canonical)})

    def of(self, number: int | None) -> int | None:
        if number is None or self.ranks is None:
            return number
        return self.ranks.get(number)


def _view(
    reader: Reader, numbering: Numbering, props: dict[str, Any], score: float | None = None
) -> SectionView:
    fields, masked = mask("Section", props, reader.scope)
    for name in ("responds_to", "responded_by"):
        if name in fields:
            # Ascending, not storage order: the order edges were written in is no reader's business.
            fields[name] = sorted(n for n in map(numbering.of, fields[name]) if n is not None)
    allowed = reader.scope.visible_fields("Section", str(props.get("domain", "")))
    if allowed is None or "section_number" in allowed:  # mask() drops the canonical number
        fields["section_number"] = numbering.of(props.get("section_number"))
        masked = tuple(m for m in masked if m != "section_number")
    if "collision" in masked and (allowed is None or "collision" in allowed):
        # mask() drops the canonical collision; the caller's is against its own number.
        own, filed = numbering.of(props.get("section_number")), props.get("filed_number")
        fields["collision"] = None if own is None or filed is None else filed != own
        masked = tuple(m for m in masked if m != "collision")
    return SectionView(str(props["id"]), fields, masked, None if score is None else round(float(score), 6))


def _require_search(reader: Reader) -> None:
    if not reader.can_search:
        raise CorrespondenceRefused(
            "FORBIDDEN_SEARCH", "this role reads the correspondence in order only (linear tail)"
        )


def _check_filter_fields(reader: Reader, filters: Filters) -> None:
    """A filter on a field the role may not see would leak it through which sections match.

    Decided from the scope alone, before any query, so the refusal is the same whether or not
    a hidden section holds the value: a field counts as hidden when the scope's field rules
    hide it in any domain the scope reaches (``Scope.fields_shown_everywhere``), not only in
    the correspondence's default domain.
    """
    shown = reader.scope.fields_shown_everywhere("Section")
    if shown is None:
        return
    refused = [(name, field) for name, field in filters.used() if field not in shown]
    if refused:
        names = ", ".join(name for name, _ in refused)
        fields = ", ".join(dict.fromkeys(field for _, field in refused))
        raise FilterRefused(
            "FILTER_NOT_ALLOWED",
            f"filter {names} is not allowed: this role may not see the section field {fields}",
            refused[0][0],
        )


def _vector(query: str | Sequence[float], embedder: Embedder | None) -> Vector:
    if isinstance(query, str):
        if not query.strip():
            raise CorrespondenceRefused("INVALID_ARGUMENT", "the query is empty")
        return Vector((embedder or get_embedder()).embed_one(query))
    return Vector(float(x) for x in query)


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
    in_range("k", k, 1, MAX_K)
    _check_filter_fields(reader, filters)
    params = {**reader.scope.cypher_params(), **filters.params(), "k": k}
    params["vector"] = _vector(query, embedder)
    sees_all = reader.scope.unrestricted and not filters.fields()
    hits, stamp = _nearest(driver, params, k, sees_all)
    if sees_all and stamp is not None:  # every stored section is visible and passes
        numbering, total = Numbering(None), int(stamp[0])
    else:
        numbering, total = _number_and_count(driver, reader, params, hits, stamp)
    return SearchResult([_view(reader, numbering, h["props"], h["score"]) for h in hits], total)


def _nearest(
    driver: Driver, params: dict[str, Any], k: int, sees_all: bool
) -> tuple[list[dict[str, Any]], list[Any] | None]:
    """The k nearest visible sections passing the filters, scored exactly, best first, and the
    store's stamp (``STORE_STAMP``; None when nothing visible passed).

    The index's candidates pass through the scope and the filters before they are ranked, so a
    hidden section is never scored or returned; it takes a candidate slot, which only costs a
    larger fetch or the exact scan (time, not results). The answer is the exact top k as long
    as the index finds the fetched neighbours, which the unquantized index does (bench/
    correspondence_search.py measures recall against exact search).
    """
    fetch = max(MIN_FETCH, k * FETCH_FACTOR * (1 if sees_all else RESTRICTED_FETCH_FACTOR))
    for _ in range(2):
        records, _, _ = driver.execute_query(
            SEARCH_INDEX, {**params, "fetch": fetch}, routing_=RoutingControl.READ
        )
        visible = int(records[0]["visible"]) if records else 0
        if records and (visible >= k or fetch >= int(records[0]["stamp"][0])):
            return list(records[0]["hits"]), list(records[0]["stamp"])
        if visible == 0:
            break  # nothing to estimate the visible share from: a very selective scope
        fetch = -(-k * fetch * 3 // (2 * visible))  # 1.5 times the fetch the observed share needs
        if fetch > MAX_FETCH:
            break
    records, _, _ = driver.execute_query(SEARCH_EXACT, params, routing_=RoutingControl.READ)
    if not records:
        return [], None
    return list(records[0]["hits"]), list(records[0]["stamp"])


@dataclass
class _Counts:
    """What one pass over a scope's visible sections established, true while the stamp holds:
    per block of NUMBER_BLOCK canonical numbers that holds visible sections, how many visible
    sections lie in the blocks before it, and the total per filter set."""

    stamp: list[Any]
    blocks: list[int]  # ascending
    before: list[int]  # visible sections in the blocks before blocks[i]; the last: all of them
    totals: dict[str, int]

    def visible_before(self, block: int) -> int:
        return self.before[bisect_left(self.blocks, block)]  # len(before) == len(blocks) + 1


_COUNTS: OrderedDict[str, _Counts] = OrderedDict()
_COUNTS_LOCK = threading.Lock()


# The parameters _scope_key reads: the ACL's, then the field rules' search verdicts.
_SCOPE_KEY = (
    "unrestricted",
    "role",
    "namespaces",
    "ceiling",
    "domain_re",
    "vector_rules",
    "searchable_everywhere",
)


def _scope_key(params: dict[str, Any]) -> str:
    """What decides visibility (the ACL predicate's parameters) and which sections search may
    rank (the field rules' verdicts: acl.search_fields_shown), as a cache key."""
    return json.dumps([params[n] for n in _SCOPE_KEY])


def _number_and_count(
    driver: Driver,
    reader: Reader,
    params: dict[str, Any],
    hits: list[dict[str, Any]],
    stamp: list[Any] | None,
) -> tuple[Numbering, int]:
    """The caller's numbers of the hits and their links, and how many visible sections pass the
    filters (canonical numbers for a caller that sees all).

    The first search of a scope (and filter set) after the store changed makes one pass over the
    visible sections; the counts it finds are kept per scope under the store's stamp, so the
    next searches only read the visible numbers of the few blocks that hold a hit or a link.
    """
    wanted: set[int] = set()
    if not reader.scope.unrestricted:
        props = [h["props"] for h in hits]
        wanted = {p["section_number"] for p in props if p.get("section_number") is not None}
        wanted.update(n for p in props for n in (*p["responds_to"], *p["responded_by"]))
    blocks = sorted({n // NUMBER_BLOCK for n in wanted})
    key, filter_key = _scope_key(params), json.dumps(Filters.key(params))
    with _COUNTS_LOCK:
        counts = _COUNTS.get(key)
        if counts is not None and counts.stamp == stamp:
            _COUNTS.move_to_end(key)
        else:
            counts = None
    members: dict[int, list[int]] = {}
    if counts is not None and filter_key in counts.totals:
        total = counts.totals[filter_key]
        if blocks:
            records, _, _ = driver.execute_query(
                BLOCK_MEMBERS,
                {**params, "block": NUMBER_BLOCK, "wanted_blocks": blocks},
                routing_=RoutingControl.READ,
            )
            members = {int(r["block"]): sorted(r["members"]) for r in records}
    else:
        records, _, _ = driver.execute_query(
            NUMBER_AND_COUNT,
            {**params, "block": NUMBER_BLOCK, "wanted_blocks": blocks},
            routing_=RoutingControl.READ,
        )
        total = sum(int(r["matched"]) for r in records)
        numbered = sorted((int(r["block"]), int(r["sections"])) for r in records if r["block"] is not None)
        members = {int(r["block"]): sorted(r["members"]) for r in records if r["block"] is not None}
        if counts is None:
            before = [0]
            for _, size in numbered:
                before.append(before[-1] + size)
            counts = _Counts(stamp or [], [b for b, _ in numbered], before, {})
        if len(counts.totals) >= TOTALS_KEPT:  # a caller cycling through filters cannot grow it
            counts.totals.clear()
        counts.totals[filter_key] = total
        if stamp is not None:
            with _COUNTS_LOCK:
                _COUNTS[key] = counts
                _COUNTS.move_to_end(key)
                while len(_COUNTS) > COUNTS_KEPT:
                    _COUNTS.popitem(last=False)
    if reader.scope.unrestricted:
        return Numbering(None), total
    ranks = {
        n: counts.visible_before(n // NUMBER_BLOCK) + bisect_right(members.get(n // NUMBER_BLOCK, []), n)
        for n in wanted
    }
    return Numbering(ranks), total


def linear_tail(
    driver: Driver, reader: Reader, n: int = 30, from_section: int | None = None
) -> list[SectionView]:
    """The last ``n`` visible sections (or ``n`` from the caller's number ``from_section``), oldest first."""
    in_range("n", n, 1, MAX_TAIL)
    if from_section is not None and from_section < 1:
        raise CorrespondenceRefused("INVALID_ARGUMENT", "from_section must be a positive section number")
    if from_section is not None:
        # Neo4j indexes lists with 32-bit ints: past that, as past the caller's last number, the
        # window is empty (no caller holds two billion sections).
        from_section = min(from_section, LAST_LIST_INDEX - MAX_TAIL)
    params = {**reader.scope.cypher_params(), "n": n, "from_section": from_section}
    records, _, _ = driver.execute_query(TAIL_QUERY, params, routing_=RoutingControl.READ)
    if not records:
        return []
    numbering = Numbering.dense(records[0]["numbers"])
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
    in_range("k", k, 1, MAX_K)
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
    numbering = Numbering.dense(records[0]["numbers"] if records else [])
    by_being: list[list[dict[str, Any]]] = records[0]["by_being"] if records else []
    return {
        name: [_view(reader, numbering, h["props"], h["score"]) for h in by_being[i]]
        for i, name in enumerate(names)
    }
