"""The Neo4j driver for the embedded server or an external one (NEO4J_URI), chosen by settings.

One driver model (docs/design.md §One driver model): the sync driver everywhere. The service
runs domain code in worker threads (``cairn.resolvers.context.run_domain``); the CLI, ingest,
benches and tests call it directly. Switching to Aura or a cluster changes only env.
Server notifications (e.g. "property key does not exist" on a fresh database) are off:
they are advice for query authors, not events for operators.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from neo4j import READ_ACCESS, Driver, GraphDatabase, Record
from neo4j.exceptions import DriverError, Neo4jError

from cairn.runtime import neo4j_server
from cairn.runtime.settings import Settings

# At least anyio's worker threads (40 by default), so a resolver thread never waits for a
# connection another thread holds.
POOL_SIZE = 64
READ_ATTEMPTS = 3


def connection(settings: Settings) -> tuple[str, tuple[str, str]]:
    """(uri, auth) for the configured server."""
    if settings.neo4j_uri:
        return settings.neo4j_uri, (settings.neo4j_user, settings.neo4j_password or "")
    return neo4j_server.bolt_uri(settings), ("neo4j", neo4j_server.password(settings))


def _options(settings: Settings) -> dict[str, Any]:
    """Retry budget for transient errors, no server notifications."""
    return {"max_transaction_retry_time": settings.neo4j_retry_s, "notifications_min_severity": "OFF"}


def sync_driver(settings: Settings) -> Driver:
    uri, auth = connection(settings)
    return GraphDatabase.driver(uri, auth=auth, max_connection_pool_size=POOL_SIZE, **_options(settings))


def read(driver: Driver, query: str, params: Mapping[str, Any]) -> list[Record]:
    """One read, one round trip: an auto-commit query (``driver.execute_query``'s managed
    transaction adds a COMMIT round trip), retried like one when the error is transient
    (docs/design.md §One driver model)."""
    for attempt in range(1, READ_ATTEMPTS + 1):
        try:
            with driver.session(default_access_mode=READ_ACCESS) as session:
                return list(session.run(query, dict(params)))
        except (Neo4jError, DriverError) as exc:
            if attempt == READ_ATTEMPTS or not exc.is_retryable():
                raise
    raise AssertionError("unreachable")
