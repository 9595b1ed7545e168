"""What ``masked`` names must not tell (red-team pass, 2026-11-26).

A node's ``masked`` list named every x_extra key past the role's whitelist and every reference
dropped because its target is hidden. Against ``cairn serve --demo`` staff saw six alias events;
on four of them ``masked`` held ``alias_of_decision`` (the decision behind it is one staff may
not see), on the other two it did not (their decision is visible and named). The zero-trust
alias event carries no note saying where it comes from, so only ``masked`` told staff that a
decision it cannot see stands behind it; a reference to a never-stored id would not have been
"masked" but absent. Managers read ``x_extra.kpis`` and ``x_extra.kpi_tracking_id`` on the
four product decisions that track KPIs: which decisions hold the data their role withholds.
Now a dropped reference is absent as if never written, x_extra shows its whitelisted keys
without naming the others, and a field a rule hides is named on every node the rule covers,
whether or not the node holds a value there (docs/design.md §Pre-Selector).
"""

from __future__ import annotations

from typing import Any

import pytest
from starlette.testclient import TestClient

from cairn.policy.profiles import PolicyRegistry
from tests.e2e.conftest import gql, passport

pytestmark = pytest.mark.usefixtures("acme")

HIDDEN_REF = "acme-e-alias-zero-trust-2023"  # staff: its decision is corporate, hidden
VISIBLE_REF = "acme-e-alias-sunset-connectors-apac-2024"  # staff: its decision is a product one
NODE = "query($i: ID!) { node(id: $i) { id fields masked } }"
SEARCH = """query($l: [String!]) { search(query: "cloud platform pricing", k: 100, threshold: -1,
  labels: $l) { hits { node { id label domain masked } } } }"""


def node(client: TestClient, registry: PolicyRegistry, role: str, node_id: str) -> dict[str, Any]:
    body = gql(client, NODE, passport(registry, role), i=node_id)
    assert "errors" not in body, body
    found: dict[str, Any] = body["data"]["node"]
    return found


def test_an_alias_of_a_hidden_decision_reads_like_a_plain_event(
    client: TestClient, registry: PolicyRegistry
) -> None:
    hidden = node(client, registry, "staff", HIDDEN_REF)
    assert "alias_of_decision" not in hidden["fields"]
    assert hidden["masked"] == []
    # read alone, an alias event names its decision only when that decision is in the result
    assert node(client, registry, "staff", VISIBLE_REF)["masked"] == []
    body = gql(client, SEARCH, passport(registry, "staff"), l=["Event"])
    hits = {h["node"]["id"]: h["node"] for h in body["data"]["search"]["hits"]}
    assert hits[HIDDEN_REF]["masked"] == hits[VISIBLE_REF]["masked"] == []


@pytest.mark.parametrize("role", ["staff", "manager"])
def test_masked_names_no_x_extra_key_and_no_dropped_reference(
    role: str, client: TestClient, registry: PolicyRegistry
) -> None:
    body = gql(client, SEARCH, passport(registry, role), l=["Decision", "Event"])
    assert "errors" not in body, body
    hits = body["data"]["search"]["hits"]
    assert len(hits) > 20
    named = {m for h in hits for m in h["node"]["masked"]}
    assert not {m for m in named if m.startswith("x_extra.")}, sorted(named)
    # A field the rule hides is named on every node its rule covers, whatever the node holds
    # there: naming alias_of_decision only on alias events told which events are aliases.
    by_rule: dict[tuple[str, str], set[tuple[str, ...]]] = {}
    for h in hits:
        by_rule.setdefault((h["node"]["label"], h["node"]["domain"]), set()).add(tuple(h["node"]["masked"]))
    assert all(len(lists) == 1 for lists in by_rule.values()), by_rule
