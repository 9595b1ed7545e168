"""Which factor question a free-text question asks: a classifier learnt from labelled examples.

The labelled set (fixtures/factors/questions.yaml, section ``questions``) is the training data;
its ``holdout`` section is never trained on and measures how the router generalises. The model is
a multinomial logistic regression over the question's sentence embedding (all-MiniLM-L6-v2, the
project's embedder) joined with one feature per intent pattern below (does the wording match it),
so a cue the patterns know (catalog.py) ("what if", "since") and the meaning of words they do not know
("feasible", "big picture") both count. It is trained at start-up — a few hundred short
sentences, about a second, deterministic (lbfgs, fixed seed) — and cached per embedder: no model
file is shipped. Cross-validated accuracy (stratified k-fold) is reported by ``cross_validate``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import cast

import numpy as np
from numpy.typing import NDArray
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import confusion_matrix
from sklearn.model_selection import StratifiedKFold

from cairn.memory.factors.catalog import INTENT_PATTERNS, INTENTS
from cairn.memory.factors.models import Intent
from cairn.runtime.embedder import Embedder
from cairn.runtime.settings import REPO_ROOT
from cairn.schema import unique_yaml

LABELLED_QUESTIONS = REPO_ROOT / "fixtures" / "factors" / "questions.yaml"
# Inverse regularisation and the weight of a pattern hit beside the unit-length embedding:
# chosen by stratified 5-fold cross-validation on the training set (bench/results/factor_router.md).
C = 8.0
PATTERN_WEIGHT = 0.3
SEED = 0
FOLDS = 5


class LabelledQuestion(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: str = Field(min_length=1)
    intent: Intent
    entities: list[str] = Field(default_factory=list)
    value: float | None = None
    since: AwareDatetime | None = None


class LabelledSet(BaseModel):
    """``questions`` train the intent model; ``holdout`` is never trained on (it measures)."""

    model_config = ConfigDict(extra="forbid")
    now: AwareDatetime
    role: str
    questions: list[LabelledQuestion] = Field(min_length=1)
    holdout: list[LabelledQuestion] = Field(default_factory=list)


def load_labelled(path: Path = LABELLED_QUESTIONS) -> LabelledSet:
    return LabelledSet.model_validate(unique_yaml.load_file(path))


def pattern_hits(texts: Sequence[str]) -> NDArray[np.float32]:
    """One column per intent pattern: 1 where the wording matches it."""
    return np.array(
        [[1.0 if p.search(t) else 0.0 for _, p in INTENT_PATTERNS] for t in texts], dtype=np.float32
    ).reshape(len(texts), len(INTENT_PATTERNS))


def _features(embedder: Embedder, texts: Sequence[str]) -> NDArray[np.float32]:
    return np.hstack([embedder.embed(list(texts)), PATTERN_WEIGHT * pattern_hits(texts)])


def _model() -> LogisticRegression:
    return LogisticRegression(C=C, max_iter=5000, random_state=SEED)


@dataclass(frozen=True)
class IntentGuess:
    intent: Intent
    confidence: float  # the model's probability of that intent


class IntentClassifier:
    """Trained once from labelled questions; predicts an intent and its probability."""

    def __init__(self, embedder: Embedder, examples: Sequence[LabelledQuestion]) -> None:
        self.embedder = embedder
        self.model = _model().fit(
            _features(embedder, [q.text for q in examples]), [q.intent for q in examples]
        )
        self.size = len(examples)

    def predict(self, question: str, vector: NDArray[np.float32] | None = None) -> IntentGuess:
        """The intent of ``question``; ``vector``: its embedding when the caller already has it
        (the router embeds the question with its remainder in one pass)."""
        if vector is None:
            features = _features(self.embedder, [question])
        else:
            features = np.hstack([vector.reshape(1, -1), PATTERN_WEIGHT * pattern_hits([question])])
        probabilities = self.model.predict_proba(features)[0]
        best = int(np.argmax(probabilities))
        return IntentGuess(cast(Intent, str(self.model.classes_[best])), float(probabilities[best]))


@lru_cache(maxsize=4)
def intent_classifier(embedder: Embedder, path: Path = LABELLED_QUESTIONS) -> IntentClassifier:
    """The classifier trained on the shipped labelled set, once per process and embedder."""
    return IntentClassifier(embedder, load_labelled(path).questions)


@dataclass(frozen=True)
class CrossValidation:
    folds: int
    accuracy: float
    fold_accuracies: tuple[float, ...]
    confusion: tuple[tuple[int, ...], ...]  # rows: labelled intent, columns: predicted (INTENTS order)


def cross_validate(
    embedder: Embedder, examples: Sequence[LabelledQuestion], folds: int = FOLDS
) -> CrossValidation:
    """Stratified k-fold accuracy of the intent model on ``examples`` (shuffled with a fixed seed)."""
    x = _features(embedder, [q.text for q in examples])
    y = np.array([q.intent for q in examples])
    predicted = np.empty_like(y)
    scores = []
    for train, test in StratifiedKFold(folds, shuffle=True, random_state=SEED).split(x, y):
        predicted[test] = _model().fit(x[train], y[train]).predict(x[test])
        scores.append(float(np.mean(predicted[test] == y[test])))
    matrix = confusion_matrix(y, predicted, labels=list(INTENTS))
    return CrossValidation(
        folds,
        round(float(np.mean(predicted == y)), 4),
        tuple(round(s, 4) for s in scores),
        tuple(tuple(int(v) for v in row) for row in matrix),
    )
