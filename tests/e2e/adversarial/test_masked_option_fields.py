"""Options, factor references and aliases mask as every other node does (leak, contract).

Three gaps of the factor answers' masking contract (docs/design.md §Policy module): an option's
field rules had no test anywhere an option appears; a factor or option cited in an answer
(``FactorNodeRef``) showed a hidden name as its id with nothing saying it was hidden; and a hidden
``aliases`` field came back as an empty list, not null and named in ``masked``. The probe policy
hides every option's name, description and aliases and every factor's name and aliases from
staff; the test writes sentinels into them and asks that staff's answers (state, the questions,
their evidence and prose) hold none of them, that every cited factor or option whose name it
hides says ``masked: ["name"]``, and that exec (every field) still sees them, with ``masked: []``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from neo4j import Driver

from cairn.runtime.settings import Settings
from cairn.schema.nodes import DECLARED_FIELDS
from tests.e2e.adversarial.test_masked_factor_fields import READS, answers, assert_nowhere
from tests.e2e.adversarial.test_masked_factor_names import staff_hiding, staff_probe
from tests.e2e.conftest import gql, passport

HIDDEN_OPTION = {"name", "description", "aliases"}
HIDDEN_FACTOR = {"name", "aliases"}
NAME = "ZQXOPTIONNAME"
DESCRIPTION = "ZQXOPTIONDESCRIPTION"
ALIAS = "zqxoptionalias"
FACTOR_ALIAS = "zqxfactoralias"
SENTINELS = (NAME, DESCRIPTION, ALIAS, FACTOR_ALIAS)
PLANT = f"""
MATCH (o:Option) SET o.name = '{NAME} ' + o.id, o.description = '{DESCRIPTION}', o.aliases = ['{ALIAS}']
WITH count(o) AS n
MATCH (f:Factor) SET f.aliases = ['{FACTOR_ALIAS}']
"""
REF = "{ id label name masked }"
OPTION_READS: dict[str, tuple[str, dict[str, Any]]] = {
    "node/option": (
        "query($id: ID!) { node(id: $id) { id label fields masked } }",
        {"id": "predictive_maintenance"},
    ),
    "whyBlocked/refs": (
        f"""query($id: ID!) {{ whyBlocked(id: $id) {{ subject {REF} answer evidence
          blockers {{ factor {REF} requiredBy {REF} }} }} }}""",
        {"id": "predictive_maintenance"},
    ),
    "whatIf/refs": (
        f"""query($id: ID!) {{ whatIf(factorId: $id, value: 100) {{ factor {REF}
          unblocked {REF} blocked {REF} answer evidence }} }}""",
        {"id": "data_quality"},
    ),
    "whatIf/lower": (
        f"""query($id: ID!) {{ whatIf(factorId: $id, value: 0) {{ factor {REF}
          unblocked {REF} blocked {REF} answer evidence }} }}""",
        {"id": "ml_expertise"},
    ),
    "whatChanged/refs": (
        f"""{{ whatChanged(since: "1800-01-01T00:00:00Z") {{ factors {REF} answer evidence }} }}""",
        {},
    ),
    "assessment/refs": (f"{{ assessment {{ canEvaluate {REF} answer continuity evidence }} }}", {}),
    "question/entities": (
        f"""query($text: String!) {{ question(text: $text) {{ entities {REF} answer evidence route }} }}""",
        {"text": "What would happen if data quality went up to 90?"},
    ),
    "question/option": (
        f"""query($text: String!) {{ question(text: $text) {{ entities {REF} answer evidence route }} }}""",
        {"text": "Why can't we do predictive maintenance?"},
    ),
}


@pytest.fixture(scope="module")
def probe(driver: Driver, settings: Settings, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    rules = {
        "Option": [{"domains": ["*"], "fields": sorted(DECLARED_FIELDS["Option"] - HIDDEN_OPTION)}],
        "Factor": [{"domains": ["*"], "fields": sorted(DECLARED_FIELDS["Factor"] - HIDDEN_FACTOR)}],
    }
    yield from staff_probe(driver, settings, tmp_path_factory, PLANT, rules)


def refs(data: Any) -> list[dict[str, Any]]:
    """Every factor or option reference (a map with id, label, name and masked) in a response."""
    found = []
    if isinstance(data, dict):
        if {"id", "label", "name", "masked"} <= set(data):
            found.append(data)
        for value in data.values():
            found += refs(value)
    elif isinstance(data, list):
        for value in data:
            found += refs(value)
    return found


def test_a_role_whose_profile_masks_option_fields_sees_none_of_them(probe: Any) -> None:
    staff = answers(probe, "staff", {**READS, **OPTION_READS})
    assert_nowhere(staff, SENTINELS)
    node = staff["node/option"]["node"]
    assert set(node["masked"]) >= HIDDEN_OPTION, node
    assert not HIDDEN_OPTION & set(node["fields"]), node
    # Every option and factor an answer cites is named by its id and says its name is hidden.
    cited = [r for data in staff.values() for r in refs(data)]
    labels = {r["label"] for r in cited}
    assert {"Option", "Factor"} <= labels, labels
    for ref in cited:
        assert (ref["name"], ref["masked"]) == (ref["id"], ["name"]), ref
    ready = staff["assessment/refs"]["assessment"]["canEvaluate"]
    assert ready or staff["whatIf/refs"]["whatIf"]["unblocked"], "no ready or unblocked option cited"


def test_a_hidden_aliases_field_is_null_and_named_in_masked(probe: Any) -> None:
    staff = answers(probe, "staff")
    for read in ("factor", "factor/asOf"):
        factor = staff[read]["factor"]
        assert factor["aliases"] is None and "aliases" in factor["masked"], factor
    assert staff["whyValue"]["whyValue"]["factor"]["aliases"] is None


def test_a_reader_of_every_field_still_sees_them_unmasked(probe: Any) -> None:
    exec_ = answers(probe, "exec", {**READS, **OPTION_READS})
    everything = json.dumps(exec_)
    for sentinel in SENTINELS:
        assert sentinel in everything, sentinel
    cited = [r for data in exec_.values() for r in refs(data)]
    assert cited and all(r["masked"] == [] and r["name"] != r["id"] for r in cited), cited
    assert exec_["factor"]["factor"]["aliases"] == [FACTOR_ALIAS]
    assert exec_["factor"]["factor"]["masked"] == []


# Factors staff may read (low sensitivity), one never journalled and one journalled.
PICK = "MATCH (f:Factor) WHERE f.sensitivity = 'low' AND f.journal_seq IS {} RETURN f.id AS id ORDER BY id"
UNASSESSED, ASSESSED = PICK.format("NULL"), PICK.format("NOT NULL")
VALUE_FIELDS = {"current_value", "current_confidence", "inference_status", "last_updated", "journal_seq"}
NODE = "query($id: ID!) { node(id: $id) { id fields masked } }"


def test_masked_names_the_same_hidden_fields_on_assessed_and_unassessed_factors(
    probe: Any, driver: Driver, settings: Settings, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Found attacking the demo over HTTP: ``node`` on a factor lists ``journal_seq`` (and a
    ``description``), which the schema did not declare, so a rule that hid them named them in
    ``masked`` only where stored. A factor gets a ``journal_seq`` with its first journal entry: a
    role that may not see values still learnt which factors are assessed. Now both are declared,
    and an assessed and an unassessed factor (one without a description) mask the same names."""
    assessed = driver.execute_query(ASSESSED).records[0]["id"]  # the first by id
    unassessed = driver.execute_query(UNASSESSED).records[0]["id"]
    driver.execute_query("MATCH (f:Factor {id: $id}) REMOVE f.description", id=unassessed)
    hidden = VALUE_FIELDS | {"description"}
    with staff_hiding(settings, tmp_path_factory, hidden) as (client, registry):
        staff, exec_ = passport(registry, "staff"), passport(registry, "exec")
        seen = {i: gql(client, NODE, staff, id=i)["data"]["node"] for i in (assessed, unassessed)}
        full = {i: gql(client, NODE, exec_, id=i)["data"]["node"] for i in (assessed, unassessed)}
    assert seen[assessed]["masked"] == seen[unassessed]["masked"], seen
    assert hidden <= set(seen[assessed]["masked"]), seen
    assert not hidden & (set(seen[assessed]["fields"]) | set(seen[unassessed]["fields"])), seen
    # the difference is there to hide: a reader of every field sees it
    assert "journal_seq" in full[assessed]["fields"] and "journal_seq" not in full[unassessed]["fields"]
