"""The factor journal on the real Neo4j: writes, as-of, recalculation, the summary and bad input.

Every test that writes starts from a fresh demo domain (fixtures/factors).
"""

from __future__ import annotations

import copy
import itertools
import math
import threading
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from neo4j import Driver

from cairn.ingest.factors import DEMO_DIR, ingest_factor_dir, ingest_factor_payload, load_demo_factors
from cairn.ingest.fixtures import FixtureError
from cairn.memory.factors.assessment import assessment_summary, decision_tier
from cairn.memory.factors.journal import (
    confirm_factor,
    factor_state,
    history,
    recalculate_factor,
    unconfirmed_inferences,
    update_factor,
)
from cairn.memory.factors.models import FactorError, Scale
from cairn.memory.factors.recalculation import Evidence, synthesise
from cairn.policy.acl import MAX_HOPS
from cairn.policy.profiles import PolicyRegistry
from cairn.policy.scope import Scope
from cairn.runtime.embedder import Embedder
from cairn.runtime.settings import Settings
from cairn.schema import unique_yaml
from cairn.schema.checksum import graph_checksum
from tests.e2e.conftest import load_factors, wipe


def at(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


@pytest.fixture
def demo(driver: Driver, embedder: Embedder) -> Driver:
    """The demo domain as loaded; reloaded only when an earlier test changed the graph."""
    return load_factors(driver, embedder)


@pytest.fixture(scope="module")
def roles(settings: Settings) -> dict[str, Scope]:
    registry = PolicyRegistry.load(settings.policy_file)
    return {name: Scope.from_profile(p) for name, p in registry.roles.items()}


# -- update_factor -------------------------------------------------------------------------


def test_update_writes_entry_moves_current_state_and_sets_the_factor(
    demo: Driver, roles: dict[str, Scope], embedder: Embedder
) -> None:
    writer = roles["writer"]
    when = at("2024-11-02T09:00:00Z")
    entry = update_factor(
        demo,
        writer,
        "data_quality",
        35,
        rationale="A data catalog pilot started",
        confidence=0.7,
        excerpt='User: "We bought a catalog tool last week."',
        influenced_by=["data_governance"],
        session_id="session_nov",
        timestamp=when,
        embedder=embedder,
    )
    assert (entry.previous_value, entry.new_value, entry.confidence) == (20.0, 35.0, 0.7)
    assert entry.influenced_by == ("data_governance",)
    state = factor_state(demo, writer, "data_quality")
    assert (state.value, state.confidence, state.status, state.last_updated) == (
        35.0,
        0.7,
        "unconfirmed",
        when,
    )
    assert state.entry is not None and state.entry.id == entry.id
    rows, _, _ = demo.execute_query(
        """MATCH (f:Factor {id: 'data_quality'})-[:CURRENT_STATE]->(e) RETURN e.id AS id,
           [(e)-[:PART_OF]->(s) | s.id] AS sessions, [(e)-[:ABOUT]->(x) | x.id] AS about,
           e.domain AS domain, e.roles_allowed AS roles, size(e.embedding) AS dims"""
    )
    assert len(rows) == 1  # exactly one CURRENT_STATE edge
    assert rows[0].data() == {
        "id": entry.id,
        "sessions": ["session_nov"],
        "about": ["data_quality"],
        "domain": "acme/assessment",
        "roles": ["staff", "manager", "director", "exec", "writer"],
        "dims": 384,
    }
    assert [e.new_value for e in history(demo, writer, "data_quality", limit=2)] == [35.0, 20.0]


@pytest.mark.parametrize(
    ("factor_id", "value", "confidence", "rationale", "extra", "code", "field"),
    [
        ("no_such_factor", 10, 0.5, "why", {}, "NOT_FOUND", "factor_id"),
        ("data_quality", 120, 0.5, "why", {}, "INVALID_INPUT", "value"),
        ("data_quality", -1, 0.5, "why", {}, "INVALID_INPUT", "value"),
        ("data_quality", 10, 1.5, "why", {}, "INVALID_INPUT", "confidence"),
        ("data_quality", 10, -0.1, "why", {}, "INVALID_INPUT", "confidence"),
        ("data_quality", 10, 0.5, "", {}, "INVALID_INPUT", "rationale"),
        ("data_quality", 10, 0.5, "   ", {}, "INVALID_INPUT", "rationale"),
        ("data_quality", 10, 0.5, "why", {"influenced_by": ["nope"]}, "NOT_FOUND", "influenced_by"),
        (
            "data_quality",
            10,
            0.5,
            "why",
            {"influenced_by": ["data_quality"]},
            "INVALID_INPUT",
            "influenced_by",
        ),
        (
            "data_quality",
            10,
            0.5,
            "why",
            {"timestamp": at("2024-10-01T00:00:00Z")},
            "INVALID_INPUT",
            "timestamp",
        ),
        ("data_quality", 10, 0.5, "why", {"timestamp": datetime(2025, 1, 1)}, "INVALID_INPUT", "timestamp"),
        ("data_quality", 10, 0.5, "why", {"status": "guessed"}, "INVALID_INPUT", "status"),
        ("data_quality", 10, 0.5, "why", {"session_id": "bad id!"}, "INVALID_INPUT", "session_id"),
        ("data_quality", 10, 0.5, "why", {"session_id": "ml_expertise"}, "INVALID_INPUT", "session_id"),
    ],
)
def test_bad_updates_are_refused_and_nothing_is_written(
    demo: Driver,
    roles: dict[str, Scope],
    embedder: Embedder,
    factor_id: str,
    value: float,
    confidence: float,
    rationale: str,
    extra: dict[str, Any],
    code: str,
    field: str,
) -> None:
    before = graph_checksum(demo)
    with pytest.raises(FactorError) as refused:
        update_factor(
            demo,
            roles["writer"],
            factor_id,
            value,
            rationale=rationale,
            confidence=confidence,
            embedder=embedder,
            **extra,
        )
    assert (refused.value.code, refused.value.field) == (code, field)
    assert graph_checksum(demo) == before


def test_a_factor_the_caller_cannot_see_is_unknown_to_it(demo: Driver, roles: dict[str, Scope]) -> None:
    with pytest.raises(FactorError, match="unknown factor 'ai_budget'") as refused:
        update_factor(demo, roles["staff"], "ai_budget", 50, rationale="x", confidence=0.5)
    assert refused.value.code == "NOT_FOUND"
    with pytest.raises(FactorError, match="unknown factor"):
        factor_state(demo, roles["staff"], "ai_budget")
    assert factor_state(demo, roles["manager"], "ai_budget").value == 30.0


def test_concurrent_updates_keep_one_consistent_chain(
    demo: Driver, roles: dict[str, Scope], embedder: Embedder
) -> None:
    errors: list[BaseException] = []

    def writer(offset: int) -> None:
        try:
            for i in range(6):
                update_factor(
                    demo,
                    roles["writer"],
                    "sensor_data",
                    float(offset + i),
                    rationale=f"t{offset}-{i}",
                    confidence=0.5,
                    embedder=embedder,
                )
        except BaseException as exc:  # surfaced below: a thread must not swallow a failure
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in (10, 50)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    rows, _, _ = demo.execute_query(
        """MATCH (e:JournalEntry)-[:ABOUT]->(:Factor {id: 'sensor_data'})
           RETURN e.seq AS seq, e.previous_number AS prev, e.new_number AS new ORDER BY seq"""
    )
    assert [r["seq"] for r in rows] == list(range(1, 14))
    for earlier, later in itertools.pairwise(rows):
        assert later["prev"] == earlier["new"]  # no two writers read the same "previous"
    current, _, _ = demo.execute_query(
        "MATCH (:Factor {id: 'sensor_data'})-[:CURRENT_STATE]->(e) RETURN e.seq AS seq"
    )
    assert [r["seq"] for r in current] == [13]


# -- confirm_factor ------------------------------------------------------------------------


def test_confirm_boosts_confidence_and_correct_journals_the_user_value(
    demo: Driver, roles: dict[str, Scope], embedder: Embedder
) -> None:
    writer = roles["writer"]
    confirmed = confirm_factor(demo, writer, "ml_expertise", embedder=embedder)
    assert (confirmed.op, confirmed.new_value, confirmed.confidence, confirmed.inference_status) == (
        "confirm",
        30.0,
        0.7,
        "confirmed",
    )
    corrected = confirm_factor(demo, writer, "sensor_data", 40, embedder=embedder)
    assert (corrected.op, corrected.previous_value, corrected.new_value, corrected.confidence) == (
        "correct",
        25.0,
        40.0,
        0.95,
    )
    assert corrected.rationale == "User corrected from 25 to 40"
    state = factor_state(demo, writer, "sensor_data")
    assert (state.value, state.status) == (40.0, "user_provided")
    unconfirmed = {u.id for u in unconfirmed_inferences(demo, writer)}
    assert "ml_expertise" not in unconfirmed and "sensor_data" not in unconfirmed
    assert "data_quality" in unconfirmed


def test_the_reasoning_chain_is_the_newest_history(demo: Driver, roles: dict[str, Scope]) -> None:
    state = factor_state(demo, roles["staff"], "data_quality")
    chain = history(demo, roles["staff"], "data_quality", limit=2)
    assert (state.value, state.confidence) == (20.0, 0.75)
    assert [e.new_value for e in chain] == [20.0, 25.0]
    assert chain[0].influenced_by == ("data_governance", "data_infrastructure")


# -- as of ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("factor_id", "moment", "value", "confidence", "status"),
    [
        ("data_quality", "2024-09-01T00:00:00Z", None, None, None),
        ("data_quality", "2024-09-10T09:20:00Z", 40.0, 0.5, "unconfirmed"),
        ("data_quality", "2024-10-16T00:00:00Z", 30.0, 0.7, "unconfirmed"),
        ("data_quality", "2024-10-21T00:00:00Z", 25.0, 0.7, "unconfirmed"),
        ("data_quality", "2024-10-28T10:29:59Z", 25.0, 0.7, "unconfirmed"),
        ("data_quality", "2024-10-28T10:30:00Z", 20.0, 0.75, "unconfirmed"),
        ("ml_infrastructure", "2024-10-21T00:00:00Z", 50.0, 0.8, "unconfirmed"),
        ("ml_infrastructure", "2024-10-23T00:00:00Z", 50.0, 0.9, "confirmed"),
        ("data_governance", "2024-10-05T00:00:00Z", 25.0, 0.6, "unconfirmed"),
    ],
)
def test_as_of_replays_the_journal(
    demo: Driver,
    roles: dict[str, Scope],
    factor_id: str,
    moment: str,
    value: float | None,
    confidence: float | None,
    status: str | None,
) -> None:
    state = factor_state(demo, roles["staff"], factor_id, at(moment))
    assert (state.value, state.confidence, state.status) == (value, confidence, status)
    assert state.as_of == at(moment)


