"""Factor answers show no factor ``name``, ``category`` or ``scale`` the caller's profile masks (leak).

The dependency answers (``whyBlocked``, ``whatIf``, ``whyValue``, ``whatChanged``, the routed
questions) named every factor they cite by its stored name, and ``assessment`` grouped factors
by their stored category, whatever the field rules hid; ``factor`` showed a hidden name as the
id and a hidden category or scale as the defaults "uncategorised" and "0-100". Now the closure,
dependents and what-changed reads return those fields only where the scope shows them
(``acl.shown_or`` in cairn/graph/factors.py), a factor's own state has them null and named in
``masked`` (cairn/memory/factors/journal.py, ``state_from_row``), and prose calls a factor whose
name is hidden by its id, which the caller sees (docs/design.md §Policy module). The probe policy
hides every factor's name, category and scale from staff; the test writes sentinels into them and
asks that staff's answers hold none of them while exec's (all fields) still do.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
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
from tests.e2e.adversarial.test_masked_factor_fields import READS, answers, assert_nowhere
from tests.e2e.conftest import gql, passport, wipe

HIDDEN_FACTOR = {"name", "category", "scale"}
NAME = "ZQXSENTINELNAME"
CATEGORY = "zqxsentinelcategory"
SCALE_HIGH = "100.125"  # every factor's scale becomes 0-100.125: its values still lie on it
SENTINELS = (NAME, CATEGORY, SCALE_HIGH)
PLANT = f"""
MATCH (f:Factor)
SET f.name = '{NAME} ' + f.id, f.category = '{CATEGORY}', f.scale = '0-{SCALE_HIGH}'
"""
EXTRA_READS: dict[str, tuple[str, dict[str, Any]]] = {
    "whyBlocked/names": (
        """query($id: ID!) { whyBlocked(id: $id) { subject { id name } answer evidence
          blockers { factor { id name } requiredBy { id name } } } }""",
        {"id": "predictive_maintenance"},
    ),
    "whatIf/names": (
        """query($id: ID!) { whatIf(factorId: $id, value: 90) { factor { id name }
          unblocked { id name } blocked { id name } answer evidence } }""",
        {"id": "data_quality"},
    ),
    "assessment/categories": ("{ assessment { categories { category } answer evidence } }", {}),
}


def staff_probe(
    driver: Driver,
    settings: Settings,
    tmp_path_factory: pytest.TempPathFactory,
    plant: str,
    rules: dict[str, Any],
) -> Iterator[Any]:
    """The demo factors plus ``plant``, served to staff under the demo policy with ``rules``."""
    wipe(driver)
    load_demo_factors(driver)
    driver.execute_query(plant)
    path = demo_roles_with(tmp_path_factory, "staff", rules)
    with TestClient(create_app(settings.model_copy(update={"policy_file": path}))) as client:
        yield client, PolicyRegistry.load(path)
    wipe(driver)


@contextmanager
def staff_hiding(
    settings: Settings, tmp_path_factory: pytest.TempPathFactory, hidden: set[str]
) -> Iterator[tuple[TestClient, PolicyRegistry]]:
    """An app whose staff rules show every declared Factor field but ``hidden``."""
    rules = {"Factor": [{"domains": ["*"], "fields": sorted(DECLARED_FIELDS["Factor"] - hidden)}]}
    path = demo_roles_with(tmp_path_factory, "staff", rules)
    with TestClient(create_app(settings.model_copy(update={"policy_file": path}))) as client:
        yield client, PolicyRegistry.load(path)


@pytest.fixture(scope="module")
def probe(driver: Driver, settings: Settings, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    rules = {"Factor": [{"domains": ["*"], "fields": sorted(DECLARED_FIELDS["Factor"] - HIDDEN_FACTOR)}]}
    yield from staff_probe(driver, settings, tmp_path_factory, PLANT, rules)


def test_factor_answers_show_no_masked_name_category_or_scale(probe: Any) -> None:
    staff = answers(probe, "staff", {**READS, **EXTRA_READS})
    assert_nowhere(staff, SENTINELS)
    factor = staff["factor"]["factor"]
    # Null and named in masked: not the id, "uncategorised" or "0-100" standing in for them.
    assert factor["name"] is None and factor["category"] is None and factor["scale"] is None
    assert set(factor["masked"]) >= HIDDEN_FACTOR
    assert factor["value"] is not None  # a shown field is still shown
    # Prose still says which factor it means, by the id the caller sees.
    assert "data_quality" in staff["whyValue"]["whyValue"]["answer"]


def test_a_reader_of_every_field_still_sees_names(probe: Any) -> None:
    exec_ = answers(probe, "exec", {**READS, **EXTRA_READS})
    everything = json.dumps(exec_)
    for sentinel in SENTINELS:
        assert sentinel in everything, sentinel
    assert NAME in exec_["whyBlocked/option"]["whyBlocked"]["answer"]
    assert exec_["factor"]["factor"]["category"] == CATEGORY
    assert exec_["factor"]["factor"]["scale"] == f"0-{SCALE_HIGH}"


UPDATE = """mutation($input: FactorUpdateInput!) { updateFactor(input: $input) { id newValue } }"""
RECALCULATE = """mutation($id: ID!) { recalculateFactor(factorId: $id) { value written answer } }"""
ENTRIES = "MATCH (e:JournalEntry) RETURN count(e) AS n"


def test_a_writer_who_may_not_see_the_scale_cannot_write_a_value(
    probe: Any, driver: Driver, settings: Settings, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Checking a value against the scale (or clamping to it) would tell the scale: refused, and
    the refusal names no bound; nothing is written."""
    path = demo_roles_with(
        tmp_path_factory,
        "writer",
        {"Factor": [{"domains": ["*"], "fields": sorted(DECLARED_FIELDS["Factor"] - {"scale"})}]},
    )
    registry = PolicyRegistry.load(path)
    before = driver.execute_query(ENTRIES).records[0]["n"]
    with TestClient(create_app(settings.model_copy(update={"policy_file": path}))) as client:
        for value in (35, 100.1, 120):
            body = gql(
                client,
                UPDATE,
                passport(registry, "writer"),
                input={"factorId": "data_quality", "value": value, "rationale": "probe", "confidence": 0.5},
            )
            assert body["errors"][0]["extensions"]["code"] == "INVALID_INPUT", body
            assert SCALE_HIGH not in json.dumps(body) and "0-100" not in json.dumps(body)
        body = gql(client, RECALCULATE, passport(registry, "writer"), id="data_quality")
        assert body["errors"][0]["extensions"]["code"] == "INVALID_INPUT", body
        assert SCALE_HIGH not in json.dumps(body)
    assert driver.execute_query(ENTRIES).records[0]["n"] == before


