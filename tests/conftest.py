"""What every test shares, with or without Neo4j.

``tests/unit`` needs no Neo4j and no jars; ``tests/e2e`` (its own conftest) runs against a real
Neo4j. Here: the environment that keeps a test run away from a developer's database and from the
network, the hypothesis profiles, and one embedding model for the whole session.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections.abc import Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import settings as hypothesis_settings

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# The tests wipe their database, so they never take a developer's own database settings from the
# environment (CAIRN_DATA_DIR, the ports, NEO4J_URI): only the CAIRN_TEST_* ones. An external
# server for the tests is named by CAIRN_TEST_NEO4J_URI (its NEO4J_USER / NEO4J_PASSWORD apply).
os.environ.pop("NEO4J_URI", None)
if os.environ.get("CAIRN_TEST_NEO4J_URI"):
    os.environ["NEO4J_URI"] = os.environ["CAIRN_TEST_NEO4J_URI"]
    os.environ["CAIRN_BENCH_NEO4J_URI"] = os.environ["CAIRN_TEST_NEO4J_URI"]
else:
    os.environ["CAIRN_DATA_DIR"] = os.environ.get("CAIRN_TEST_DATA_DIR", "/tmp/cairn-test-data")
    os.environ["CAIRN_BOLT_PORT"] = os.environ.get("CAIRN_TEST_BOLT_PORT", "17687")
    os.environ["CAIRN_HTTP_PORT"] = os.environ.get("CAIRN_TEST_HTTP_PORT", "17474")
    os.environ.pop("CAIRN_BENCH_NEO4J_URI", None)
    # The suite starts the server five times: the starts after the first clean stop map the
    # class-data archive it wrote (docs/design.md §Embedded Neo4j start-up).
    os.environ["CAIRN_NEO4J_CLASS_ARCHIVE"] = os.path.join(os.environ["CAIRN_DATA_DIR"], "neo4j-classes.jsa")
    # neo4j-admin (the backup test's dump and load) compiles with C1 only: the same dump and
    # load took 40% less time (docs/design.md §Embedded Neo4j start-up).
    os.environ["CAIRN_NEO4J_ADMIN_JVM_FLAGS"] = "-XX:TieredStopAtLevel=1"
    # A cached plan is kept for the session: the suite wipes and reloads the store hundreds of
    # times, and each time the statistics moved past Neo4j's threshold it planned the query again
    # (docs/design.md §Embedded Neo4j start-up). CAIRN_NEO4J_CONF set in the environment instead
    # ("" for Neo4j's defaults) is kept.
    os.environ.setdefault("CAIRN_NEO4J_CONF", "dbms.cypher.min_replan_interval=1h")
if "CAIRN_TRACE_DIR" not in os.environ:  # the session's own trace folder, removed when it ends
    os.environ["CAIRN_TRACE_DIR"] = tempfile.mkdtemp(prefix="cairn-traces-")
    atexit.register(shutil.rmtree, os.environ["CAIRN_TRACE_DIR"], ignore_errors=True)
# Starlette's TestClient sends "Host: testserver"; an app without a passport secret answers
# only loopback hosts and the names listed here (cairn.app.LoopbackOnly).
os.environ["CAIRN_ALLOWED_HOSTS"] = "testserver"

from cairn.runtime.embedder import DIMENSIONS, PASS, Embedder, get_embedder

# The apps the tests start in this process leave Python's collector alone (CAIRN_GC_YOUNG=0,
# runtime/collector.py): a tuned start runs a full collection over everything the test process
# holds (the model, hypothesis, every module's data), about a second a start on the loaded
# machine, and its stop unfreezes what the session froze (tests/e2e/conftest.py `started`).
# test_service_lifecycle.py checks the tuned start with its own setting. The CLI processes the tests
# start (tests/e2e/warm_cli.py, `cairn serve` among them) get the environment without it: a served
# process runs the collector path it runs in production, or the developer's own setting.
DEVELOPER_GC_YOUNG = os.environ.get("CAIRN_GC_YOUNG")
os.environ["CAIRN_GC_YOUNG"] = "0"

# A bench module a test imports (its input generators) points the process at the bench's own
# database when imported (bench/common.py use_bench_neo4j): the bench settings name the test
# database too, so importing one changes nothing (tests/e2e/conftest.py checks).
for name in ("DATA_DIR", "BOLT_PORT", "HTTP_PORT"):
    if f"CAIRN_{name}" in os.environ:
        os.environ[f"CAIRN_BENCH_{name}"] = os.environ[f"CAIRN_{name}"]
TEST_DATABASE = {
    k: os.environ.get(k) for k in ("NEO4J_URI", "CAIRN_DATA_DIR", "CAIRN_BOLT_PORT", "CAIRN_HTTP_PORT")
}

# `make fuzz` selects this profile (HYPOTHESIS_PROFILE=fuzz, or `pytest --hypothesis-profile
# fuzz`): the leak properties run CAIRN_FUZZ_EXAMPLES (10,000) examples each instead of 200.
hypothesis_settings.register_profile(
    "fuzz", max_examples=int(os.environ.get("CAIRN_FUZZ_EXAMPLES", "10000")), deadline=None
)
# Every other run: hypothesis's defaults without its 200 ms deadline per example, which a
# shared, busy 2-core machine overruns in pure-Python properties (a timing flake, not a finding).
hypothesis_settings.register_profile("cairn", deadline=None)
hypothesis_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "cairn"))


class MemoEmbedder(Embedder):
    """The real model, remembering each text's vector: a text embedded once in the session is
    not embedded again, so reloading a demo after a wipe costs no model time."""

    def __init__(self, inner: Embedder) -> None:  # the wrapped model is already loaded
        self.name = inner.name
        self._inner = inner
        self._embed = inner.embed  # the model's own method, even if a test routes inner.embed here
        self._queue = inner._submit  # the model's own queue, even once ``submit`` stands in for it
        self._seen: dict[str, Any] = {}
        self._parts: dict[tuple[str, tuple[tuple[int, int], ...]], Any] = {}  # embed_with_part's answers

    def embed(self, texts: Sequence[str], batch_size: int = PASS) -> Any:
        missing = [t for t in dict.fromkeys(texts) if t not in self._seen]
        if missing:
            self._seen.update(zip(missing, self._embed(missing, batch_size), strict=True))
        if not texts:
            return np.zeros((0, DIMENSIONS), dtype=np.float32)
        return np.array([self._seen[t] for t in texts], dtype=np.float32)

    def submit(self, texts: list[str]) -> Future[Any]:
        """The model's queue (``Embedder._submit``, which ``embed`` and ``aembed`` use), remembering:
        a request whose texts were all embedded before resolves at once, any other queues only
        its new texts. Installed on the process-wide model for every e2e test
        (tests/e2e/conftest.py), so the service's own searches, loads and CLI commands embed a
        text once in the session too."""
        out: Future[Any] = Future()
        missing = [t for t in dict.fromkeys(texts) if t not in self._seen]
        if not missing:
            out.set_result(np.array([self._seen[t] for t in texts], dtype=np.float32))
            return out
        queued: Future[Any] = self._queue(missing)

        def done(f: Future[Any]) -> None:
            error = f.exception()
            if error is None:
                self._seen.update(zip(missing, f.result(), strict=True))
            if out.cancelled():  # the caller stopped waiting (its vectors are remembered all the same)
                return
            if error is not None:
                out.set_exception(error)
            else:
                out.set_result(np.array([self._seen[t] for t in texts], dtype=np.float32))

        queued.add_done_callback(done)
        return out

    def embed_with_part(self, text: str, spans: Sequence[tuple[int, int]]) -> Any:
        key = (text, tuple(spans))
        if key not in self._parts:
            self._parts[key] = self._inner.embed_with_part(text, spans)
        return self._parts[key]

    def token_counts(self, texts: Sequence[str]) -> list[int]:
        return self._inner.token_counts(texts)

    def save(self, path: Path) -> Path:
        """Every text embedded so far with its vector, for a process of its own
        (tests/e2e/warm_cli.py, VECTORS_ENV, which reads it back)."""
        texts = list(self._seen)
        vectors = np.array([self._seen[t] for t in texts], dtype=np.float32).reshape(len(texts), DIMENSIONS)
        # The texts as one UTF-8 blob and its offsets: an array of str is as wide as the longest
        # text for every text (a whole session's memory would be hundreds of MB).
        encoded = [t.encode("utf-8") for t in texts]
        offsets = np.cumsum([0, *map(len, encoded)], dtype=np.int64)
        blob = np.frombuffer(b"".join(encoded), dtype=np.uint8)
        np.savez(path, text_bytes=blob, text_offsets=offsets, vectors=vectors)
        return path


@pytest.fixture(scope="session")
def embedder() -> Embedder:
    """One model for the session (the process-wide one the service code also uses), with a
    memory of the texts it has embedded."""
    return MemoEmbedder(get_embedder())
