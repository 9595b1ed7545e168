"""Follow a correspondence file: sync it whenever it changes, until told to stop.

``watchfiles`` is not among the project's dependencies, so this polls: every
``interval`` seconds it compares the file's (mtime, size) with the last sync's and syncs
again when they differ. Appends are what authors do, and a sync of an unchanged file
costs a parse and one read query (see bench/), so polling every couple of seconds is
cheap. A file caught half-written (a heading without its body yet) is refused as usual,
reported, and synced on the next change; an unreachable database is retried next tick.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from neo4j import Driver
from neo4j.exceptions import ServiceUnavailable, SessionExpired

from cairn.ingest.correspondence.parser import CorrespondenceError
from cairn.ingest.correspondence.sync import SyncRaceError, SyncReport, sync_file
from cairn.runtime.embedder import Embedder

DEFAULT_INTERVAL_S = 2.0


def _signature(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return st.st_mtime_ns, st.st_size


def watch_file(
    driver: Driver,
    path: Path,
    *,
    collision_log: Path,
    on_report: Callable[[SyncReport], None],
    on_error: Callable[[Exception], None],
    stop: threading.Event,
    source: str | None = None,
    embedder: Embedder | None = None,
    interval: float = DEFAULT_INTERVAL_S,
) -> None:
    """Sync ``path`` now and after every change, until ``stop`` is set."""
    last: tuple[int, int] | None = None
    while not stop.is_set():
        current = _signature(path)
        if current is not None and current != last:
            try:
                on_report(
                    sync_file(driver, path, collision_log=collision_log, source=source, embedder=embedder)
                )
                last = current
            except (CorrespondenceError, FileNotFoundError) as exc:
                on_error(exc)
                last = current  # wait for the author's next change
            except (ServiceUnavailable, SessionExpired, SyncRaceError) as exc:
                on_error(exc)  # keep `last`: retried on the next tick
        stop.wait(interval)
