"""Claims a passport cannot make good (red-team pass, 2026-11-25).

- A staff passport that claims ``confidential`` in X-User-Namespaces reads nothing more (the
  scope drops what the profile does not grant), but its ask meta used to echo the claim as
  ``actor.namespaces``: the audit of that request, and its trace, said staff held a namespace it
  does not. The meta now carries the namespaces the read used.
- The write check (cairn/policy/writes.py) let a record with no namespace at all through: the
  read ACL needs one shared namespace, so nobody, the writer included, could read it back.
"""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from cairn.policy.profiles import PolicyRegistry
from cairn.policy.scope import Scope
from cairn.policy.writes import create_problems
from tests.e2e.conftest import gql, passport

CONFIDENTIAL_DECISION = "acme-corp-descope-onprem-2024"  # namespace confidential: director and exec
STAFF_DECISION = "acme-prod-sunset-onprem-connectors-2024"
ASK = "query($id: ID!) { ask(anchorId: $id) { meta } }"
NODE = "query($id: ID!) { node(id: $id) { id } }"
CLAIMS = ("public,internal,confidential", "confidential,internal", "internal,secret-ops")


pytestmark = pytest.mark.usefixtures("acme")


@pytest.mark.parametrize("claim", CLAIMS)
def test_the_audit_shows_the_namespaces_the_read_used_not_the_claim(
    client: TestClient, registry: PolicyRegistry, claim: str
) -> None:
    headers = passport(registry, "staff", **{"X-User-Namespaces": claim})
    assert gql(client, NODE, headers, id=CONFIDENTIAL_DECISION)["data"]["node"] is None
    meta = gql(client, ASK, headers, id=STAFF_DECISION)["data"]["ask"]["meta"]
    staff = registry.get("staff")
    assert staff is not None
    held = [ns for ns in claim.split(",") if ns in staff.namespaces]
    assert meta["actor"]["namespaces"] == held
    trace = gql(client, "query($r: ID!) { trace(requestId: $r) }", headers, r=headers["X-Request-Id"])
    assert trace["data"]["trace"]["actor"]["namespaces"] == held


@pytest.mark.parametrize("role", ["writer", "director"])
def test_a_record_without_a_namespace_cannot_be_created(registry: PolicyRegistry, role: str) -> None:
    profile = registry.get(role)
    assert profile is not None
    problems = create_problems(
        Scope.from_profile(profile),
        domain="acme/product",
        sensitivity="low",
        namespaces=(),
        roles_allowed=(role,),
    )
    assert [p.field for p in problems] == ["namespaces"]
    # The control: one namespace the role holds is enough.
    assert not create_problems(
        Scope.from_profile(profile),
        domain="acme/product",
        sensitivity="low",
        namespaces=profile.namespaces[:1],
        roles_allowed=(role,),
    )
