"""A factor's value and its journal entries' numbers are one datum, masked together (leak).

A journal write sets the factor's ``current_value`` to the entry's ``new_number`` (and
``current_confidence`` to its ``confidence``), and the next entry's ``previous_number`` is that
value again. A policy hiding the factor's value but showing entry numbers showed it one field
over (``currentEntry.newValue``, every ``journal`` entry); one hiding the entry numbers but
showing the factor's value showed the newest hidden number in ``factor.value`` and in a
``whyBlocked`` blocker's value. The same held for the factor's ``inference_status`` and
``last_updated`` (the newest entry's status and ``timestamp``). Now each copy shows only where
the rules show every copy in the node's domain (``scope.FACTOR_MIRRORS``; docs/design.md
§Policy module, "Derived fields").
"""

from __future__ import annotations

from typing import Any

import pytest
from neo4j import Driver

from cairn.runtime.settings import Settings
from cairn.schema.nodes import DECLARED_FIELDS
from tests.e2e.adversarial.conftest import data_as, served_with

ENTRY = "id newValue previousValue confidence masked"
FACTOR = f"""query($id: ID!) {{ factor(id: $id) {{ value confidence masked currentEntry {{ {ENTRY} }} }}
  journal(factorId: $id) {{ {ENTRY} }} }}"""
BLOCKED = """query { whyBlocked(id: "predictive_maintenance") {
  blockers { factor { id } value } answer } }"""


def _all_but(label: str, *hidden: str) -> list[dict[str, Any]]:
    return [{"domains": ["*"], "fields": sorted(DECLARED_FIELDS[label] - set(hidden))}]


def _read(settings: Settings, tmp: pytest.TempPathFactory, fields: dict[str, Any], query: str) -> Any:
    with served_with(settings, tmp, "staff", fields) as (client, registry):
        return data_as(client, registry, "staff", query, id="data_quality")


def test_a_hidden_factor_value_is_not_shown_by_its_entries(
    demo_factors: Driver, settings: Settings, tmp_path_factory: pytest.TempPathFactory
) -> None:
    fields = {
        "Factor": _all_but("Factor", "current_value", "current_confidence"),
        "JournalEntry": _all_but("JournalEntry"),
    }
    data = _read(settings, tmp_path_factory, fields, FACTOR)
    factor = data["factor"]
    assert factor["value"] is None and {"current_value", "current_confidence"} <= set(factor["masked"])
    entries = [factor["currentEntry"], *data["journal"]]
    assert len(entries) > 2
    for entry in entries:
        assert entry["newValue"] is None and entry["previousValue"] is None, entry
        assert entry["confidence"] is None, entry
        assert {"new_value", "previous_value", "new_number", "previous_number", "confidence"} <= set(
            entry["masked"]
        )


def test_hidden_entry_numbers_are_not_shown_as_the_factors_value(
    demo_factors: Driver, settings: Settings, tmp_path_factory: pytest.TempPathFactory
) -> None:
    hidden = ("new_number", "previous_number", "confidence", "previous_confidence")
    fields = {"Factor": _all_but("Factor"), "JournalEntry": _all_but("JournalEntry", *hidden)}
    data = _read(settings, tmp_path_factory, fields, FACTOR)
    factor = data["factor"]
    assert factor["value"] is None and factor["confidence"] is None, factor
    assert {"current_value", "current_confidence"} <= set(factor["masked"])
    assert all(e["newValue"] is None for e in data["journal"])
    with served_with(settings, tmp_path_factory, "staff", fields) as (client, registry):
        blocked = data_as(client, registry, "staff", BLOCKED)["whyBlocked"]
    assert blocked["blockers"] and all(b["value"] is None for b in blocked["blockers"]), blocked


def test_a_reader_of_both_sees_both(
    demo_factors: Driver, settings: Settings, tmp_path_factory: pytest.TempPathFactory
) -> None:
    fields = {"Factor": _all_but("Factor"), "JournalEntry": _all_but("JournalEntry")}
    data = _read(settings, tmp_path_factory, fields, FACTOR)
    factor = data["factor"]
    assert factor["value"] is not None and factor["masked"] == []
    assert float(factor["currentEntry"]["newValue"]) == factor["value"]


STATE = """query($id: ID!) { factor(id: $id) { inferenceStatus lastUpdated masked
  currentEntry { timestamp inferenceStatus masked } }
  journal(factorId: $id) { timestamp inferenceStatus masked } }"""


def test_a_factors_hidden_time_and_status_are_not_shown_by_its_entries(
    demo_factors: Driver, settings: Settings, tmp_path_factory: pytest.TempPathFactory
) -> None:
    hidden = ("last_updated", "inference_status")
    fields = {"Factor": _all_but("Factor", *hidden), "JournalEntry": _all_but("JournalEntry")}
    data = _read(settings, tmp_path_factory, fields, STATE)
    factor = data["factor"]
    assert factor["lastUpdated"] is None and factor["inferenceStatus"] is None, factor
    for entry in [factor["currentEntry"], *data["journal"]]:
        assert entry["timestamp"] is None and entry["inferenceStatus"] is None, entry
        assert {"timestamp", "inference_status"} <= set(entry["masked"])


def test_hidden_entry_times_and_statuses_are_not_shown_as_the_factors(
    demo_factors: Driver, settings: Settings, tmp_path_factory: pytest.TempPathFactory
) -> None:
    fields = {
        "Factor": _all_but("Factor"),
        "JournalEntry": _all_but("JournalEntry", "timestamp", "inference_status"),
    }
    factor = _read(settings, tmp_path_factory, fields, STATE)["factor"]
    assert factor["lastUpdated"] is None and factor["inferenceStatus"] is None, factor
    assert {"last_updated", "inference_status"} <= set(factor["masked"])


NODE = "query($id: ID!) { node(id: $id) { fields masked } }"
CHANGED = """query { whatChanged(since: "2024-10-16T12:00:00Z", factorIds: ["data_quality"]) {
  entries evidence } }"""


def test_hidden_entry_numbers_are_not_shown_by_a_node_read_or_a_change_window(
    demo_factors: Driver, settings: Settings, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Review of pass 11: `node` (and every walk: the Pre-Selector's own field rules) showed the
    factor's value where `factor` hid it, and `whatChanged` gave the number before its window
    from the newest earlier entry's hidden `new_number`."""
    hidden = ("new_number", "previous_number", "confidence", "previous_confidence")
    fields = {"Factor": _all_but("Factor"), "JournalEntry": _all_but("JournalEntry", *hidden)}
    with served_with(settings, tmp_path_factory, "staff", fields) as (client, registry):
        node = data_as(client, registry, "staff", NODE, id="data_quality")["node"]
        changed = data_as(client, registry, "staff", CHANGED)["whatChanged"]
    assert "current_value" not in node["fields"] and "current_confidence" not in node["fields"], node
    assert {"current_value", "current_confidence"} <= set(node["masked"])
    [change] = changed["evidence"]["changes"]
    assert changed["entries"] >= 1 and change["before"] is None, change
