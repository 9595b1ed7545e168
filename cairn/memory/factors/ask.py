"""Answer a free-text question about the assessment: route it, run its handler (catalog.py), answer.

The templated answer is always computed (it is the evidence's own summary). When an LLM is
configured and the caller's role may use it, the model is given the question and the context of
context.py — built in priority order within the token budget (docs/design.md §Factor context) —
and its answer replaces the template; if it cannot answer, the template stands and the reason is recorded.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from neo4j import Driver

from cairn.memory.factors import catalog
from cairn.memory.factors.context import DEFAULT_MAX_TOKENS, FactorContext, build_context
from cairn.memory.factors.models import Route
from cairn.memory.factors.router import Router
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
    entry, answered = catalog.answer(driver, scope, route, moment)
    if answered is None:
        return FactorAnswer(route, NOT_UNDERSTOOD, {}, None, False, None)
    answer, evidence = answered.text, answered.evidence
    if llm is None or not llm.configured or not answered.context_factors:
        return FactorAnswer(route, answer, evidence, None, False, None)
    if route.llm_down:  # the router just waited for it to fail: the template stands, same reason
        return FactorAnswer(route, answer, evidence, None, False, route.fallback_reason)
    context = build_context(
        driver,
        scope,
        answered.context_factors,
        include_history=entry.include_history,
        include_dependencies=entry.include_dependencies,
        max_tokens=max_tokens,
    )
    try:
        result = llm.complete(LLM_SYSTEM, f"{question}\n{context.text}", max_tokens=400)
    except LLMUnavailable as exc:
        return FactorAnswer(route, answer, evidence, context, False, str(exc))
    return FactorAnswer(route, result.text, evidence, context, True, None)
