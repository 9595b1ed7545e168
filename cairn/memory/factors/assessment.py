"""The assessment summary (docs/design.md §Assessment): categories, overall figures, decision tier,
capabilities.

The summary depends on who asks (a manager sees the budget factor, staff do not, and a count
must never include a node the caller cannot see), so it is not stored: it is computed per call
from the state that ``update_factor`` keeps on every factor node in the same transaction as
the journal write. That makes it current by construction and cheap — one aggregate over the
factor nodes, one closure over the visible options, one index-ordered lookup of the latest
entry — and nothing scans the journal.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from neo4j import Driver

from cairn.graph import factors as queries
from cairn.memory.factors.dependencies import DepNode
from cairn.memory.factors.journal import unconfirmed_inferences
from cairn.memory.factors.models import NodeRef, UnconfirmedInference, day, fmt, iso, native
from cairn.memory.factors.templates import HIDDEN, names, quote
from cairn.memory.factors.traversal import downstream, visible_options
from cairn.policy.scope import Scope
from cairn.runtime.database import read

Tier = Literal["exploratory", "low_risk", "medium_risk"]
TIER_TEXT = {
    "exploratory": "exploratory (explore, do not decide yet)",
    "low_risk": "low risk (pilot decisions under €25k)",
    "medium_risk": "medium risk (decisions of €25k-€100k)",
}
NEXT_UNLOCKS = 5


def decision_tier(avg_confidence: float, assessed: int, total: int) -> Tier:
    """The tiers of docs/design.md §Assessment: medium risk at confidence >= 0.75 and completeness
    >= 0.50, low risk at >= 0.60 and >= 0.30, otherwise exploratory. Both bounds are inclusive;
    the average is rounded to six places first so that 0.75 computed as 0.7499999999 is still 0.75.
    """
    completeness = assessed / total if total > 0 else 0.0
    confidence = round(avg_confidence, 6)
    if confidence >= 0.75 and completeness >= 0.50:
        return "medium_risk"
    if confidence >= 0.60 and completeness >= 0.30:
        return "low_risk"
    return "exploratory"


@dataclass(frozen=True)
class CategorySummary:
    category: str
    completeness: float
    avg_confidence: float
    factor_count: int  # assessed
    total_factors: int
    last_updated: datetime | None

    def evidence(self) -> dict[str, Any]:
        return {
            "category": self.category,
            "completeness": self.completeness,
            "avg_confidence": self.avg_confidence,
            "factor_count": self.factor_count,
            "total_factors": self.total_factors,
            "last_updated": iso(self.last_updated),
        }


@dataclass(frozen=True)
class Overall:
    total_factors_assessed: int
    total_factors: int
    completeness: float
    avg_confidence: float
    decision_tier: Tier

    def evidence(self) -> dict[str, Any]:
        return {
            "total_factors_assessed": self.total_factors_assessed,
            "total_factors": self.total_factors,
            "completeness": self.completeness,
            "avg_confidence": self.avg_confidence,
            "decision_tier": self.decision_tier,
        }


@dataclass(frozen=True)
class Unlock:
    """An option not ready yet, with what stands in the way (hidden prerequisites only flagged)."""

    id: str
    name: str
    status: str
    missing: tuple[tuple[str, float | None, float], ...]  # (factor name, value, threshold)
    has_hidden: bool  # whether it also needs something the caller cannot see, never how many

    def evidence(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "status": self.status,
            "missing": [{"factor": n, "value": v, "threshold": t} for n, v, t in self.missing],
            "has_hidden_prerequisites": self.has_hidden,
        }


@dataclass(frozen=True)
class LastConversation:
    topic: str
    factor_id: str
    timestamp: datetime
    excerpt: str
    session_id: str | None
    session_title: str | None
    value: float | None
    confidence: float | None

    def evidence(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "factor_id": self.factor_id,
            "timestamp": iso(self.timestamp),
            "excerpt": self.excerpt,
            "session_id": self.session_id,
            "session_title": self.session_title,
        }


@dataclass(frozen=True)
class Assessment:
    categories: tuple[CategorySummary, ...]
    overall: Overall
    can_evaluate: tuple[NodeRef, ...]  # the ready options
    next_unlocks: tuple[Unlock, ...]
    last_conversation: LastConversation | None
    unconfirmed: tuple[UnconfirmedInference, ...]

    def evidence(self) -> dict[str, Any]:
        return {
            "categories": {c.category: c.evidence() for c in self.categories},
            "overall": self.overall.evidence(),
            "capabilities": {
                "can_evaluate": [
                    {"id": n.id, "name": n.name, "masked": list(n.masked)} for n in self.can_evaluate
                ],
                "cannot_evaluate_yet": [u.evidence() for u in self.next_unlocks],
            },
            "last_conversation": None
            if self.last_conversation is None
            else self.last_conversation.evidence(),
            "unconfirmed_inferences": [u.evidence() for u in self.unconfirmed],
        }

    @property
    def status_answer(self) -> str:
        return status_text(self)

    @property
    def continuity_answer(self) -> str:
        return continuity_text(self)


def _categories(driver: Driver, scope: Scope) -> tuple[list[CategorySummary], Overall]:
    records = read(driver, queries.CATEGORY_FIGURES, scope.cypher_params())
    cats = []
    for r in records:
        total, assessed = int(r["total"]), int(r["assessed"])
        cats.append(
            CategorySummary(
                category=str(r["category"]),
                completeness=round(assessed / total, 4) if total else 0.0,
                avg_confidence=round(float(r["confidence_sum"]) / assessed, 4) if assessed else 0.0,
                factor_count=assessed,
                total_factors=total,
                last_updated=native(r["last_updated"]),
            )
        )
    total = sum(c.total_factors for c in cats)
    assessed = sum(c.factor_count for c in cats)
    conf_sum = sum(float(r["confidence_sum"]) for r in records)
    avg = conf_sum / assessed if assessed else 0.0
    overall = Overall(
        total_factors_assessed=assessed,
        total_factors=total,
        completeness=round(assessed / total, 4) if total else 0.0,
        avg_confidence=round(avg, 4),
        decision_tier=decision_tier(avg, assessed, total),
    )
    return cats, overall


def capabilities(driver: Driver, scope: Scope) -> tuple[tuple[NodeRef, ...], tuple[Unlock, ...]]:
    """Options ready now, and the next unlocks: blocked options with the fewest, smallest gaps first."""
    options = visible_options(driver, scope)
    graph = downstream(driver, scope, options)
    statuses = graph.statuses()
    ready = tuple(
        sorted(
            (NodeRef.of(graph.nodes[o]) for o in options if statuses.get(o) == "ready"),
            key=lambda n: n.name,
        )
    )
    pending = []
    for o in options:
        if statuses.get(o) == "ready" or o not in graph.nodes:
            continue
        found, hidden = graph.blockers(o)
        missing = tuple(
            (graph.nodes[b.edge.target].name, b.value, b.edge.min_value) for b in found if b.edge.target
        )
        gap = sum(
            _shortfall(graph.nodes[b.edge.target], b.value, b.edge.min_value) for b in found if b.edge.target
        )
        pending.append(
            (
                len(missing),
                gap,
                graph.nodes[o].name,
                Unlock(o, graph.nodes[o].name, statuses[o], missing, bool(hidden)),
            )
        )
    pending.sort(key=lambda p: (p[0], p[1], p[2]))
    return ready, tuple(p[3] for p in pending[:NEXT_UNLOCKS])


def _shortfall(node: DepNode, value: float | None, threshold: float) -> float:
    """How far below its threshold a prerequisite is, as a fraction of its scale."""
    span = node.scale.span if node.scale is not None else 100.0
    return (
        max(0.0, threshold - (value if value is not None else (node.scale.low if node.scale else 0.0))) / span
    )


def last_conversation(driver: Driver, scope: Scope) -> LastConversation | None:
    records = read(driver, queries.LAST_CONVERSATION, scope.cypher_params())
    if not records:
        return None
    r = records[0]
    return LastConversation(
        topic=str(r["topic"] or r["factor_id"]),
        factor_id=str(r["factor_id"]),
        timestamp=native(r["timestamp"]),
        excerpt=str(r["rationale"] or "")[:100],
        session_id=r["session_id"],
        session_title=r["session_title"],
        value=r["value"],
        confidence=r["confidence"],
    )


def assessment_summary(driver: Driver, scope: Scope) -> Assessment:
    """The whole summary as the caller may see it."""
    cats, overall = _categories(driver, scope)
    ready, unlocks = capabilities(driver, scope)
    return Assessment(
        categories=tuple(cats),
        overall=overall,
        can_evaluate=ready,
        next_unlocks=unlocks,
        last_conversation=last_conversation(driver, scope),
        unconfirmed=tuple(unconfirmed_inferences(driver, scope)),
    )


def _unlock_text(u: Unlock) -> str:
    parts = [f"{n} ≥ {fmt(t)}, now {fmt(v)}" for n, v, t in u.missing]
    if u.has_hidden:
        parts.append(HIDDEN)
    return f"{u.name} (needs {'; '.join(parts)})" if parts else u.name


def status_text(a: Assessment) -> str:
    """The "where are we?" answer (docs/design.md §Assessment)."""
    lines = ["Here's what we've mapped out:"]
    for c in a.categories:
        title = c.category.replace("_", " ").title()
        lines.append(
            f"- {title}: {round(c.completeness * 100)}% mapped ({c.factor_count} of {c.total_factors}), "
            f"{round(c.avg_confidence * 100)}% confident"
        )
    o = a.overall
    lines.append(
        f"Overall: {o.total_factors_assessed} of {o.total_factors} factors assessed, average confidence "
        f"{o.avg_confidence:.2f}; decision tier: {TIER_TEXT[o.decision_tier]}."
    )
    if a.can_evaluate:
        lines.append(f"What you can do now: {names([n.name for n in a.can_evaluate])}.")
    else:
        lines.append("Nothing can be evaluated yet.")
    if a.next_unlocks:
        lines.append("Next unlocks: " + "; ".join(_unlock_text(u) for u in a.next_unlocks) + ".")
    if o.decision_tier == "exploratory":
        lines.append("Next step: continue mapping factors to unlock pilot decisions.")
    elif o.decision_tier == "low_risk":
        lines.append(
            "Next step: continue mapping and confirming to unlock medium-risk decisions (€25k-€100k)."
        )
    return "\n".join(lines)


def continuity_text(a: Assessment) -> str:
    """The "where were we?" answer (docs/design.md §Assessment): the last conversation and what is
    still unconfirmed."""
    last = a.last_conversation
    if last is None:
        return "We have not talked about any factor yet."
    session = f', "{last.session_title}"' if last.session_title else ""
    lines = [
        f"Last time ({day(last.timestamp)}{session}) we talked about {last.topic}: {quote(last.excerpt)}. "
        f"It stands at {fmt(last.value)}"
        + ("" if last.confidence is None else f" (confidence {last.confidence:g})")
        + "."
    ]
    if a.unconfirmed:
        items = [f"{u.name} ({fmt(u.value)})" for u in a.unconfirmed[:5]]
        lines.append(f"Still unconfirmed: {names(items)}. Shall we confirm them?")
    if a.next_unlocks:
        lines.append(f"Closest next unlock: {_unlock_text(a.next_unlocks[0])}.")
    return "\n".join(lines)
