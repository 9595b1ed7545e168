"""The Selector: ranks the already-sanitised candidates once, with cheap deterministic signals.

It runs after the Pre-Selector, so every field it reads is one the caller may see; it never
drops anything for policy reasons. The ranking is the only ordering the Budget Gate and the
Templater use, so it must be reproducible from the CandidateSet alone: no clock, no
embeddings, no randomness. The anchor is not ranked, because it always leads the answer.

Signals, each in [0, 1] except ``recency_days`` (reported raw, scored as ``1 / (1 + days/365)``):

=============  ======  ==========================================================================
signal         weight  meaning
=============  ======  ==========================================================================
sim            0.30    Jaccard overlap of title/summary + tag words with the anchor's
importance     0.25    the fixture prior (``importance`` field); 0.5 when absent or masked
recency        0.20    closeness in time to the anchor; a missing timestamp counts as 3650 days
adjacency      0.15    ``1 / hop``: direct neighbours of the anchor outrank two-hop ones
completeness   0.05    share of the fields its label normally carries that are visible
quality        0.05    headline length/noise penalty: very short, very long or symbol-heavy text
=============  ======  ==========================================================================

Before the score comes the item's part in the answer (``tier``): the anchor's direct causes
first, then its direct consequences, then its alias projections, then everything else. A why
answer is its causes, so a cause must never lose its place in the budget to a better-scored
bystander. Within a tier, ties (after rounding the score to 6 places) go to the newer item,
then to the smaller id.

Only identical evidence is deduplicated: a node reached twice (same id) is ranked once and the
repeat is listed in ``Selection.duplicates``. Distinct ids are never merged, however alike
their titles: two decisions may share a title and still be two records.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any, TypeVar

from cairn.policy.preselector import CandidateNode, CandidateSet

__all__ = [
    "RANKING_POLICY",
    "TIERS",
    "Scored",
    "Selection",
    "headline",
    "node_timestamp",
    "parts",
    "select",
]

RANKING_POLICY = "tier_asc__score_desc__ts_iso_desc__id_asc"
TIERS = ("cause", "consequence", "alias", "context")

WEIGHTS = {
    "sim": 0.30,
    "importance": 0.25,
    "recency": 0.20,
    "adjacency": 0.15,
    "completeness": 0.05,
    "quality": 0.05,
}
DEFAULT_IMPORTANCE = 0.5
MISSING_RECENCY_DAYS = 3650.0
RECENCY_HALF_LIFE_DAYS = 365.0  # a year away scores half of "same day"

# What the headline of each label is, most specific first: a decision is named by its option,
# an event by its summary; the later fields stand in when policy masked the earlier ones.
HEADLINE_FIELDS: dict[str, tuple[str, ...]] = {
    "Decision": ("option", "title"),
    "Event": ("summary", "snippet", "description"),
}
DEFAULT_HEADLINE_FIELDS = ("title", "summary", "name")
EXPECTED_FIELDS: dict[str, tuple[str, ...]] = {
    "Decision": ("option", "rationale", "timestamp", "decision_maker", "tags"),
    "Event": ("summary", "description", "snippet", "timestamp", "tags"),
}
DEFAULT_EXPECTED_FIELDS = ("timestamp", "tags")

_WORD = re.compile(r"[a-z0-9]+")
# Counted by its complement: a match per noisy character, not one per character of the text.
_NOISY_CHAR = re.compile(r"[^\w\s.,;:'\"()\-/&%$€£+]")
_STOPWORDS = frozenset(
    {"a", "an", "and", "as", "at", "by", "for", "from", "in", "of", "on", "or", "the", "to", "with"}
)
_IDEAL_WORDS = (3, 40)


class _Unset:
    """The type of ``UNSET``: an argument not given, where None is a meaningful value."""


UNSET = _Unset()


@dataclass(frozen=True, slots=True)
class Scored:
    """One ranked candidate with the signals that produced its score, for selection_metrics.

    ``row`` is its entry in selection_metrics.scores: the signals, then ``score`` (built once,
    with the score, rather than copied per ask by each reader of the scores)."""

    id: str
    score: float
    row: dict[str, float]

    @property
    def signals(self) -> dict[str, float]:
        return {name: value for name, value in self.row.items() if name != "score"}


@dataclass(frozen=True)
class Selection:
    """The ranking plus the ids dedup removed, which the caller reports as excluded."""

    ranked: list[Scored]
    duplicates: list[str]


def headline(node: CandidateNode) -> str | None:
    """The short text that names ``node`` (title or summary), or None when policy masked all of it."""
    fields = node.fields
    for name in HEADLINE_FIELDS.get(node.label, DEFAULT_HEADLINE_FIELDS):
        value = fields.get(name)
        if value is not None:
            text = _squeezed(str(value))
            if text:
                return text
    return None


@lru_cache(maxsize=8192)
def _squeezed(text: str) -> str:
    """Runs of whitespace as one space, no edges: once per text (nodes recur from ask to ask)."""
    return " ".join(text.split())


def node_timestamp(node: CandidateNode) -> datetime | None:
    """The node's timestamp in UTC; unreadable text counts as absent rather than failing the answer."""
    raw = node.text("timestamp")
    return _parse_timestamp(raw) if raw else None


