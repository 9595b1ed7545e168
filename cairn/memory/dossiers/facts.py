"""Fact-level retrieval: the facts that answer a question, ranked, each with its dossier as context.

Dossier search (``retriever.retrieve_relevant_dossiers``) answers "which topics"; an
application that feeds a model needs the *facts*, first the ones that answer. On LoCoMo,
returning dossiers with their newest facts found 5% of the evidence where a flat cosine
over the facts found 59%, so this ranks facts directly and uses dossiers only as context.

Ranking is hybrid: the Fact vector index (full floats, so its score is the exact cosine) and Neo4j's full-text
index on ``Fact.text`` (english analyzer; it finds each query word's facts, which are scored by
BM25 over the caller's visible facts only: docs/design.md §Fact search scores, never by
Lucene's score, whose statistics count hidden facts) each give a ranked list, fused by
their scores rescaled to [0, 1] (cosine min-max over the list, BM25 over its best); this beat
reciprocal rank fusion (RRF, still a ``FusionConfig`` option) because it keeps how far ahead
the best matches are. Then
graph expansion: the facts of the same source block (a conversation session) as a top
hit get a small share of its score, which brings in the other half of a multi-hop answer
told in the same session; the other facts of a top hit's dossier (a topic, across sessions)
get a smaller share, except for a question that asks when (``asks_when``: it asks for one
event's day, and a topic's other facts are other days). A third list takes the dense
candidates that name whom the question asks about (``query_names``), and facts that only
restate turns better-ranked facts already cite are listed after those citing a new one. The
dense query is centred on the caller's view (minus the mean vector of the facts it may see,
``FusionConfig.centre``), so a fact is found by what sets it apart, not by what the whole
memory shares (docs/design.md §Fact search scores).
What was measured for each choice is in bench/results/locomo.md.

Scope: every candidate list is filtered by the caller's Scope inside Cypher (the policy
module's ``acl_visible`` on the fact and its dossier, and the HAS_FACT edge allowlist)
before it is ordered, cut or counted: the view's one pass over the visible facts collects the
(dossier, fact) pairs that pass, and each list admits only those (the rules run once per fact).
Both indexes are queried before the filter (they cannot take one). The vector index's fetch is
larger than the list it must fill and grows until the list is full or the index has nothing
more; only then does the dense side fall back to an exact scan over the visible facts. The
full-text side takes every match of each word, so it has no fetch to grow. Hidden facts cost
time, never a rank or a score.

One round trip per search: the centred query, both lists, the top fused seeds' block neighbours,
the ranked pool and the headers of the returned facts' dossiers come from one query (``FACT_SEARCH`` in
``cairn.graph.dossiers``, imported as ``cypher``); only the top_k facts' fields travel
(carrying every candidate's was most of the latency), their timestamps as text (``iso_text``),
never a vector (a dossier's visible facts' vectors only when some are hidden, to rebuild its
summary).
It is repeated only when the dense list must be refetched larger.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from neo4j import Driver

from cairn.graph import dossiers as cypher
from cairn.graph.dossiers import plain_cosine
from cairn.memory.dossiers.retriever import DossierView, header_views
from cairn.policy.preselector import mask
from cairn.policy.scope import Scope
from cairn.runtime.database import Vector, read
from cairn.runtime.embedder import Embedder, get_embedder
from cairn.runtime.stopwords import FACT_STOP_WORDS as STOP_WORDS
from cairn.runtime.stopwords import LUCENE_STOP_WORDS, QUESTION_WORDS
from cairn.runtime.tokens import count_tokens

FIRST_FETCH = 100
# The parameters each search query reads: only those travel (a scope's parameters carry more, for
# other queries; packing and reading them was a measurable part of a search's round trip).
_PARAMETER = re.compile(r"\$(\w+)")
_READS = {q: frozenset(_PARAMETER.findall(q)) for q in (cypher.FACT_SEARCH, cypher.FACT_SEARCH_EXACT)}
MAX_POOL = 1_000_000  # "no cut" for the ranked pool
MAX_FETCH = 6_400
_WORD = re.compile(r"[^\W_]+")
MAX_QUERY_WORDS = 48


_POSSESSIVE = re.compile(r"(?:'s|\u2019s|'|\u2019)$")
_TOKEN = re.compile(r"[^\W_][\w'\u2019-]*")
_NOT_CONTENT = QUESTION_WORDS | STOP_WORDS


def _words(text: str) -> list[tuple[str, bool, tuple[int, int]]]:
    """The question's words without possessive endings, each with whether it is a name
    (capitalised, not the first word) and where it stands in the text."""
    out = []
    for n, m in enumerate(_TOKEN.finditer(text)):
        bare = _POSSESSIVE.sub("", m.group())
        out.append((bare, n > 0 and bare[:1].isupper(), (m.start(), m.start() + len(bare))))
    return out


def content_spans(text: str) -> list[tuple[int, int]]:
    """Where the question's content words (``content_words``) stand in it."""
    return [span for w, name, span in _words(text) if not name and w.lower() not in _NOT_CONTENT]