def test_as_of_sees_later_updates_only_after_they_happen(
    demo: Driver, roles: dict[str, Scope], embedder: Embedder
) -> None:
    update_factor(
        demo,
        roles["writer"],
        "data_quality",
        45,
        rationale="catalog rolled out",
        confidence=0.8,
        timestamp=at("2024-11-10T00:00:00Z"),
        embedder=embedder,
    )
    assert factor_state(demo, roles["staff"], "data_quality", at("2024-11-09T00:00:00Z")).value == 20.0
    assert factor_state(demo, roles["staff"], "data_quality", at("2024-11-10T00:00:00Z")).value == 45.0


# -- recalculation -------------------------------------------------------------------------


def reference_synthesis(points: list[tuple[datetime, float, float]], span: float) -> tuple[float, float]:
    """The documented rule, written out independently of recalculation.py."""
    newest = max(t for t, _, _ in points)
    w = [c * 0.5 ** ((newest - t) / timedelta(days=30)) for t, _, c in points]
    value = sum(wi * v for wi, (_, v, _) in zip(w, points, strict=True)) / sum(w)
    sd = math.sqrt(sum(wi * (v - value) ** 2 for wi, (_, v, _) in zip(w, points, strict=True)) / sum(w))
    support = 1 - math.prod(1 - wi for wi in w)
    return round(value, 2), round(support * (1 - 2 * min(0.5, sd / span)), 3)


