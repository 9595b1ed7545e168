"""DNS rebinding against every route, not only /dev/passport (red-team pass, 2026-11-26).

Found against the running ``cairn serve --demo``: /dev/passport refused a foreign Host
(test_rebinding.py), but a page whose DNS name rebinds to 127.0.0.1 does not need it. Without
a passport secret the headers *are* the passport, and every value in them is public: the
policy version and key are the version and a hash of the policy file (``cairn passport``
prints them on any machine). A POST to /graphql with ``Host: evil.example:8052`` and an exec
passport the page wrote itself answered 200 with the corporate decision's rationale and KPIs;
as the writer it could write, and /bundles served its traces. Now a server without a secret
answers only requests whose Host (and Origin, when sent) is loopback, on every route
(``cairn.app.LoopbackOnly``), exactly as a route that does not exist; with a secret a page
cannot sign a passport, and any Host is answered as before.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from neo4j import Driver
from starlette.testclient import TestClient

from cairn.policy.passport import headers_for
from cairn.policy.profiles import PolicyRegistry
from cairn.runtime.settings import Settings
from tests.e2e.adversarial.test_rebinding import FOREIGN_HOSTS, FOREIGN_ORIGINS, LOOPBACK_HOSTS
from tests.e2e.adversarial.traces_common import HIDDEN_DECISION, secrets, serve, victim_asks

NODE = "query($id: ID!) { node(id: $id) { id fields } }"
WRITE = "mutation($p: JSON!) { ingestOrgMemory(payload: $p) { nodesCreated } }"
PLANTED = "acme-rebound-planted-2026"
PAYLOAD = {
    "decisions": [
        {
            "id": PLANTED,
            "timestamp": "2026-01-01T00:00:00Z",
            "domain": "acme/product",
            "importance": 0.5,
            "sensitivity": "low",
            "namespaces": ["internal"],
            "roles_allowed": ["writer", "staff"],
            "option": "planted by a rebound page",
            "decision_maker": "Mallory",
        }
    ]
}


@pytest.fixture(scope="module")
def client(
    acme: Driver, settings: Settings, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[TestClient]:
    """The demo's server: loopback, no secret, no extra host names."""
    with serve(
        settings,
        tmp_path_factory.mktemp("rebound"),
        host="127.0.0.1",
        passport_secret=None,
        allowed_hosts="",
    ) as c:
        yield c


def like_no_route(client: TestClient, method: str, path: str, headers: dict[str, str], **kw: object) -> None:
    resp = client.request(method, path, headers=headers, **kw)  # type: ignore[arg-type]
    absent = client.request("GET", "/no/such/route", headers=headers)
    assert absent.status_code == 404
    assert (resp.status_code, resp.content, resp.headers.get("content-type")) == (
        absent.status_code,
        absent.content,
        absent.headers.get("content-type"),
    ), (headers.get("Host"), headers.get("Origin"), path, resp.text[:300])


def planted(driver: Driver) -> int:
    records, _, _ = driver.execute_query("MATCH (n:Entity {id: $id}) RETURN count(n) AS c", id=PLANTED)
    return int(records[0]["c"])


def test_a_rebound_page_reads_and_writes_nothing(
    client: TestClient, acme: Driver, registry: PolicyRegistry
) -> None:
    loot = secrets(acme)
    victim = headers_for(registry, "exec")
    request_id = victim_asks(client, {**victim, "Host": "127.0.0.1:8000"})
    sent = [{"Host": h} for h in FOREIGN_HOSTS] + [
        {"Host": "127.0.0.1:8000", "Origin": o} for o in FOREIGN_ORIGINS
    ]
    for extra in sent:
        forged = {**headers_for(registry, "exec"), **extra}
        read = {"query": NODE, "variables": {"id": HIDDEN_DECISION}}
        like_no_route(client, "POST", "/graphql", forged, json=read)
        like_no_route(client, "GET", f"/bundles/{request_id}/bundle_full", {**victim, **extra})
        like_no_route(client, "GET", "/ui/", extra)
        writer = {**headers_for(registry, "writer"), **extra}
        like_no_route(client, "POST", "/graphql", writer, json={"query": WRITE, "variables": {"p": PAYLOAD}})
    assert planted(acme) == 0
    # The control: the same forged passport from this machine's own client reads the loot.
    for host in LOOPBACK_HOSTS:
        resp = client.post(
            "/graphql",
            json={"query": NODE, "variables": {"id": HIDDEN_DECISION}},
            headers={**headers_for(registry, "exec"), "Host": host},
        )
        assert resp.status_code == 200 and all(s in resp.text for s in loot), (host, resp.text[:300])


def test_listed_host_names_are_answered_too(
    acme: Driver, settings: Settings, registry: PolicyRegistry, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """CAIRN_ALLOWED_HOSTS names a local alias (the test client's ``testserver``); only those."""
    aliases = " Devbox ,testserver"
    trace_dir = tmp_path_factory.mktemp("rebound-alias")
    with serve(settings, trace_dir, passport_secret=None, allowed_hosts=aliases) as c:
        for host, answered in (("devbox:8000", True), ("testserver", True), ("evil.example", False)):
            resp = c.post(
                "/graphql",
                json={"query": NODE, "variables": {"id": HIDDEN_DECISION}},
                headers={**headers_for(registry, "staff"), "Host": host},
            )
            assert (resp.status_code == 200) == answered, (host, resp.text[:200])


def test_with_a_secret_any_host_is_answered(
    acme: Driver, settings: Settings, registry: PolicyRegistry, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Signed passports: a page cannot sign one, and a gateway may forward any Host."""
    secret = "a-passport-secret-long-enough"
    with serve(settings, tmp_path_factory.mktemp("rebound-signed"), passport_secret=secret) as c:
        resp = c.post(
            "/graphql",
            json={"query": NODE, "variables": {"id": HIDDEN_DECISION}},
            headers={**headers_for(registry, "exec", secret), "Host": "cairn.example.com"},
        )
        assert resp.status_code == 200 and resp.json()["data"]["node"]["id"] == HIDDEN_DECISION
        forged = c.post(
            "/graphql",
            json={"query": NODE, "variables": {"id": HIDDEN_DECISION}},
            headers={**headers_for(registry, "exec"), "Host": "cairn.example.com"},
        )
        assert forged.json()["errors"][0]["extensions"]["code"] == "PASSPORT_BAD_SIGNATURE"
