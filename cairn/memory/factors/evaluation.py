"""Accuracy of a router on the labelled questions (fixtures/factors/questions.yaml).

The file has a development set (``questions``: the router's patterns and entity threshold were
calibrated on it) and a ``holdout`` written after they were frozen; report both. Three scores,
each over a whole set: intent (exact), entities (the set of linked ids equals
the labelled set, including "none"), and joint (intent and entities and — where the question
states one — the what-if value all right). The misses are kept so a regression can be read.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from cairn.memory.factors.router import Intent, Route, Router
from cairn.policy.scope import Scope
from cairn.runtime.settings import REPO_ROOT

LABELLED_QUESTIONS = REPO_ROOT / "fixtures" / "factors" / "questions.yaml"


class LabelledQuestion(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: str = Field(min_length=1)
    intent: Intent
    entities: list[str] = Field(default_factory=list)
    value: float | None = None


class LabelledSet(BaseModel):
    model_config = ConfigDict(extra="forbid")
    now: AwareDatetime
    role: str
    questions: list[LabelledQuestion] = Field(min_length=1)
    holdout: list[LabelledQuestion] = Field(default_factory=list)


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
            },
            "got": {
                "intent": self.route.intent,
                "entities": [e.id for e in self.route.entities],
                "value": self.route.value,
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


def load_labelled(path: Path = LABELLED_QUESTIONS) -> LabelledSet:
    return LabelledSet.model_validate(yaml.safe_load(path.read_text(encoding="utf-8")))


def evaluate(router: Router, scope: Scope, questions: list[LabelledQuestion], now: datetime) -> RouterReport:
    """Route every question as ``scope`` at ``now`` and score it against its labels."""
    intents = entities = joint = 0
    misses = []
    for q in questions:
        route = router.route(q.text, scope, now)
        intent_ok = route.intent == q.intent
        entity_ok = {e.id for e in route.entities} == set(q.entities)
        value_ok = q.value is None or route.value == q.value
        intents += intent_ok
        entities += entity_ok
        joint += intent_ok and entity_ok and value_ok
        if not (intent_ok and entity_ok and value_ok):
            misses.append(Miss(q, route))
    n = max(1, len(questions))
    return RouterReport(n, round(intents / n, 4), round(entities / n, 4), round(joint / n, 4), tuple(misses))
