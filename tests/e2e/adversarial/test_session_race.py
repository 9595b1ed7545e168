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

The race is played out, not hoped for (review of stop 27): both writers check, then each waits
at the embedding of its entry's text, between its check and its write, until both got there;
then one writes and the other after it, in each order (``Turns``).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from functools import partial
from typing import Any

import numpy as np
import pytest
from neo4j import Driver
from numpy.typing import NDArray

from cairn.ingest.factors import ingest_factor_payload
from cairn.memory.factors.journal import update_factor
from cairn.memory.factors.models import FactorError
from cairn.policy.profiles import PolicyRegistry
from cairn.policy.scope import Scope
from cairn.runtime.embedder import PASS, Embedder
from tests.e2e.adversarial.turns import Turns
from tests.e2e.conftest import wipe

ACCESS = {"domain": "acme/assessment", "sensitivity": "low", "namespaces": ["internal"]}
# Neither factor's readers are all readers of the other: whichever entry creates the session,
# the other one may not join it.
FACTORS = {"rt_staff_side": ["writer", "staff"], "rt_manager_side": ["writer", "manager"]}
# Every entry whose session some of its readers may not see (cairn.policy.acl.access_covers).
UNCOVERED = """
MATCH (e:JournalEntry)-[:PART_OF]->(s:Session)
WHERE NOT all(r IN e.roles_allowed WHERE r IN s.roles_allowed)
RETURN e.id AS entry, s.id AS session, e.roles_allowed AS entry_roles, s.roles_allowed AS session_roles
"""


class GatedEmbedder(Embedder):
    """The session's model, with each writer (its thread) stopped at its ``Turns`` gate first."""

    def __init__(self, inner: Embedder, turns: Turns) -> None:  # the wrapped model is already loaded
        self.name = inner.name
        self._inner, self._turns = inner, turns

    def embed(self, texts: Sequence[str], batch_size: int = PASS) -> NDArray[np.float32]:
        self._turns.gate(threading.current_thread().name)
        return self._inner.embed(texts, batch_size)


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


@pytest.mark.parametrize("first", list(FACTORS))
def test_racing_writers_never_file_an_entry_under_a_session_its_readers_cannot_see(
    factors: Driver, embedder: Embedder, registry: PolicyRegistry, first: str
) -> None:
    writer = Scope.from_profile(registry.roles["writer"])
    order = [first, *(fid for fid in FACTORS if fid != first)]
    turns = Turns(order)
    gated = GatedEmbedder(embedder, turns)
    session = f"rt-race-{first}"

    def write(fid: str) -> Any:
        return update_factor(
            factors,
            writer,
            fid,
            50,
            rationale=f"race {session}",
            confidence=0.5,
            session_id=session,
            embedder=gated,
        )

    outcomes = turns.run({fid: partial(write, fid) for fid in order})
    assert factors.execute_query(UNCOVERED).records == []
    # Both checked before either wrote: the first creates the session, the second is refused in
    # the words a session created before its check gets (test_less_visible_references.py),
    # naming session_id.
    assert not isinstance(outcomes[order[0]], Exception), outcomes
    refused = outcomes[order[1]]
    assert isinstance(refused, FactorError), outcomes
    assert (refused.code, refused.field) == ("INVALID_INPUT", "session_id"), refused
    assert "some readers of factor" in str(refused), refused