def test_recalculation_with_contradicting_entries(
    demo: Driver, roles: dict[str, Scope], embedder: Embedder
) -> None:
    writer = roles["writer"]
    consistent = recalculate_factor(
        demo, writer, "data_quality", timestamp=at("2024-10-29T00:00:00Z"), embedder=embedder
    )
    assert consistent.contradictions == ()  # 40 → 30 → 25 → 20: a steady decline, no pair 25 apart
    update_factor(
        demo,
        writer,
        "data_quality",
        70,
        rationale="Vendor says the new MDM tool cleaned everything",
        confidence=0.6,
        timestamp=at("2024-10-29T10:30:00Z"),
        embedder=embedder,
    )
    result = recalculate_factor(
        demo, writer, "data_quality", timestamp=at("2024-10-30T00:00:00Z"), embedder=embedder
    )
    points = [
        (at("2024-09-10T09:20:00Z"), 40.0, 0.5),
        (at("2024-10-15T14:20:00Z"), 30.0, 0.7),
        (at("2024-10-20T10:30:00Z"), 25.0, 0.7),
        (at("2024-10-28T10:30:00Z"), 20.0, 0.75),
        (at("2024-10-29T10:30:00Z"), 70.0, 0.6),
    ]
    assert (result.value, result.confidence) == reference_synthesis(points, 100.0)
    pairs = [(c.older.value, c.newer.value) for c in result.contradictions]
    assert pairs == [(40.0, 70.0), (30.0, 70.0), (25.0, 70.0), (20.0, 70.0)]
    assert result.confidence is not None and consistent.confidence is not None
    assert result.confidence < consistent.confidence  # contradiction lowers confidence
    assert result.entry is not None and result.entry.op == "recalculate"
    assert len(result.entry.details["contradictions"]) == 4
    state = factor_state(demo, writer, "data_quality")
    assert (state.value, state.confidence) == (result.value, result.confidence)
    assert "4 contradicting pair(s) lowered confidence" in result.answer
    again = recalculate_factor(demo, writer, "data_quality", embedder=embedder)
    assert again.entry is None  # recalculations are not evidence: nothing changes, nothing written


