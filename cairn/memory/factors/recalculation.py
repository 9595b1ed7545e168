"""The deterministic rule that synthesises a factor's value and confidence from all its evidence.

No LLM is needed, so the rule is written down here (summary in docs/design.md §Recalculation):

* evidence = every journal entry of the factor that states a value from a conversation or the
  user (ops ``update``, ``correct``, ``confirm``); earlier recalculations are derived, not
  evidence, so they are left out (no feedback loop);
* recency ``r_i = 0.5 ** (age_i / 30 days)``, with ages measured from the **newest evidence**,
  not the wall clock, so recalculating twice gives the same answer next month;
* weight ``w_i = confidence_i * r_i``; value = ``sum(w_i v_i) / sum(w_i)`` (clamped to the scale);
* support = ``1 - prod(1 - w_i)``: independent, fresh, confident evidence adds up (noisy-or);
* spread = weighted standard deviation of the values around the result, as a fraction of the
  scale span (0 when all agree, at most 0.5);
* confidence = ``support * (1 - 2 * spread)``: disagreement lowers confidence, and evidence split
  evenly between the two ends of the scale leaves none;
* a **contradiction** is any pair of evidence entries whose values differ by at least a quarter
  of the scale span; every such pair is reported, oldest first.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from cairn.memory.factors.models import Scale, iso

HALF_LIFE_DAYS = 30.0
CONTRADICTION_FRACTION = 0.25
EVIDENCE_OPS = ("update", "correct", "confirm")
RULE_TEXT = (
    "weights = confidence x 0.5^(age/30 days) from the newest evidence; value = weighted mean; "
    "confidence = (1 - prod(1 - w)) x (1 - 2 x weighted spread / scale span); "
    "pairs differing by >= 25% of the scale are contradictions"
)


@dataclass(frozen=True)
class Evidence:
    entry_id: str
    timestamp: datetime
    value: float
    confidence: float
    excerpt: str = ""


@dataclass(frozen=True)
class Contradiction:
    older: Evidence
    newer: Evidence
    difference: float

    def evidence(self) -> dict[str, Any]:
        return {
            "older": {
                "entry_id": self.older.entry_id,
                "timestamp": iso(self.older.timestamp),
                "value": self.older.value,
                "excerpt": self.older.excerpt,
            },
            "newer": {
                "entry_id": self.newer.entry_id,
                "timestamp": iso(self.newer.timestamp),
                "value": self.newer.value,
                "excerpt": self.newer.excerpt,
            },
            "difference": self.difference,
        }


@dataclass(frozen=True)
class Synthesis:
    value: float
    confidence: float
    weights: dict[str, float]
    spread: float
    contradictions: tuple[Contradiction, ...]


def synthesise(evidence: list[Evidence], scale: Scale) -> Synthesis | None:
    """Apply the rule; None when there is no evidence at all."""
    if not evidence:
        return None
    ordered = sorted(evidence, key=lambda e: (e.timestamp, e.entry_id))
    newest = ordered[-1].timestamp
    weights = {
        e.entry_id: e.confidence * 0.5 ** ((newest - e.timestamp).total_seconds() / 86400.0 / HALF_LIFE_DAYS)
        for e in ordered
    }
    total = sum(weights.values())
    if total <= 0.0:  # every entry had confidence 0: fall back to the plain mean, with no confidence
        value = sum(e.value for e in ordered) / len(ordered)
        return Synthesis(_clamp(value, scale), 0.0, weights, 0.0, _contradictions(ordered, scale))
    value = sum(weights[e.entry_id] * e.value for e in ordered) / total
    variance = sum(weights[e.entry_id] * (e.value - value) ** 2 for e in ordered) / total
    spread = min(0.5, math.sqrt(variance) / scale.span)
    support = 1.0 - math.prod(1.0 - min(w, 1.0) for w in weights.values())
    confidence = max(0.0, support * (1.0 - 2.0 * spread))
    return Synthesis(
        value=round(_clamp(value, scale), 2),
        confidence=round(confidence, 3),
        weights={k: round(v, 4) for k, v in weights.items()},
        spread=round(spread, 4),
        contradictions=_contradictions(ordered, scale),
    )


def _clamp(value: float, scale: Scale) -> float:
    return min(scale.high, max(scale.low, value))


def _contradictions(ordered: list[Evidence], scale: Scale) -> tuple[Contradiction, ...]:
    limit = CONTRADICTION_FRACTION * scale.span
    found = []
    for i, older in enumerate(ordered):
        for newer in ordered[i + 1 :]:
            gap = abs(newer.value - older.value)
            if gap >= limit:
                found.append(Contradiction(older, newer, gap))
    return tuple(found)
