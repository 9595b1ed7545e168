"""The factor questions as one table: each entry says how it is recognised and how it is answered.

One ``FactorQuestion`` per intent: the wording pattern (a feature of the intent model in
intents.py and what ``residual`` strips before linking an entity), the label a vague subject
is preferred to resolve to, whether the question is about a factor or option at all, the
handler that answers it from the graph with a named ``Answered``, and which context (history,
dependencies) an LLM answer gets. A new question is a new ``Intent`` value, an entry here and
its labelled questions; the router, the dispatch and the evaluation read this table.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from neo4j import Driver

from cairn.memory.factors import questions
from cairn.memory.factors.assessment import assessment_summary
from cairn.memory.factors.models import Intent, Route
from cairn.memory.factors.timeframe import DEFAULT_WINDOW
from cairn.policy.scope import Scope


@dataclass(frozen=True)
class Answered:
    """A handler's answer: the templated text, its evidence, the factors an LLM context is built on."""

    text: str
    evidence: dict[str, Any]
    context_factors: list[str]


Handler = Callable[[Driver, Scope, Route, datetime], Answered | None]  # None: no subject to answer on


@dataclass(frozen=True)
class FactorQuestion:
    intent: Intent
    pattern: re.Pattern[str]
    handler: Handler
    preferred: Literal["Factor", "Option"] | None = None  # a vague subject resolves to this label
    links_entities: bool = True  # False: about the whole assessment, nothing to link
    include_history: bool = False  # the LLM context's parts
    include_dependencies: bool = False
    options_go_to: Intent | None = None  # asked about an option, it is answered as this question


def _subject(route: Route, label: str | None = None) -> str | None:
    subject = route.entities[0] if route.entities else None
    return subject.id if subject is not None and label in (None, subject.label) else None


def _why_blocker(driver: Driver, scope: Scope, route: Route, now: datetime) -> Answered | None:
    if (subject := _subject(route)) is None:
        return None
    blocked = questions.why_blocked(driver, scope, subject)
    return Answered(blocked.answer, blocked.evidence(), [b.factor.id for b in blocked.blockers])


def _why_value(driver: Driver, scope: Scope, route: Route, now: datetime) -> Answered | None:
    if (subject := _subject(route, "Factor")) is None:
        return None
    value = questions.why_value(driver, scope, subject)
    return Answered(value.answer, value.evidence(), [subject, *(d.factor.id for d in value.dependencies)])


def _what_if(driver: Driver, scope: Scope, route: Route, now: datetime) -> Answered | None:
    if (subject := _subject(route, "Factor")) is None:
        return None
    result = questions.what_if(driver, scope, subject, route.value, route.direction)
    return Answered(result.answer, result.evidence(), [subject])


def _what_changed(driver: Driver, scope: Scope, route: Route, now: datetime) -> Answered:
    factors = [e.id for e in route.entities if e.label == "Factor"] or None
    changed = questions.what_changed(driver, scope, route.since or now - DEFAULT_WINDOW, None, factors)
    return Answered(changed.answer, changed.evidence(), [c.factor.id for c in changed.changes])


def _status(driver: Driver, scope: Scope, route: Route, now: datetime) -> Answered:
    a = assessment_summary(driver, scope)
    return Answered(a.status_answer, a.evidence(), [])


def _where_were_we(driver: Driver, scope: Scope, route: Route, now: datetime) -> Answered:
    a = assessment_summary(driver, scope)
    last = [a.last_conversation.factor_id] if a.last_conversation else []
    return Answered(a.continuity_answer, a.evidence(), last)


