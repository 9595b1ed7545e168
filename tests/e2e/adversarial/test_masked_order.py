"""A list ordered by a field the caller may not see must not be ordered by it (latent leak).

A dossier's facts are listed (and a ``limit`` keeps the newest) by ``added_at``. Under a policy
that shows facts without ``added_at``, that order told the masked times. Now a list orders by
a maskable field only where the scope shows it (``acl.shown_or``), else by id: the probe
policy below masks ``added_at`` for staff, and the test rewrites the hidden times and asks
that staff's answer not move (docs/design.md §Policy module, "Ordering by a maskable field").
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from neo4j import Driver
from starlette.testclient import TestClient

from cairn.app import create_app
from cairn.policy.profiles import PolicyRegistry
from cairn.runtime.settings import Settings
from tests.e2e.adversarial.conftest import demo_roles_with
from tests.e2e.conftest import demo_dossiers, gql, passport, wipe

FACT_FIELDS = ["id", "text", "fact_type", "confidence", "source_block_id", "domain"]
DOSSIER = "query($i: ID!) { dossier(id: $i) { facts { id } } }"
MOST_FACTS = """MATCH (d:Dossier)-[:HAS_FACT]->(f:Fact) WITH d, count(f) AS n
RETURN d.id AS id ORDER BY n DESC, id LIMIT 1"""


@pytest.fixture(scope="module")
def probe(driver: Driver, settings: Settings, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    demo_dossiers(driver)
    path = demo_roles_with(tmp_path_factory, "staff", {"Fact": [{"domains": ["*"], "fields": FACT_FIELDS}]})
    with TestClient(create_app(settings.model_copy(update={"policy_file": path}))) as client:
        yield client, PolicyRegistry.load(path)
    wipe(driver)


def _facts(probe: Any, role: str, dossier: str) -> list[str]:
    client, registry = probe
    body = gql(client, DOSSIER, passport(registry, role), i=dossier)
    assert "errors" not in body, body
    return [f["id"] for f in body["data"]["dossier"]["facts"]]


def test_a_masked_added_at_does_not_order_a_dossiers_facts(probe: Any, driver: Driver) -> None:
    dossier = driver.execute_query(MOST_FACTS)[0][0]["id"]
    before = _facts(probe, "staff", dossier)
    seen_by_director = _facts(probe, "director", dossier)
    assert len(before) >= 3
    # Reverse the stored times: the newest fact becomes the oldest.
    driver.execute_query(
        """MATCH (:Dossier {id: $d})-[:HAS_FACT]->(f:Fact) WITH collect(f) AS fs,
        collect(f.added_at) AS times UNWIND range(0, size(fs) - 1) AS i
        WITH fs[i] AS f, times[size(fs) - 1 - i] AS t SET f.added_at = t""",
        {"d": dossier},
    )
    assert _facts(probe, "staff", dossier) == before
    assert _facts(probe, "director", dossier) != seen_by_director  # a reader of the times sees them move