@lru_cache(maxsize=8192)
def _parse_timestamp(raw: str) -> datetime | None:
    """Parsed once per text: an ask reads each node's timestamp several times (score, order, date)."""
    try:
        parsed = datetime.fromisoformat(raw.strip())
    except ValueError:
        return None
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


def parts(cs: CandidateSet) -> dict[str, str]:
    """Each neighbour's part in the answer: a direct cause, consequence or alias projection.

    An alias event anchor counts the decision it projects as its cause: that is where it came
    from. A node that is both a cause and a consequence (a two-way link) counts as a cause.
    """
    memo: dict[str, str] | None = cs.__dict__.get("_parts")  # once per CandidateSet (by_id)
    if memo is not None:
        return memo
    anchor = cs.anchor.id
    found: dict[str, str] = cs.__dict__.setdefault("_parts", {})
    for edge in cs.edges:
        if edge.target == anchor and edge.type in ("CAUSAL_PRECEDES", "ALIAS_OF"):
            found[edge.source] = "cause"
        elif edge.type == "CAUSAL_PRECEDES" and edge.source == anchor:
            found.setdefault(edge.target, "consequence")
        elif edge.type == "ALIAS_OF" and edge.source == anchor:
            found.setdefault(edge.target, "alias")
    return found


def select(cs: CandidateSet) -> Selection:
    """Score every non-anchor candidate once and order by RANKING_POLICY; repeats of an id go."""
    anchor_words = _words(cs.anchor)
    anchor_ts = node_timestamp(cs.anchor)
    anchor_id = cs.anchor.id
    candidates = [n for n in cs.nodes if n.id != anchor_id]
    # A walk's ids are unique (the usual case): one set of them says so.
    duplicates: list[str] = []
    if len({n.id for n in candidates}) == len(candidates):
        nodes = candidates
    else:
        nodes, duplicates = _unique(candidates)
    tier_of = {node_id: _TIER_INDEX[part] for node_id, part in parts(cs).items()}.get
    context = _TIER_INDEX["context"]
    # The anchor's time as epoch seconds where it has no fraction of a second: then a node's
    # distance from it in days is read off the epoch seconds (_score), exactly as from the two
    # datetimes (both are whole seconds, so both subtractions are exact).
    anchor_s = None if anchor_ts is None or anchor_ts.microsecond else _epoch(anchor_ts)
    keyed = []
    for n in nodes:
        value = n.fields.get("timestamp")
        # node_timestamp, inline: it runs per node (str(value) is value for text)
        raw = None if value is None else value if value.__class__ is str else str(value)
        when = _when(raw) if raw else None
        # Dated first, newer first; the ids are unique (_unique), so no two keys are equal and
        # the tuples sort by the key alone (the Scored at the end is never compared).
        if when is None:
            scored = _score(n, anchor_words, anchor_ts, None, anchor_s)
            keyed.append((tier_of(n.id, context), -scored.score, 1, 0.0, n.id, scored))
        else:
            scored = _score(n, anchor_words, anchor_ts, when, anchor_s)
            keyed.append((tier_of(n.id, context), -scored.score, 0, -when[1], n.id, scored))
    keyed.sort()
    return Selection([item[5] for item in keyed], duplicates)


@lru_cache(maxsize=8192)
def _epoch(ts: datetime) -> float:
    """A parsed timestamp as seconds (the ordering key), once per value: nodes recur."""
    return ts.timestamp()


@lru_cache(maxsize=8192)
def _when(raw: str) -> tuple[datetime, float, bool] | None:
    """A timestamp text parsed (``_parse_timestamp``), as epoch seconds (the ordering key), and
    whether it is whole seconds; once per text: nodes recur, and dates more so."""
    ts = _parse_timestamp(raw)
    return None if ts is None else (ts, _epoch(ts), not ts.microsecond)


_TIER_INDEX = {name: i for i, name in enumerate(TIERS)}


