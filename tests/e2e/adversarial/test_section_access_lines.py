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

import pytest
from neo4j import Driver
from starlette.testclient import TestClient

from cairn.ingest.correspondence.sync import sync_bytes
from cairn.policy.profiles import PolicyRegistry
from cairn.runtime.embedder import Embedder
from tests.e2e.adversarial.conftest import data_as
from tests.e2e.conftest import wipe

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

---

## III — Decided, then shared

*Dana Okafor, CEO · 2026-02-03*

Decision: the platform moves to the new cloud.
{ACCESS_LINE}
Marta, the board meets again in Porto.

---

## IV — A reply

*Dana Okafor, CEO · 2026-02-04*

Re: II — Lisbon suits us; see § III for the cloud.
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


def bodies(client: TestClient, registry: PolicyRegistry, role: str) -> dict[str, str]:
    """Each section's body by title, as the tail and ``node`` show it (they must agree)."""
    out = {}
    for s in data_as(client, registry, role, TAIL)["correspondenceTail"]:
        by_id = data_as(client, registry, role, NODE, i=s["id"])["node"]["fields"]
        assert by_id["body"] == s["body"], (role, s["title"])
        out[s["title"]] = s["body"]
    return out


@pytest.mark.usefixtures("letters")
def test_external_does_not_read_the_access_line(client: TestClient, registry: PolicyRegistry) -> None:
    masked = data_as(client, registry, "external", TAIL)["correspondenceTail"][0]["masked"]
    assert {"domain", "sensitivity", "namespaces", "roles_allowed"} <= set(masked)
    seen = bodies(client, registry, "external")
    assert set(seen) == {
        "Shared with the advisor only",
        "Shared with everyone",
        "Decided, then shared",
        "A reply",
    }
    for title, body in seen.items():
        assert "Access:" not in body and "roles=" not in body, (title, body)
    assert seen["Shared with the advisor only"].startswith("Marta, the board meets on Friday")


@pytest.mark.usefixtures("letters")
def test_a_dropped_access_line_does_not_let_a_decision_swallow_the_next_line(
    client: TestClient, registry: PolicyRegistry
) -> None:
    """The decision paragraph ends at the access line as the parser read it; dropping the line
    first ran the decision on into the letter's next line, and external lost it (review,
    2026-11-26)."""
    body = bodies(client, registry, "external")["Decided, then shared"]
    assert "Decision" not in body and "new cloud" not in body, body
    assert "Marta, the board meets again in Porto." in body, body


@pytest.mark.usefixtures("letters")
def test_section_references_are_not_read_where_responds_to_filed_is_hidden(
    client: TestClient, registry: PolicyRegistry
) -> None:
    """``Re: II`` and ``§ III`` are what the parser reads into ``responds_to_filed``, a field
    external may not see: the filed numbers a letter answers are not read in its body either."""
    masked = data_as(client, registry, "external", TAIL)["correspondenceTail"][0]["masked"]
    assert "responds_to_filed" in masked
    reply = bodies(client, registry, "external")["A reply"]
    assert "Re:" not in reply and "§" not in reply and "III" not in reply, reply
    # The sentence that holds the reference goes with it (pass 17: `see  for the cloud.` read short).
    assert reply == "", reply
    assert bodies(client, registry, "exec")["A reply"] == "Re: II — Lisbon suits us; see § III for the cloud."


@pytest.mark.usefixtures("letters")
def test_a_role_that_sees_the_access_fields_reads_the_line(
    client: TestClient, registry: PolicyRegistry
) -> None:
    seen = bodies(client, registry, "exec")
    assert ACCESS_LINE in seen["Shared with the advisor only"]
    assert "Shared with the advisor only" not in bodies(client, registry, "staff")
