"""Run every benchmark module in bench/ (or the ones named on the command line)."""

from __future__ import annotations

import importlib
import pkgutil
import sys
import time

import bench


def main(names: list[str]) -> int:
    modules = names or sorted(
        m.name
        for m in pkgutil.iter_modules(bench.__path__)
        if not m.name.startswith("_") and m.name != "common"
    )
    for name in modules:
        started = time.perf_counter()
        print(f"== bench.{name}", flush=True)
        # Each module reads its own options from sys.argv; the names given here are not theirs.
        sys.argv = [f"bench.{name}"]
        importlib.import_module(f"bench.{name}").main()
        print(f"== bench.{name} done in {time.perf_counter() - started:.0f}s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
