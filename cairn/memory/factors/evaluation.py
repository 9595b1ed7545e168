"""Accuracy of a router on the labelled questions (fixtures/factors/questions.yaml).

The file has a training set (``questions``: the intent model is trained on it, the entity
threshold was calibrated on it) and a ``holdout`` never trained on; report both. Three scores,
each over a whole set: intent (exact), entities (the set of linked ids equals the labelled set,
including "none"), and joint (intent and entities and the arguments all right: the what-if value
where the question states one, and for a "what changed" question the start of its window — none
when it names none). The misses are kept so a regression can be read.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from cairn.memory.factors.intents import LabelledQuestion
from cairn.memory.factors.models import Route
from cairn.memory.factors.router import Router
from cairn.policy.scope import Scope


@dataclass(frozen=True)
class Miss:
    question: LabelledQuestion
    route: Route

    def evidence(self) -> dict[str, Any]:
        return {
            "text": self.question.text,
            "expected": {
                "intent": self.question.intent,
                "entities": self.question.entities,
                "value": self.question.value,
                "since": None if self.question.since is None else self.question.since.isoformat(),
            },
            "got": {
                "intent": self.route.intent,
                "entities": [e.id for e in self.route.entities],
                "value": self.route.value,
                "since": None if self.route.since is None else self.route.since.isoformat(),
            },
        }


@dataclass(frozen=True)
class RouterReport:
    total: int
    intent_accuracy: float
    entity_accuracy: float
    joint_accuracy: float
    misses: tuple[Miss, ...]

    def evidence(self) -> dict[str, Any]:
        return {
            "total": self.total,
            "intent_accuracy": self.intent_accuracy,
            "entity_accuracy": self.entity_accuracy,
            "joint_accuracy": self.joint_accuracy,
            "misses": [m.evidence() for m in self.misses],
        }


def evaluate(router: Router, scope: Scope, questions: list[LabelledQuestion], now: datetime) -> RouterReport:
    """Route every question as ``scope`` at ``now`` and score it against its labels."""
    intents = entities = joint = 0
    misses = []
    for q in questions:
        route = router.route(q.text, scope, now)
        intent_ok = route.intent == q.intent
        entity_ok = {e.id for e in route.entities} == set(q.entities)
        value_ok = q.value is None or route.value == q.value
        since_ok = q.intent != "what_changed" or route.since == q.since
        intents += intent_ok
        entities += entity_ok
        joint += intent_ok and entity_ok and value_ok and since_ok
        if not (intent_ok and entity_ok and value_ok and since_ok):
            misses.append(Miss(q, route))
    n = max(1, len(questions))
    return RouterReport(n, round(intents / n, 4), round(entities / n, 4), round(joint / n, 4), tuple(misses))
