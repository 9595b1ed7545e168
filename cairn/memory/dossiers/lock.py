"""The routing lock: one node whose write lock serialises every change to dossiers.

Why a lock. Two packets on one topic arriving together would each vote, each find no
dossier (neither has committed yet) and each create one. Every transaction that changes
dossiers therefore first writes a property on one ``CairnLock`` node, which makes Neo4j hand
it an exclusive lock held until commit; the vote that decides append-or-create runs *after*
that, inside the same transaction, so it sees every dossier committed before it. The lock
node also lists the dossiers created in the last minute, so that vote can check them with
exact cosine rather than trust the vector index to have absorbed them already.

The node has no ``Entity`` label: it is machinery, not data, carries no access fields and is
never returned to a caller. A uniqueness constraint makes the first concurrent ``MERGE``
create exactly one node.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Sequence

from neo4j import Driver, ManagedTransaction

LOCK_ID = "dossier-routing"
RECENT_WINDOW_MS = 60_000
RECENT_MAX = 64

ENSURE_CONSTRAINT = "CREATE CONSTRAINT cairn_lock_id IF NOT EXISTS FOR (l:CairnLock) REQUIRE l.id IS UNIQUE"

TAKE_LOCK = """
MERGE (l:CairnLock {id: $lock})
SET l.seq = coalesce(l.seq, 0) + 1
RETURN coalesce(l.recent, []) AS recent, coalesce(l.recent_at, []) AS recent_at
"""

REMEMBER_RECENT = """
MATCH (l:CairnLock {id: $lock})
SET l.recent = $recent, l.recent_at = $recent_at
"""

_ensured: weakref.WeakSet[Driver] = weakref.WeakSet()
_ensure_guard = threading.Lock()


def ensure_lock_schema(driver: Driver) -> None:
    """Create the lock's uniqueness constraint once per driver (idempotent)."""
    with _ensure_guard:
        if driver in _ensured:
            return
        driver.execute_query(ENSURE_CONSTRAINT)
        _ensured.add(driver)


class RoutingLock:
    """The lock as taken inside one transaction, with the recently created dossiers it lists."""

    def __init__(self, tx: ManagedTransaction) -> None:
        record = tx.run(TAKE_LOCK, lock=LOCK_ID).single(strict=True)
        now = int(time.time() * 1000)
        pairs = [
            (str(d), int(t))
            for d, t in zip(record["recent"], record["recent_at"], strict=False)
            if now - int(t) <= RECENT_WINDOW_MS
        ]
        self._tx = tx
        self._pairs = pairs[-RECENT_MAX:]
        self._now = now

    @property
    def recent(self) -> list[str]:
        return [d for d, _ in self._pairs]

    def remember(self, created: Sequence[str]) -> None:
        """Add newly created dossiers to the recent list (written in this transaction)."""
        pairs = (self._pairs + [(d, self._now) for d in created])[-RECENT_MAX:]
        self._tx.run(
            REMEMBER_RECENT,
            lock=LOCK_ID,
            recent=[d for d, _ in pairs],
            recent_at=[t for _, t in pairs],
        ).consume()