def test_synthesis_rule_on_hand_computed_cases() -> None:
    t0 = at("2024-10-01T00:00:00Z")
    same = synthesise([Evidence("a", t0, 40, 0.5), Evidence("b", t0, 40, 0.5)], Scale(0, 100))
    assert same is not None and (same.value, same.confidence, same.contradictions) == (40.0, 0.75, ())
    split = synthesise([Evidence("a", t0, 0, 1.0), Evidence("b", t0, 100, 1.0)], Scale(0, 100))
    assert split is not None and (split.value, split.confidence, len(split.contradictions)) == (50.0, 0.0, 1)
    old_vs_new = synthesise(
        [Evidence("old", t0 - timedelta(days=30), 80, 0.8), Evidence("new", t0, 20, 0.8)], Scale(0, 100)
    )
    assert old_vs_new is not None and old_vs_new.weights == {"old": 0.4, "new": 0.8}
    assert old_vs_new.value == 40.0  # the newer statement counts twice as much after one half-life
    assert synthesise([], Scale(0, 100)) is None


# -- assessment summary and tiers ----------------------------------------------------------


@pytest.mark.parametrize(
    ("confidence", "assessed", "total", "tier"),
    [
        (0.75, 5, 10, "medium_risk"),
        (0.7499, 5, 10, "low_risk"),
        (0.75, 4, 10, "low_risk"),
        (0.60, 3, 10, "low_risk"),
        (0.5999, 3, 10, "exploratory"),
        (0.60, 2, 10, "exploratory"),
        (0.99, 0, 0, "exploratory"),
        ((0.55 + 0.6 + 0.95 + 0.9) / 4, 5, 10, "medium_risk"),  # 0.7499999999999999 in floats
    ],
)
def test_decision_tier_boundaries(confidence: float, assessed: int, total: int, tier: str) -> None:
    assert decision_tier(confidence, assessed, total) == tier


