"""A factor's value must come from journal entries its reader may see (latent leak).

A factor's stored state (``current_value``, ``journal_seq``, and the assessment totals built from
it) is its newest journal entry's. Entries take their factor's access fields when written, but a
factor re-ingested with other access fields left its stored entries as they were: a factor
opened to staff then showed them the value of an entry they could not read (``journal`` empty,
``value`` 90), and one closed again left its entries readable. Now a factor's access fields,
whenever they are written, are its entries' too, so an entry always shares its factor's access
(docs/design.md §Factor journal). No demo factor changes access; the probe below does.
"""

from __future__ import annotations

from typing import Any

from neo4j import Driver
from starlette.testclient import TestClient

from cairn.ingest.factors import ingest_factor_payload
from cairn.policy.profiles import PolicyRegistry
from cairn.runtime.embedder import Embedder
from tests.e2e.conftest import gql, passport, wipe

CLOSED = {
    "domain": "acme/assessment",
    "sensitivity": "high",
    "namespaces": ["confidential"],
    "roles_allowed": ["director", "exec"],
}
OPEN = {
    "domain": "acme/assessment",
    "sensitivity": "low",
    "namespaces": ["internal"],
    "roles_allowed": ["staff", "manager", "director", "exec", "writer"],
}
FACTOR = {"id": "probe_budget", "name": "Probe budget", "category": "budget"}
ENTRY = {
    "id": "je-probe-1",
    "factor": "probe_budget",
    "session": "probe_session",
    "timestamp": "2024-10-01T01:00:00Z",
    "value": 90,
    "confidence": 0.9,
    "rationale": "The board approved the full amount",
}
SESSION = {"id": "probe_session", "title": "Budget", "started_at": "2024-10-01T00:00:00Z"}
FACTOR_READ = '{ factor(id: "probe_budget") { value currentEntry { id newValue } } }'
JOURNAL_READ = '{ journal(factorId: "probe_budget") { id newValue } }'
HIDDEN: dict[str, Any] = {"factor": None}


def _read(client: TestClient, registry: PolicyRegistry, role: str) -> dict[str, Any]:
    """The factor as ``role`` sees it and, when it sees it, its journal."""
    body = gql(client, FACTOR_READ, passport(registry, role))
    assert "errors" not in body, body
    data: dict[str, Any] = body["data"]
    if data["factor"] is not None:
        body = gql(client, JOURNAL_READ, passport(registry, role))
        assert "errors" not in body, body
        data["journal"] = body["data"]["journal"]
    return data


def _consistent(data: dict[str, Any]) -> bool:
    """The value shown is the newest entry shown."""
    factor, journal = data["factor"], data["journal"]
    return bool(journal) and factor["value"] == journal[0]["newValue"] and factor["currentEntry"] is not None


def test_a_factor_opened_later_shows_no_value_of_a_hidden_entry(
    client: TestClient, driver: Driver, embedder: Embedder, registry: PolicyRegistry
) -> None:
    wipe(driver)
    ingest_factor_payload(
        driver,
        {"defaults": CLOSED, "factors": [FACTOR], "sessions": [SESSION], "journal": [ENTRY]},
        embedder=embedder,
    )
    assert _read(client, registry, "staff") == HIDDEN
    ingest_factor_payload(driver, {"defaults": OPEN, "factors": [FACTOR]}, embedder=embedder)
    opened = _read(client, registry, "staff")
    assert opened["factor"] is not None and _consistent(opened), opened
    ingest_factor_payload(driver, {"defaults": CLOSED, "factors": [FACTOR]}, embedder=embedder)
    assert _read(client, registry, "staff") == HIDDEN
    assert _consistent(_read(client, registry, "director"))
    wipe(driver)


def test_every_stored_entry_shares_its_factors_access(driver: Driver, embedder: Embedder) -> None:
    wipe(driver)
    ingest_factor_payload(
        driver,
        {"defaults": CLOSED, "factors": [FACTOR], "sessions": [SESSION], "journal": [ENTRY]},
        embedder=embedder,
    )
    ingest_factor_payload(driver, {"defaults": OPEN, "factors": [FACTOR]}, embedder=embedder)
    records, _, _ = driver.execute_query(
        """MATCH (e:JournalEntry)-[:ABOUT]->(f:Factor)
        RETURN count(*) AS n, sum(CASE WHEN [e.domain, e.sensitivity, e.namespaces, e.roles_allowed]
            = [f.domain, f.sensitivity, f.namespaces, f.roles_allowed] THEN 1 ELSE 0 END) AS same"""
    )
    assert records[0]["n"] == 1 and records[0]["same"] == 1
    wipe(driver)