def content_words(text: str) -> str:
    """What the question is about, without what makes it a question or whom it is about.

    Question words, function words and names (capitalised words after the first) are left
    out: "What books has Melanie read?" -> "books read". Most facts name their subject, so
    the name pulls the question's vector toward everything told about that person; the
    topic words alone pull toward the facts on that topic (see ``FusionConfig.content_weight``).
    """
    return " ".join(text[a:b] for a, b in content_spans(text))


def query_names(text: str) -> list[str]:
    """Whom the question is about: its names (capitalised words after the first, of two letters
    or more, not a question or function word such as a second sentence's first word), distinct,
    in order: "What books has Melanie read?" -> ["Melanie"] (see ``FusionConfig.name_weight``).
    A fact names one when it holds it as a whole word (``name_pattern``)."""
    names = (w for w, name, _ in _words(text) if name and len(w) > 1 and w.lower() not in _NOT_CONTENT)
    return list(dict.fromkeys(names))[:MAX_QUERY_WORDS]


def name_pattern(names: Sequence[str]) -> str | None:
    """A Java regular expression matching a whole text that holds one of ``names`` as a whole word
    (``cypher.FACT_SEARCH``'s named list; None: no names, no match). One pattern for all names, so
    Neo4j compiles it once per search, not once per candidate and name. Each name is quoted
    (``\\Q…\\E``); a name holds letters, digits, apostrophes and hyphens only (``query_names``)."""
    if not names:
        return None
    return "(?sU).*\\b(?:" + "|".join(f"\\Q{n}\\E" for n in names) + ")\\b.*"


# What splits a fact's text into words when its term frequencies are counted (``cypher.FACT_FULLTEXT``).
TEXT_SEPARATORS = [" ", "\t", "\n", ".", ",", ";", ":", "!", "?", '"', "(", ")", "[", "]", "/", "-"]
BM25_K1 = 1.2  # Lucene's defaults
BM25_B = 0.75


def query_terms(text: str, drop: frozenset[str] = frozenset()) -> list[str]:
    """The question's distinct lower-cased words, each a Lucene query of one word: no syntax from
    the caller reaches the parser (a word is letters and digits only)."""
    words = dict.fromkeys(w.lower() for w in _WORD.findall(text))
    return [w for w in words if w not in drop and w not in LUCENE_STOP_WORDS][:MAX_QUERY_WORDS]


CONTENT_VECTORS = ("pooled", "encoded")


def asks_when(text: str) -> bool:
    """Whether the question asks when: its first word is "when" ("When did Melanie go camping?"),
    any case. Such a question gets no dossier mates (``FusionConfig.when_mates``)."""
    first = _WORD.search(text)
    return first is not None and first.group().lower() == "when"


