"""Route a free-text question to one of the factor questions, without an LLM by default.

Intent comes from a classifier learnt from labelled questions (intents.py: logistic regression
over the sentence embedding and the intent patterns of catalog.py, whose table also says which
questions name a subject and which label a vague one prefers). Entities are linked in two steps, the
second only if the first found nothing, and always over the nodes the caller may see — a name
the caller may not see is never a candidate, so no route can reveal it:

1. **lexical**: the question's words contain a factor's or option's name, alias or id words
   (light normalisation: case, punctuation, plural "s"), exactly or with a typo (difflib ratio
   ≥ ``FUZZY_RATIO`` on the longer words); longest, then exact, match wins; otherwise
2. **vector**, with the **semantic fallback** beside it: the question minus its intent and time
   wording is embedded and compared by exact cosine with the factor/option embeddings (name,
   description, aliases) and with the caller's journal entries (rationale, excerpt); the best
   of the two wins if it clears ``ENTITY_THRESHOLD`` — a journal hit links the factor the entry
   is about ("why does the CFO matter?" → executive sponsorship). Exact cosine over the
   ACL-filtered candidates rather than an index query: an assessment holds tens to hundreds of
   nodes, and post-filtering an approximate top-k could drop visible ones.

``LLMRouter`` asks a configured model for the same ``Route`` and falls back to the learned router
when the model is unavailable or answers something unusable; ``question_router`` picks it only
when the caller may use the LLM and one is configured.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from difflib import SequenceMatcher
from functools import lru_cache
from typing import Any, Literal, Protocol

from neo4j import Driver

from cairn.graph import factors as queries
from cairn.memory.factors.catalog import INTENT_PATTERNS, INTENTS, QUESTION
from cairn.memory.factors.intents import IntentClassifier, intent_classifier
from cairn.memory.factors.models import Intent, LinkedEntity, Route
from cairn.memory.factors.timeframe import parse_since
from cairn.policy.scope import Scope
from cairn.runtime.database import read
from cairn.runtime.embedder import Embedder
from cairn.runtime.llm import LLMClient, LLMUnavailable
from cairn.runtime.stopwords import ROUTER_STOP_WORDS as STOPWORDS
from cairn.schema.timestamps import storable_problem

# Cosine of the question remainder with a node (name, description, aliases) or with a journal
# entry (rationale, excerpt): MiniLM gives ~0.55-0.65 to unrelated text of this domain, so a link
# needs 0.70 — calibrated on the labelled set, where true links score 0.72-0.87.
ENTITY_THRESHOLD = 0.70
# A misspelt word links when difflib's ratio with a name's word reaches 0.85 and both have 5+
# letters ("maintenence", "qualty", "intgration"); shorter words ("ML", "AI", "data") must be exact.
FUZZY_RATIO = 0.85
FUZZY_MIN_LENGTH = 5
PREFER_BONUS = 0.05  # "why can't we …" is about an option more often than a factor

_P = re.compile
# A what-if target: a number after "to", "at", "hit", "were", "=" …, or one given as a percentage.
_VALUE = _P(
    r"(?:\b(?:to|reach(?:ed|es)?|hits?|at|were|was|of|is|be|becomes?|with)\s+|=\s*)(\d+(?:\.\d+)?)\b"
    r"|\b(\d+(?:\.\d+)?)\s*(?:%|percent\b)",
    re.I,
)
_LOWER = _P(
    r"\b(?:drop(?:ped|s)?|lower(?:ed)?|decrease[sd]?|fell|fall(?:s)?|lose|lost|worse|cut|reduce[sd]?|"
    r"break|down)\b",
    re.I,
)
_TIME_WORDS = _P(
    r"\b(?:since|from|after|in|over|during|within|the|last|past|this|next|ago|recently|lately|"
    r"yesterday|today|week|weeks|month|months|year|years|day|days|\d{4}-\d{2}-\d{2}|\d+(?:st|nd|rd|th)?|"
    r"january|february|march|april|june|july|august|september|october|november|december)\b",
    re.I,
)


class Router(Protocol):
    def route(self, question: str, scope: Scope, now: datetime) -> Route: ...


def _norm_token(word: str) -> str:
    word = word.lower().removesuffix("'s")
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        word = word[:-1]
    return word


def tokens(text: str) -> list[str]:
    return [_norm_token(w) for w in re.findall(r"[A-Za-z0-9]+(?:'[a-z]+)?", text)]


def residual(question: str) -> str:
    """The question without its intent and time wording and stopwords: what names the entity."""
    text = question
    for _, pattern in INTENT_PATTERNS:
        text = pattern.sub(" ", text)
    text = _TIME_WORDS.sub(" ", text)
    words = [w for w in re.findall(r"[A-Za-z0-9%'-]+", text) if w.lower() not in STOPWORDS]
    return " ".join(words)


@dataclass(frozen=True)
class _Candidate:
    id: str
    label: str
    name: str
    forms: tuple[tuple[str, ...], ...]
    score: float


@lru_cache(maxsize=65536)
def _word_match(asked: str, known: str) -> float:
    """1 for the same word; the similarity for a likely typo of a longer word; else 0.

    A question is matched word by word against every form of every linkable name (hundreds of
    pairs), and the words recur from question to question: each pair is scored once per
    process, and a pair whose upper bounds (``real_quick_ratio``, ``quick_ratio``: difflib's
    cheap bounds on ``ratio``) already fall short of ``FUZZY_RATIO`` is not matched block by
    block. The same verdicts as ``ratio`` alone (docs/design.md §Embedding under load)."""
    if asked == known:
        return 1.0
    if min(len(asked), len(known)) < FUZZY_MIN_LENGTH:
        return 0.0
    matcher = SequenceMatcher(None, asked, known)
    if matcher.real_quick_ratio() < FUZZY_RATIO or matcher.quick_ratio() < FUZZY_RATIO:
        return 0.0
    ratio = matcher.ratio()
    return ratio if ratio >= FUZZY_RATIO else 0.0


def _form_match(words: Sequence[str], form: tuple[str, ...]) -> float:
    """How well a window of the question's words spells a name (0: not at all)."""
    scores = [_word_match(a, k) for a, k in zip(words, form, strict=True)]
    if not all(scores):
        return 0.0
    if len(form) > 1 and 1.0 not in scores:  # a multi-word name needs one word spelt right
        return 0.0
    return min(scores)


