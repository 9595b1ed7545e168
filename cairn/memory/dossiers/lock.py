"""The routing lock: one node whose write lock serialises every change to dossiers.

Why a lock. Two packets on one topic arriving together would each vote, each find no
dossier (neither has committed yet) and each create one. Every transaction that changes
dossiers therefore first writes a property on one ``CairnLock`` node, which makes Neo4j hand
it an exclusive lock held until commit; the vote that decides append-or-create runs *after*
that, inside the same transaction, so it sees every dossier committed before it.

Why the vote under the lock may use the vector index. Neo4j applies index updates as part
of a transaction's commit, before that transaction's locks are released, and reads are
read-committed; so once this transaction holds the lock, the index already contains every
fact of every transaction that held it before. (Only writes made earlier in the *same*
transaction are invisible to the index, and the vote runs before this transaction writes
anything but the lock.) tests/e2e/test_dossiers_governor.py routes 8 packets at once and
checks one dossier results; without the lock that test fails.

The node has no ``Entity`` label: it is machinery, not data, carries no access fields and is
never returned to a caller. It also keeps the database's secret (``keyed``): the journal ids of a curation
unit or a split, and a split's new dossier ids, are keyed with it, so no reader can compute them
from the dossier and fact ids (and recognise a link, a merge or a split by the id of an entry
whose ``op`` its rules hide). Its uniqueness
constraint (installed by ``cairn db migrate``, see ``CairnLock`` in cairn/schema/nodes.py) makes
the first concurrent ``MERGE`` create one node.
"""

from __future__ import annotations

import secrets

from neo4j import ManagedTransaction

from cairn.graph import dossiers as cypher
from cairn.memory.dossiers.journal import entry_id
from cairn.schema.keys import LOCK_ID, keyed_with


def take_lock(tx: ManagedTransaction, marker: str | None = None) -> str | None:
    """Take the routing lock for the rest of ``tx``.

    ``marker`` is the id of the first journal entry a unit of work writes; the return value
    names the dossier it went to when that unit already ran (so it is not applied twice).
    """
    record = tx.run(cypher.TAKE_ROUTING_LOCK, lock=LOCK_ID, marker=marker).single(strict=True)
    return None if record["applied_to"] is None else str(record["applied_to"])


def secret(tx: ManagedTransaction) -> str:
    """Take the routing lock for the rest of ``tx``; return the database's secret (made by the
    first transaction that asks for it)."""
    record = tx.run(cypher.TAKE_KEYED_LOCK, lock=LOCK_ID, fresh=secrets.token_hex(32)).single(strict=True)
    return str(record["secret"])


def keyed(tx: ManagedTransaction, *parts: str) -> str:
    """``keys.keyed_with`` the database's secret (only the service computes it), taking the
    routing lock for the rest of ``tx``."""
    return keyed_with(secret(tx), *parts)


def keyed_lock(tx: ManagedTransaction, *parts: str) -> tuple[str, str | None]:
    """``keyed`` and, as ``take_lock``, the dossier its unit of work went to when it already ran."""
    work = keyed(tx, *parts)
    return work, take_lock(tx, entry_id(work, 0))
