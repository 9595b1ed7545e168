"""Note 003's example flows on the deterministic path, what-if, policy and the readiness rule.

The demo domain (fixtures/factors) is loaded once for the read-only tests; the expected factors,
values and dates below are the ones note 003 states (data quality 20 on 2024-10-28, governance
15 on 2024-10-20, readiness 35 on 2024-10-20, ML infrastructure 50).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest
from neo4j import Driver

from cairn.memory.factors.models import HIDDEN_NOTICE, FactorError
from cairn.memory.factors.questions import what_changed, what_if, why_blocked, why_value
from cairn.policy.acl import MAX_HOPS
from cairn.policy.profiles import PolicyRegistry
from cairn.policy.scope import Scope
from cairn.runtime.embedder import Embedder
from cairn.schema.checksum import graph_checksum
from tests.e2e.conftest import load_factors
from tests.e2e.round_trips import RoundTrips

NOW = datetime(2024, 10, 30, 12, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
def demo(driver: Driver, embedder: Embedder) -> Driver:
    return load_factors(driver, embedder)


# The questions' semantics over the demo's deep prerequisite chains, so the roles get the deepest
# hop budget a profile may have; the demo profiles allow one hop, and what that cuts is tested in
# tests/e2e/adversarial/test_factor_edges.py.
@pytest.fixture(scope="module")
def staff(registry: PolicyRegistry) -> Scope:
    return replace(Scope.from_profile(registry.roles["staff"]), max_hops=MAX_HOPS)


@pytest.fixture(scope="module")
def manager(registry: PolicyRegistry) -> Scope:
    return replace(Scope.from_profile(registry.roles["manager"]), max_hops=MAX_HOPS)


def ids(nodes: Any) -> list[str]:
    return [n.id for n in nodes]


# -- note 003, question 1: "Why can't we do predictive maintenance?" --------------------------


def test_why_cant_we_do_predictive_maintenance(demo: Driver, staff: Scope) -> None:
    result = why_blocked(demo, staff, "predictive_maintenance")
    assert result.status == "blocked"
    got = [(b.factor.id, b.value, b.threshold, b.required_by.id) for b in result.blockers]
    assert got == [
        ("data_quality", 20.0, 60.0, "predictive_maintenance"),
        ("ml_expertise", 30.0, 40.0, "predictive_maintenance"),
        ("sensor_data", 25.0, 50.0, "predictive_maintenance"),
        ("data_infrastructure", 45.0, 50.0, "sensor_data"),  # transitive: sensor data needs it
    ]
    dq = result.blockers[0]
    assert [(e.timestamp.isoformat(), e.new_value) for e in dq.entries] == [
        ("2024-10-28T10:30:00+00:00", 20.0),
        ("2024-10-20T10:30:00+00:00", 25.0),
        ("2024-10-15T14:20:00+00:00", 30.0),
    ]
    assert ids(result.blockers[3].via) == ["predictive_maintenance", "sensor_data"]
    assert "Data quality is 20; it needs at least 60. Last set on 2024-10-28" in result.answer
    assert "predictive_maintenance" not in result.answer  # names, never ids


def test_ready_option_is_not_blocked(demo: Driver, staff: Scope) -> None:
    result = why_blocked(demo, staff, "basic_forecasting_annual")
    assert (result.status, result.blockers) == ("ready", ())
    assert result.answer.startswith("Annual demand forecasting is not blocked")


# -- note 003, question 2: "What changed in our data governance since last month?" ------------


def test_what_changed_in_data_governance_since_last_month(demo: Driver, staff: Scope) -> None:
    since = datetime(2024, 9, 30, 12, 0, tzinfo=UTC)  # one month before NOW
    result = what_changed(demo, staff, since, factor_ids=["data_governance"])
    (change,) = result.changes
    assert (change.factor.id, change.before, change.after) == ("data_governance", 30.0, 15.0)
    assert [(e.timestamp.date().isoformat(), e.previous_value, e.new_value) for e in change.entries] == [
        ("2024-10-02", 30.0, 25.0),
        ("2024-10-20", 25.0, 15.0),
    ]
    assert "Data governance: 30 → 15, in 2 entries" in result.answer


def test_what_changed_windows_and_grouping(demo: Driver, staff: Scope, manager: Scope) -> None:
    since = datetime(2024, 10, 20, tzinfo=UTC)
    until = datetime(2024, 10, 23, tzinfo=UTC)
    staff_view = what_changed(demo, staff, since, until)
    assert ids(c.factor for c in staff_view.changes) == [
        "ml_infrastructure",
        "ai_readiness_score",
        "data_quality",
        "data_governance",
    ]
    manager_view = what_changed(demo, manager, since, until)
    assert "ai_budget" in ids(c.factor for c in manager_view.changes)
    assert what_changed(demo, staff, datetime(2024, 11, 1, tzinfo=UTC)).changes == ()


# -- note 003, question 3: "If we improve data quality, what becomes possible?" ---------------


def test_if_we_improve_data_quality(demo: Driver, staff: Scope) -> None:
    before = graph_checksum(demo)
    result = what_if(demo, staff, "data_quality")
    assert graph_checksum(demo) == before  # hypothetical: nothing written
    assert [(s.value, ids(s.unblocked)) for s in result.steps] == [
        (50.0, ["complex_forecasting_seasonal"]),
        (60.0, []),
    ]
    assert ids(result.unblocked) == ["complex_forecasting_seasonal"]
    (still,) = result.still_blocked
    assert still.node.id == "predictive_maintenance"
    assert sorted(f.id for f, _, _ in still.blockers) == [
        "data_infrastructure",
        "ml_expertise",
        "sensor_data",
    ]
    assert "Raising it to 50 would unblock Seasonal demand forecasting." in result.answer


def test_what_if_unblocks_transitively_and_writes_nothing(demo: Driver, staff: Scope) -> None:
    before = graph_checksum(demo)
    up = what_if(demo, staff, "data_infrastructure", 50)
    assert ids(up.unblocked) == ["quality_anomaly_alerts", "equipment_monitoring", "sensor_data"]
    assert up.blocked == ()
    down = what_if(demo, staff, "data_infrastructure", 25)
    assert ids(down.blocked) == ["ai_pilot_program", "ai_readiness_score", "ml_infrastructure"]
    assert down.unblocked == ()
    assert graph_checksum(demo) == before


def test_what_if_refuses_unknown_factor_and_out_of_scale_value(demo: Driver, staff: Scope) -> None:
    with pytest.raises(FactorError) as unknown:
        what_if(demo, staff, "no_such_factor", 50)
    assert unknown.value.code == "NOT_FOUND"
    with pytest.raises(FactorError) as scale:
        what_if(demo, staff, "data_quality", 150)
    assert scale.value.code == "INVALID_INPUT"


# -- "Why is our AI readiness score so low?" -------------------------------------------------


def test_why_is_our_ai_readiness_score_so_low(demo: Driver, staff: Scope) -> None:
    result = why_value(demo, staff, "ai_readiness_score")
    f = result.factor
    assert (f.value, f.confidence, f.last_updated.isoformat() if f.last_updated else None) == (
        35.0,
        0.8,
        "2024-10-20T11:00:00+00:00",
    )
    assert result.history[0].rationale == "Composite score from data_quality, governance, infrastructure"
    deps = [
        (d.factor.id, d.value, d.last_entry.timestamp.date().isoformat() if d.last_entry else None)
        for d in result.dependencies
    ]
    assert deps == [  # largest drag first
        ("data_quality", 20.0, "2024-10-28"),
        ("data_governance", 15.0, "2024-10-20"),
        ("ml_infrastructure", 50.0, "2024-10-22"),
    ]
    assert [d.changed_after_subject for d in result.dependencies] == [True, False, False]
    assert ids(d.node for d in result.dependents) == ["ai_pilot_program"]
    text = result.answer
    assert text.startswith(
        "AI readiness score is 35 (confidence 0.8, unconfirmed), last changed on 2024-10-20"
    )
    assert "1. Data quality: 20 (largest drag). Last assessed 2024-10-28" in text
    assert "2. Data governance: 15. Last assessed 2024-10-20" in text
    assert "Data quality changed on 2024-10-28, after AI readiness score was last set" in text


# -- policy: hidden prerequisites ----------------------------------------------------------


def test_hidden_prerequisite_is_reported_without_name_or_value(
    demo: Driver, staff: Scope, manager: Scope
) -> None:
    seen = why_blocked(demo, manager, "ml_automation")
    assert "ai_budget" in ids(b.factor for b in seen.blockers)
    assert seen.hidden_required_by == () and not seen.has_hidden_prerequisites
    assert HIDDEN_NOTICE not in seen.answer
    hidden = why_blocked(demo, staff, "ml_automation")
    assert ids(b.factor for b in hidden.blockers) == ["ml_expertise", "ml_infrastructure"]
    assert ids(hidden.hidden_required_by) == ["ml_automation"] and hidden.has_hidden_prerequisites
    assert f"{HIDDEN_NOTICE} (required by ML-driven automation)." in hidden.answer
    assert hidden.prerequisites_reached == seen.prerequisites_reached - 1  # visible edges only
    dumped = str(hidden.evidence()) + hidden.answer
    for secret in ("ai_budget", "AI budget", "headroom", "EUR 20k", "discretionary"):
        assert secret not in dumped


def test_hidden_nodes_never_appear_in_what_if(demo: Driver, staff: Scope, manager: Scope) -> None:
    assert "workforce_planning_ai" not in str(what_if(demo, manager, "historical_data", 100).evidence())
    with pytest.raises(FactorError):
        what_if(demo, staff, "ai_budget", 80)  # staff cannot see it: same answer as unknown
    with pytest.raises(FactorError):
        why_blocked(demo, staff, "workforce_planning_ai")


# -- one round trip per question (issue 15) ----------------------------------------------------


@pytest.mark.parametrize(
    "ask",
    [
        lambda d, s: why_blocked(d, s, "predictive_maintenance"),
        lambda d, s: why_value(d, s, "ai_readiness_score"),
        lambda d, s: what_if(d, s, "data_quality"),
        lambda d, s: what_changed(d, s, datetime(2024, 9, 1, tzinfo=UTC)),
    ],
    ids=["why_blocked", "why_value", "what_if", "what_changed"],
)
def test_each_question_is_one_round_trip(demo: Driver, staff: Scope, ask: Any) -> None:
    counting = RoundTrips(demo)
    answered = ask(counting, staff)
    assert counting.trips == 1
    assert answered.evidence() == ask(demo, staff).evidence()  # and the answer is the real one
