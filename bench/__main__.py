"""Run every benchmark module in bench/ (or the ones named on the command line).

``python -m bench locomo --data PATH``: the names come first; the options after them are
passed on to each named module's ``main`` as its command line.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
import time

import bench

# Shared code, and the fusion weights' leave-one-out check (28 LoCoMo variants, a tuning check
# run by name: `python -m bench locomo_loo --data ...`), are left out of a run of everything.
NOT_BENCHMARKS = ("common", "locomo_data", "locomo_loo")


def main(args: list[str]) -> int:
    split = next((i for i, a in enumerate(args) if a.startswith("-")), len(args))
    names, options = args[:split], args[split:]
    modules = names or sorted(
        m.name
        for m in pkgutil.iter_modules(bench.__path__)
        if not m.name.startswith("_") and m.name not in NOT_BENCHMARKS
    )
    for name in modules:
        started = time.perf_counter()
        print(f"== bench.{name}", flush=True)
        # Each module reads its own options from sys.argv: the options, not the names given here.
        sys.argv = [f"bench.{name}", *options]
        importlib.import_module(f"bench.{name}").main()
        print(f"== bench.{name} done in {time.perf_counter() - started:.0f}s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
