"""A question links a factor by its journal only through what the caller may read (leak).

A journal entry's vector is made from "<factor name>: <rationale>. <excerpt>". The router links
a question to a factor by its own vector only where the caller reads the factor's name
(``LINKABLE_NODES``), but the journal link (``JOURNAL_LINK``) checked only the entry's rationale
and excerpt: a role that may not read a factor's name was linked by it. Two factors alike in
all staff may read, differing only in the hidden name, were told apart by a question naming
one (cosine 0.79 against that factor's entry, 0.42 against the other's; link threshold 0.70),
so the linked id said which hidden name the question held. Now the journal link, as the
factor link, counts a factor only where the caller reads its name (docs/design.md §Policy
module, "Masked fields and search"); a reader of names links as before.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from neo4j import Driver
from starlette.testclient import TestClient

from cairn.ingest.factors import ingest_factor_payload
from cairn.policy.profiles import PolicyRegistry
from cairn.runtime.embedder import Embedder
from cairn.runtime.settings import Settings
from cairn.schema.nodes import DECLARED_FIELDS
from tests.e2e.adversarial.conftest import served_with
from tests.e2e.conftest import gql, passport, wipe

OPEN = {
    "domain": "acme/assessment",
    "sensitivity": "low",
    "namespaces": ["internal"],
    "roles_allowed": ["staff", "manager", "director", "exec", "writer"],
}
SECRET = "AI budget headroom"
DULL = "Cafeteria menu rotation"
PAIR = ("probe_left", "probe_right")
SESSION = {"id": "probe_session", "title": "Review", "started_at": "2024-10-01T00:00:00Z"}
QUESTION = "Why is the AI budget headroom so low when feeds arrive late every week?"
ASK = """query($q: String!) { question(text: $q, now: "2024-10-30T12:00:00Z") {
  intent router entities { id name masked } } }"""


def payload(secret_on: str) -> dict[str, Any]:
    """The two factors, the hidden name ``SECRET`` on ``secret_on``; all else alike."""
    factors = [
        {"id": fid, "name": SECRET if fid == secret_on else DULL, "category": "probe", "description": ""}
        for fid in PAIR
    ]
    journal = [
        {
            "id": f"je-{fid}",
            "factor": fid,
            "session": SESSION["id"],
            "timestamp": "2024-10-01T01:00:00Z",
            "value": 40,
            "confidence": 0.6,
            "rationale": "Two of the five feeds arrive late every week",
            "excerpt": "The ingestion team reports gaps",
        }
        for fid in PAIR
    ]
    return {"defaults": OPEN, "factors": factors, "sessions": [SESSION], "journal": journal}


@pytest.fixture(scope="module")
def app(
    driver: Driver, settings: Settings, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[TestClient, PolicyRegistry]]:
    """Staff see every factor field but its name (and its entries whole); exec sees all."""
    rules = {"Factor": [{"domains": ["*"], "fields": sorted(DECLARED_FIELDS["Factor"] - {"name"})}]}
    with served_with(settings, tmp_path_factory, "staff", rules) as served:
        yield served
    wipe(driver)


def linked(app: tuple[TestClient, PolicyRegistry], role: str) -> list[dict[str, Any]]:
    client, registry = app
    body = gql(client, ASK, passport(registry, role), q=QUESTION)
    assert "errors" not in body, body
    entities: list[dict[str, Any]] = body["data"]["question"]["entities"]
    return entities


def test_a_hidden_name_links_no_factor_through_its_journal(
    app: tuple[TestClient, PolicyRegistry], driver: Driver, embedder: Embedder
) -> None:
    seen = {}
    for secret_on in PAIR:
        wipe(driver)
        ingest_factor_payload(driver, payload(secret_on), embedder=embedder)
        seen[secret_on] = linked(app, "staff")
        # A reader of names is linked to the factor the question names, as before.
        assert [e["id"] for e in linked(app, "exec")] == [secret_on]
    # Staff see the two factors alike: where the hidden name sits changes nothing they get.
    assert seen[PAIR[0]] == seen[PAIR[1]], seen
