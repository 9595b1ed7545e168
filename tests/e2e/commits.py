"""The database's last committed transaction: the cheap witness that nothing was written."""

from __future__ import annotations

from neo4j import READ_ACCESS, Driver

# The server's start (its JVM's start time) with the read: a restart, and a restore with it, may
# take the transaction ids back (a dump is restored at the id it was taken at).
SERVER_START = (
    "CALL dbms.queryJmx('java.lang:type=Runtime') YIELD attributes RETURN attributes.StartTime.value AS t"
)


def last_commit(driver: Driver) -> str:
    """The database's last committed transaction (the bookmark a fresh read session is handed)
    since the server's start.

    The witness that a refused request wrote nothing: every transaction that commits a change
    moves it (a rolled-back one, a read or a write that matched nothing does not), so "unchanged"
    is at least as strong as an unchanged graph_checksum, at the cost of one round trip instead
    of reading the whole graph. Stricter, even: it also catches a write undone by a second write,
    and a label or property name first seen in a write that rolled back (Neo4j commits a new
    name on its own). Neo4j 5.26 Community offers no other view of it (``SHOW DATABASES`` leaves
    ``lastCommittedTxn`` null, JMX has only the JVM's beans); test_write_witness.py checks it
    sees writes from any session."""
    with driver.session(default_access_mode=READ_ACCESS) as session:
        started = session.run(SERVER_START).single(strict=True)["t"]
        return f"{started}:" + ",".join(sorted(session.last_bookmarks().raw_values))