def _lexical(question: str, candidates: list[_Candidate]) -> list[LinkedEntity]:
    words = tokens(question)
    matches: list[tuple[int, int, float, _Candidate]] = []
    for c in candidates:
        for form in c.forms:
            n = len(form)
            for i in range(len(words) - n + 1):
                if score := _form_match(words[i : i + n], form):
                    matches.append((i, i + n, score, c))
    matches.sort(key=lambda m: (-(m[1] - m[0]), -m[2], m[0], m[3].id))
    taken: set[int] = set()
    found: dict[str, tuple[int, float, _Candidate]] = {}
    for start, end, score, c in matches:
        span = set(range(start, end))
        if span & taken:
            continue
        taken |= span
        found.setdefault(c.id, (start, score, c))
    ordered = sorted(found.values(), key=lambda x: x[0])
    return [
        LinkedEntity(c.id, c.label, c.name, score, "lexical" if score == 1.0 else "fuzzy")
        for _, score, c in ordered
    ]


class LearnedRouter:
    """The default router: a learnt classifier for intent; lexical, then vector or journal, for entities."""

    def __init__(
        self, driver: Driver, embedder: Embedder, classifier: IntentClassifier | None = None
    ) -> None:
        self.driver = driver
        self.embedder = embedder
        self.classifier = classifier or intent_classifier(embedder)

    def _candidates(self, scope: Scope, vector: list[float] | None) -> list[_Candidate]:
        records = read(self.driver, queries.LINKABLE_NODES, {**scope.cypher_params(), "q": vector})
        out = []
        for r in records:
            forms = {tuple(tokens(str(r["name"] or ""))), tuple(tokens(str(r["id"]).replace("_", " ")))}
            forms |= {tuple(tokens(str(a))) for a in r["aliases"]}
            out.append(
                _Candidate(
                    str(r["id"]),
                    str(r["label"]),
                    str(r["name"] or r["id"]),
                    tuple(f for f in forms if f),
                    float(r["score"]),
                )
            )
        return out

    def link(self, question: str, scope: Scope, intent: Intent) -> list[LinkedEntity]:
        rest = residual(question)
        return self._link(question, scope, intent, self.embedder.embed_one(rest) if rest else None)

    def _link(
        self, question: str, scope: Scope, intent: Intent, vector: list[float] | None
    ) -> list[LinkedEntity]:
        """``link`` with the remainder's embedding given (None: the question has no remainder)."""
        candidates = self._candidates(scope, vector)
        found = _lexical(question, candidates)
        if found or vector is None:
            return found
        prefer = QUESTION[intent].preferred
        pool = candidates if prefer == "Option" else [c for c in candidates if c.label == "Factor"]
        ranked = sorted(pool, key=lambda c: (-(c.score + (PREFER_BONUS if c.label == prefer else 0.0)), c.id))
        best: LinkedEntity | None = None
        if ranked:
            top = ranked[0]
            best = LinkedEntity(top.id, top.label, top.name, top.score, "vector")
        params = {**scope.cypher_params(), "q": vector, "threshold": ENTITY_THRESHOLD}
        records = read(self.driver, queries.JOURNAL_LINK, params)
        for r in records:
            if best is None or float(r["score"]) > best.score:
                best = LinkedEntity(
                    str(r["id"]),
                    "Factor",
                    str(r["name"] or r["id"]),
                    float(r["score"]),
                    "journal",
                )
        return [best] if best is not None and best.score >= ENTITY_THRESHOLD else []

    def route(self, question: str, scope: Scope, now: datetime) -> Route:
        if self.classifier.embedder is not self.embedder:
            intent = self.classifier.predict(question).intent
            entities = self.link(question, scope, intent) if QUESTION[intent].links_entities else []
        else:
            # The question and its remainder in one call, so one forward pass (docs/design.md
            # §Embedding under load): the remainder is short, and most questions link an entity.
            rest = residual(question)
            vectors = self.embedder.embed([question, rest] if rest else [question])
            intent = self.classifier.predict(question, vectors[0]).intent
            entities = (
                self._link(question, scope, intent, [float(x) for x in vectors[1]] if rest else None)
                if QUESTION[intent].links_entities
                else []
            )
        value = None
        if intent == "what_if" and (m := list(_VALUE.finditer(question))):
            value = float(m[-1].group(1) or m[-1].group(2))
        direction: Literal["improve", "lower"] = "lower" if _LOWER.search(question) else "improve"
        since = parse_since(question, now) if intent == "what_changed" else None
        return Route(question, intent, tuple(entities), value, direction, since, "learned")


