"""Races made deterministic: every writer reads, then they write one at a time in a set order.

A check-then-write race loses when a writer's write follows another's between its read and its
own write. Starting threads together only makes that likely; ``Turns`` makes it certain: each
writer calls ``gate(name)`` at the point between its read and its write (an embedder or a
function the write path calls), which waits until every writer got there, then lets each one
on only after the writer before it in ``order`` has finished.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

WAIT = 120.0  # seconds: a writer that never arrives fails the test instead of hanging it


class Turns:
    def __init__(self, order: Sequence[str]) -> None:
        self.order = list(order)
        self.arrived = threading.Barrier(len(self.order), timeout=WAIT)
        self.finished = {name: threading.Event() for name in self.order}
        self.passed: set[str] = set()

    def gate(self, name: str) -> None:
        """Wait for every writer to have read, then for the writer before ``name`` to finish;
        a writer's later calls pass at once."""
        if name in self.passed:
            return
        self.passed.add(name)
        self.arrived.wait()
        place = self.order.index(name)
        if place and not self.finished[self.order[place - 1]].wait(WAIT):
            raise TimeoutError(f"{self.order[place - 1]} never finished")

    def run(self, writers: Mapping[str, Callable[[], Any]]) -> dict[str, Any]:
        """Run each writer in its own thread (named after it); what each returned or raised."""
        outcomes: dict[str, Any] = {}

        def target(name: str) -> None:
            try:
                outcomes[name] = writers[name]()
            except Exception as exc:  # the outcome the test judges
                outcomes[name] = exc
            finally:
                if name not in self.passed:  # it stopped before the gate: release the others
                    self.arrived.abort()
                self.finished[name].set()

        threads = [threading.Thread(target=target, args=(n,), name=n) for n in self.order]
        for t in threads:
            t.start()
        for t in threads:
            t.join(WAIT * 2)
        assert not any(t.is_alive() for t in threads), "a writer hung"
        return outcomes
