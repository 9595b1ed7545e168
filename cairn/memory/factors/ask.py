"""Answer a free-text question about the assessment: route it, run the matching traversal, answer.

The templated answer is always computed (it is the evidence's own summary). When an LLM is
configured and the caller's role may use it, the model is given the question and the context of
context.py — built in note 003's priority order within the token budget — and its answer
replaces the template; if it cannot answer, the template stands and the reason is recorded.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from neo4j import Driver

from cairn.memory.factors import questions
from cairn.memory.factors.assessment import assessment_summary
from cairn.memory.factors.context import DEFAULT_MAX_TOKENS, FactorContext, build_context
from cairn.memory.factors.router import Route, Router
from cairn.memory.factors.timeframe import DEFAULT_WINDOW
from cairn.policy.scope import Scope
from cairn.runtime.llm import LLMClient, LLMUnavailable

LLM_SYSTEM = (
    "You answer questions about an organisation's AI-readiness assessment using only the context "
    "lines given. Cite values and dates from them; say so when the context does not answer. "
    "Never mention identifiers. At most six sentences."
)
NOT_UNDERSTOOD = (
    "I could not tell which factor or option the question is about. Try naming it, e.g. "
    '"Why can\'t we do predictive maintenance?" or "Why is data quality so low?".'
)


@dataclass(frozen=True)
class FactorAnswer:
    route: Route
    answer: str
    evidence: dict[str, Any]
    context: FactorContext | None
    llm_used: bool
    fallback_reason: str | None


def _dispatch(
    driver: Driver, scope: Scope, route: Route, now: datetime
) -> tuple[str, dict[str, Any], list[str], bool, bool]:
    """(answer, evidence, factor ids for the LLM context, include history, include dependencies)."""
    factors = [e.id for e in route.entities if e.label == "Factor"]
    subject = route.entities[0] if route.entities else None
    if route.intent == "status":
        a = assessment_summary(driver, scope)
        return a.status_answer, a.evidence(), [], False, False
    if route.intent == "where_were_we":
        a = assessment_summary(driver, scope)
        last = [a.last_conversation.factor_id] if a.last_conversation else []
        return a.continuity_answer, a.evidence(), last, True, False
    if route.intent == "what_changed":
        since = route.since or now - DEFAULT_WINDOW
        changed = questions.what_changed(driver, scope, since, None, factors or None)
        return changed.answer, changed.evidence(), [c.factor.id for c in changed.changes], True, False
    if subject is None:
        return NOT_UNDERSTOOD, {}, [], False, False
    if route.intent == "why_blocker" or (route.intent == "why_value" and subject.label == "Option"):
        blocked = questions.why_blocked(driver, scope, subject.id)
        return blocked.answer, blocked.evidence(), [b.factor.id for b in blocked.blockers], True, True
    if route.intent == "what_if" and subject.label == "Factor":
        result = questions.what_if(driver, scope, subject.id, route.value, route.direction)
        return result.answer, result.evidence(), [subject.id], False, True
    if subject.label != "Factor":
        return NOT_UNDERSTOOD, {}, [], False, False
    value = questions.why_value(driver, scope, subject.id)
    return (
        value.answer,
        value.evidence(),
        [subject.id, *(d.factor.id for d in value.dependencies)],
        True,
        True,
    )


def answer_question(
    driver: Driver,
    scope: Scope,
    question: str,
    *,
    router: Router,
    now: datetime | None = None,
    llm: LLMClient | None = None,
    max_tokens: int = DEFAULT_MAX_TOKENS,
) -> FactorAnswer:
    """Route and answer ``question`` as ``scope`` sees the graph; pass ``llm`` only if the role may use it."""
    moment = now or datetime.now(UTC)
    route = router.route(question, scope, moment)
    answer, evidence, factor_ids, with_history, with_deps = _dispatch(driver, scope, route, moment)
    if llm is None or not llm.configured or not factor_ids:
        return FactorAnswer(route, answer, evidence, None, False, None)
    context = build_context(
        driver,
        scope,
        factor_ids,
        include_history=with_history,
        include_dependencies=with_deps,
        max_tokens=max_tokens,
    )
    try:
        result = llm.complete_sync(LLM_SYSTEM, f"{question}\n{context.text}", max_tokens=400)
    except LLMUnavailable as exc:
        return FactorAnswer(route, answer, evidence, context, False, str(exc))
    return FactorAnswer(route, result.text, evidence, context, True, None)
