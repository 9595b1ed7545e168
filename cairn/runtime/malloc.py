"""Cap glibc's malloc arenas for the long-running service.

Why: glibc gives every thread that allocates its own arena (up to 8 per core), and the
service runs its blocking work (embedding, sync Neo4j calls) on a pool of worker threads.
Memory freed in one of many arenas is seldom returned to the system, so the resident size
crept up over a soak: 10 minutes of mixed load grew it by 72 MB (end/warm-up 1.109) with
the default and by 46 MB (1.082) with two arenas, at no cost in throughput
(bench/results/load.md). ``mallopt`` must run before the worker threads start allocating.
"""

from __future__ import annotations

import ctypes
import ctypes.util

M_ARENA_MAX = -8  # from glibc's malloc.h


def cap_malloc_arenas(arenas: int) -> bool:
    """Limit malloc to ``arenas`` arenas; False where it cannot be done (not glibc, or 0 asked)."""
    if arenas <= 0:
        return False
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        mallopt = ctypes.CDLL(name).mallopt
    except (OSError, AttributeError):  # not glibc (e.g. musl has no mallopt)
        return False
    return bool(mallopt(M_ARENA_MAX, arenas))
