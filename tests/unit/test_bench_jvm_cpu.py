"""bench.common.jvm_cpu_s: a process's CPU split into JIT compiler threads and the rest (the
LoCoMo bench reports Neo4j's ingest CPU that way)."""

from __future__ import annotations

import ctypes
import os
import sys
import threading
import time

import pytest

from bench.common import jvm_cpu_s

PR_SET_NAME = 15


def _burn(name: bytes, seconds: float, done: threading.Event) -> None:
    ctypes.CDLL(None).prctl(PR_SET_NAME, name, 0, 0, 0)  # this thread's name, as the JVM names its own
    while time.thread_time() < seconds:
        pass
    done.wait()  # alive until read: an ended thread is no longer in /proc


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_compiler_threads_are_counted_apart_from_the_rest() -> None:
    before = jvm_cpu_s(os.getpid())
    done = threading.Event()
    worker = threading.Thread(target=_burn, args=(b"C2 CompilerThre", 0.3, done))
    worker.start()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and jvm_cpu_s(os.getpid())["jit"] - before["jit"] < 0.25:
        time.sleep(0.05)
    after = jvm_cpu_s(os.getpid())
    done.set()
    worker.join()
    assert after["jit"] - before["jit"] >= 0.25  # the compiler-named thread's CPU
    assert after["work"] >= before["work"]  # this thread's own CPU goes to the rest
    assert before["jit"] == 0.0


def test_no_process_no_split() -> None:
    assert jvm_cpu_s(None) == {}
