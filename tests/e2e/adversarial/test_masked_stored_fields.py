"""What ``masked`` names must not tell of fields the schema does not declare (red-team pass 8,
2026-11-26).

``masked`` names every declared field a rule hides on every node the rule covers, whatever the
node holds (test_masked_names.py). Nodes also store fields the schema does not declare: a
factor journal entry's ``new_number``, ``previous_number``, ``previous_confidence`` and
``inference_status``, its ``seq`` and ``work_key``; a fact's ``observed_at``, ``turn_index``,
``tag``, ``packet_key`` and source lists; a block's ``last_turn``; a merged dossier's
``merged_into``; a section's ``filed_number`` and ``responds_to_filed``. Those were named in
``masked`` only where the node held a value. Under a rule showing staff only ``id`` and
``domain`` of every node, on the whole demo, ``masked`` named ``previous_number`` on the 7 of
37 journal entries staff sees that replaced an earlier value (the masked ``previous_value`` was
null or not), ``new_number`` and ``inference_status`` on the 17 factor entries, ``work_key`` on
20; ``turn_index`` on 16 of 28 facts, ``tag`` on 5, ``observed_at`` and ``packet_key`` on 23.
A rule decides the list, so every node of a label under one rule must name the same fields:
now those fields are declared (named wherever the rule hides them), and a stored field still
undeclared is withheld unnamed (docs/design.md §Pre-Selector).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from neo4j import Driver
from starlette.testclient import TestClient

from cairn.app import create_app
from cairn.policy.acl import acl_visible
from cairn.policy.profiles import PolicyRegistry
from cairn.policy.scope import Scope
from cairn.runtime.settings import Settings
from cairn.schema.nodes import DECLARED_FIELDS
from tests.e2e.adversarial.conftest import demo_roles_with
from tests.e2e.conftest import gql, passport, whole_demo

SHOWN = ["id", "domain"]
PER_REQUEST = 15  # the alias limit
VISIBLE = f"""
MATCH (n:Entity) WHERE {acl_visible("n")}
RETURN [l IN labels(n) WHERE l <> 'Entity'][0] AS label, n.id AS id ORDER BY id
"""


@pytest.fixture(scope="module")
def probe(
    driver: Driver, settings: Settings, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[TestClient, PolicyRegistry]]:
    whole_demo(driver)
    rules = {label: [{"domains": ["*"], "fields": SHOWN}] for label in DECLARED_FIELDS}
    path = demo_roles_with(tmp_path_factory, "staff", rules)
    with TestClient(create_app(settings.model_copy(update={"policy_file": path}))) as client:
        yield client, PolicyRegistry.load(path)


def masked_by_label(
    driver: Driver, client: TestClient, registry: PolicyRegistry
) -> dict[str, dict[str, tuple[str, ...]]]:
    """Every node staff may see, read with ``node``: label -> id -> its ``masked``."""
    profile = registry.get("staff")
    assert profile is not None
    records, _, _ = driver.execute_query(VISIBLE, Scope.from_profile(profile).cypher_params())
    ids = [r["id"] for r in records]
    out: dict[str, dict[str, tuple[str, ...]]] = {}
    for start in range(0, len(ids), PER_REQUEST):
        chunk = ids[start : start + PER_REQUEST]
        args = ", ".join(f"$i{n}: ID!" for n in range(len(chunk)))
        fields = " ".join(f"n{n}: node(id: $i{n}) {{ id label masked }}" for n in range(len(chunk)))
        body = gql(
            client,
            f"query({args}) {{ {fields} }}",
            passport(registry, "staff"),
            **{f"i{n}": i for n, i in enumerate(chunk)},
        )
        assert "errors" not in body, body
        for found in body["data"].values():
            out.setdefault(found["label"], {})[found["id"]] = tuple(found["masked"])
    assert out.keys() >= {"Decision", "Fact", "JournalEntry", "Block", "Dossier", "Section"}
    return out


def test_one_rule_names_the_same_masked_fields_on_every_node_it_covers(driver: Driver, probe: Any) -> None:
    client, registry = probe
    found = masked_by_label(driver, client, registry)
    # Per label, the names some of its nodes' lists hold and others do not.
    varied = {}
    for label, by_id in found.items():
        lists = [set(names) for names in by_id.values()]
        if names := sorted(set().union(*lists) - set.intersection(*lists)):
            varied[label] = names
    assert varied == {}, varied
    # Still named: what the rule hides of the label's declared fields.
    for label, by_id in found.items():
        for names in by_id.values():
            assert set(names) >= DECLARED_FIELDS[label] - set(SHOWN), (label, names)
