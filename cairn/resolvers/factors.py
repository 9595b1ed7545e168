"""Factor journal over GraphQL: thin resolvers over cairn.memory.factors, every field behind the passport.

Domain services are synchronous (they take the sync driver) and run in a worker thread. Each
answer type carries the templated ``answer`` and the structured ``evidence`` (JSON) the answer
was composed from; the most used parts are typed as well.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

import strawberry
from strawberry.scalars import JSON

from cairn.errors import in_range
from cairn.memory.factors import questions
from cairn.memory.factors.ask import answer_question
from cairn.memory.factors.assessment import Assessment, assessment_summary
from cairn.memory.factors.journal import (
    MAX_HISTORY,
    Recalculation,
    confirm_factor,
    factor_state,
    history,
    recalculate_factor,
    update_factor,
)
from cairn.memory.factors.models import FactorError, FactorState, JournalEntryView, NodeRef, WhyBlocked, iso
from cairn.memory.factors.router import question_router
from cairn.resolvers.context import run_domain
from cairn.resolvers.permissions import READ, WRITE, Ctx, caller_of
from cairn.runtime.embedder import get_embedder
from cairn.runtime.llm import LLMClient


@strawberry.type(description="A factor journal entry as the caller may see it; masked fields are null.")
class FactorJournalEntry:
    id: strawberry.ID
    factor_id: str
    op: str | None
    timestamp: str | None
    previous_value: float | None
    new_value: float | None
    rationale: str | None
    excerpt: str | None
    confidence: float | None
    session_id: str | None
    inference_status: str | None
    influenced_by: list[str]
    has_hidden_influences: bool = strawberry.field(
        description="Whether influencing factors you cannot see exist (never how many)."
    )
    masked: list[str] = strawberry.field(description="The stored fields your role may not see.")

    @classmethod
    def of(cls, e: JournalEntryView) -> FactorJournalEntry:
        return cls(
            id=strawberry.ID(e.id),
            factor_id=e.factor_id,
            op=e.op,
            timestamp=iso(e.timestamp),
            previous_value=e.previous_value,
            new_value=e.new_value,
            rationale=e.rationale,
            excerpt=e.excerpt,
            confidence=e.confidence,
            session_id=e.session_id,
            inference_status=e.inference_status,
            influenced_by=list(e.influenced_by),
            has_hidden_influences=e.has_hidden_influences,
            masked=list(e.masked),
        )


@strawberry.type(description="A factor as the caller may see it; masked fields are null.")
class Factor:
    id: strawberry.ID
    name: str | None
    category: str | None
    scale: str | None
    aliases: list[str] | None
    value: float | None
    confidence: float | None
    inference_status: str | None
    last_updated: str | None
    as_of: str | None
    current_entry: FactorJournalEntry | None
    masked: list[str] = strawberry.field(description="The stored fields your role may not see.")

    @classmethod
    def of(cls, s: FactorState) -> Factor:
        return cls(
            id=strawberry.ID(s.id),
            name=s.name,
            category=s.category,
            scale=None if s.scale is None else str(s.scale),
            aliases=None if s.aliases is None else list(s.aliases),
            value=s.value,
            confidence=s.confidence,
            inference_status=s.status,
            last_updated=iso(s.last_updated),
            as_of=iso(s.as_of),
            current_entry=FactorJournalEntry.of(s.entry) if s.entry else None,
            masked=list(s.masked),
        )


@strawberry.type(
    description="A factor or option an answer cites; a name your role may not see is its id, named in masked."
)
class FactorNodeRef:
    id: strawberry.ID
    label: str
    name: str
    masked: list[str] = strawberry.field(
        description="The fields your role may not see (name: shown as the id)."
    )

    @classmethod
    def of(cls, n: NodeRef) -> FactorNodeRef:
        return cls(id=strawberry.ID(n.id), label=n.label, name=n.name, masked=list(n.masked))


@strawberry.type
class AssessmentCategory:
    category: str
    completeness: float
    avg_confidence: float
    factor_count: int
    total_factors: int
    last_updated: str | None


@strawberry.type
class AssessmentSummary:
    categories: list[AssessmentCategory]
    total_factors_assessed: int
    total_factors: int
    completeness: float
    avg_confidence: float
    decision_tier: str
    can_evaluate: list[FactorNodeRef]
    answer: str = strawberry.field(description="The templated 'where are we?' answer.")
    continuity: str = strawberry.field(description="The templated 'where were we?' answer.")
    evidence: JSON

    @classmethod
    def of(cls, a: Assessment) -> AssessmentSummary:
        o = a.overall
        return cls(
            categories=[
                AssessmentCategory(
                    category=c.category,
                    completeness=c.completeness,
                    avg_confidence=c.avg_confidence,
                    factor_count=c.factor_count,
                    total_factors=c.total_factors,
                    last_updated=iso(c.last_updated),
                )
                for c in a.categories
            ],
            total_factors_assessed=o.total_factors_assessed,
            total_factors=o.total_factors,
            completeness=o.completeness,
            avg_confidence=o.avg_confidence,
            decision_tier=o.decision_tier,
            can_evaluate=[FactorNodeRef.of(n) for n in a.can_evaluate],
            answer=a.status_answer,
            continuity=a.continuity_answer,
            evidence=cast(JSON, a.evidence()),
        )


@strawberry.type
class FactorBlocker:
    factor: FactorNodeRef
    value: float | None
    threshold: float
    required_by: FactorNodeRef
    last_set: str | None


@strawberry.type
class WhyBlockedAnswer:
    subject: FactorNodeRef
    status: str
    blockers: list[FactorBlocker]
    has_hidden_prerequisites: bool = strawberry.field(
        description="Whether prerequisites you cannot see are also required (never how many)."
    )
    answer: str
    evidence: JSON


@strawberry.type
class WhyValueAnswer:
    factor: Factor
    history: list[FactorJournalEntry]
    answer: str
    evidence: JSON


@strawberry.type
class WhatIfAnswer:
    factor: FactorNodeRef
    current: float | None
    value: float
    unblocked: list[FactorNodeRef]
    blocked: list[FactorNodeRef]
    answer: str
    evidence: JSON


@strawberry.type
class WhatChangedAnswer:
    since: str
    factors: list[FactorNodeRef]
    entries: int
    answer: str
    evidence: JSON


@strawberry.type
class FactorQuestionAnswer:
    intent: str
    entities: list[FactorNodeRef]
    router: str
    answer: str
    llm_used: bool
    fallback_reason: str | None
    context_tokens: int | None
    evidence: JSON
    route: JSON


@strawberry.type
class RecalculationAnswer:
    value: float | None
    confidence: float | None
    contradictions: int
    written: bool
    answer: str
    evidence: JSON

    @classmethod
    def of(cls, r: Recalculation) -> RecalculationAnswer:
        return cls(
            value=r.value,
            confidence=r.confidence,
            contradictions=len(r.contradictions),
            written=r.entry is not None,
            answer=r.answer,
            evidence=cast(JSON, r.evidence()),
        )


@strawberry.input
class FactorUpdateInput:
    factor_id: strawberry.ID
    value: float
    rationale: str
    confidence: float
    excerpt: str = ""
    influenced_by: list[strawberry.ID] = strawberry.field(default_factory=list)
    session_id: str | None = None
    inference_status: str = "unconfirmed"


def _blocked(b: WhyBlocked) -> WhyBlockedAnswer:
    return WhyBlockedAnswer(
        subject=FactorNodeRef.of(b.subject),
        status=b.status,
        blockers=[
            FactorBlocker(
                factor=FactorNodeRef.of(p.factor),
                value=p.value,
                threshold=p.threshold,
                required_by=FactorNodeRef.of(p.required_by),
                last_set=iso(p.entries[0].timestamp) if p.entries else None,
            )
            for p in b.blockers
        ],
        has_hidden_prerequisites=b.has_hidden_prerequisites,
        answer=b.answer,
        evidence=cast(JSON, b.evidence()),
    )


@strawberry.type
class FactorQuery:
    @strawberry.field(permission_classes=READ, description="A factor now, or as the journal had it at asOf.")
    async def factor(self, info: Ctx, id: strawberry.ID, as_of: datetime | None = None) -> Factor | None:
        driver, scope = info.context.services.driver, caller_of(info).scope
        try:
            state = await run_domain(lambda: factor_state(driver, scope, str(id), as_of))
        except FactorError as exc:
            if exc.code == "NOT_FOUND":
                return None
            raise
        return Factor.of(state)

    @strawberry.field(permission_classes=READ, description="A factor's journal, newest first.")
    async def journal(
        self, info: Ctx, factor_id: strawberry.ID, limit: int = 20, since: datetime | None = None
    ) -> list[FactorJournalEntry]:
        driver, scope = info.context.services.driver, caller_of(info).scope
        n = in_range("limit", limit, 1, MAX_HISTORY)
        entries = await run_domain(lambda: history(driver, scope, str(factor_id), limit=n, since=since))
        return [FactorJournalEntry.of(e) for e in entries]

    @strawberry.field(permission_classes=READ, description="Completeness, confidence, tier and capabilities.")
    async def assessment(self, info: Ctx) -> AssessmentSummary:
        driver, scope = info.context.services.driver, caller_of(info).scope
        return AssessmentSummary.of(await run_domain(lambda: assessment_summary(driver, scope)))

    @strawberry.field(permission_classes=READ, description="Unmet prerequisites of an option, transitively.")
    async def why_blocked(self, info: Ctx, id: strawberry.ID) -> WhyBlockedAnswer:
        driver, scope = info.context.services.driver, caller_of(info).scope
        return _blocked(await run_domain(lambda: questions.why_blocked(driver, scope, str(id))))

    @strawberry.field(permission_classes=READ, description="A factor's history and what it rests on.")
    async def why_value(self, info: Ctx, id: strawberry.ID) -> WhyValueAnswer:
        driver, scope = info.context.services.driver, caller_of(info).scope
        result = await run_domain(lambda: questions.why_value(driver, scope, str(id)))
        return WhyValueAnswer(
            factor=Factor.of(result.factor),
            history=[FactorJournalEntry.of(e) for e in result.history],
            answer=result.answer,
            evidence=cast(JSON, result.evidence()),
        )

    @strawberry.field(
        permission_classes=READ, description="Hypothetically set a factor (nothing is written): what changes."
    )
    async def what_if(
        self, info: Ctx, factor_id: strawberry.ID, value: float | None = None, lower: bool = False
    ) -> WhatIfAnswer:
        driver, scope = info.context.services.driver, caller_of(info).scope
        result = await run_domain(
            lambda: questions.what_if(driver, scope, str(factor_id), value, "lower" if lower else "improve"),
        )
        return WhatIfAnswer(
            factor=FactorNodeRef.of(result.factor),
            current=result.current,
            value=result.value,
            unblocked=[FactorNodeRef.of(n) for n in result.unblocked],
            blocked=[FactorNodeRef.of(n) for n in result.blocked],
            answer=result.answer,
            evidence=cast(JSON, result.evidence()),
        )

    @strawberry.field(
        permission_classes=READ, description="Journal entries since a moment, grouped by factor."
    )
    async def what_changed(
        self,
        info: Ctx,
        since: datetime,
        until: datetime | None = None,
        factor_ids: list[strawberry.ID] | None = None,
    ) -> WhatChangedAnswer:
        driver, scope = info.context.services.driver, caller_of(info).scope
        ids = None if factor_ids is None else [str(i) for i in factor_ids]
        result = await run_domain(lambda: questions.what_changed(driver, scope, since, until, ids))
        return WhatChangedAnswer(
            since=since.isoformat(),
            factors=[FactorNodeRef.of(ch.factor) for ch in result.changes],
            entries=sum(len(ch.entries) for ch in result.changes),
            answer=result.answer,
            evidence=cast(JSON, result.evidence()),
        )

    @strawberry.field(permission_classes=READ, description="A free-text question, routed and answered.")
    async def question(
        self, info: Ctx, text: str, now: datetime | None = None, use_llm: bool = False
    ) -> FactorQuestionAnswer:
        services = info.context.services
        llm = LLMClient(services.settings)

        caller = caller_of(info)

        def work() -> Any:
            # Built in the worker thread: the first use loads the embedding model (seconds).
            allowed = llm if use_llm and caller.profile.can_use_llm else None
            router = question_router(services.driver, get_embedder(), allowed)
            return answer_question(
                services.driver, caller.scope, text[:1000], router=router, now=now, llm=allowed
            )

        result = await run_domain(work)
        return FactorQuestionAnswer(
            intent=result.route.intent,
            entities=[
                FactorNodeRef(id=strawberry.ID(e.id), label=e.label, name=e.name, masked=list(e.masked))
                for e in result.route.entities
            ],
            router=result.route.router,
            answer=result.answer,
            llm_used=result.llm_used,
            fallback_reason=result.fallback_reason or result.route.fallback_reason,
            context_tokens=None if result.context is None else result.context.tokens,
            evidence=cast(JSON, result.evidence),
            route=cast(JSON, result.route.evidence()),
        )


@strawberry.type
class FactorMutation:
    @strawberry.mutation(permission_classes=WRITE, description="Journal a new value for a factor.")
    async def update_factor(self, info: Ctx, input: FactorUpdateInput) -> FactorJournalEntry:
        driver, scope = info.context.services.driver, caller_of(info).scope
        entry = await run_domain(
            lambda: update_factor(
                driver,
                scope,
                str(input.factor_id),
                input.value,
                rationale=input.rationale,
                confidence=input.confidence,
                excerpt=input.excerpt,
                influenced_by=[str(i) for i in input.influenced_by],
                session_id=input.session_id,
                status=input.inference_status,
            ),
        )
        return FactorJournalEntry.of(entry)

    @strawberry.mutation(permission_classes=WRITE, description="Confirm a factor's value, or correct it.")
    async def confirm_factor(
        self,
        info: Ctx,
        factor_id: strawberry.ID,
        value: float | None = None,
        excerpt: str = "",
        session_id: str | None = None,
    ) -> FactorJournalEntry:
        driver, scope = info.context.services.driver, caller_of(info).scope
        entry = await run_domain(
            lambda: confirm_factor(
                driver, scope, str(factor_id), value, excerpt=excerpt, session_id=session_id
            ),
        )
        return FactorJournalEntry.of(entry)

    @strawberry.mutation(
        permission_classes=WRITE, description="Re-derive value and confidence from all journal evidence."
    )
    async def recalculate_factor(self, info: Ctx, factor_id: strawberry.ID) -> RecalculationAnswer:
        driver, scope = info.context.services.driver, caller_of(info).scope
        return RecalculationAnswer.of(
            await run_domain(lambda: recalculate_factor(driver, scope, str(factor_id)))
        )
