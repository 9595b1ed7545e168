"""Value objects of the factor journal (docs/design.md §Factor journal), shared by services, resolvers, CLI.

They carry only what the caller may see: a service builds them from ACL-filtered rows, so
nothing downstream (templates, GraphQL, the CLI) needs to know about policy. ``evidence()``
turns each into JSON-safe data (ISO dates) for the structured half of an answer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, Protocol

from cairn.errors import CairnError

Status = Literal["ready", "blocked", "undetermined"]
INFERENCE_STATUSES: tuple[str, ...] = ("unconfirmed", "confirmed", "user_provided")
# What a caller is told about prerequisites it cannot see: whether there are any, never how many.
# Both phrases are fixed (plural whatever the number), so no answer varies with the hidden count.
HIDDEN_PREREQUISITES = "prerequisites you cannot see"
HIDDEN_NOTICE = "Some prerequisites are not visible to you"

_SCALE = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s*(?:-|\.\.|to)\s*(-?\d+(?:\.\d+)?)\s*$")


class FactorError(CairnError):
    """A refused factor operation (see docs/design.md §Errors); ``where`` names the field at fault
    and leaves as ``extensions.field``. On the CLI every factor refusal is bad input (exit 2).

    Unknown and invisible factors get the same NOT_FOUND answer: telling them apart would leak
    that a hidden factor exists.
    """

    where_key = "field"

    @property
    def field(self) -> str | None:
        return self.where


def unknown_factor(factor_id: str) -> FactorError:
    """The one NOT_FOUND for a factor, whether it does not exist or the caller cannot see it."""
    return FactorError("NOT_FOUND", f"unknown factor '{factor_id}'", "factor_id")


def aware(value: datetime, name: str) -> datetime:
    """``value`` itself; INVALID_INPUT naming ``name`` when it carries no time zone."""
    if value.tzinfo is None or value.utcoffset() is None:
        raise FactorError("INVALID_INPUT", f"{name} must carry a time zone (e.g. 2024-10-28T10:30:00Z)", name)
    return value


@dataclass(frozen=True)
class Scale:
    """The closed range a factor's value lives in, written ``"0-100"`` in fixtures and on nodes."""

    low: float
    high: float

    @classmethod
    def parse(cls, text: str) -> Scale:
        match = _SCALE.match(text)
        if match is None:
            raise ValueError(f"scale {text!r} is not of the form 'low-high', e.g. '0-100'")
        low, high = float(match.group(1)), float(match.group(2))
        if not low < high:
            raise ValueError(f"scale {text!r} must have low < high")
        return cls(low, high)

    @property
    def span(self) -> float:
        return self.high - self.low

    def contains(self, value: float) -> bool:
        return self.low <= value <= self.high

    def __str__(self) -> str:
        return f"{fmt(self.low)}-{fmt(self.high)}"


def fmt(value: float | None) -> str:
    """A value as people write it: 20 rather than 20.0, 0.75 as is, None as 'not assessed'.
    A whole number of 16 digits or more keeps its exponent (1e+308, not 309 digits: a value
    outside a factor's scale is quoted in the refusal, red-team pass 21)."""
    if value is None:
        return "not assessed"
    whole = float(value).is_integer() and abs(value) < 1e15
    return str(int(value)) if whole else f"{value:g}"


def native(value: Any) -> Any:
    """Neo4j temporal values as Python ones (aware datetimes)."""
    return value.to_native() if hasattr(value, "to_native") else value


def iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def day(value: datetime | None) -> str:
    return "never" if value is None else value.date().isoformat()


@dataclass(frozen=True)
class JournalEntryView:
    id: str
    factor_id: str
    op: str | None  # None, like every field below: the caller's scope masks it (``masked``)
    timestamp: datetime | None
    previous_value: float | None
    new_value: float | None
    rationale: str | None
    excerpt: str | None
    confidence: float | None
    session_id: str | None
    inference_status: str | None
    influenced_by: tuple[str, ...] = ()
    has_hidden_influences: bool = False  # whether, never how many
    details: dict[str, Any] = field(default_factory=dict)
    # What entries are ordered by (never shown): the time where the caller's scope shows it, else
    # None, then the journal sequence (docs/design.md §Policy module, "Ordering by a maskable field").
    order_at: datetime | None = None
    seq: int = 0
    # The stored fields the caller's scope hides (docs/design.md §Policy module): shown as null.
    masked: tuple[str, ...] = ()

    def newest_key(self) -> tuple[bool, float, int, str]:
        """Sort key, largest for the newest: never reads a time the caller may not see."""
        at = self.order_at
        return (at is not None, 0.0 if at is None else at.timestamp(), self.seq, self.id)

    def evidence(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "factor_id": self.factor_id,
            "op": self.op,
            "timestamp": iso(self.timestamp),
            "previous_value": self.previous_value,
            "new_value": self.new_value,
            "rationale": self.rationale,
            "excerpt": self.excerpt,
            "confidence": self.confidence,
            "session_id": self.session_id,
            "inference_status": self.inference_status,
            "influenced_by": list(self.influenced_by),
            "has_hidden_influences": self.has_hidden_influences,
            "details": self.details,
            "masked": list(self.masked),
        }


