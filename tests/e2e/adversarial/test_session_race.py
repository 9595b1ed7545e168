"""Two journal writes racing to create one session (red-team pass on writes, 2026-11-26).

A journal entry joins only a session every reader of the entry may see (``access_covers``,
test_less_visible_references.py), and a new session takes the access of the factor whose entry
creates it. Both were decided in two steps: the session was looked up (visible? a session? no
less visible than the factor?) before the entry's text was embedded, and created or joined by
the write transaction afterwards. Two writers sending one new session id for factors of
different access both found no session, both wrote, and the second ``MERGE`` joined the session
the first had just created under its own factor's access: an entry that staff reads, filed under
a session staff may not see (its id, and that it exists, shown to staff). Now the session is
claimed inside the write transaction (``MERGE`` on the unique ``Entity.id``, which serialises
concurrent creations of one id) and checked there, under the same words as before
(``cairn.graph.factors.CLAIM_SESSION``; docs/design.md §Factor journal).
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from neo4j import Driver

from cairn.ingest.factors import ingest_factor_payload
from cairn.memory.factors.journal import update_factor
from cairn.memory.factors.models import FactorError
from cairn.policy.profiles import PolicyRegistry
from cairn.policy.scope import Scope
from cairn.runtime.embedder import Embedder
from tests.e2e.conftest import wipe

ACCESS = {"domain": "acme/assessment", "sensitivity": "low", "namespaces": ["internal"]}
# Neither factor's readers are all readers of the other: whichever entry creates the session,
# the other one may not join it.
FACTORS = {"rt_staff_side": ["writer", "staff"], "rt_manager_side": ["writer", "manager"]}
ROUNDS = 8
# Every entry whose session some of its readers may not see (cairn.policy.acl.access_covers).
UNCOVERED = """
MATCH (e:JournalEntry)-[:PART_OF]->(s:Session)
WHERE NOT all(r IN e.roles_allowed WHERE r IN s.roles_allowed)
RETURN e.id AS entry, s.id AS session, e.roles_allowed AS entry_roles, s.roles_allowed AS session_roles
"""


@pytest.fixture
def factors(driver: Driver, embedder: Embedder) -> Any:
    wipe(driver)
    for fid, roles in FACTORS.items():
        ingest_factor_payload(
            driver,
            {
                "defaults": {**ACCESS, "roles_allowed": roles},
                "factors": [{"id": fid, "name": fid.replace("_", " "), "category": "probe"}],
            },
            embedder=embedder,
        )
    yield driver
    wipe(driver)


def test_racing_writers_never_file_an_entry_under_a_session_its_readers_cannot_see(
    factors: Driver, embedder: Embedder, registry: PolicyRegistry
) -> None:
    writer = Scope.from_profile(registry.roles["writer"])
    outcomes: list[tuple[str, str, str]] = []

    def write(fid: str, session: str, start: threading.Barrier) -> None:
        start.wait()
        try:
            update_factor(
                factors,
                writer,
                fid,
                50,
                rationale=f"race {session}",
                confidence=0.5,
                session_id=session,
                embedder=embedder,
            )
            outcomes.append((session, fid, "written"))
        except FactorError as exc:
            outcomes.append((session, fid, f"{exc.code} {exc.field}: {exc}"))

    for n in range(ROUNDS):
        session = f"rt-race-{n}"
        start = threading.Barrier(len(FACTORS))
        threads = [threading.Thread(target=write, args=(fid, session, start)) for fid in FACTORS]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert factors.execute_query(UNCOVERED).records == []
    # Each round: one writer creates the session, the other is refused in the words a session
    # created before its check gets (test_less_visible_references.py), naming session_id.
    for n in range(ROUNDS):
        got = sorted(o[2] for o in outcomes if o[0] == f"rt-race-{n}")
        assert got[-1] == "written", got
        assert got[0].startswith("INVALID_INPUT session_id:") and "some readers of factor" in got[0], got
