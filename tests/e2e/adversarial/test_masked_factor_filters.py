"""Factor reads pick factors and entries only by fields the caller sees (leak).

The list of unconfirmed inferences (``assessment``: its continuity's "Still unconfirmed: …" and its
evidence's ``unconfirmed_inferences``) picked factors by their stored ``inference_status`` and
whether a ``current_value`` was stored, whatever the field rules showed: a role whose rules hide
a factor's status read which factors were unconfirmed, and one hiding the value which were
assessed. Now the list reads both only where the rules show them (``acl.shown_or``), as every
order and filter over a maskable field does (docs/design.md §Policy module). Likewise a
recalculation weighs only entries whose op the writer sees.
"""

from __future__ import annotations

from typing import Any

import pytest
from neo4j import Driver

from cairn.runtime.settings import Settings
from cairn.schema.nodes import DECLARED_FIELDS
from tests.e2e.adversarial.conftest import data_as, served_with

ASSESSMENT = "{ assessment { continuity evidence } }"


def _assessment(settings: Settings, tmp: pytest.TempPathFactory, *hidden: str) -> Any:
    rule = [{"domains": ["*"], "fields": sorted(DECLARED_FIELDS["Factor"] - set(hidden))}]
    with served_with(settings, tmp, "staff", {"Factor": rule}) as (client, registry):
        return data_as(client, registry, "staff", ASSESSMENT)["assessment"]


@pytest.mark.parametrize("hidden", ["inference_status", "current_value"])
def test_unconfirmed_factors_are_chosen_by_shown_fields_only(
    demo_factors: Driver, settings: Settings, tmp_path_factory: pytest.TempPathFactory, hidden: str
) -> None:
    shown = _assessment(settings, tmp_path_factory)
    assert shown["evidence"]["unconfirmed_inferences"] and "Still unconfirmed" in shown["continuity"]
    masked = _assessment(settings, tmp_path_factory, hidden)
    assert masked["evidence"]["unconfirmed_inferences"] == [], masked["evidence"]
    assert "Still unconfirmed" not in masked["continuity"], masked["continuity"]


RECALCULATE = 'mutation { recalculateFactor(factorId: "data_quality") { answer written } }'


def test_recalculation_weighs_no_entry_by_a_hidden_op(
    demo_factors: Driver, settings: Settings, tmp_path_factory: pytest.TempPathFactory
) -> None:
    # Recalculation takes as evidence the entries whose op is an update, a correction or a
    # confirmation: picked by a hidden op, "From N entries" told how many of them had which op.
    rule = [{"domains": ["*"], "fields": sorted(DECLARED_FIELDS["JournalEntry"] - {"op"})}]
    with served_with(settings, tmp_path_factory, "writer", {"JournalEntry": rule}) as (client, registry):
        answer = data_as(client, registry, "writer", RECALCULATE)["recalculateFactor"]
    assert "no journalled evidence" in answer["answer"] and not answer["written"], answer