@dataclass(frozen=True)
class FactorState:
    """A factor's value, confidence and status now, or as of a past moment (from the journal)."""

    id: str
    name: str | None  # None, like category and scale: the caller's scope masks it (``masked``)
    category: str | None
    scale: Scale | None
    value: float | None
    confidence: float | None
    status: str | None
    last_updated: datetime | None
    aliases: tuple[str, ...] | None = ()  # None: masked, as name
    as_of: datetime | None = None
    entry: JournalEntryView | None = None
    masked: tuple[str, ...] = ()  # the factor's stored fields the caller's scope hides

    @property
    def label(self) -> str:
        """What prose calls the factor: its name, or its id (which the caller sees) where the
        scope hides the name (docs/design.md §Policy module)."""
        return self.name or self.id

    def evidence(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "category": self.category,
            "scale": None if self.scale is None else str(self.scale),
            "value": self.value,
            "confidence": self.confidence,
            "inference_status": self.status,
            "last_updated": iso(self.last_updated),
            "as_of": iso(self.as_of),
            "entry": self.entry.evidence() if self.entry else None,
            "masked": list(self.masked),
        }


@dataclass(frozen=True)
class UnconfirmedInference:
    id: str
    name: str
    value: float | None
    confidence: float | None
    evidence_count: int
    latest_mention: datetime | None

    def evidence(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "value": self.value,
            "confidence": self.confidence,
            "evidence_count": self.evidence_count,
            "latest_mention": iso(self.latest_mention),
        }


# -- routed questions ---------------------------------------------------------------------------

Intent = Literal["why_blocker", "why_value", "what_if", "what_changed", "status", "where_were_we"]


@dataclass(frozen=True)
class LinkedEntity:
    id: str
    label: str
    name: str
    score: float
    method: Literal["lexical", "fuzzy", "vector", "journal", "llm"]
    masked: tuple[str, ...] = ()  # ("name",) where the caller's scope hides the name (shown as the id)

    def evidence(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "label": self.label,
            "name": self.name,
            "score": round(self.score, 4),
            "method": self.method,
        }


@dataclass(frozen=True)
class Route:
    question: str
    intent: Intent
    entities: tuple[LinkedEntity, ...]
    value: float | None
    direction: Literal["improve", "lower"]
    since: datetime | None
    router: str  # "learned" or "llm"
    fallback_reason: str | None = None
    # The LLM router found the model unreachable (LLMUnavailable): the answer does not ask it
    # again, so a question waits for one failed call, not two (cairn/memory/factors/ask.py).
    llm_down: bool = False

    def evidence(self) -> dict[str, Any]:
        return {
            "intent": self.intent,
            "entities": [e.evidence() for e in self.entities],
            "value": self.value,
            "direction": self.direction,
            "since": None if self.since is None else self.since.isoformat(),
            "router": self.router,
            "fallback_reason": self.fallback_reason,
        }


# The factor questions' answers (what cairn/memory/factors/questions.py returns and the templates
# render) live here, a layer below both, so neither imports the other (docs/design.md §Factor questions).


