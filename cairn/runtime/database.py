"""Neo4j drivers for the embedded server or an external one (NEO4J_URI), chosen by settings.

The service uses the async driver; the CLI, ingest and tests use the sync one. Both read
the same connection facts so that a user switching to Aura or a cluster changes only env.
Server notifications (e.g. "property key does not exist" on a fresh database) are off:
they are advice for query authors, not events for operators.
"""

from __future__ import annotations

from typing import Any

from neo4j import AsyncDriver, AsyncGraphDatabase, Driver, GraphDatabase

from cairn.runtime import neo4j_server
from cairn.runtime.settings import Settings


def connection(settings: Settings) -> tuple[str, tuple[str, str]]:
    """(uri, auth) for the configured server."""
    if settings.neo4j_uri:
        return settings.neo4j_uri, (settings.neo4j_user, settings.neo4j_password or "")
    return neo4j_server.bolt_uri(settings), ("neo4j", neo4j_server.password(settings))


def _options(settings: Settings) -> dict[str, Any]:
    """What both drivers share: retry budget for transient errors, no server notifications."""
    return {"max_transaction_retry_time": settings.neo4j_retry_s, "notifications_min_severity": "OFF"}


def sync_driver(settings: Settings) -> Driver:
    uri, auth = connection(settings)
    return GraphDatabase.driver(uri, auth=auth, max_connection_pool_size=16, **_options(settings))


def async_driver(settings: Settings) -> AsyncDriver:
    uri, auth = connection(settings)
    return AsyncGraphDatabase.driver(uri, auth=auth, max_connection_pool_size=64, **_options(settings))
