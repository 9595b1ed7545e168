"""A section's own access line is not read by a role that may not see its access fields
(red-team pass 9, 2026-11-26).

A correspondence file may give a section its own access (``*Access: domain=…; sensitivity=…;
namespaces=…; roles=…*`` under its byline). The parser reads the line into the section's
``domain``, ``sensitivity``, ``namespaces`` and ``roles_allowed`` and leaves it in the body. The
``external`` role's rule hides all four (they are named in its ``masked``), yet it read the
line in the body of every read: which roles share the letter, in which namespace, at which
sensitivity. The policy module's mask now drops the line wherever the rule hides one of those
fields; a role that sees them reads the body as written.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from neo4j import Driver
from starlette.testclient import TestClient

from cairn.ingest.correspondence.sync import sync_bytes
from cairn.policy.passport import headers_for
from cairn.policy.profiles import PolicyRegistry
from cairn.runtime.embedder import Embedder
from tests.e2e.conftest import gql, wipe

ACCESS_LINE = "*Access: domain=acme/correspondence; sensitivity=low; namespaces=public; roles=external,exec*"
PREAMBLE_ACCESS = (
    "domain=acme/correspondence; sensitivity=low; namespaces=internal,public; roles=staff,exec,external"
)
LETTERS = f"""# Letters with access of their own

*Access: {PREAMBLE_ACCESS}*

---

## I — Shared with the advisor only

*Dana Okafor, CEO · 2026-02-01*

Marta, the board meets on Friday; only you and I read this letter.

{ACCESS_LINE}

---

## II — Shared with everyone

*Dana Okafor, CEO · 2026-02-02*

The offsite is in Lisbon this year.
"""
TAIL = "{ correspondenceTail(n: 10) { id title body masked } }"
NODE = "query($i: ID!) { node(id: $i) { fields masked } }"


@pytest.fixture(scope="module")
def letters(driver: Driver, embedder: Embedder, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Driver]:
    wipe(driver)
    log = tmp_path_factory.mktemp("collisions") / "collisions.jsonl"
    sync_bytes(driver, LETTERS.encode(), "rt-access-lines", collision_log=log, embedder=embedder)
    yield driver
    wipe(driver)


def post(client: TestClient, registry: PolicyRegistry, role: str, query: str, **variables: Any) -> Any:
    body = gql(client, query, headers_for(registry, role), **variables)
    assert not body.get("errors"), body
    return body["data"]


def bodies(client: TestClient, registry: PolicyRegistry, role: str) -> dict[str, str]:
    """Each section's body by title, as the tail and ``node`` show it (they must agree)."""
    out = {}
    for s in post(client, registry, role, TAIL)["correspondenceTail"]:
        by_id = post(client, registry, role, NODE, i=s["id"])["node"]["fields"]
        assert by_id["body"] == s["body"], (role, s["title"])
        out[s["title"]] = s["body"]
    return out


@pytest.mark.usefixtures("letters")
def test_external_does_not_read_the_access_line(client: TestClient, registry: PolicyRegistry) -> None:
    masked = post(client, registry, "external", TAIL)["correspondenceTail"][0]["masked"]
    assert {"domain", "sensitivity", "namespaces", "roles_allowed"} <= set(masked)
    seen = bodies(client, registry, "external")
    assert set(seen) == {"Shared with the advisor only", "Shared with everyone"}
    for title, body in seen.items():
        assert "Access:" not in body and "roles=" not in body, (title, body)
    assert seen["Shared with the advisor only"].startswith("Marta, the board meets on Friday")


@pytest.mark.usefixtures("letters")
def test_a_role_that_sees_the_access_fields_reads_the_line(
    client: TestClient, registry: PolicyRegistry
) -> None:
    seen = bodies(client, registry, "exec")
    assert ACCESS_LINE in seen["Shared with the advisor only"]
    assert "Shared with the advisor only" not in bodies(client, registry, "staff")
