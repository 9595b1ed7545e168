"""The Neo4j driver for the embedded server or an external one (NEO4J_URI), chosen by settings.

One driver model (docs/design.md §One driver model): the sync driver everywhere. The service
runs domain code in worker threads (``cairn.resolvers.context.run_domain``); the CLI, ingest,
benches and tests call it directly. Switching to Aura or a cluster changes only env.
Server notifications (e.g. "property key does not exist" on a fresh database) are off:
they are advice for query authors, not events for operators.
The embedded server's address and generated password live here too, so every driver, its
start-up probe's included, is made in this one module (``tests/unit/test_layers.py``).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping
from contextlib import nullcontext
from typing import Any, Concatenate, ParamSpec, TypeVar

from neo4j import READ_ACCESS, Driver, GraphDatabase, ManagedTransaction, Record
from neo4j.exceptions import DriverError, Neo4jError, ServiceUnavailable
from tenacity import retry, retry_if_exception, stop_after_attempt, wait_exponential_jitter

from cairn.runtime.settings import Settings

# At least anyio's worker threads (40 by default), so a resolver thread never waits for a
# connection another thread holds.
POOL_SIZE = 64
READ_ATTEMPTS = 3
PASSWORD_FILE = "password"  # in the embedded server's home

P = ParamSpec("P")
T = TypeVar("T")


class Vector(list[float]):
    """A vector as a query parameter: a list (the driver packs it as one) whose repr is short.

    The driver builds the debug line of every RUN before it asks whether debug is on (neo4j 6.1,
    ``Bolt5x0.run``: ``" ".join(map(repr, fields))``), and the repr of 384 floats took about
    0.3 ms of CPU per search, more than the rest of its parameters and the query text together
    (issue #16); the 384 floats of each fact and centroid sum an ingest writes took ~11.7 ms of
    repr per 64-fact statement (issue #15). ``tests/e2e/test_read_round_trips.py`` and
    ``tests/e2e/test_write_round_trips.py`` check what the RUN lines hold."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"<vector of {len(self)} floats>"


def password(settings: Settings) -> str:
    """The generated password of the embedded server (created on first use, kept 0600)."""
    path = settings.neo4j_home / PASSWORD_FILE
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        # Hex, not urlsafe base64: a password starting with "-" would be read as an option by
        # `neo4j-admin dbms set-initial-password` (1 in 64 fresh data directories failed to start).
        path.write_text(secrets.token_hex(24))
        path.chmod(0o600)
    return path.read_text().strip()


def bolt_uri(settings: Settings) -> str:
    """The embedded server's Bolt address (loopback only)."""
    return f"bolt://127.0.0.1:{settings.bolt_port}"


def connection(settings: Settings) -> tuple[str, tuple[str, str]]:
    """(uri, auth) for the configured server."""
    if settings.neo4j_uri:
        return settings.neo4j_uri, (settings.neo4j_user, settings.neo4j_password or "")
    return bolt_uri(settings), ("neo4j", password(settings))


def _options(settings: Settings) -> dict[str, Any]:
    """Retry budget for transient errors, no server notifications."""
    return {"max_transaction_retry_time": settings.neo4j_retry_s, "notifications_min_severity": "OFF"}


def sync_driver(settings: Settings) -> Driver:
    uri, auth = connection(settings)
    return GraphDatabase.driver(uri, auth=auth, max_connection_pool_size=POOL_SIZE, **_options(settings))


# The running server's version and edition.
SERVER_VERSION = "CALL dbms.components() YIELD versions, edition RETURN versions[0] + ' ' + edition AS v"


def embedded_version(settings: Settings) -> str | None:
    """The embedded server's version and edition, or None while its Bolt port does not answer:
    the start-up probe and ``cairn neo4j status`` (``cairn/runtime/neo4j_server.py``). It asks
    whether the server is up before a pooled driver makes sense, so it opens a driver of its
    own, with ``sync_driver``'s options but one connection, a 2 s connection timeout and one
    auto-commit query (no retry loop while the server starts); a refused password raises
    ``AuthError``."""
    try:
        with (
            GraphDatabase.driver(
                bolt_uri(settings),
                auth=("neo4j", password(settings)),
                connection_timeout=2,
                max_connection_pool_size=1,
                **_options(settings),
            ) as driver,
            driver.session() as session,
        ):
            record = session.run(SERVER_VERSION).single(strict=True)
    except (ServiceUnavailable, OSError):
        return None
    return str(record["v"])


def _transient(exc: BaseException) -> bool:
    return isinstance(exc, (Neo4jError, DriverError)) and exc.is_retryable()


@retry(
    retry=retry_if_exception(_transient),
    stop=stop_after_attempt(READ_ATTEMPTS),
    wait=wait_exponential_jitter(multiplier=0.05, max=1.0, jitter=0.05),
    reraise=True,
)
def read(driver: Driver, query: str, params: Mapping[str, Any]) -> list[Record]:
    """One read, one round trip: an auto-commit query (``driver.execute_query``'s managed
    transaction adds a COMMIT round trip). A transient error is retried after a jittered pause,
    every row is read before it returns (a retry never follows rows already handed out), and it
    shares ``execute_query``'s bookmarks. On one server (the embedded one, docker-compose's) it
    sees every committed write; on a cluster, only those made through ``execute_query``, since
    the write sessions keep their own bookmarks (docs/design.md §One driver model)."""
    with driver.session(
        default_access_mode=READ_ACCESS, bookmark_manager=driver.execute_query_bookmark_manager
    ) as session:
        return list(session.run(query, dict(params)))


def write(
    driver: Driver, work: Callable[Concatenate[ManagedTransaction, P], T], *args: P.args, **kwargs: P.kwargs
) -> T:
    """``work`` in a managed write transaction (retried by the driver on a transient error) whose
    BEGIN travels with its first statement, as ``driver.execute_query`` sends its own: one round
    trip less per transaction (docs/design.md §One driver model). The driver offers that
    pipelining only through ``execute_query`` (the session's ``_pipelined_begin`` switch, neo4j
    6.1); where a driver has no such switch the BEGIN goes alone, as ``execute_write`` sends it.
    ``tests/e2e/test_write_round_trips.py`` counts the round trips of a packet."""
    with driver.session() as session:
        pipelined = getattr(session, "_pipelined_begin", None)
        with nullcontext() if pipelined is None else pipelined:
            return session.execute_write(work, *args, **kwargs)
