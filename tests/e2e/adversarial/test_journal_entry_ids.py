"""A journal entry id must not move to another journal (latent leak).

The factor loader MERGEs entries on their id. An entry id already stored under one factor and
loaded again under another was tied to both (two ABOUT edges) and took the second factor's access
fields: a factor readable by staff then listed an entry written about a factor only directors
may read, and the first factor's history changed. Now such an id is refused, naming neither the
other factor nor whether it is readable, and nothing of the set is written (docs/design.md
§Factor journal). An entry of a dossier's journal is refused the same way.
"""

from __future__ import annotations

from typing import Any

import pytest
from neo4j import Driver

from cairn.ingest.factors import ENTRY_OF_ANOTHER_JOURNAL, ingest_factor_payload
from cairn.ingest.fixtures import FixtureError
from cairn.runtime.embedder import Embedder
from tests.e2e.adversarial.test_factor_entry_access import CLOSED, OPEN
from tests.e2e.conftest import wipe

SESSION = {"id": "probe_session", "title": "Budget", "started_at": "2024-10-01T00:00:00Z"}


def _set(factor: str, access: dict[str, Any], entry: str = "je-probe-1", value: float = 90) -> dict[str, Any]:
    return {
        "defaults": access,
        "factors": [{"id": factor, "name": factor.replace("_", " "), "category": "budget"}],
        "sessions": [SESSION],
        "journal": [
            {
                "id": entry,
                "factor": factor,
                "session": "probe_session",
                "timestamp": "2024-10-01T01:00:00Z",
                "value": value,
                "confidence": 0.9,
                "rationale": f"Set on {factor}",
            }
        ],
    }


STATE = """MATCH (e:JournalEntry {id: 'je-probe-1'}) OPTIONAL MATCH (e)-[:ABOUT]->(o)
RETURN collect(o.id) AS about, e.roles_allowed AS roles, COUNT { (:Factor {id: 'probe_open'}) } AS opened"""


def _refusal(driver: Driver, embedder: Embedder) -> list[str]:
    with pytest.raises(FixtureError) as refused:
        ingest_factor_payload(driver, _set("probe_open", OPEN, value=10), embedder=embedder)
    return [f"{p.record_id} {p.field}: {p.message}" for p in refused.value.problems]


@pytest.mark.parametrize("owner", ["hidden", "visible"])
def test_an_entry_id_of_another_factor_is_refused_and_nothing_written(
    driver: Driver, embedder: Embedder, owner: str
) -> None:
    wipe(driver)
    factor = f"probe_{owner}"
    ingest_factor_payload(driver, _set(factor, CLOSED if owner == "hidden" else OPEN), embedder=embedder)
    before = driver.execute_query(STATE).records[0].data()
    problems = _refusal(driver, embedder)
    assert problems == [f"je-probe-1 id: {ENTRY_OF_ANOTHER_JOURNAL}"]
    assert driver.execute_query(STATE).records[0].data() == before  # still one journal, nothing new
    assert before["about"] == [factor] and before["opened"] == 0
    wipe(driver)


def test_an_entry_id_of_a_dossier_journal_is_refused(driver: Driver, embedder: Embedder) -> None:
    wipe(driver)
    driver.execute_query(
        """CREATE (:Entity:JournalEntry {id: 'je-probe-1', op: 'created', domain: 'acme/assistant'})
        -[:ABOUT]->(:Entity:Dossier {id: 'probe_dossier', domain: 'acme/assistant'})"""
    )
    assert _refusal(driver, embedder) == [f"je-probe-1 id: {ENTRY_OF_ANOTHER_JOURNAL}"]
    assert driver.execute_query(STATE).records[0]["about"] == ["probe_dossier"]
    wipe(driver)


def test_an_entry_loaded_again_under_its_factor_is_a_no_op(driver: Driver, embedder: Embedder) -> None:
    wipe(driver)
    ingest_factor_payload(driver, _set("probe_open", OPEN), embedder=embedder)
    ingest_factor_payload(driver, _set("probe_open", OPEN), embedder=embedder)
    assert driver.execute_query(STATE).records[0]["about"] == ["probe_open"]
    wipe(driver)
