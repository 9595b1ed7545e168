"""The reads behind a search, a dossier search, a factor question's entity linking and the status
question each take one round trip (docs/design.md §One driver model): an auto-commit query
through ``database.read``, not ``driver.execute_query``, whose managed transaction adds a COMMIT
(issue 15, mixed load). A dossier search reads its found dossiers' facts in the same query: one
round trip in all."""

from __future__ import annotations

import logging
import re
from datetime import UTC, datetime

import pytest
from neo4j import Driver

from cairn.memory.dossiers.facts import search_facts
from cairn.memory.dossiers.retriever import retrieve_relevant_dossiers
from cairn.memory.factors.ask import answer_question
from cairn.memory.factors.router import LearnedRouter
from cairn.memory.org_search import search_org
from cairn.policy.profiles import PolicyRegistry
from cairn.policy.scope import Scope
from cairn.runtime.database import Vector, read
from cairn.runtime.embedder import Embedder
from tests.e2e.conftest import whole_demo
from tests.e2e.round_trips import RoundTrips


@pytest.fixture(scope="module")
def demo(driver: Driver) -> Driver:
    return whole_demo(driver)


@pytest.fixture(scope="module")
def staff(registry: PolicyRegistry) -> Scope:
    return Scope.from_profile(registry.roles["staff"])


def test_an_org_search_is_one_round_trip(demo: Driver, staff: Scope, embedder: Embedder) -> None:
    vector = embedder.embed_one("what did we decide about the on-prem connectors")
    counted = RoundTrips(demo)
    got = search_org(counted, staff, vector, k=5)  # type: ignore[arg-type]
    assert counted.trips == 1
    assert got.hits and got == search_org(demo, staff, vector, k=5)


def test_a_dossier_search_is_one_round_trip(demo: Driver, staff: Scope, embedder: Embedder) -> None:
    """The index's answer (complete here) with the found dossiers' visible facts, in one query."""
    counted = RoundTrips(demo)
    got = retrieve_relevant_dossiers(counted, staff, "vegetarian recipes", embedder=embedder)  # type: ignore[arg-type]
    assert counted.trips == 1
    assert got.dossiers and all(d.facts for d in got.dossiers)
    assert got == retrieve_relevant_dossiers(demo, staff, "vegetarian recipes", embedder=embedder)


def test_linking_a_questions_entity_is_one_round_trip_per_read(
    demo: Driver, staff: Scope, embedder: Embedder
) -> None:
    """The linkable nodes, then (nothing linked by name) the journal's nearest entry."""
    vector = embedder.embed_one("the thing with the numbers")
    counted = RoundTrips(demo)
    router = LearnedRouter(counted, embedder)  # type: ignore[arg-type]
    linked = router._link("how is the thing with the numbers?", staff, "why_value", vector)
    assert counted.trips == 2
    assert linked == LearnedRouter(demo, embedder)._link(
        "how is the thing with the numbers?", staff, "why_value", vector
    )


def test_a_searchs_run_line_does_not_spell_out_its_vector(
    demo: Driver, staff: Scope, embedder: Embedder, caplog: pytest.LogCaptureFixture
) -> None:
    """The driver builds every RUN's debug line whatever the log level, its parameters' reprs
    included: a search's vector goes as a ``database.Vector`` (a list with a short repr), so its
    384 floats are not spelt out on every search (issue 16), and it still arrives as floats."""
    vector = embedder.embed_one("what did we decide about the on-prem connectors")
    caplog.set_level(logging.DEBUG, logger="neo4j")
    assert search_org(demo, staff, vector, k=5).hits
    assert retrieve_relevant_dossiers(demo, staff, "vegetarian recipes", embedder=embedder).dossiers
    assert search_facts(demo, staff, "vegetarian recipes", embedder=embedder).hits
    runs = [r.getMessage() for r in caplog.records if "C: RUN" in r.getMessage()]
    with_vector = [line for line in runs if "'vec':" in line or "'vector':" in line]
    assert len(with_vector) >= 3  # the org search, the dossier search, the fact search
    assert all("<vector of 384 floats>" in line for line in with_vector)
    assert not any(re.search(r"(-?\d+\.\d+(e-?\d+)?, ){50}", line) for line in runs)
    [record] = read(demo, "RETURN $v AS v", {"v": Vector(vector)})
    assert record["v"] == vector and type(record["v"]) is list


def test_where_we_are_on_the_assessment_is_one_round_trip_per_read(
    demo: Driver, registry: PolicyRegistry, embedder: Embedder
) -> None:
    """The status question (a fifth of the load bench's questions, with "where were we") reads the
    category figures, the options, their dependencies, the last conversation and the unconfirmed
    inferences: five reads, five round trips (eight when three went through ``execute_query``)."""
    manager = Scope.from_profile(registry.roles["manager"])
    counted = RoundTrips(demo)
    now = datetime(2026, 11, 27, tzinfo=UTC)
    question = "where are we on the assessment?"
    got = answer_question(counted, manager, question, router=LearnedRouter(counted, embedder), now=now)  # type: ignore[arg-type]
    assert got.route.intent == "status"
    assert counted.trips == 5
    assert (
        got.answer
        == answer_question(demo, manager, question, router=LearnedRouter(demo, embedder), now=now).answer
    )
