"""The database's secret, and the ids keyed with it (docs/design.md §Curation, §Fact packets).

A unit of work that may be sent again is recognised by ids derived from its input: a link's,
a merge's or a split's journal entries, and a fact packet's facts, dossier and entries when its
client gave no ``packet_id``. Derived by an unkeyed hash, anyone could compute them from what
they read, and so recognise a link or a split by an entry whose ``op`` their rules hide, or
confirm a guess of a packet's hidden field. They are an HMAC with a secret the database keeps on
the routing lock node (``CairnLock``, never returned to a caller), made by the first
transaction that asks for it: cairn/memory/dossiers/lock.py reads it in each unit's
transaction, and ``cairn db migrate`` re-keys the journal ids written before (schema 9).
"""

from __future__ import annotations

import hashlib
import hmac

LOCK_ID = "dossier-routing"  # the one CairnLock node (cairn/memory/dossiers/lock.py)

# Takes the routing lock (a write to the node) and binds the secret as ``secret``, set once
# under the lock so every later transaction reads the same one.
HOLD_SECRET = """
MERGE (l:CairnLock {id: $lock})
SET l.held = true
WITH l
SET l.secret = coalesce(l.secret, $fresh)
WITH l.secret AS secret
"""
# The same, returning it.
TAKE_SECRET = f"{HOLD_SECRET}RETURN secret\n"


def keyed_with(secret: str, *parts: str) -> str:
    """The key of the unit of work named by ``parts``: an HMAC with the database's ``secret``."""
    return hmac.new(secret.encode(), "\x00".join(parts).encode(), hashlib.sha256).hexdigest()[:20]


def unkeyed(*parts: str) -> str:
    """The key a link or a merge got before schema 9, which anyone could compute."""
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:20]