@dataclass(frozen=True)
class FusionConfig:
    """How the ranked lists are combined; defaults are the measured best (bench/results/locomo.md)."""

    fusion: str = (
        "score"  # "score" (rescaled scores, see cypher.FACT_FUSE; +0.015 at k=10 over "rrf") or "rrf"
    )
    rrf_k: float = 20.0  # a rank's weight is 1 / (rrf_k + rank); 20 beat the usual 60 (top ranks count more)
    dense_weight: float = 1.0
    text_weight: float = 1.0
    feedback: int = 0  # top dense hits whose mean moves the query for a third list (0: none)
    feedback_weight: float = 1.0
    depth: int = 50  # candidates taken from each list (at least 2 x top_k)
    seeds: int = 10  # top fused facts whose block neighbours are expanded
    neighbour_weight: float = 0.3  # share of a seed's fused score a neighbour receives
    neighbour_window: int | None = 3  # only neighbours this many turns away (None: whole block)
    block_decay: float = 1.0  # each further fact from an already-ranked block is scaled by this (1: off)
    drop_question_words: bool = True  # leave QUESTION_WORDS out of the full-text query
    # The dense query is the question's vector plus this times its content words' vector
    # (``content_words``): one vector, one index query (0: the question alone).
    content_weight: float = 1.0
    # The content words' vector: "pooled" is the mean of the question's own token vectors over
    # them, from the question's forward pass (``Embedder.embed_with_part``); "encoded" embeds them
    # as a second text, a second pass (a quarter more CPU for the query vector: docs/design.md
    # §Fact search scores).
    content_vector: str = "pooled"
    # The named list: the first 2 x depth visible dense candidates that name one of the question's
    # names (``query_names``; the text holds it, case-sensitive), cosine-ranked and rescaled like the
    # dense list, fused with this weight: the facts about whom the question asks, topic by topic.
    name_weight: float = 0.25
    # A fact whose source turns are all cited by better-ranked facts restates them: it is listed
    # after every fact that brings a turn not yet cited (the ranked pool is partitioned, in order).
    distinct_sources: bool = True
    # The dense query is centred on the caller's view: minus this times the mean vector of the facts
    # the caller may see (``cypher.FACT_VIEW``), so a fact is found by what sets it apart
    # from the rest of the memory, not by what all of it shares (0: not centred).
    centre: float = 1.0
    # Dossier mates: the other facts of a top ``dossier_seeds`` fused fact's dossier (a topic the
    # routing grouped across sessions) get this share of its score (0: off; multi-hop @10 +0.013,
    # @10 up or flat on each development conversation: docs/design.md §Fact search scores).
    dossier_weight: float = 0.1
    dossier_seeds: int = 5
    # A question that asks when (its first word ``when``) gets no dossier mates unless this is set:
    # it asks for the day of one event, and a mate of its topic is another session of that topic,
    # another day (temporal @10 0.790 -> 0.803, back to where it was before the mates).
    when_mates: bool = False

    def __post_init__(self) -> None:
        if self.content_vector not in CONTENT_VECTORS:
            raise ValueError(f"content_vector must be one of {CONTENT_VECTORS}, not {self.content_vector!r}")
        # Not a caller's choice (the service and the CLI take the defaults; bench/locomo.py names
        # its variants), but a variant may not break what the order promises: the decay re-ranks
        # the pool by score, which would put restatements back among the facts that bring a new
        # source (review of stop 27).
        if not 0.0 < self.block_decay <= 1.0:
            raise ValueError(f"block_decay must lie in (0, 1], not {self.block_decay}")
        if self.block_decay < 1.0 and self.distinct_sources:
            raise ValueError(
                "block_decay < 1 re-ranks the pool and would undo distinct_sources: set one only"
            )


@dataclass(frozen=True)
class FactHit:
    """One fact as the caller may see it, with its dossier (title and summary) as context."""

    fact: dict[str, Any]
    dossier: DossierView
    score: float  # fused score (see cypher.FACT_FUSE); comparable within one search only
    cosine: float | None  # the fact's exact cosine to the (centred) query, when it was a dense candidate
    # which lists brought it: "dense", "name", "text", "feedback", "block", "dossier"
    matched: tuple[str, ...]

    @property
    def observed_at(self) -> str | None:
        value = self.fact.get("observed_at")
        return None if value is None else str(value)


@dataclass(frozen=True)
class FactSearchResult:
    total: int  # visible facts in the fused candidate pool (before the top-k cut)
    hits: list[FactHit] = field(default_factory=list)


@dataclass
class _Candidate:
    hit: dict[str, Any]
    score: float = 0.0
    cosine: float | None = None
    matched: list[str] = field(default_factory=list)


