"""Factor answers show no field the caller's profile masks (leak).

``factor``, ``journal``, ``assessment``, ``whyValue``, ``whyBlocked``, ``whatIf``, ``whatChanged``
and ``question`` returned a journal entry's ``timestamp`` and ``rationale`` and a factor's
``last_updated`` in their typed fields, their evidence and their templated text whatever the
field rules hid. Now factor reads mask as every other read does (``preselector.mask`` in
cairn/memory/factors/journal.py; docs/design.md §Policy module): a hidden field is null, named in
``masked``, and left out of the prose. The probe policy hides entry ``timestamp`` and
``rationale`` and factor ``last_updated`` for staff; the test writes sentinels into those fields
and asks that staff's answers hold none of them while exec's (all fields) still do.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from neo4j import Driver
from starlette.testclient import TestClient

from cairn.app import create_app
from cairn.ingest.factors import load_demo_factors
from cairn.policy.profiles import PolicyRegistry
from cairn.runtime.settings import Settings
from cairn.schema.nodes import DECLARED_FIELDS
from tests.e2e.adversarial.conftest import demo_roles_with
from tests.e2e.conftest import gql, passport, wipe

HIDDEN_ENTRY = {"timestamp", "rationale"}
HIDDEN_FACTOR = {"last_updated"}
RATIONALE = "ZQXSENTINELRATIONALE"
ENTRY_YEAR = "1904-"  # every entry's time is moved 120 years back, into 1904 (order kept)
FACTOR_TIME = "1899-12-31T00:00:00Z"
SENTINELS = (RATIONALE, ENTRY_YEAR, "1899-12-31")
PLANT = f"""
MATCH (e:JournalEntry)-[:ABOUT]->(:Factor)
SET e.timestamp = e.timestamp - duration({{years: 120}}), e.rationale = '{RATIONALE} ' + e.id
WITH count(e) AS n
MATCH (f:Factor) WHERE f.last_updated IS NOT NULL SET f.last_updated = datetime('{FACTOR_TIME}')
"""

ENTRY = """id factorId op timestamp previousValue newValue rationale excerpt confidence sessionId
  inferenceStatus influencedBy hasHiddenInfluences masked"""
FACTOR = f"""id name category scale aliases value confidence inferenceStatus lastUpdated asOf masked
  currentEntry {{ {ENTRY} }}"""
WHY_BLOCKED = """query($id: ID!) { whyBlocked(id: $id) { status answer evidence
  blockers { factor { id } value threshold lastSet } } }"""
QUESTION = """query($text: String!) { question(text: $text) { intent answer evidence route } }"""
READS: dict[str, tuple[str, dict[str, Any]]] = {
    "factor": (f"query($id: ID!) {{ factor(id: $id) {{ {FACTOR} }} }}", {"id": "data_governance"}),
    "factor/asOf": (
        f'query($id: ID!) {{ factor(id: $id, asOf: "2100-01-01T00:00:00Z") {{ {FACTOR} }} }}',
        {"id": "data_governance"},
    ),
    "journal": (f"query($id: ID!) {{ journal(factorId: $id) {{ {ENTRY} }} }}", {"id": "data_quality"}),
    "assessment": (
        "{ assessment { categories { category lastUpdated } answer continuity evidence } }",
        {},
    ),
    "whyValue": (
        f"query($id: ID!) {{ whyValue(id: $id) {{ factor {{ {FACTOR} }} history {{ {ENTRY} }}"
        " answer evidence } }",
        {"id": "data_quality"},
    ),
    "whyBlocked/option": (WHY_BLOCKED, {"id": "predictive_maintenance"}),
    "whyBlocked/factor": (WHY_BLOCKED, {"id": "data_quality"}),
    "whatIf": (
        """query($id: ID!) { whatIf(factorId: $id, value: 90) { current value answer evidence } }""",
        {"id": "data_quality"},
    ),
    "whatChanged": (
        """{ whatChanged(since: "1800-01-01T00:00:00Z") { entries answer evidence } }""",
        {},
    ),
    "question/why_blocker": (QUESTION, {"text": "Why can't we do predictive maintenance?"}),
    "question/why_value": (QUESTION, {"text": "Why is data quality only 20?"}),
    "question/status": (QUESTION, {"text": "Where are we overall?"}),
    "question/where_were_we": (QUESTION, {"text": "Where were we last time?"}),
    "question/what_changed": (QUESTION, {"text": "What changed since 1800?"}),
}


# Stored on a factor entry but not declared in cairn/schema/nodes.py (written by the journal).
ENTRY_EXTRA = frozenset({"previous_number", "new_number", "inference_status", "seq"})


def _all_but(label: str, hidden: set[str], extra: frozenset[str] = frozenset()) -> list[str]:
    return sorted((DECLARED_FIELDS[label] | extra) - hidden)


@pytest.fixture(scope="module")
def probe(driver: Driver, settings: Settings, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    wipe(driver)
    load_demo_factors(driver)
    driver.execute_query(PLANT)
    entry_fields = _all_but("JournalEntry", HIDDEN_ENTRY, ENTRY_EXTRA)
    path = demo_roles_with(
        tmp_path_factory,
        "staff",
        {
            "JournalEntry": [{"domains": ["*"], "fields": entry_fields}],
            "Factor": [{"domains": ["*"], "fields": _all_but("Factor", HIDDEN_FACTOR)}],
        },
    )
    with TestClient(create_app(settings.model_copy(update={"policy_file": path}))) as client:
        yield client, PolicyRegistry.load(path)
    wipe(driver)


def answers(probe: Any, role: str, reads: dict[str, Any] = READS) -> dict[str, Any]:
    """Every read of ``reads`` through the probe's app as ``role``; no read may error."""
    client, registry = probe
    out: dict[str, Any] = {}
    for name, (query, variables) in reads.items():
        body = gql(client, query, passport(registry, role), **variables)
        assert "errors" not in body, (name, body)
        out[name] = body["data"]
    return out


def assert_nowhere(answered: dict[str, Any], sentinels: tuple[str, ...]) -> None:
    """No answer, in data, errors or prose, contains any of ``sentinels``."""
    for name, data in answered.items():
        text = json.dumps(data)
        for sentinel in sentinels:
            assert sentinel not in text, (name, sentinel, text)


def test_factor_answers_show_no_masked_field(probe: Any) -> None:
    staff = answers(probe, "staff")
    assert_nowhere(staff, SENTINELS)
    factor = staff["factor"]["factor"]
    assert factor["lastUpdated"] is None and "last_updated" in factor["masked"]
    entry = factor["currentEntry"]
    assert entry["timestamp"] is None and entry["rationale"] is None
    assert set(entry["masked"]) >= HIDDEN_ENTRY
    assert entry["newValue"] is not None  # a shown field is still shown
    assert staff["journal"]["journal"] and all(e["rationale"] is None for e in staff["journal"]["journal"])


def test_a_reader_of_every_field_still_sees_them(probe: Any) -> None:
    exec_ = answers(probe, "exec")
    everything = json.dumps(exec_)
    for sentinel in SENTINELS:
        assert sentinel in everything, sentinel
    assert RATIONALE in exec_["whyValue"]["whyValue"]["answer"]
    assert ENTRY_YEAR in exec_["journal"]["journal"][0]["timestamp"]
    assert exec_["factor"]["factor"]["masked"] == []
