"""Factor walks honour the role's edge rules and hop limit, not node visibility alone (issue 12, #7).

Every node below is one staff and manager may *see*; what they may not do is *reach* two of
them: ``far_secret`` sits two DEPENDS_ON hops from the option (their profiles allow one), and
``product_secret`` hangs off an edge into ``acme/product``, which their DEPENDS_ON rule
(``acme/assessment`` to ``acme/assessment``) does not allow. Both are unmet blockers, so the
old walk (node visibility only) named them with their values. Now why-blocked and what-if name
neither, say only that something unseen is also required, and never call the option ready;
director and exec (two and three hops, ``acme/*`` rules) still get both, so the check is not
vacuous. External sees no factor at all: every answer equals the one for an id that does not exist.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from neo4j import Driver
from starlette.testclient import TestClient

from cairn.policy.passport import headers_for
from cairn.policy.profiles import PolicyRegistry
from tests.e2e.conftest import wipe

ACCESS = {
    "sensitivity": "low",
    "namespaces": ["internal", "public"],
    "roles_allowed": ["staff", "manager", "director", "exec", "writer", "external"],
}
NODES = [
    ("Option", "opt_go", "Go live", "acme/assessment", None),
    ("Factor", "near", "Near readiness", "acme/assessment", 80.0),
    ("Factor", "far_secret", "Far SECRETFAR readiness", "acme/assessment", 10.0),
    ("Factor", "product_secret", "Product SECRETPRODUCT fit", "acme/product", 5.0),
]
EDGES = [("opt_go", "near", 50.0), ("near", "far_secret", 50.0), ("opt_go", "product_secret", 50.0)]
SECRETS = ("far_secret", "SECRETFAR", "product_secret", "SECRETPRODUCT")
WHY_BLOCKED = """query($id: ID!) { whyBlocked(id: $id) {
  subject { id } status blockers { factor { id name } value threshold } hasHiddenPrerequisites answer evidence
} }"""
WHAT_IF = """query($id: ID!) { whatIf(factorId: $id, value: 0) {
  factor { id } unblocked { id name } blocked { id name } answer evidence
} }"""


def _load(driver: Driver) -> None:
    wipe(driver)
    for label, nid, name, domain, value in NODES:
        driver.execute_query(
            f"CREATE (x:Entity:{label} {{id: $id}}) SET x += $props",
            id=nid,
            props={"name": name, "domain": domain, "current_value": value, "category": "test", **ACCESS},
        )
    driver.execute_query(
        "UNWIND $edges AS e MATCH (a:Entity {id: e[0]}), (b:Entity {id: e[1]}) "
        "CREATE (a)-[:DEPENDS_ON {min_value: e[2]}]->(b)",
        edges=[list(e) for e in EDGES],
    )


@pytest.fixture(scope="module")
def graph(driver: Driver) -> Driver:
    _load(driver)
    return driver


pytestmark = pytest.mark.usefixtures("graph")


def ask(client: TestClient, registry: PolicyRegistry, role: str, query: str, **variables: Any) -> Any:
    headers = headers_for(registry, role)
    resp = client.post("/graphql", json={"query": query, "variables": variables}, headers=headers)
    assert resp.status_code == 200, resp.text
    body = resp.json()
    for error in body.get("errors") or []:  # request ids differ per call; nothing else may
        error.pop("locations", None)
    return body


@pytest.mark.parametrize("role", ["staff", "manager"])
def test_why_blocked_names_nothing_past_the_edge_rules_or_the_hop_limit(
    client: TestClient, registry: PolicyRegistry, role: str
) -> None:
    body = ask(client, registry, role, WHY_BLOCKED, id="opt_go")
    answer = body["data"]["whyBlocked"]
    dumped = json.dumps(body)
    for secret in SECRETS:
        assert secret not in dumped, f"{role} reached {secret}"
    assert answer["hasHiddenPrerequisites"] is True
    assert answer["status"] != "ready"
    assert answer["blockers"] == []  # the one walkable prerequisite (near) is met


@pytest.mark.parametrize("role", ["staff", "manager"])
def test_what_if_walks_no_further_than_the_role_may(
    client: TestClient, registry: PolicyRegistry, role: str
) -> None:
    body = ask(client, registry, role, WHAT_IF, id="near")
    assert body["data"]["whatIf"]["factor"]["id"] == "near"
    dumped = json.dumps(body)
    for secret in SECRETS:
        assert secret not in dumped, f"{role} reached {secret}"


@pytest.mark.parametrize("role", ["director", "exec"])
def test_roles_whose_rules_allow_it_still_reach_both(
    client: TestClient, registry: PolicyRegistry, role: str
) -> None:
    answer = ask(client, registry, role, WHY_BLOCKED, id="opt_go")["data"]["whyBlocked"]
    assert {b["factor"]["id"] for b in answer["blockers"]} == {"far_secret", "product_secret"}
    assert answer["status"] == "blocked"


def test_header_narrowed_hops_cut_the_walk(client: TestClient, registry: PolicyRegistry) -> None:
    """X-Max-Hops narrows the walk too: a director limited to one hop no longer reaches far_secret."""
    headers = {**headers_for(registry, "director"), "X-Max-Hops": "1"}
    payload = {"query": WHY_BLOCKED, "variables": {"id": "opt_go"}}
    dumped = client.post("/graphql", json=payload, headers=headers).text
    assert "SECRETPRODUCT" in dumped and "SECRETFAR" not in dumped


def test_zero_hops_answer_for_the_subject_alone(client: TestClient, registry: PolicyRegistry) -> None:
    """X-Max-Hops 0 is a valid narrowing: the walk is the subject itself, and everything it needs
    lies past the limit, so the verdict is undetermined and nothing behind it is named."""
    headers = {**headers_for(registry, "director"), "X-Max-Hops": "0"}
    payload = {"query": WHY_BLOCKED, "variables": {"id": "opt_go"}}
    response = client.post("/graphql", json=payload, headers=headers)
    answer = response.json()["data"]["whyBlocked"]
    assert (answer["status"], answer["blockers"]) == ("undetermined", [])
    assert "SECRETPRODUCT" not in response.text and "SECRETFAR" not in response.text


@pytest.mark.parametrize("query,name", [(WHY_BLOCKED, "whyBlocked"), (WHAT_IF, "whatIf")])
def test_external_gets_what_a_missing_factor_gets(
    client: TestClient, registry: PolicyRegistry, query: str, name: str
) -> None:
    for nid in ("opt_go", "near", "far_secret"):
        hidden = json.dumps(ask(client, registry, "external", query, id=nid)).replace(nid, "<id>")
        missing = json.dumps(ask(client, registry, "external", query, id="no_such_factor"))
        assert hidden == missing.replace("no_such_factor", "<id>")
