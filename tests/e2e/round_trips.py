"""A driver that counts the round trips of the queries sent through it (issue 15: one per read)."""

from __future__ import annotations

import threading
from time import monotonic
from typing import Any

import pytest
from neo4j import Driver
from neo4j._sync.io._bolt import Bolt


class RoundTrips:
    """The real driver, counting round trips: an auto-commit query (a session's one run, as
    ``database.read`` sends it) is one, a managed transaction of one query (``execute_query``:
    BEGIN and RUN pipelined, then COMMIT) two."""

    def __init__(self, driver: Driver) -> None:
        self.driver = driver
        self.trips = 0

    def session(self, **kwargs: Any) -> Any:
        self.trips += 1
        return self.driver.session(**kwargs)

    def execute_query(self, *args: Any, **kwargs: Any) -> Any:
        self.trips += 2
        return self.driver.execute_query(*args, **kwargs)

    @property
    def execute_query_bookmark_manager(self) -> Any:
        return self.driver.execute_query_bookmark_manager


class Flushes:
    """Round trips as the wire sees them: each time the calling thread's driver sends what it has
    queued (``Bolt._send_all``, after which the sync driver waits for the answers), counted while
    the context is open. Messages that travel together (a BEGIN with its first RUN, a RUN with
    its PULL) are one."""

    def __init__(self) -> None:
        self.trips = 0
        self._thread = threading.get_ident()

    def __enter__(self) -> Flushes:
        counter = self

        def send_all(bolt: Bolt) -> None:  # Bolt._send_all, counted
            if bolt.outbox.flush():
                bolt.idle_since = monotonic()
                if threading.get_ident() == counter._thread:
                    counter.trips += 1

        self._patch = pytest.MonkeyPatch()
        self._patch.setattr(Bolt, "_send_all", send_all)
        return self

    def __exit__(self, *exc: object) -> None:
        self._patch.undo()
