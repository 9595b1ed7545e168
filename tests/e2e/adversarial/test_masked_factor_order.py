"""The factor journal must not be ordered, windowed or summarised by a time the caller may not see
(latent leak).

Factor reads ordered entries newest first by ``timestamp`` and matched time windows (``since``,
``asOf``, ``whatChanged``) against it even under a policy that masks it: which entries a window
returned, and their order, told the masked times. Now an entry is ordered by its time only where
the scope shows it (``acl.shown_or``), else by its journal sequence, and a window matches only
entries whose time the caller sees (docs/design.md §Policy module, "Ordering by a maskable
field"). The probe policy masks journal entry ``timestamp`` for staff; the test rewrites the
hidden times of one factor and asks that nothing staff reads moves.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from neo4j import Driver
from starlette.testclient import TestClient

from cairn.app import create_app
from cairn.ingest.factors import load_demo_factors
from cairn.policy.profiles import PolicyRegistry
from cairn.runtime.settings import Settings
from tests.e2e.adversarial.conftest import demo_roles_with
from tests.e2e.conftest import gql, passport, wipe

ENTRY_FIELDS = [
    "id",
    "op",
    "previous_value",
    "new_value",
    "previous_number",
    "new_number",
    "rationale",
    "excerpt",
    "confidence",
    "session_id",
    "inference_status",
    "details",
    "seq",
    "domain",
]
MOST_ENTRIES = """MATCH (e:JournalEntry)-[:ABOUT]->(f:Factor) WITH f, count(e) AS n
RETURN f.id AS id ORDER BY n DESC, id LIMIT 1"""
TIMES = "MATCH (e:JournalEntry)-[:ABOUT]->(:Factor {id: $f}) RETURN e.timestamp AS t ORDER BY t"
REVERSE = """MATCH (e:JournalEntry)-[:ABOUT]->(:Factor {id: $f}) WITH e ORDER BY e.timestamp
WITH collect(e) AS es, collect(e.timestamp) AS times UNWIND range(0, size(es) - 1) AS i
WITH es[i] AS e, times[size(es) - 1 - i] AS t SET e.timestamp = t"""
READS = """query($f: ID!, $mid: DateTime!) {
  journal(factorId: $f) { id }
  window: journal(factorId: $f, since: $mid) { id }
  factor(id: $f, asOf: $mid) { value currentEntry { id } }
  whyValue(id: $f) { history { id } }
  whatChanged(since: "2000-01-01T00:00:00Z", factorIds: [$f]) { entries factors { id } answer }
}"""


@pytest.fixture(scope="module")
def probe(driver: Driver, settings: Settings, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    wipe(driver)
    load_demo_factors(driver)
    path = demo_roles_with(
        tmp_path_factory, "staff", {"JournalEntry": [{"domains": ["*"], "fields": ENTRY_FIELDS}]}
    )
    with TestClient(create_app(settings.model_copy(update={"policy_file": path}))) as client:
        yield client, PolicyRegistry.load(path)
    wipe(driver)


def _read(probe: Any, role: str, factor: str, mid: str) -> dict[str, Any]:
    client, registry = probe
    body = gql(client, READS, passport(registry, role), f=factor, mid=mid)
    assert "errors" not in body, body
    data: dict[str, Any] = body["data"]
    return data


def test_masked_entry_times_do_not_order_or_window_the_factor_journal(probe: Any, driver: Driver) -> None:
    factor = driver.execute_query(MOST_ENTRIES)[0][0]["id"]
    times = [r["t"] for r in driver.execute_query(TIMES, {"f": factor})[0]]
    assert len(times) >= 3
    mid = times[len(times) // 2].to_native().isoformat()
    before = _read(probe, "staff", factor, mid)
    seen_by_director = _read(probe, "director", factor, mid)
    assert len(before["journal"]) == len(times)
    driver.execute_query(REVERSE, {"f": factor})  # the newest entry becomes the oldest
    assert _read(probe, "staff", factor, mid) == before
    moved = _read(probe, "director", factor, mid)  # a reader of the times sees them move
    assert moved["journal"] != seen_by_director["journal"]
    assert moved["window"] != seen_by_director["window"]
