"""The answer-quality checks shared by every decision record the why answers are measured on.

An expected-causes file (``fixtures/*-expected-causes.yaml``) lists, for each anchor and role,
the direct causes the role may see and the relation each edge carries (null: the anchor is not
visible to the role). Each anchor is asked as each role against the real Neo4j with the default
budget; cause recall (share of the expected causes the answer names, with their relation, title
and key in the text) and precision (share of the named causes that are expected) must both be
1.0 for every role, no withheld cause may surface, and causes are listed oldest first.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest
from neo4j import Driver

from cairn.memory.ask import AskResult, AskService
from cairn.memory.templater import relation_words
from cairn.policy.passport import headers_for, verify
from cairn.policy.preselector import AnchorNotVisible
from cairn.policy.profiles import PolicyRegistry
from cairn.runtime.llm import LLMClient
from cairn.runtime.settings import REPO_ROOT, Settings
from cairn.schema import unique_yaml

ROLES = ("staff", "manager", "director", "exec")

Expected = dict[str, dict[str, dict[str, str] | None]]  # anchor -> role -> cause id -> relation
Answers = dict[tuple[str, str], AskResult | None]  # (anchor, role) -> answer, None when hidden


def expected_causes(name: str) -> Expected:
    """The anchors of ``fixtures/<name>-expected-causes.yaml``."""
    path = REPO_ROOT / "fixtures" / f"{name}-expected-causes.yaml"
    anchors: Expected = unique_yaml.load_file(path)["anchors"]
    return anchors


def ask_every_anchor(driver: Driver, settings: Settings, anchors: Expected, traces: Path) -> Answers:
    """Every anchor asked as every role once (None when the role may not see the anchor)."""
    registry = PolicyRegistry.load(settings.policy_file)
    service = AskService(driver, LLMClient(settings), traces)
    found: Answers = {}
    for role in ROLES:
        caller = verify(headers_for(registry, role), registry, None)
        for anchor in anchors:
            try:
                found[(anchor, role)] = service.ask(caller, anchor)
            except AnchorNotVisible:
                found[(anchor, role)] = None
    return found


def check_general_shape(anchors: Expected, relations: frozenset[str]) -> None:
    """At least 20 anchors, the given relation kinds, anchors with several causes, partial visibility."""
    assert len(anchors) >= 20
    stated = {r for per in anchors.values() for causes in per.values() if causes for r in causes.values()}
    assert relations <= stated, relations - stated
    many = [a for a, per in anchors.items() if len(per["exec"] or {}) >= 3]
    assert len(many) >= 5
    partial = [a for a, per in anchors.items() if per["staff"] is not None and per["staff"] != per["exec"]]
    assert len(partial) >= 3


def named(result: AskResult) -> dict[str, str]:
    """The causes an answer names: listed in the envelope and spelled out in its text."""
    text = result.envelope["text"]
    return {
        c["id"]: c["relation"]
        for c in result.envelope["causes"]
        if f"[{c['id']}]" in text and c["title"] in text and relation_words(c["relations"]) in text
    }


def check_recall_and_precision(answers: Answers, anchors: Expected, role: str) -> None:
    """Every expected cause named with its relation, nothing else named, nothing clipped, the
    answer valid, and the causes listed oldest first (undated last)."""
    expected_total = named_right = named_total = 0
    misses: list[str] = []
    for anchor, per in anchors.items():
        result = answers[(anchor, role)]
        expected = per[role]
        if expected is None:
            assert result is None, f"{anchor} should not be visible to {role}"
            continue
        assert result is not None, f"{anchor} should be visible to {role}"
        found = named(result)
        expected_total += len(expected)
        named_total += len(found)
        named_right += sum(1 for i, rel in found.items() if expected.get(i) == rel)
        if found != expected:
            misses.append(f"{anchor}: named {sorted(found.items())}, expected {sorted(expected.items())}")
        assert result.envelope["more_causes"] == 0
        assert result.meta["validator"]["error_count"] == 0, result.meta["validator"]["warnings"]
        dates = [(c["date"] is None, c["date"] or "") for c in result.envelope["causes"]]
        assert dates == sorted(dates), f"{anchor} as {role}: causes not oldest first"
    recall = named_right / expected_total if expected_total else 1.0
    precision = named_right / named_total if named_total else 1.0
    print(f"\n{role}: cause recall {recall:.3f}, precision {precision:.3f} over {expected_total} causes")
    assert (recall, precision) == (1.0, 1.0), "\n".join(misses)


def check_nothing_hidden_surfaces(answers: Answers, anchors: Expected, role: str) -> None:
    """No cause withheld from ``role`` and no record it may not see is named in an answer, and the
    anchor is printed once, as the subject, never as its own cause."""
    everything = {i for per in anchors.values() for causes in per.values() if causes for i in causes}
    for anchor, per in anchors.items():
        result = answers[(anchor, role)]
        if result is None:
            continue
        hidden = {i for causes in per.values() if causes for i in causes} - set(per[role] or {})
        hidden |= {i for i in everything if answers.get((i, role), "absent") is None}
        text = result.envelope["text"]
        assert not [i for i in hidden if i in text], f"{anchor} as {role} names a hidden record"
        assert anchor not in {c["id"] for c in result.envelope["causes"]}
        assert text.count(f"[{anchor}]") == 1


class AnswerQuality:
    """The tests every decision record is held to. A test module subclasses it as ``Test…`` with
    its record's name (``fixtures/<record>-expected-causes.yaml``), the relation kinds the record
    must cover and the loader that writes it (loaded once while unchanged); further tests of the
    subclass share its ``answers``."""

    record: ClassVar[str]
    relations: ClassVar[frozenset[str]]

    @staticmethod
    def load(driver: Driver) -> Driver:
        """Write the record into the store (once while unchanged: tests/e2e/conftest.py)."""
        raise NotImplementedError

    @pytest.fixture(scope="class")
    @classmethod
    def anchors(cls) -> Expected:
        return expected_causes(cls.record)

    @pytest.fixture(scope="class")
    @classmethod
    def answers(
        cls, driver: Driver, settings: Settings, anchors: Expected, tmp_path_factory: pytest.TempPathFactory
    ) -> Iterator[Answers]:
        """Every anchor asked as every role once (None when the role may not see the anchor)."""
        cls.load(driver)
        yield ask_every_anchor(driver, settings, anchors, tmp_path_factory.mktemp("traces"))

    def test_the_record_has_the_general_shape(self, anchors: Expected) -> None:
        check_general_shape(anchors, self.relations)

    @pytest.mark.parametrize("role", ROLES)
    def test_cause_recall_and_precision_are_one_for_every_role(
        self, answers: Answers, anchors: Expected, role: str
    ) -> None:
        check_recall_and_precision(answers, anchors, role)

    @pytest.mark.parametrize("role", ROLES)
    def test_no_hidden_cause_surfaces_and_the_anchor_is_never_its_own_cause(
        self, answers: Answers, anchors: Expected, role: str
    ) -> None:
        check_nothing_hidden_surfaces(answers, anchors, role)
