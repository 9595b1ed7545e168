"""`cairn serve` as an operator meets it: health and readiness, start-up refusals, a Neo4j
outage while serving, and a graceful SIGTERM that finishes the request in flight.

Every test runs the real command in its own process on a free loopback port and stops it.
"""

from __future__ import annotations

import gc
import signal
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import httpx
import pytest
from neo4j import Driver
from starlette.testclient import TestClient

from cairn.app import create_app
from cairn.memory.dossiers.lock import LOCK_ID
from cairn.policy.passport import headers_for
from cairn.policy.profiles import PolicyRegistry
from cairn.runtime import embedder as embedder_module
from cairn.runtime import neo4j_server
from cairn.runtime.database import connection, sync_driver
from cairn.runtime.embedder import get_embedder
from cairn.runtime.malloc import cap_malloc_arenas
from cairn.runtime.settings import Settings
from cairn.schema.migrate import SCHEMA_VERSION, migrate, schema_version
from tests.e2e.warm_cli import WarmCLI

pytestmark = pytest.mark.restarts

SET_VERSION = "MATCH (m:CairnSchema {id: 'schema'}) SET m.version = $v"
MARKER_LABEL = "CairnLifecycleMarker"  # not an Entity: wipe() leaves it alone
NODE = 'query { node(id: "no-such-node") { id } }'
PACKET = "mutation($p: JSON!) { ingestFactPacket(packet: $p) { action dossierId } }"
WAITING_ON_THE_LOCK = """
SHOW TRANSACTIONS YIELD currentQuery, status
WHERE currentQuery CONTAINS 'CairnLock' AND status STARTS WITH 'Blocked'
RETURN count(*) AS blocked
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Served:
    """One `cairn serve` process (a fork of the warm CLI, tests/e2e/warm_cli.py: a process of its
    own that need not import torch and load the model again); its output goes to a file that
    failures quote."""

    def __init__(self, cli: WarmCLI, tmp: Path, **env: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = tmp / f"serve-{self.port}.log"
        self.proc = cli.run(["serve"], self.log, CAIRN_PORT=str(self.port), COLUMNS="300", **env)

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_ready(self, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        # One client for the whole wait: each httpx.get builds a client and its SSL context (reading
        # the CA bundle), which took more of the test process's CPU than the polls themselves.
        with httpx.Client(timeout=5) as http:
            while time.monotonic() < deadline:
                assert self.proc.poll() is None, f"cairn serve exited:\n{self.output()}"
                with suppress(httpx.HTTPError):
                    if http.get(f"{self.url}/ready").status_code == 200:
                        return
                time.sleep(0.2)
        raise AssertionError(f"not ready after {timeout} s:\n{self.output()}")

    def exit_code(self, timeout: float = 120) -> int:
        return self.proc.wait(timeout=timeout)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=40)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@contextmanager
def serving(cli: WarmCLI, tmp: Path, **env: str) -> Iterator[Served]:
    served = Served(cli, tmp, **env)
    try:
        served.wait_ready()
        yield served
    finally:
        served.stop()


@contextmanager
def schema_version_set_to(driver: Driver, version: int) -> Iterator[None]:
    driver.execute_query(SET_VERSION, v=version)
    try:
        yield
    finally:
        driver.execute_query(SET_VERSION, v=SCHEMA_VERSION)


def graphql(url: str, query: str, headers: dict[str, str], **variables: Any) -> httpx.Response:
    body = {"query": query, "variables": variables}
    return httpx.post(f"{url}/graphql", json=body, headers=headers, timeout=90)


# --- health and readiness -----------------------------------------------------------------------


def test_health_and_readiness_when_all_is_well_and_with_an_old_schema(
    driver: Driver, warm_cli: WarmCLI, tmp_path: Path
) -> None:
    with serving(warm_cli, tmp_path) as served:
        assert httpx.get(f"{served.url}/health").json() == {"status": "ok"}
        ready = httpx.get(f"{served.url}/ready")
        assert (ready.status_code, ready.json()) == (200, {"ready": True, "schema_version": SCHEMA_VERSION})

        with schema_version_set_to(driver, SCHEMA_VERSION - 1):
            stale = httpx.get(f"{served.url}/ready")
            assert stale.status_code == 503
            assert stale.json() == {
                "ready": False,
                "reason": f"schema v{SCHEMA_VERSION - 1}, code needs v{SCHEMA_VERSION}",
            }
            assert httpx.get(f"{served.url}/health").status_code == 200  # alive, just not ready
        assert httpx.get(f"{served.url}/ready").status_code == 200


def test_the_model_is_loaded_during_start_up_not_by_the_first_search(
    driver: Driver, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first search after `cairn serve` used to wait ~11 s for the model to load lazily.

    The load start-up asks for hands back this process's model: a second one would cost its load
    and leave the tests after this one (in this process, in whatever order they run) a model other
    than the session's (tests/conftest.py, whose MemoEmbedder wraps this one)."""
    model = get_embedder()
    monkeypatch.setattr(embedder_module, "Embedder", lambda: model)
    get_embedder.cache_clear()
    app = create_app(settings)
    assert get_embedder.cache_info().currsize == 0
    with TestClient(app) as client:  # start-up (the lifespan) has run
        assert get_embedder.cache_info().currsize == 1
        assert client.get("/ready").json()["ready"] is True
        misses = get_embedder.cache_info().misses
        headers = headers_for(PolicyRegistry.load(settings.policy_file), "staff")
        body = {"query": '{ search(query: "cloud platform", k: 1) { total } }'}
        assert "errors" not in client.post("/graphql", json=body, headers=headers).json()
        assert get_embedder.cache_info().misses == misses  # the search reused the loaded model
    assert get_embedder() is model


