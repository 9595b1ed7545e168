"""Headers only narrow, traces included (red-team pass, 2026-11-25).

A trace belonged to (user id, role, policy key); the narrowing headers (X-Domain-Scopes,
X-Sensitivity-Ceiling, X-User-Namespaces, X-Edge-Allow, X-Max-Hops) were not part of its owner.
So a passport a gateway narrowed for one app or session read, by request id, every trace the
same user made with its full scope: against the demo, a director passport narrowed to
``acme/product`` and ``low`` gets ``null`` for ``node(id: "acme-corp-descope-onprem-2024")``
but downloaded bundle_full of the director's earlier ask about it, rationale and KPIs included.

Fixed (cairn/memory/trace.py ``_owner``): the owner key holds the effective scope too, so a
narrowed passport has its own trace folder and a trace made under another view answers exactly
like a missing one.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from neo4j import Driver
from starlette.testclient import TestClient

from cairn.policy.passport import headers_for
from cairn.policy.profiles import PolicyRegistry
from cairn.runtime.settings import Settings
from tests.e2e.adversarial.traces_common import (
    HIDDEN_DECISION,
    VICTIMS,
    assert_like_missing,
    assert_no_secret,
    bundle_answer,
    readable,
    secrets,
    serve,
    trace_answer,
    victim_asks,
)
from tests.e2e.conftest import gql

NARROWINGS = {
    "domains": {"X-Domain-Scopes": "acme/product"},
    "ceiling": {"X-Sensitivity-Ceiling": "low"},
    "namespaces": {"X-User-Namespaces": "public"},
}
NODE = "query($id: ID!) { node(id: $id) { id } }"


@pytest.fixture(scope="module")
def client(
    acme: Driver, settings: Settings, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[TestClient]:
    with serve(settings, tmp_path_factory.mktemp("narrowed")) as c:
        yield c


@pytest.mark.parametrize("narrowing", sorted(NARROWINGS))
@pytest.mark.parametrize("role", VICTIMS)
def test_a_narrowed_passport_cannot_read_traces_made_under_the_full_role(
    acme: Driver, client: TestClient, registry: PolicyRegistry, role: str, narrowing: str
) -> None:
    full = headers_for(registry, role)
    rid = victim_asks(client, full)
    narrowed = {**headers_for(registry, role), **NARROWINGS[narrowing]}
    # The control: under this narrowing the decision is not visible.
    assert gql(client, NODE, narrowed, id=HIDDEN_DECISION)["data"]["node"] is None
    assert trace_answer(client, narrowed, rid) == {"data": {"trace": None}}
    for name in ("bundle_view", "bundle_full"):
        resp = client.get(f"/bundles/{rid}/{name}", headers=narrowed)
        assert_no_secret([*secrets(acme), HIDDEN_DECISION], readable(resp))
    assert_like_missing(client, narrowed, bundle_answer(client, narrowed, rid))