def _unique(nodes: Iterable[CandidateNode]) -> tuple[list[CandidateNode], list[str]]:
    """First occurrence of each id, plus the ids seen again (identical evidence, reported)."""
    seen: dict[str, CandidateNode] = {}
    repeats: list[str] = []
    for node in nodes:
        if node.id in seen:
            repeats.append(node.id)
        seen.setdefault(node.id, node)
    return list(seen.values()), repeats


def _score(
    node: CandidateNode,
    anchor_words: frozenset[str],
    anchor_ts: datetime | None,
    when: tuple[datetime, float, bool] | None,
    anchor_s: float | None,
) -> Scored:
    """``when``: the node's timestamp (``_when``); ``anchor_s``: the anchor's as epoch seconds,
    when it is whole seconds."""
    fields = node.fields
    get = fields.get
    if when is None or anchor_ts is None:
        days, recency = MISSING_RECENCY_DAYS, _MISSING_RECENCY
    elif anchor_s is not None and when[2]:
        # Whole seconds: exact, as below. Remembered per distance: dates recur, a round() is slow.
        apart = abs(when[1] - anchor_s)
        known = _DAYS.get(apart)
        days, recency = known if known is not None else _remember(_DAYS, apart, _days(apart))
    else:
        days, recency = _days(abs((when[0] - anchor_ts).total_seconds()))
    # _tag_text(tags) and headline(node), inline: they run per node.
    tags: Any = get("tags")
    kind = tags.__class__
    if kind is list or kind is tuple:
        try:
            tag_text = " ".join(tags)  # text tags (the usual case): str() of each is itself
        except TypeError:
            tag_text = " ".join(map(str, tags))
    else:
        tag_text = _tag_text(tags)
    signals = None
    for name in HEADLINE_FIELDS.get(node.label, DEFAULT_HEADLINE_FIELDS):
        value = get(name)
        if value is not None:
            signals = _headline_signals(value if value.__class__ is str else str(value), tag_text)
            if signals is not None:
                break
    words, quality, union_base = signals or _text_signals(None, tag_text)
    # Jaccard overlap, importance, 1/hop and the share of expected fields, each rounded to 4
    # places; their values are few (ratios of small counts, the fixture's priors), so each
    # rounding is remembered (_SIM, _IMPORTANCE, ...) rather than redone per node.
    common = len(words & anchor_words)
    sim_key = (common, union_base + len(anchor_words) - common)  # the size of the union, no new set
    sim = _SIM.get(sim_key)
    if sim is None:
        sim = _remember(_SIM, sim_key, round(common / sim_key[1] if sim_key[1] else 0.0, 4))
    value = get("importance")
    if value.__class__ is float:  # the usual prior; keyed by floats only (1, 1.0 and True are equal keys)
        importance = _IMPORTANCE.get(value)
        if importance is None:
            importance = _rounded(("importance", float, value))
            if value == value:  # not NaN: a NaN key is never found again
                _remember(_IMPORTANCE, value, importance)
    else:
        importance = _rounded(("importance", value.__class__, value))
    adjacency = _ADJACENCY.get(node.hop)
    if adjacency is None:
        adjacency = _remember(_ADJACENCY, node.hop, round(1.0 / max(node.hop, 1), 4))
    expected = EXPECTED_FIELDS.get(node.label, DEFAULT_EXPECTED_FIELDS)
    present = 0
    for value in map(get, expected):
        if value is None:
            continue
        kind = value.__class__
        # `not in _EMPTY`: text and lists are empty only when falsy (a str or list equals no
        # other member of _EMPTY); anything else is compared as before.
        if value if kind is str or kind is list else value not in _EMPTY:
            present += 1
    completeness = _COMPLETENESS.get((present, len(expected)))
    if completeness is None:
        completeness = _rounded(("completeness", present, len(expected)))
    # The WEIGHTS in their order, summed left to right as sum() over WEIGHTS would.
    score = (
        0.0
        + _W_SIM * sim
        + _W_IMPORTANCE * importance
        + _W_RECENCY * recency
        + _W_ADJACENCY * adjacency
        + _W_COMPLETENESS * completeness
        + _W_QUALITY * quality
    )
    score = round(score, 6)
    row = {
        "sim": sim,
        "recency_days": days,
        "importance": importance,
        "adjacency": adjacency,
        "completeness": completeness,
        "quality": quality,
        "score": score,
    }
    scored = _new(Scored)  # Scored(...) without the frozen dataclass's generic __init__
    _set_id(scored, node.id)
    _set_score(scored, score)
    _set_row(scored, row)
    return scored


def _days(seconds: float) -> tuple[float, float]:
    """``recency_days`` of a distance in seconds, and the recency signal it scores as."""
    days = round(seconds / 86400, 2)
    return days, 1.0 / (1.0 + days / RECENCY_HALF_LIFE_DAYS)