class FactRetriever:
    """Hybrid fact search over a Scope: ``search(scope, query, top_k)`` (neo4j-graphrag style)."""

    def __init__(
        self, driver: Driver, embedder: Embedder | None = None, config: FusionConfig | None = None
    ) -> None:
        self.driver = driver
        self.embedder = embedder or get_embedder()
        self.config = config or FusionConfig()

    def search(
        self,
        scope: Scope,
        query: str,
        top_k: int = 10,
        *,
        query_vector: Sequence[float] | None = None,
        include_archived: bool = False,
    ) -> FactSearchResult:
        """The ``top_k`` visible facts that best answer ``query``, best first.

        ``query_vector``: the query's embedding when the caller already has it (made by the
        same model); otherwise the query is embedded here.
        """
        top_k = max(0, top_k)
        cfg = self.config
        vec = self._query_vector(query, query_vector)
        names = query_names(query) if cfg.name_weight > 0 else []
        depth = max(cfg.depth, 2 * top_k)
        params: dict[str, Any] = {
            **scope.cypher_params(),
            "vec": vec,
            "terms": query_terms(query, QUESTION_WORDS if cfg.drop_question_words else frozenset()),
            "name_pattern": name_pattern(names),
            "name_weight": cfg.name_weight,
            "distinct_sources": cfg.distinct_sources,
            "separators": TEXT_SEPARATORS,
            "k1": BM25_K1,
            "b": BM25_B,
            "depth": depth,
            # visible dense candidates kept: the dense list is their first depth; the named list
            # looks at twice as many, so a named fact just below the dense list can still come in
            "dense_pool": 2 * depth if names else depth,
            "statuses": ["active", "archived"] if include_archived else ["active"],
            "vector_index": cypher.FACT_VECTOR_INDEX,
            "text_index": cypher.FACT_TEXT_INDEX,
            "fusion": cfg.fusion,
            "rrf_k": cfg.rrf_k,
            "dense_weight": cfg.dense_weight,
            "text_weight": cfg.text_weight,
            "centre": cfg.centre,
            "feedback": cfg.feedback,
            "feedback_weight": cfg.feedback_weight,
            "seeds": cfg.seeds if cfg.neighbour_weight > 0 else 0,
            "window": cfg.neighbour_window,
            "neighbour_weight": cfg.neighbour_weight,
            "dossier_seeds": cfg.dossier_seeds
            if cfg.dossier_weight > 0 and (cfg.when_mates or not asks_when(query))
            else 0,
            "dossier_weight": cfg.dossier_weight,
            # The query cuts the ranked pool at top_k; a block decay re-ranks it here, so it needs all.
            "limit": top_k if cfg.block_decay >= 1.0 else MAX_POOL,
        }
        r = self._fetch(params)
        pool = [
            _Candidate(
                {"fact": fact, "dossier_id": h["dossier_id"]},
                float(h["score"]),
                None if h["cosine"] is None else plain_cosine(float(h["cosine"])),
                list(h["matched"]),
            )
            for h, fact in zip(r["ranked"], r["facts"], strict=True)
        ]
        headers = header_views(r["headers"], scope)
        return FactSearchResult(int(r["total"]), self._hits(scope, headers, self._ranked(scope, pool, top_k)))

    def _query_vector(self, query: str, given: Sequence[float] | None) -> Vector:
        """The question's vector moved toward its content words' (``FusionConfig.content_weight``,
        ``content_vector``), normalised; the question's reused when the caller gives it."""
        cfg = self.config
        spans = content_spans(query) if cfg.content_weight > 0 else []
        q = None if given is None else np.asarray(given, dtype=np.float32)
        c = None
        if spans and cfg.content_vector == "pooled":
            own, c = self.embedder.embed_with_part(query, spans)
            q = own if q is None else q
        elif spans:
            content = " ".join(query[a:b] for a, b in spans)
            vectors = self.embedder.embed([content] if q is not None else [query, content])
            q, c = (q, vectors[0]) if q is not None else (vectors[0], vectors[1])
        if q is None:
            q = self.embedder.embed([query])[0]
        if c is not None:
            q = q + cfg.content_weight * c
            q = q / (float(np.linalg.norm(q)) or 1.0)
        return Vector(float(x) for x in q)

    def _ranked(self, scope: Scope, pool: Sequence[_Candidate], top_k: int) -> list[_Candidate]:
        """In the query's order (best first, restatements after new sources: ``distinct_sources``);
        with ``block_decay`` < 1 a block's n-th fact counts ``decay**(n-1)`` of its score, so one
        session's near-repeats do not fill the list (a multi-hop answer spans sessions). The block
        is the one the caller is shown: a hidden ``source_block_id`` never moves the order."""
        decay = self.config.block_decay
        if decay >= 1.0:
            return list(pool[:top_k])
        blocks = {id(c): mask("Fact", c.hit["fact"], scope)[0].get("source_block_id") for c in pool}
        order = sorted(pool, key=lambda c: (-c.score, c.hit["fact"]["id"]))
        taken: list[_Candidate] = []
        per_block: dict[Any, int] = {}
        while order and len(taken) < top_k:
            scaled = [c.score * decay ** per_block.get(blocks[id(c)], 0) for c in order]
            best = order.pop(scaled.index(max(scaled)))  # the first of equals keeps the fused order
            taken.append(best)
            per_block[blocks[id(best)]] = per_block.get(blocks[id(best)], 0) + 1
        return taken

    def _fetch(self, params: dict[str, Any]) -> dict[str, Any]:
        """One round trip, repeated only while the dense list is short of ``depth`` visible facts
        and its index has more: the fetch grows; past ``MAX_FETCH`` the dense list is an exact
        scan. The full-text list takes every visible match of each word, so it is never short."""
        query = cypher.FACT_SEARCH
        dense_fetch = max(FIRST_FETCH, 2 * params["dense_pool"])
        while True:
            sent = {k: v for k, v in params.items() if k in _READS[query]}
            r = read(self.driver, query, {**sent, "dense_fetch": dense_fetch})[0]
            if not (r["dense_fetched"] == dense_fetch and r["dense_count"] < params["dense_pool"]):
                return dict(r)
            if dense_fetch >= MAX_FETCH:
                query = cypher.FACT_SEARCH_EXACT
            else:
                dense_fetch *= 4

    def _hits(
        self, scope: Scope, headers: dict[str, DossierView], chosen: Sequence[_Candidate]
    ) -> list[FactHit]:
        return [
            FactHit(
                mask("Fact", c.hit["fact"], scope)[0],
                headers[c.hit["dossier_id"]],
                c.score,
                c.cosine,
                tuple(c.matched),
            )
            for c in chosen
            if c.hit["dossier_id"] in headers
        ]