class Named(Protocol):
    """A node of the dependency graph as an answer names it (dependencies.DepNode is one)."""

    @property
    def id(self) -> str: ...
    @property
    def label(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def masked(self) -> tuple[str, ...]: ...


@dataclass(frozen=True)
class NodeRef:
    """A factor or option as an answer cites it. Where the caller's scope hides its name, ``name``
    holds its id (which the caller sees) and ``masked`` says so: ``("name",)``, decided by the
    field rule alone (docs/design.md §Policy module), never by whether a name is stored."""

    id: str
    label: str
    name: str
    masked: tuple[str, ...] = ()

    @classmethod
    def of(cls, node: Named) -> NodeRef:
        return cls(node.id, node.label, node.name, node.masked)

    def evidence(self) -> dict[str, Any]:
        return {"id": self.id, "label": self.label, "name": self.name, "masked": list(self.masked)}


@dataclass(frozen=True)
class Prerequisite:
    """One unmet prerequisite reached from the subject; ``via`` is the chain from the subject."""

    factor: NodeRef
    value: float | None
    threshold: float
    confidence: float | None
    required_by: NodeRef
    via: tuple[NodeRef, ...]
    entries: tuple[JournalEntryView, ...]

    def evidence(self) -> dict[str, Any]:
        return {
            "factor": self.factor.evidence(),
            "value": self.value,
            "threshold": self.threshold,
            "confidence": self.confidence,
            "required_by": self.required_by.evidence(),
            "via": [n.evidence() for n in self.via],
            "entries": [e.evidence() for e in self.entries],
        }


@dataclass(frozen=True)
class WhyBlocked:
    subject: NodeRef
    status: Status
    blockers: tuple[Prerequisite, ...]
    hidden_required_by: tuple[NodeRef, ...]  # each visible node that needs something hidden, once
    prerequisites_reached: int  # visible prerequisite edges reached
    answer: str

    @property
    def has_hidden_prerequisites(self) -> bool:
        return bool(self.hidden_required_by)

    def evidence(self) -> dict[str, Any]:
        return {
            "subject": self.subject.evidence(),
            "status": self.status,
            "blockers": [b.evidence() for b in self.blockers],
            "has_hidden_prerequisites": self.has_hidden_prerequisites,
            "hidden_required_by": [n.evidence() for n in self.hidden_required_by],
            "prerequisites_reached": self.prerequisites_reached,
        }


@dataclass(frozen=True)
class Dependency:
    factor: NodeRef
    value: float | None
    confidence: float | None
    threshold: float
    weight: float
    drag: float  # weight x normalised shortfall from the top of the scale
    met: bool
    last_entry: JournalEntryView | None
    changed_after_subject: bool

    def evidence(self) -> dict[str, Any]:
        return {
            "factor": self.factor.evidence(),
            "value": self.value,
            "confidence": self.confidence,
            "threshold": self.threshold,
            "weight": self.weight,
            "drag": self.drag,
            "met": self.met,
            "last_entry": None if self.last_entry is None else self.last_entry.evidence(),
            "changed_after_subject": self.changed_after_subject,
        }


@dataclass(frozen=True)
class Dependent:
    node: NodeRef
    threshold: float
    met: bool

    def evidence(self) -> dict[str, Any]:
        return {"node": self.node.evidence(), "threshold": self.threshold, "met": self.met}


@dataclass(frozen=True)
class WhyValue:
    factor: FactorState
    history: tuple[JournalEntryView, ...]
    dependencies: tuple[Dependency, ...]  # ranked, largest drag first
    has_hidden_dependencies: bool  # whether it also depends on something hidden, never how many
    dependents: tuple[Dependent, ...]
    answer: str

    def evidence(self) -> dict[str, Any]:
        return {
            "factor": self.factor.evidence(),
            "history": [e.evidence() for e in self.history],
            "dependencies": [d.evidence() for d in self.dependencies],
            "has_hidden_dependencies": self.has_hidden_dependencies,
            "dependents": [d.evidence() for d in self.dependents],
        }


@dataclass(frozen=True)
class StatusChange:
    node: NodeRef
    before: Status
    after: Status

    def evidence(self) -> dict[str, Any]:
        return {"node": self.node.evidence(), "before": self.before, "after": self.after}


@dataclass(frozen=True)
class Step:
    """One rung of the ladder: at ``value``, these nodes become ready (beyond the rungs below)."""

    value: float
    unblocked: tuple[NodeRef, ...]

    def evidence(self) -> dict[str, Any]:
        return {"value": self.value, "unblocked": [n.evidence() for n in self.unblocked]}


@dataclass(frozen=True)
class StillBlocked:
    """A direct dependent whose threshold the new value meets but which stays blocked elsewhere."""

    node: NodeRef
    threshold: float
    blockers: tuple[tuple[NodeRef, float | None, float], ...]  # (factor, value, threshold)

    def evidence(self) -> dict[str, Any]:
        return {
            "node": self.node.evidence(),
            "threshold": self.threshold,
            "blockers": [{"factor": f.evidence(), "value": v, "threshold": t} for f, v, t in self.blockers],
        }


@dataclass(frozen=True)
class WhatIf:
    factor: NodeRef
    current: float | None
    value: float
    unblocked: tuple[NodeRef, ...]
    blocked: tuple[NodeRef, ...]
    other_changes: tuple[StatusChange, ...]
    thresholds_met: tuple[tuple[NodeRef, float], ...]
    thresholds_lost: tuple[tuple[NodeRef, float], ...]
    still_blocked: tuple[StillBlocked, ...]
    steps: tuple[Step, ...]
    answer: str

    def evidence(self) -> dict[str, Any]:
        return {
            "factor": self.factor.evidence(),
            "current": self.current,
            "value": self.value,
            "unblocked": [n.evidence() for n in self.unblocked],
            "blocked": [n.evidence() for n in self.blocked],
            "other_changes": [c.evidence() for c in self.other_changes],
            "thresholds_met": [{"node": n.evidence(), "threshold": t} for n, t in self.thresholds_met],
            "thresholds_lost": [{"node": n.evidence(), "threshold": t} for n, t in self.thresholds_lost],
            "still_blocked": [s.evidence() for s in self.still_blocked],
            "steps": [s.evidence() for s in self.steps],
            "hypothetical": True,
        }


@dataclass(frozen=True)
class FactorChange:
    factor: NodeRef
    before: float | None
    after: float | None
    entries: tuple[JournalEntryView, ...]  # oldest first

    def evidence(self) -> dict[str, Any]:
        return {
            "factor": self.factor.evidence(),
            "before": self.before,
            "after": self.after,
            "entries": [e.evidence() for e in self.entries],
        }


@dataclass(frozen=True)
class WhatChanged:
    since: datetime
    until: datetime | None
    changes: tuple[FactorChange, ...]
    answer: str

    def evidence(self) -> dict[str, Any]:
        return {
            "since": iso(self.since),
            "until": iso(self.until),
            "changes": [c.evidence() for c in self.changes],
        }
