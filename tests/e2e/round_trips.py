"""A driver that counts the round trips of the queries sent through it (issue 15: one per read)."""

from __future__ import annotations

from typing import Any

from neo4j import Driver


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