def search_facts(
    driver: Driver, scope: Scope, query: str, top_k: int = 10, *, embedder: Embedder | None = None
) -> FactSearchResult:
    """``FactRetriever(driver, embedder).search(scope, query, top_k)``."""
    return FactRetriever(driver, embedder).search(scope, query, top_k)


CONTEXT_HEADER = "=== MEMORY: facts that answer the question, best first ==="


def _day(value: Any) -> str:
    """The calendar day of an ISO timestamp (``2023-05-08T13:56:00+00:00`` -> ``2023-05-08``)."""
    return str(value)[:10] if value else "date unknown"


def fact_line(fact: dict[str, Any]) -> str:
    """A fact as one context line, led by the day it was observed (the session date), else its ingest day."""
    when = fact.get("observed_at") or fact.get("added_at")
    return f"  - [{_day(when)}] {fact.get('text', '')}"


def _group_lines(hit: FactHit) -> list[str]:
    lines = [f"## {hit.dossier.title or hit.dossier.id}"]
    if hit.dossier.summary:
        lines.append(f"Summary: {hit.dossier.summary}")
    return lines


def format_for_context(hits: Sequence[FactHit], *, max_tokens: int | None = None) -> str:
    """The hits as LLM context: grouped under their dossier's title and summary, each fact with its date.

    ``max_tokens`` (counted with the embedding model's tokenizer, ``cairn.runtime.tokens``) is
    filled in rank order and the first hit that does not fit ends the context: a lower-ranked
    fact is never shown in place of a better one. Groups keep the order of their best hit.
    """
    if not hits:
        return ""
    used = count_tokens(CONTEXT_HEADER)
    if max_tokens is not None and used > max_tokens:
        return ""
    groups: dict[str, list[str]] = {}
    for hit in hits:
        new_group = hit.dossier.id not in groups
        lines = [*(_group_lines(hit) if new_group else []), fact_line(hit.fact)]
        cost = sum(count_tokens(line) for line in lines)
        if max_tokens is not None and used + cost > max_tokens:
            break
        used += cost
        groups.setdefault(hit.dossier.id, []).extend(lines)
    if not groups:
        return ""
    return "\n".join([CONTEXT_HEADER, *(line for lines in groups.values() for line in lines)]) + "\n"