_P = re.compile
QUESTIONS: tuple[FactorQuestion, ...] = (
    FactorQuestion(
        "why_blocker",
        _P(
            r"\bwhy\s+(?:can'?t|cannot|can\s+not|couldn'?t|aren'?t|isn'?t|won'?t|don'?t)\s+we\b|"
            r"\bwhat(?:'s|\s+is|\s+are)?\s+(?:blocking|stopping|holding|preventing|keeping)\b|"
            r"\bprevents?\b|\boff\s+the\s+table\b|\bnot\s+(?:possible|ready|able)\b|\bunable\b|"
            r"\bout\s+of\s+reach\b|\bprerequisites?\b|\brequirements?\b|\bwhat\s+do\s+we\s+(?:still\s+)?need\b|"
            r"\bwhat\s+stands\s+between\b|\bblock(?:er|ers|ing|ed|s)?\b|\bin\s+the\s+way\b|\bobstacles?\b|"
            r"\bmissing\b",
            re.I,
        ),
        _why_blocker,
        preferred="Option",
        include_history=True,
        include_dependencies=True,
    ),
    FactorQuestion(
        "why_value",
        _P(
            r"\bwhy\b|\bhow\s+did\s+we\s+(?:arrive|get|come)\b|\bcome\s+from\b|\bexplain|"
            r"\breasoning\b|\bjustif|\brationale\b|\bbasis\b|\bhow\s+(?:was|were)\b.*\b(?:assessed|determined|"
            r"worked\s+out|calculated|rated|scored)\b",
            re.I,
        ),
        _why_value,
        preferred="Factor",
        include_history=True,
        include_dependencies=True,
        options_go_to="why_blocker",  # an option's "value" is its readiness
    ),
    FactorQuestion(
        "what_if",
        _P(
            r"\bwhat\s+if\b|\bsuppos(?:e|ing)\b|\bassum(?:e|ing)\b|\bimagine\b|\bscenario\b|\bhypothetical|"
            r"\bwhat\s+(?:would|could)\s+(?:we\s+)?(?:unlock|gain)\b|\bbecomes?\s+(?:possible|feasible)\b|"
            r"\bwould\s+(?:it|that|this)\s+unlock\b|\bopens?\s+up\b|\bun(?:lock|block)(?:s|ed)?\b|\bpicture\b|"
            r"\bby\s+(?:raising|improving|increasing|boosting|lowering)\b|"
            r"\bif\b.*\b(?:improve[sd]?|raise[sd]?|rise[sn]?|rose|increase[sd]?|boost(?:ed)?|climb(?:s|ed)?|"
            r"reach(?:ed|es)?|hit|got|get|had|were|was|went|go(?:es)?|drop(?:ped|s)?|lower(?:ed)?|"
            r"fell|falls?|slip(?:s|ped)?|sank|sinks?|lose|lost|double[sd]?|invest(?:ed)?|hire[sd]?)\b",
            re.I,
        ),
        _what_if,
        preferred="Factor",
        include_dependencies=True,
    ),
    FactorQuestion(
        "what_changed",
        _P(
            r"\bchanged?\b|\bchanges\b|\bwhat(?:'s|\s+is)\s+new\b|\bupdate[sd]?\b|\bevolved?\b|"
            r"\brevis(?:e|ed|ions?)\b|\bdifferent\s+(?:since|from)\b|\bsince\b|\bmoved?\b|\bshift(?:ed)?\b|"
            r"\blately\b|\brecent(?:ly)?\b",
            re.I,
        ),
        _what_changed,
        preferred="Factor",
        include_history=True,
    ),
    FactorQuestion(
        "status",
        _P(
            r"\bwhere\s+(?:are|do)\s+we\b|\bstatus\b|\boverview\b|\bsummar(?:y|ise|ize)\b|\boverall\b|"
            r"\bbig\s+picture\b|\bhow\s+far\s+along\b|\bprogress\b|\bdecision\s+tier\b|\bmedium[- ]risk\b|"
            r"\bwhat\s+can\s+we\s+(?:evaluate|do|start)\s+(?:now|right\s+now|already|today)\b|"
            r"\bhow\s+ready\s+are\s+we\b|\bstands?\b",
            re.I,
        ),
        _status,
        links_entities=False,
    ),
    FactorQuestion(
        "where_were_we",
        _P(
            r"\bwhere\s+(?:were|did)\s+we\b|\bpick\s+up\s+where\b|\bleft\s+off\b|"
            r"\blast\s+(?:time|session|conversation|call|meeting|chat|talk)\b|"
            r"\bprevious\s+(?:session|conversation|call|meeting|discussion)\b|\bremind\s+me\b|\brecap\b|"
            r"\bwhat\s+were\s+we\s+(?:talking|discussing|working)\b|\bearlier\s+(?:discussion|session|chat)\b",
            re.I,
        ),
        _where_were_we,
        links_entities=False,
        include_history=True,
    ),
)
QUESTION = {q.intent: q for q in QUESTIONS}
INTENTS: tuple[Intent, ...] = tuple(QUESTION)
INTENT_PATTERNS: tuple[tuple[Intent, re.Pattern[str]], ...] = tuple((q.intent, q.pattern) for q in QUESTIONS)


def answer(
    driver: Driver, scope: Scope, route: Route, now: datetime
) -> tuple[FactorQuestion, Answered | None]:
    """The question that answers the route (an option's "why value" is a "why blocked"), and its answer."""
    entry = QUESTION[route.intent]
    if entry.options_go_to and route.entities and route.entities[0].label == "Option":
        entry = QUESTION[entry.options_go_to]
    return entry, entry.handler(driver, scope, route, now)