# --- start-up refusals --------------------------------------------------------------------------


def test_start_up_refuses_an_unreachable_neo4j(warm_cli: WarmCLI, tmp_path: Path) -> None:
    port = free_port()
    served = Served(warm_cli, tmp_path, NEO4J_URI=f"bolt://127.0.0.1:{port}", NEO4J_PASSWORD="x")
    assert served.exit_code() == 1
    assert f"Neo4j is not reachable at bolt://127.0.0.1:{port}" in served.output()
    assert "Traceback" not in served.output()


def test_start_up_refuses_a_wrong_password(settings: Settings, warm_cli: WarmCLI, tmp_path: Path) -> None:
    uri, (user, _) = connection(settings)
    served = Served(warm_cli, tmp_path, NEO4J_URI=uri, NEO4J_USER=user, NEO4J_PASSWORD="not-the-password")
    assert served.exit_code() == 1
    assert "Neo4j refused the credentials (check NEO4J_USER / NEO4J_PASSWORD)" in served.output()
    assert "not-the-password" not in served.output() and "Traceback" not in served.output()


def test_start_up_refuses_a_schema_older_than_the_code(
    driver: Driver, warm_cli: WarmCLI, tmp_path: Path
) -> None:
    with schema_version_set_to(driver, SCHEMA_VERSION - 1):
        served = Served(warm_cli, tmp_path)
        assert served.exit_code() == 1
    expected = f"the database schema is v{SCHEMA_VERSION - 1}, this code needs v{SCHEMA_VERSION}"
    assert expected in served.output() and "cairn db migrate" in served.output()


# --- graceful shutdown --------------------------------------------------------------------------


def test_sigterm_finishes_the_request_in_flight_then_exits(
    driver: Driver, registry: PolicyRegistry, warm_cli: WarmCLI, tmp_path: Path
) -> None:
    """The request is held in flight deterministically: this test holds the routing lock, so
    the server's packet transaction waits on it until the test lets go, after the SIGTERM."""
    packet = {
        "packet_id": f"sigterm-{uuid.uuid4()}",
        "cluster_label": "graceful shutdown",
        "facts": ["A request in flight at SIGTERM is finished before the process exits"],
        "source_block_id": "sigterm-block",
    }
    writer = headers_for(registry, "writer")
    replies: list[httpx.Response] = []
    with serving(warm_cli, tmp_path) as served, driver.session() as session:
        holder = session.begin_transaction()
        holder.run("MERGE (l:CairnLock {id: $id}) SET l.seq = coalesce(l.seq, 0) + 1", id=LOCK_ID).consume()
        request = threading.Thread(
            target=lambda: replies.append(graphql(served.url, PACKET, writer, p=packet))
        )
        request.start()
        deadline = time.monotonic() + 90
        while driver.execute_query(WAITING_ON_THE_LOCK)[0][0]["blocked"] == 0:
            assert time.monotonic() < deadline and request.is_alive(), replies
            time.sleep(0.1)

        served.proc.send_signal(signal.SIGTERM)
        time.sleep(1.5)
        assert served.proc.poll() is None, "exited with a request in flight"
        with pytest.raises(httpx.ConnectError):  # no new work is accepted meanwhile
            httpx.get(f"{served.url}/health", timeout=5)

        holder.commit()
        request.join(timeout=60)
        # uvicorn re-raises the signal once it has shut down cleanly, as supervisors expect.
        assert served.exit_code(timeout=60) == -signal.SIGTERM, served.output()
        assert "Application shutdown complete" in served.output()
    [reply] = replies
    assert reply.status_code == 200 and "errors" not in reply.json(), reply.text
    assert reply.json()["data"]["ingestFactPacket"]["action"] in ("created", "appended")
    stored, _, _ = driver.execute_query(
        "MATCH (j:JournalEntry {work_key: $key}) RETURN count(j) AS c", key=packet["packet_id"]
    )
    assert stored[0]["c"] >= 1  # the request's transaction committed before the exit