def test_assessment_summary_is_per_caller_and_current(
    demo: Driver, roles: dict[str, Scope], embedder: Embedder
) -> None:
    # capabilities walk the demo's prerequisite chains: staff with the deepest hop budget a profile
    # may have (what staff's one hop cuts is tested in tests/e2e/adversarial/test_factor_edges.py)
    staff, writer = replace(roles["staff"], max_hops=MAX_HOPS), roles["writer"]
    s = assessment_summary(demo, staff)
    assert (s.overall.total_factors_assessed, s.overall.total_factors) == (10, 13)
    assert (s.overall.avg_confidence, s.overall.decision_tier) == (0.735, "low_risk")
    cats = {c.category: (c.factor_count, c.total_factors) for c in s.categories}
    assert cats == {"ai_capability": (3, 4), "data_readiness": (5, 6), "organisation": (2, 3)}
    assert [n.id for n in s.can_evaluate] == [
        "ai_pilot_program",
        "basic_forecasting_annual",
        "simple_automation",
    ]
    unlocks = [u.id for u in s.next_unlocks]
    assert {"complex_forecasting_seasonal", "ml_automation"} <= set(unlocks)
    assert "workforce_planning_ai" not in unlocks
    assert s.last_conversation is not None
    assert (s.last_conversation.factor_id, s.last_conversation.timestamp) == (
        "data_quality",
        at("2024-10-28T10:30:00Z"),
    )
    assert s.last_conversation.session_title == "Data quality follow-up"
    w = assessment_summary(demo, writer)
    assert (w.overall.total_factors_assessed, w.overall.total_factors) == (11, 14)
    # two confirmations move staff over 0.75 average confidence; the writer also sees the
    # low-confidence budget factor and stays low risk: counts are over visible nodes only
    confirm_factor(demo, writer, "ml_expertise", embedder=embedder)
    confirm_factor(demo, writer, "sensor_data", embedder=embedder)
    s2 = assessment_summary(demo, staff)
    assert (s2.overall.avg_confidence, s2.overall.decision_tier) == (0.755, "medium_risk")
    w2 = assessment_summary(demo, writer)
    assert (round(w2.overall.avg_confidence, 3), w2.overall.decision_tier) == (0.741, "low_risk")
    assert s2.last_conversation is not None and s2.last_conversation.factor_id == "sensor_data"
    assert "decision tier: medium risk" in s2.status_answer


# -- the loader ----------------------------------------------------------------------------


def demo_documents() -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for name in ("domain.yaml", "journal.yaml"):
        data = unique_yaml.load_file(DEMO_DIR / name)
        for key, value in data.items():
            merged[key] = value if key == "defaults" else [*merged.get(key, []), *value]
    return merged


def broken(mutate: Any) -> dict[str, Any]:
    doc = copy.deepcopy(demo_documents())
    mutate(doc)
    return doc


def _set(section: str, index: int, **changes: Any) -> Any:
    return lambda d: d[section][index].update(changes)


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (_set("journal", 0, factor="no_such_factor"), "'no_such_factor' is not a known factor"),
        (_set("journal", 0, value=130), "130 is outside the scale 0-100"),
        (_set("journal", 0, confidence=1.2), "less than or equal to 1"),
        (_set("journal", 0, rationale=""), "at least 1 character"),
        (_set("journal", 0, session="nowhere"), "'nowhere' is not a known session"),
        (_set("journal", 1, id="je-dq-1"), "duplicate id"),
        (_set("depends_on", 0, target="ghost"), "'ghost' is not a known factor"),
        (_set("depends_on", 0, min_value=101), "outside the scale"),
        (_set("factors", 0, scale="hundred"), "not of the form"),
        (
            lambda d: d["depends_on"].append(
                {"source": "data_governance", "target": "data_quality", "min_value": 5}
            ),
            "form a cycle",
        ),
    ],
)
def test_bad_fixture_input_is_refused_and_nothing_written(
    driver: Driver, embedder: Embedder, mutate: Any, message: str
) -> None:
    wipe(driver)
    before = graph_checksum(driver)
    with pytest.raises(FixtureError, match=message):
        ingest_factor_payload(driver, broken(mutate), embedder=embedder)
    assert graph_checksum(driver) == before


def test_loader_is_idempotent_and_keeps_live_updates(
    demo: Driver, roles: dict[str, Scope], embedder: Embedder, tmp_path: Path
) -> None:
    first = graph_checksum(demo)
    load_demo_factors(demo)
    assert graph_checksum(demo) == first
    update_factor(
        demo, roles["writer"], "data_quality", 33, rationale="live", confidence=0.6, embedder=embedder
    )
    ingest_factor_dir(demo, DEMO_DIR, embedder=embedder)
    assert factor_state(demo, roles["writer"], "data_quality").value == 33.0  # not rolled back
    (tmp_path / "bad.yaml").write_text("factors: [{id: x}]\n", encoding="utf-8")
    with pytest.raises(FixtureError, match=r"bad\.yaml"):
        ingest_factor_dir(demo, tmp_path, embedder=embedder)