_MISSING_RECENCY = 1.0 / (1.0 + MISSING_RECENCY_DAYS / RECENCY_HALF_LIFE_DAYS)
# (days, recency) per distance in whole seconds, remembered (bounded by _MAX_ROUNDED) as the other
# roundings are: the dates of a graph are few, so their distances recur (~90% of lookups at 10k).
_DAYS: dict[float, tuple[float, float]] = {}
_new = object.__new__
_set_id, _set_score, _set_row = (Scored.__dict__[name].__set__ for name in ("id", "score", "row"))
_SIM: dict[tuple[int, int], float] = {}
_IMPORTANCE: dict[float, float] = {}
_ADJACENCY: dict[int, float] = {}
# The share of expected fields present, per (present, expected) count: a handful of keys.
_COMPLETENESS: dict[tuple[int, int], float] = {
    (present, expected): round(present / expected, 4)
    for expected in {len(f) for f in (*EXPECTED_FIELDS.values(), DEFAULT_EXPECTED_FIELDS)}
    for present in range(expected + 1)
}


_V = TypeVar("_V")


def _remember(cache: dict[Any, _V], key: Any, value: _V) -> _V:
    if len(cache) < _MAX_ROUNDED:
        cache[key] = value
    return value


class _Rounded(dict[tuple[Any, ...], float]):
    """The rounded signal of each key ``_score`` builds; computed on first use."""

    def __missing__(self, key: tuple[Any, ...]) -> float:
        kind = key[0]
        if kind == "sim":
            _, common, union = key
            value = round(common / union if union else 0.0, 4)
        elif kind == "importance":
            value = round(_importance_of(key[2]), 4)
        elif kind == "adjacency":
            value = round(1.0 / max(key[1], 1), 4)
        else:
            _, present, expected = key
            value = round(present / expected, 4)
        if len(self) < _MAX_ROUNDED:
            self[key] = value
        return value


_MAX_ROUNDED = 65536


def _rounded(key: tuple[Any, ...]) -> float:
    try:
        return _ROUNDED[key]
    except TypeError:  # an importance that cannot be a key (a list): computed, not remembered
        return _ROUNDED.__missing__(key)


_ROUNDED = _Rounded()


@lru_cache(maxsize=8192)
def _headline_signals(text: str, tag_text: str) -> tuple[frozenset[str], float, int] | None:
    """``_text_signals`` of a headline field's text (squeezed) with the tags; None when the text
    is blank (the headline is a later field's), once per text pair."""
    title = _squeezed(text)
    return _text_signals(title, tag_text) if title else None


@lru_cache(maxsize=8192)
def _text_signals(title: str | None, tag_text: str) -> tuple[frozenset[str], float, int]:
    """A headline's words (with the tags'), its rounded quality and its word count, once per
    text pair: the same nodes recur from ask to ask."""
    words = _word_set(f"{title or ''} {tag_text}")
    return words, round(_quality(title), 4), len(words)


def _tag_text(tags: object) -> str:
    return " ".join(map(str, tags)) if isinstance(tags, list | tuple) else str(tags or "")


_W_SIM, _W_IMPORTANCE, _W_RECENCY = WEIGHTS["sim"], WEIGHTS["importance"], WEIGHTS["recency"]
_W_ADJACENCY, _W_COMPLETENESS, _W_QUALITY = WEIGHTS["adjacency"], WEIGHTS["completeness"], WEIGHTS["quality"]


def _words(node: CandidateNode, title: str | _Unset | None = UNSET) -> frozenset[str]:
    """Title/summary and tag words; ``title`` is the node's headline when the caller has it."""
    if isinstance(title, _Unset):
        title = headline(node)
    return _word_set(f"{title or ''} {_tag_text(node.fields.get('tags'))}")


@lru_cache(maxsize=8192)
def _word_set(text: str) -> frozenset[str]:
    """The words of a text, once per text: the same nodes recur from ask to ask."""
    return frozenset(w for w in _WORD.findall(text.lower()) if w not in _STOPWORDS)


def _importance_of(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        return DEFAULT_IMPORTANCE
    return min(1.0, max(0.0, float(value)))


_EMPTY: tuple[object, ...] = (None, "", [], ())


@lru_cache(maxsize=8192)
def _quality(text: str | None) -> float:
    """1.0 for a plain headline of a readable length, less for fragments, walls of text or noise."""
    if not text:
        return 0.0
    words = len(text.split())
    low, high = _IDEAL_WORDS
    length = words / low if words < low else high / words if words > high else 1.0
    plain = (len(text) - len(_NOISY_CHAR.findall(text))) / len(text)
    return length * plain
