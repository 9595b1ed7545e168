"""A writer that may not read a factor's value and confidence may not confirm or recalculate it (destroy).

``confirmFactor`` raises the stored confidence by 0.1, or, given a value that differs from the
stored one, journals a correction quoting it ("User corrected from 20 to 42"). Through a scope
hiding the factor's confidence (or value) it read none (null) and wrote 0.1 over the stored
confidence, or a correction "from n/a", over a field the writer cannot read; ``recalculateFactor``
compared its result with them (null: "changed") and wrote a value and confidence over both. Now
each is refused, naming the field, the same whatever the factor holds, and nothing is written.
"""

from __future__ import annotations

import pytest
from neo4j import Driver

from cairn.runtime.settings import Settings
from cairn.schema.nodes import DECLARED_FIELDS
from tests.e2e.adversarial.conftest import served_with
from tests.e2e.conftest import codes, gql, passport

CONFIRM = """mutation($v: Float) { confirmFactor(factorId: "data_quality", value: $v) { id } }"""
RECALCULATE = 'mutation { recalculateFactor(factorId: "data_quality") { written } }'
STATE = """MATCH (f:Factor {id: 'data_quality'}) RETURN f.current_value AS value,
  f.current_confidence AS confidence, f.journal_seq AS seq"""


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
    before = demo_factors.execute_query(STATE)[0][0].data()
    rule = [{"domains": ["*"], "fields": sorted(DECLARED_FIELDS["Factor"] - {hidden})}]
    with served_with(settings, tmp_path_factory, "writer", {"Factor": rule}) as (client, registry):
        body = gql(client, CONFIRM, passport(registry, "writer"), v=value)
    assert codes(body) == ["INVALID_INPUT"], body
    assert hidden in body["errors"][0]["message"], body
    assert demo_factors.execute_query(STATE)[0][0].data() == before  # nothing written


@pytest.mark.parametrize("hidden", ["current_confidence", "current_value"])
def test_a_writer_that_cannot_read_the_state_may_not_recalculate_it(
    demo_factors: Driver, settings: Settings, tmp_path_factory: pytest.TempPathFactory, hidden: str
) -> None:
    before = demo_factors.execute_query(STATE)[0][0].data()
    rule = [{"domains": ["*"], "fields": sorted(DECLARED_FIELDS["Factor"] - {hidden})}]
    with served_with(settings, tmp_path_factory, "writer", {"Factor": rule}) as (client, registry):
        body = gql(client, RECALCULATE, passport(registry, "writer"))
    assert codes(body) == ["INVALID_INPUT"], body
    assert hidden in body["errors"][0]["message"], body
    assert demo_factors.execute_query(STATE)[0][0].data() == before  # nothing written
