"""The text a factor's journal writes itself is masked with the numbers and times it copies (leak).

A confirmation, a correction and a recalculation write their ``rationale`` ("User corrected from
20 to 73.25", "User confirmed 61.4", "Recalculated from 4 journal entries; 1 contradiction(s)")
and a recalculation its ``details`` (every weighed entry's value, confidence, time and excerpt)
from the entry's numbers; an entry's ``created_at`` is the moment its ``timestamp`` defaults to,
and a session the journal opens for it was named after that time and starts at it, and is titled
by its op ("recalculation", "ad-hoc update"). A policy
showing those but hiding the numbers (or the times) showed them through the copies, in every
read: ``journal``, ``factor``, ``whyValue``, ``whatChanged``, the questions, the assessment's
"where were we", ``node`` and walks. Now they are derived fields of the entry's numbers, time and
op (``scope.FACTOR_ENTRY_DERIVED``, ``scope.DERIVED_FIELDS``), masked wherever any of these is.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import ExitStack
from datetime import UTC, datetime
from typing import Any

import pytest
from neo4j import Driver
from starlette.testclient import TestClient

from cairn.ingest.factors import load_demo_factors
from cairn.memory.factors.journal import confirm_factor, recalculate_factor, update_factor
from cairn.policy.profiles import PolicyRegistry
from cairn.policy.scope import Scope
from cairn.runtime.settings import Settings
from tests.e2e.adversarial.conftest import served_with
from tests.e2e.adversarial.test_masked_factor_fields import (
    ENTRY_EXTRA,
    READS,
    _all_but,
    answers,
    assert_nowhere,
)
from tests.e2e.conftest import gql, passport, wipe

FACTOR = "data_quality"
CORRECTED = 73.25  # a value the demo never holds: its text anywhere is a copy of the number
VALUES = {"new_number", "previous_number", "new_value", "previous_value"}
NUMBERS = VALUES | {"confidence", "previous_confidence"}
HIDDEN_FACTOR = {"current_value", "current_confidence"}
WHEN = datetime(2031, 7, 9, 13, 14, 15, tzinfo=UTC)  # the hidden time of the timed probe
NODE = "query($id: ID!) { node(id: $id) { fields masked } }"
WALK = "query($id: ID!) { neighbourhood(id: $id, hops: 1) { anchor { fields } nodes { id fields masked } } }"


def _rules(label: str, hidden: set[str], extra: frozenset[str] = frozenset()) -> list[dict[str, Any]]:
    return [{"domains": ["*"], "fields": _all_but(label, hidden, extra)}]


@pytest.fixture(scope="module")
def written(driver: Driver) -> Iterator[dict[str, str]]:
    """The demo's factors, and on one of them a correction, a confirmation and a recalculation
    written by the operator (the last two now), plus an update at a set time on another (ids by kind)."""
    wipe(driver)
    load_demo_factors(driver)
    system = Scope.system()
    # Set a month after the demo's journal, so the recalculation weighs it beside older evidence.
    corrected = confirm_factor(driver, system, FACTOR, CORRECTED, timestamp=datetime(2024, 12, 1, tzinfo=UTC))
    ids = {"correct": corrected.id}
    recalculated = recalculate_factor(driver, system, FACTOR)
    assert recalculated.entry is not None, recalculated.answer
    ids["recalculate"] = recalculated.entry.id
    ids["recalculation session"] = str(recalculated.entry.session_id)
    ids["confirm"] = confirm_factor(driver, system, FACTOR).id
    timed = update_factor(
        driver, system, "data_governance", 50, rationale="set by hand", confidence=0.5, timestamp=WHEN
    )
    ids["timed"], ids["session"] = timed.id, str(timed.session_id)
    yield ids
    wipe(driver)


# What staff's rules hide of an entry and of its factor, per probe: the numbers (showing the
# rationale and details), or the time (showing created_at and the sessions' fields).
HIDDEN = {"numbers": (NUMBERS, HIDDEN_FACTOR), "times": ({"timestamp"}, {"last_updated"})}


@pytest.fixture(scope="module")
def probes(
    written: dict[str, str], settings: Settings, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, tuple[TestClient, PolicyRegistry]]]:
    with ExitStack() as stack:
        yield {
            name: stack.enter_context(
                served_with(
                    settings,
                    tmp_path_factory,
                    "staff",
                    {
                        "JournalEntry": _rules("JournalEntry", entry, ENTRY_EXTRA),
                        "Factor": _rules("Factor", factor),
                    },
                )
            )
            for name, (entry, factor) in HIDDEN.items()
        }


def _reads(probe: tuple[TestClient, PolicyRegistry], role: str, ids: dict[str, str]) -> dict[str, Any]:
    """Every factor read, and ``node`` and a walk at each written entry and session."""
    out = answers(probe, role, READS)
    client, registry = probe
    for kind, node_id in ids.items():
        for name, query in (("node", NODE), ("walk", WALK)):
            body = gql(client, query, passport(registry, role), id=node_id)
            assert "errors" not in body, (kind, name, body)
            out[f"{name}/{kind}"] = body["data"]
    return out


def test_the_journals_own_text_is_masked_with_the_numbers_it_copies(
    probes: dict[str, tuple[TestClient, PolicyRegistry]], written: dict[str, str]
) -> None:
    staff = _reads(probes["numbers"], "staff", written)
    assert_nowhere(staff, ("73.25", "corrected from", "Recalculated from", "contradiction(s)", "weights"))
    confirmed = re.search(r"User confirmed \d", json.dumps(staff))  # the confirmed value
    assert confirmed is None, confirmed
    for kind in ("correct", "confirm", "recalculate"):
        node = staff[f"node/{kind}"]["node"]
        assert {"rationale", "details"} <= set(node["masked"]), (kind, node)
    # Decided by the rule, not by the op: a plain update's rationale is masked alike.
    assert "rationale" in staff["node/timed"]["node"]["masked"]
    journal = json.dumps(staff["journal"])
    assert '"rationale": null' in journal, journal


def test_a_reader_of_the_numbers_still_reads_the_text(
    probes: dict[str, tuple[TestClient, PolicyRegistry]], written: dict[str, str]
) -> None:
    exec_ = json.dumps(_reads(probes["numbers"], "exec", written))
    for copy in ("corrected from 20 to 73.25", "Recalculated from", "weights"):
        assert copy in exec_, copy
    assert re.search(r"User confirmed \d", exec_)


def test_an_entrys_created_at_and_session_are_masked_with_its_time(
    probes: dict[str, tuple[TestClient, PolicyRegistry]], written: dict[str, str]
) -> None:
    staff = _reads(probes["times"], "staff", written)
    assert_nowhere(staff, ("2031-07-09", "20310709"))
    assert "created_at" in staff["node/confirm"]["node"]["masked"]
    assert "created_at" in staff["node/timed"]["node"]["masked"]
    assert {"started_at", "created_at"} <= set(staff["node/session"]["node"]["masked"])
    # The operator's timed write is what staff cannot see: exec reads it in both.
    exec_ = _reads(probes["times"], "exec", written)
    for kind in ("timed", "session"):
        assert "2031-07-09" in json.dumps(exec_[f"node/{kind}"]), kind


def test_a_session_the_journal_opens_is_titled_only_where_its_entries_op_shows(
    written: dict[str, str], settings: Settings, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The journal titles a session it opens by the op that opened it, and writes an entry's
    rationale, details and default excerpt by its op ("Recalculated from …", "User confirmed the
    inferred value"): where a rule hides entries' ``op``, these are masked (on every session and
    entry alike, as the rule decides), in every read: ``node``, walks, ``journal`` and the
    assessment's "where were we" ("Last time (…, "recalculation") …")."""
    rules = {"JournalEntry": _rules("JournalEntry", {"op"}, ENTRY_EXTRA)}
    with served_with(settings, tmp_path_factory, "staff", rules) as probe:
        staff = _reads(probe, "staff", written)
        exec_ = _reads(probe, "exec", written)
    copies = (
        "recalculation",
        "ad-hoc update",
        "Recalculated from",
        "User confirmed",
        "corrected from",
        "weights",
    )
    assert_nowhere(staff, copies)
    for kind in ("session", "recalculation session"):
        assert "title" in staff[f"node/{kind}"]["node"]["masked"], staff[f"node/{kind}"]
    for kind in ("correct", "confirm", "recalculate", "timed"):
        assert {"rationale", "details", "excerpt"} <= set(staff[f"node/{kind}"]["node"]["masked"]), kind
    assert "recalculation" in json.dumps(exec_["node/recalculation session"])
    assert "ad-hoc update" in json.dumps(exec_["assessment"])
    assert all(copy in json.dumps(exec_) for copy in copies), exec_
