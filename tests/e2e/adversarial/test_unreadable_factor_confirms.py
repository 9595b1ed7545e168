"""A writer that may not read a factor's value and confidence may not confirm or recalculate it (destroy).

``confirmFactor`` raises the stored confidence by 0.1, or, given a value that differs from the
stored one, journals a correction quoting it ("User corrected from 20 to 42"). Through a scope
hiding the factor's confidence (or value) it read none (null) and wrote 0.1 over the stored
confidence, or a correction "from n/a", over a field the writer cannot read; ``recalculateFactor``
compared its result with them (null: "changed") and wrote a value and confidence over both. Now
each is refused, naming the field, the same whatever the factor holds, and nothing is written.

``updateFactor`` (red-team pass 14) set the factor's value, confidence, inference status, time and
journal sequence whatever the writer's rules showed of them: a writer that may not read the value
replaced it (and filed the old one in its entry's ``previous_value``). It too is refused now,
naming the hidden field it would set, and writes nothing.
"""

from __future__ import annotations

from typing import Any

import pytest
from neo4j import Driver

from cairn.runtime.settings import Settings
from cairn.schema.nodes import DECLARED_FIELDS
from tests.e2e.adversarial.conftest import served_with
from tests.e2e.conftest import codes, gql, passport

CONFIRM = """mutation($v: Float) { confirmFactor(factorId: "data_quality", value: $v) { id } }"""
RECALCULATE = 'mutation { recalculateFactor(factorId: "data_quality") { written } }'
UPDATE = """mutation { updateFactor(input: {factorId: "data_quality", value: 3, confidence: 0.5,
  rationale: "a probe"}) { id } }"""
STATE = """MATCH (f:Factor {id: 'data_quality'}) RETURN f.current_value AS value,
  f.current_confidence AS confidence, f.inference_status AS status, f.last_updated AS at,
  f.journal_seq AS seq, COUNT { (f)<-[:ABOUT]-(:JournalEntry) } AS entries"""


def assert_refused_and_unwritten(
    driver: Driver, settings: Settings, tmp: pytest.TempPathFactory, hidden: str, query: str, **variables: Any
) -> str:
    """``query`` asked by a writer whose rules hide the factor's ``hidden`` field is refused,
    naming that field, and writes nothing."""
    before = driver.execute_query(STATE)[0][0].data()
    rule = [{"domains": ["*"], "fields": sorted(DECLARED_FIELDS["Factor"] - {hidden})}]
    with served_with(settings, tmp, "writer", {"Factor": rule}) as (client, registry):
        body = gql(client, query, passport(registry, "writer"), **variables)
    assert codes(body) == ["INVALID_INPUT"], body
    assert hidden in body["errors"][0]["message"], body
    assert driver.execute_query(STATE)[0][0].data() == before  # nothing written
    return str(body["errors"][0]["message"])


@pytest.mark.parametrize(
    ("hidden", "value"),
    [
        ("current_confidence", None),
        ("current_confidence", 20.0),
        ("current_value", None),
        ("current_value", 42.0),
    ],
)
def test_a_writer_that_cannot_read_the_state_may_not_confirm_it(
    demo_factors: Driver,
    settings: Settings,
    tmp_path_factory: pytest.TempPathFactory,
    hidden: str,
    value: float | None,
) -> None:
    assert_refused_and_unwritten(demo_factors, settings, tmp_path_factory, hidden, CONFIRM, v=value)


@pytest.mark.parametrize("hidden", ["current_confidence", "current_value"])
def test_a_writer_that_cannot_read_the_state_may_not_recalculate_it(
    demo_factors: Driver, settings: Settings, tmp_path_factory: pytest.TempPathFactory, hidden: str
) -> None:
    assert_refused_and_unwritten(demo_factors, settings, tmp_path_factory, hidden, RECALCULATE)


@pytest.mark.parametrize(
    "hidden", ["current_value", "current_confidence", "inference_status", "last_updated", "journal_seq"]
)
def test_a_writer_that_cannot_read_the_state_may_not_update_it(
    demo_factors: Driver, settings: Settings, tmp_path_factory: pytest.TempPathFactory, hidden: str
) -> None:
    assert_refused_and_unwritten(demo_factors, settings, tmp_path_factory, hidden, UPDATE)


@pytest.mark.parametrize(("value", "verb"), [(None, "confirm"), (42.0, "correct")])
def test_a_refusal_names_the_write_asked_for(
    demo_factors: Driver,
    settings: Settings,
    tmp_path_factory: pytest.TempPathFactory,
    value: float | None,
    verb: str,
) -> None:
    """A confirmation or correction refused for a field only the journal write sets says so
    ("may not confirm it"), not "may not update it" (red-team pass 15, cosmetic)."""
    message = assert_refused_and_unwritten(
        demo_factors, settings, tmp_path_factory, "inference_status", CONFIRM, v=value
    )
    assert f"may not {verb} it" in message, message