VERDICTS = """query($id: ID!) { whyBlocked(id: $id) { status blockers { factor { id } value } } }"""
FIGURES = """{ assessment { totalFactorsAssessed avgConfidence canEvaluate { id }
  categories { completeness avgConfidence } } }"""


def test_figures_and_verdicts_use_only_values_the_caller_sees(
    probe: Any, settings: Settings, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Whether a prerequisite is met and the assessment's completeness and average confidence are
    derived from a factor's value and confidence: where those are hidden, the caller sees the
    factor as unassessed, as its null value says (docs/design.md §Policy module)."""
    hidden = {"current_value", "current_confidence"}
    with staff_hiding(settings, tmp_path_factory, hidden) as (client, registry):
        seen = {
            r: gql(client, FIGURES, passport(registry, r))["data"]["assessment"] for r in ("staff", "exec")
        }
        masked = gql(client, VERDICTS, passport(registry, "staff"), id="predictive_maintenance")
    # The same role, same nodes, with values shown (the module's probe hides only names).
    shown_client, shown_registry = probe
    shown = gql(shown_client, VERDICTS, passport(shown_registry, "staff"), id="predictive_maintenance")
    assert seen["exec"]["totalFactorsAssessed"] > 0 and seen["exec"]["avgConfidence"] > 0
    assert seen["staff"]["totalFactorsAssessed"] == 0 and seen["staff"]["avgConfidence"] == 0
    assert all(c["completeness"] == 0 and c["avgConfidence"] == 0 for c in seen["staff"]["categories"])
    # Every prerequisite unmet with values shown is unmet with them hidden, and no option is
    # ready (a met verdict would tell staff the hidden value clears the threshold).
    shown_unmet = {b["factor"]["id"] for b in shown["data"]["whyBlocked"]["blockers"]}
    masked_unmet = {b["factor"]["id"] for b in masked["data"]["whyBlocked"]["blockers"]}
    assert shown_unmet and shown_unmet <= masked_unmet, (shown_unmet, masked_unmet)
    assert all(b["value"] is None for b in masked["data"]["whyBlocked"]["blockers"])
    ready = gql(shown_client, FIGURES, passport(shown_registry, "staff"))["data"]["assessment"]["canEvaluate"]
    assert ready, "the demo gives staff a ready option when values show"
    assert seen["staff"]["canEvaluate"] == []
