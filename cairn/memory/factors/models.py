"""Value objects of the factor journal (docs/design.md §Factor journal), shared by services, resolvers, CLI.

They carry only what the caller may see: a service builds them from ACL-filtered rows, so
nothing downstream (templates, GraphQL, the CLI) needs to know about policy. ``evidence()``
turns each into JSON-safe data (ISO dates) for the structured half of an answer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

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
    """A value as people write it: 20 rather than 20.0, 0.75 as is, None as 'not assessed'."""
    if value is None:
        return "not assessed"
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


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
    op: str
    timestamp: datetime
    previous_value: float | None
    new_value: float | None
    rationale: str
    excerpt: str
    confidence: float | None
    session_id: str | None
    inference_status: str | None
    influenced_by: tuple[str, ...] = ()
    has_hidden_influences: bool = False  # whether, never how many
    details: dict[str, Any] = field(default_factory=dict)

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
        }


@dataclass(frozen=True)
class FactorState:
    """A factor's value, confidence and status now, or as of a past moment (from the journal)."""

    id: str
    name: str
    category: str
    scale: Scale
    value: float | None
    confidence: float | None
    status: str | None
    last_updated: datetime | None
    aliases: tuple[str, ...] = ()
    as_of: datetime | None = None
    entry: JournalEntryView | None = None

    def evidence(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "category": self.category,
            "scale": str(self.scale),
            "value": self.value,
            "confidence": self.confidence,
            "inference_status": self.status,
            "last_updated": iso(self.last_updated),
            "as_of": iso(self.as_of),
            "entry": self.entry.evidence() if self.entry else None,
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