LLM_SYSTEM = (
    "You route questions about an AI-readiness assessment. Reply with one JSON object only: "
    '{"intent": one of ' + ", ".join(INTENTS) + ', "entities": [ids from the list], '
    '"value": number or null, "direction": "improve" or "lower", "since": ISO date or null}.'
)


class LLMRouter:
    """Asks the model for the route; any failure falls back to the learned router (with the reason)."""

    def __init__(self, llm: LLMClient, fallback: LearnedRouter) -> None:
        self.llm = llm
        self.fallback = fallback

    def route(self, question: str, scope: Scope, now: datetime) -> Route:
        base = self.fallback.route(question, scope, now)
        # Only what the scope sees, in a fixed order: the prompt must not depend on hidden nodes.
        candidates = sorted(self.fallback._candidates(scope, None), key=lambda c: c.id)
        listing = "\n".join(f"{c.id}: {c.name} ({c.label})" for c in candidates)
        prompt = f"Question: {question}\nToday: {now.date().isoformat()}\nFactors and options:\n{listing}"
        try:
            result = self.llm.complete(LLM_SYSTEM, prompt, max_tokens=200)
        except LLMUnavailable as exc:
            return replace(base, fallback_reason=str(exc), llm_down=True)
        parsed = parse_llm_route(result.text, {c.id: c for c in candidates})
        if parsed is None:
            return replace(base, fallback_reason="the LLM answer was not a usable route")
        intent, entities, value, direction, since = parsed
        return Route(question, intent, entities, value, direction, since or base.since, "llm")


def question_router(driver: Driver, embedder: Embedder, llm: LLMClient | None) -> Router:
    """The router for a question: the learned one, or the LLM's over it when ``llm`` is given (the
    caller may use it; pass None otherwise) and configured — the LLM is optional (SPEC §LLM)."""
    learned = LearnedRouter(driver, embedder)
    return LLMRouter(llm, learned) if llm is not None and llm.configured else learned


def parse_llm_route(
    text: str, candidates: dict[str, _Candidate]
) -> (
    tuple[Intent, tuple[LinkedEntity, ...], float | None, Literal["improve", "lower"], datetime | None] | None
):
    """The model's JSON as a route, or None if it is not one (unknown intent, ids it may not see)."""
    match = re.search(r"\{.*\}", text, re.S)
    if match is None:
        return None
    try:
        data = json.loads(match.group(0))
    except json.JSONDecodeError:
        return None
    if not isinstance(data, dict) or data.get("intent") not in INTENTS:
        return None
    ids = data.get("entities") or []
    if not isinstance(ids, list) or any(not isinstance(i, str) or i not in candidates for i in ids):
        return None
    entities = tuple(
        LinkedEntity(i, candidates[i].label, candidates[i].name, 1.0, "llm") for i in dict.fromkeys(ids)
    )
    value = _llm_value(data.get("value"))
    if value is False:
        return None  # NaN, Infinity or an integer past float's range: no factor holds them
    direction: Literal["improve", "lower"] = "lower" if data.get("direction") == "lower" else "improve"
    since = None
    if isinstance(data.get("since"), str):
        try:
            since = datetime.fromisoformat(data["since"])
        except ValueError:
            return None
        if since.tzinfo is None:
            since = since.replace(tzinfo=UTC)
        if storable_problem(since) is not None:
            return None  # an offset beyond +-18:00 the graph cannot compare against
    intent: Intent = data["intent"]
    return intent, entities, value, direction, since


def _llm_value(value: Any) -> float | Literal[False] | None:
    """The model's ``value`` as a float; None when it gives no number (null, text, a boolean,
    which Python counts as an int); False when the number is none a factor can hold (json reads
    NaN and Infinity, and an integer of any length, which ``float()`` refuses with OverflowError)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:
        return False
    return number if math.isfinite(number) else False