# --- a Neo4j outage while serving ---------------------------------------------------------------


def test_an_outage_is_reported_and_readiness_recovers(
    driver: Driver, settings: Settings, registry: PolicyRegistry, warm_cli: WarmCLI, tmp_path: Path
) -> None:
    if not settings.embedded:
        pytest.skip("stops the embedded server")
    staff = headers_for(registry, "staff")
    # The same restart shows the server's own stop and start keep the data and the schema
    # (tests/e2e/test_neo4j_lifecycle.py has the rest of the server's lifecycle).
    marker = f"lifecycle-{uuid.uuid4()}"
    driver.execute_query(f"CREATE (:{MARKER_LABEL} {{id: $id, note: 'survives restart'}})", id=marker)
    # A retry window of 0.5 s: one retry of the query below (after 1 s +- 20%), then the error.
    with serving(warm_cli, tmp_path, CAIRN_NEO4J_RETRY_S="0.5") as served:
        assert graphql(served.url, NODE, staff).json() == {"data": {"node": None}}
        try:
            assert neo4j_server.stop(settings) is True
            assert neo4j_server.status(settings).running is False
            assert neo4j_server.stop(settings) is False  # nothing left to stop
            started = time.monotonic()
            down = httpx.get(f"{served.url}/ready", timeout=30)
            probe_s = time.monotonic() - started
            assert down.status_code == 503 and down.json()["ready"] is False
            assert down.json()["reason"].startswith("neo4j: "), down.json()
            assert probe_s < 5, f"the readiness probe took {probe_s:.1f} s with Neo4j down"

            reply = graphql(served.url, NODE, staff).json()
            [error] = reply["errors"]
            assert error["extensions"] == {"code": "GRAPH_UNAVAILABLE"}, reply
            assert "retry" in error["message"] and str(settings.bolt_port) not in str(reply)
            assert httpx.get(f"{served.url}/health").status_code == 200
        finally:
            if not neo4j_server.status(settings).running:
                assert neo4j_server.start(settings).running
        with sync_driver(settings) as fresh:
            records, _, _ = fresh.execute_query(
                f"MATCH (m:{MARKER_LABEL} {{id: $id}}) RETURN m.note AS note", id=marker
            )
            assert schema_version(fresh) == SCHEMA_VERSION
            assert migrate(fresh) == []
        assert [r["note"] for r in records] == ["survives restart"]
        # The session driver's pooled connections died with the old process; it reconnects.
        records, _, _ = driver.execute_query(
            f"MATCH (m:{MARKER_LABEL} {{id: $id}}) RETURN count(m) AS c", id=marker
        )
        assert records[0]["c"] == 1
        records, _, _ = driver.execute_query("MATCH (n:Entity) RETURN count(n) AS c")
        assert records[0]["c"] >= 0
        driver.execute_query(f"MATCH (m:{MARKER_LABEL} {{id: $id}}) DELETE m", id=marker)
        deadline = time.monotonic() + 60
        while httpx.get(f"{served.url}/ready", timeout=30).status_code != 200:
            assert time.monotonic() < deadline, "not ready again after Neo4j came back"
            time.sleep(0.5)
        assert graphql(served.url, NODE, staff).json() == {"data": {"node": None}}


def test_malloc_arenas_are_capped_where_glibc_allows_it() -> None:
    """`cairn serve` caps arenas first thing; glibc (this machine, the Dockerfile's Debian) accepts."""
    assert cap_malloc_arenas(2) is True
    assert cap_malloc_arenas(0) is False  # CAIRN_MALLOC_ARENAS=0 leaves glibc's default


def test_a_started_service_tunes_the_collector_once_warm(settings: Settings) -> None:
    """The lifespan, after its warm-up, raises the young threshold and freezes what startup
    loaded (runtime/collector.py: an ask's containers then mostly die before any collection),
    and undoes both when the service stops."""
    before = gc.get_threshold()
    session_frozen = gc.get_freeze_count() > 0  # tests/e2e/conftest.py froze the session's start-up
    gc.unfreeze()
    try:
        with TestClient(create_app(settings.model_copy(update={"gc_young": 12_345}))):  # lifespan run
            assert gc.get_threshold()[0] == 12_345
            assert gc.get_freeze_count() > 0
        assert gc.get_threshold() == before  # stopped: undone, the app's objects collectable again
        assert gc.get_freeze_count() == 0
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)
        if session_frozen:  # the later modules' collections walk their own garbage only again
            gc.collect()
            gc.freeze()
