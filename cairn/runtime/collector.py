"""Tune the cyclic garbage collector for the long-running service, once it is warm.

Why: an ask builds a few thousand containers (the walk's rows, masked fields, scores, evidence
lines) that live until it returns. With Python's default (a young collection every 700 new
containers) 2-3 young collections run inside every ask and promote what the ask still holds,
so about one ask in five also pays an older-generation collection, and one in a hundred a full
one that walks every object the process loaded (the models, the policies, the caches: ~240k,
hundreds of ms on a shared machine). Measured over 400 exec asks at three hops on the 10k bench
graph (bench/results/ask_latency.md): collections per ask 2.3 young / 0.21 middle / 0.01 full
with the default; 0.26 / 0.02 / 0.003 with a young threshold of 10,000 and the startup objects
frozen, the full collection walking ~18k objects instead of ~240k. An ask's own containers now
mostly die (by reference count) before any collection sees them.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def tuned_collector(young: int) -> Iterator[bool]:
    """While the warm service runs: every object alive now moved out of the collector's reach
    (``gc.freeze``: what startup loaded stays while the service does) and the young generation
    collected every ``young`` new containers. On leaving (the service stops) both are undone:
    a process that starts several services one after another (the tests, a host embedding the
    app) would otherwise keep every stopped one's objects for good. Yields False, and changes
    nothing, when ``young`` is 0 (Python's default)."""
    if young <= 0:
        yield False
        return
    before = gc.get_threshold()
    gc.collect()  # what startup left as garbage goes now, not frozen with the rest
    gc.freeze()
    gc.set_threshold(young, *before[1:])
    try:
        yield True
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)
