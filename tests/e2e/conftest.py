"""End-to-end wiring: a real Neo4j for the whole run, started here unless one is configured.

With CAIRN_TEST_NEO4J_URI set the tests use that server (never NEO4J_URI: they wipe it);
otherwise they start the embedded server in its own data directory and ports (CAIRN_TEST_*,
read in tests/conftest.py) and stop it at the end, so a developer's demo database is never touched.
"""

from __future__ import annotations

import gc
import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from neo4j import Driver
from neo4j.exceptions import ServiceUnavailable, SessionExpired
from starlette.testclient import TestClient
from tenacity import retry, retry_if_exception_type, stop_after_attempt, wait_fixed

from cairn.ingest.correspondence.demo import load_demo_correspondence
from cairn.ingest.demo import load_demo
from cairn.ingest.factors import DEMO_DIR as FACTORS_DEMO
from cairn.ingest.factors import ingest_factor_dir
from cairn.ingest.org_memory import ingest_fixture_dir
from cairn.memory.dossiers.demo import load_demo_dossiers
from cairn.policy.passport import headers_for
from cairn.policy.profiles import PolicyRegistry
from cairn.runtime import neo4j_server
from cairn.runtime.database import sync_driver
from cairn.runtime.embedder import Embedder, get_embedder
from cairn.runtime.settings import REPO_ROOT, Settings, get_settings
from cairn.schema.checksum import graph_checksum
from cairn.schema.migrate import migrate
from tests.conftest import TEST_DATABASE, MemoEmbedder
from tests.e2e import snapshot
from tests.e2e.commits import last_commit
from tests.e2e.warm_cli import WarmCLI

ACME = REPO_ROOT / "fixtures" / "acme"
PEPS = REPO_ROOT / "fixtures" / "peps"  # a real decision record: Python PEPs (its README)
ADRS = REPO_ROOT / "fixtures" / "adrs"  # a real ADR log: GOV.UK's AWS migration (its README)

ROLES = REPO_ROOT / "fixtures" / "policy" / "roles.yaml"


@pytest.fixture(scope="session")
def settings() -> Settings:
    # Still the database tests/conftest.py chose, whatever the test modules imported.
    assert {k: os.environ.get(k) for k in TEST_DATABASE} == TEST_DATABASE
    return get_settings()


# The test server's home (its store and transaction logs) in memory when the machine has a
# tmpfs: the suite commits some 2,000 write transactions and each waits for an fsync (8.8 ms on
# the CI machine's /tmp, nothing on a tmpfs). A killed server's files stay as it wrote them on
# either, so the crash and restart tests prove the same (docs/design.md §Embedded Neo4j start-up).
TMPFS = Path("/dev/shm")
TMPFS_HOME = "cairn-test-neo4j-"
TMPFS_MARKER = "cairn-test-home"  # inside each: the home that links to it


def neo4j_in_memory(home: Path) -> None:
    """Make ``home`` a link to a fresh folder on the tmpfs, when there is one with room and
    ``home`` does not exist yet (a developer's earlier store stays where it is). Folders left by
    killed sessions (their home no longer links to them) are removed first."""
    if home.is_symlink() and not home.exists():  # its tmpfs folder is gone (a reboot)
        home.unlink()
    if not TMPFS.is_dir() or not os.access(TMPFS, os.W_OK):
        return
    for folder in TMPFS.resolve().glob(f"{TMPFS_HOME}*"):
        marker = folder / TMPFS_MARKER
        if not marker.is_file():  # being made, or not ours
            continue
        owner = Path(marker.read_text(encoding="utf-8"))
        if not owner.is_symlink() or owner.resolve() != folder:
            shutil.rmtree(folder, ignore_errors=True)
    room = os.statvfs(TMPFS)
    if home.exists() or room.f_bavail * room.f_frsize < 2 << 30:
        return
    home.parent.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix=TMPFS_HOME, dir=TMPFS.resolve()))
    (folder / TMPFS_MARKER).write_text(str(home.absolute()), encoding="utf-8")
    home.symlink_to(folder)


def forget_neo4j_in_memory(home: Path) -> None:
    """Remove what ``neo4j_in_memory`` made (the tmpfs folder and the link), once stopped."""
    if home.is_symlink():
        target = home.resolve()
        if target.parent == TMPFS.resolve() and target.name.startswith(TMPFS_HOME):
            shutil.rmtree(target, ignore_errors=True)
            home.unlink()


@pytest.fixture(scope="session")
def neo4j_running(settings: Settings) -> Iterator[Settings]:
    started = False
    if settings.embedded and not neo4j_server.status(settings).running:
        neo4j_in_memory(settings.neo4j_home)
        neo4j_server.start(settings)
        started = True
    yield settings
    if started:
        neo4j_server.stop(settings)
        forget_neo4j_in_memory(settings.neo4j_home)


@pytest.fixture(scope="session")
def driver(neo4j_running: Settings) -> Iterator[Driver]:
    drv = sync_driver(neo4j_running)
    migrate(drv)
    yield drv
    drv.close()


@retry(
    retry=retry_if_exception_type((ServiceUnavailable, SessionExpired)),
    stop=stop_after_attempt(5),
    wait=wait_fixed(0.5),
    reraise=True,
)
def wipe(driver: Driver) -> None:
    """Delete every Cairn node (the schema and its version node stay).

    Retried: after a test restarts the server, pooled connections fail once each."""
    with driver.session() as session:
        session.run("MATCH (n:Entity) CALL (n) { DETACH DELETE n } IN TRANSACTIONS OF 5000 ROWS").consume()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests marked ``restarts`` (their modules stop, kill or restore the server) run last, so no
    other module meets a pool of connections to a server that has since restarted."""
    items.sort(key=lambda item: item.get_closest_marker("restarts") is not None)


# The warm CLI process, when `started` launched it before a test asked for it.
_EARLY_CLI: list[WarmCLI] = []


@pytest.fixture(scope="session", autouse=True)
def started(request: pytest.FixtureRequest) -> Iterator[None]:
    """The session's slow starts side by side instead of one after another: the model loads in
    a thread while the Neo4j server starts, and the warm CLI process (when a collected test uses
    it) imports the CLI and loads its model meanwhile; its readiness is awaited on first use."""
    if any("warm_cli" in getattr(item, "fixturenames", ()) for item in request.session.items):
        _EARLY_CLI.append(WarmCLI(wait=False))
    # The query model too (exporting its graph to the user's cache on a machine's first run): the
    # warm CLI builds its own from that file before its first fork, so that its children share it.
    model = threading.Thread(target=lambda: get_embedder().prepare_query_model(), name="load-model")
    model.start()
    try:
        request.getfixturevalue("neo4j_running")
    finally:
        model.join()
    # What is loaded now (torch, the model, the driver) lives for the session: out of every later
    # collection's walk, so the collections the tests' garbage sets off walk only that garbage.
    gc.collect()
    gc.freeze()
    yield
    while _EARLY_CLI:  # launched but never used (the tests that would were deselected or failed)
        _EARLY_CLI.pop().close()


@pytest.fixture(scope="package", autouse=True)
def remembered_model(embedder: MemoEmbedder) -> Iterator[None]:
    """The process-wide model queues through the session's memory of vectors for the e2e tests
    (MemoEmbedder.submit): what the service embeds itself (a search's query, the demo loads,
    an in-process CLI command, each app's warm-up query) is embedded once in the session. For
    this package only (set up before any module's fixtures), so tests/unit, which checks the
    model's own batching, meets the bare model."""
    model = get_embedder()
    assert embedder._inner is model
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(model, "_submit", embedder.submit)
        yield


@pytest.fixture(scope="session")
def warm_cli() -> Iterator[WarmCLI]:
    """One process that has imported the CLI and loaded the model, forking a child per command
    (tests/e2e/warm_cli.py): for the tests that need CLI processes of their own."""
    cli = _EARLY_CLI.pop() if _EARLY_CLI else WarmCLI()
    cli.wait_ready()
    yield cli
    cli.close()


@pytest.fixture
def empty_db(driver: Driver) -> Driver:
    wipe(driver)
    return driver


# What the last load of the demo org, of the PEP record and of the AI-readiness demo domain
# (fixtures/factors) left: the node count and graph_checksum (every node, relationship and
# property, its load times included) and the last commit since which the graph is known to be
# that, so an unchanged graph is not reloaded.
_ACME_LOADED: dict[str, Any] = {}
_PEPS_LOADED: dict[str, Any] = {}
_ADRS_LOADED: dict[str, Any] = {}
_FACTORS_LOADED: dict[str, Any] = {}


def _count(driver: Driver) -> int:
    return int(driver.execute_query("MATCH (n) RETURN count(n) AS c")[0][0]["c"])


def _loaded_once(driver: Driver, memo: dict[str, Any], load: Callable[[Driver], object]) -> Driver:
    """The graph exactly as ``load`` writes it into an empty store. Loaded again only when the
    graph differs from what the last load left: no commit since it was last known to be that
    (last_commit), or the same checksum; so modules that only read it share one load, and a
    module after one that wrote gets a fresh one."""
    if memo:
        mark = last_commit(driver)
        if mark == memo["mark"] or (
            _count(driver) == memo["count"] and graph_checksum(driver) == memo["sum"]
        ):
            memo["mark"] = mark
            return driver
    wipe(driver)
    load(driver)
    memo.update(count=_count(driver), sum=graph_checksum(driver), mark=last_commit(driver))
    return driver


def load_acme(driver: Driver) -> Driver:
    """The graph exactly as a fresh load of the demo org writes it (parse, validate, embed,
    write: seconds), loaded again only when the graph changed (_loaded_once)."""
    return _loaded_once(driver, _ACME_LOADED, lambda drv: ingest_fixture_dir(drv, ACME))


def load_peps(driver: Driver) -> Driver:
    """The graph exactly as a fresh load of the PEP decision record writes it, loaded again only
    when the graph changed (_loaded_once)."""
    return _loaded_once(driver, _PEPS_LOADED, lambda drv: ingest_fixture_dir(drv, PEPS))


def load_adrs(driver: Driver) -> Driver:
    """The graph exactly as a fresh load of the ADR log writes it, loaded again only when the graph
    changed (_loaded_once)."""
    return _loaded_once(driver, _ADRS_LOADED, lambda drv: ingest_fixture_dir(drv, ADRS))


def load_factors(driver: Driver, embedder: Embedder) -> Driver:
    """The graph exactly as a fresh load of the demo factors writes it (what ``load_demo_factors``
    loads, embedded by the session's model), loaded again only when the graph changed."""
    return _loaded_once(
        driver, _FACTORS_LOADED, lambda drv: ingest_factor_dir(drv, FACTORS_DEMO, embedder=embedder)
    )


def whole_demo(driver: Driver) -> Driver:
    """The store as `cairn serve --demo` loads an empty one (org memory, dossiers, factors,
    correspondence): loaded once per session, written back after (tests/e2e/snapshot.py)."""
    return snapshot.loaded(driver, "demo", load_demo, wipe)


def demo_dossiers(driver: Driver, embedder: Embedder | None = None) -> Driver:
    """The store as the demo dossiers load an empty one, embedded by ``embedder`` (the
    process-wide model by default): loaded once per session, written back after
    (tests/e2e/snapshot.py)."""

    def load(drv: Driver) -> None:
        load_demo_dossiers(drv, embedder)

    return snapshot.loaded(driver, "dossiers", load, wipe)


@pytest.fixture
def acme_db(driver: Driver) -> Driver:
    """The demo org as freshly loaded (tests may read it; tests that write use their own data,
    or change it and the next user gets a reload)."""
    return load_acme(driver)


@pytest.fixture
def acme_dir() -> Path:
    return ACME


# --- Shared by the API and adversarial modules: data loaded once per module, the policy
# registry, a GraphQL call and a development passport. A module may still define a fixture of
# the same name to load something else.


@pytest.fixture(scope="module")
def acme(driver: Driver) -> Driver:
    """The demo org, loaded once for the module (its tests read it; writers clean up)."""
    return load_acme(driver)


@pytest.fixture(scope="module")
def letters(driver: Driver, settings: Settings, embedder: Embedder) -> Driver:
    """The demo correspondence, as a sync of the letters into an empty store writes it (embedded
    by the session's model): synced once per session, written back after (tests/e2e/snapshot.py)."""

    def load(drv: Driver) -> None:
        load_demo_correspondence(drv, settings, embedder)

    return snapshot.loaded(driver, "letters", load, wipe)


@pytest.fixture(scope="module")
def registry(settings: Settings) -> PolicyRegistry:
    return PolicyRegistry.load(settings.policy_file)


def gql(client: TestClient, query: str, headers: dict[str, str], **variables: Any) -> dict[str, Any]:
    """POST a GraphQL request; the transport must answer 200 (errors travel in the body)."""
    resp = client.post("/graphql", json={"query": query, "variables": variables}, headers=headers)
    assert resp.status_code == 200, resp.text
    body: dict[str, Any] = resp.json()
    return body


def gql_as(
    client: TestClient, registry: PolicyRegistry, role: str | None, query: str, **variables: Any
) -> dict[str, Any]:
    """``gql`` as ``role`` (its development passport), or without a passport when ``role`` is None."""
    return gql(client, query, headers_for(registry, role) if role else {}, **variables)


def codes(body: dict[str, Any]) -> list[str]:
    """The ``extensions.code`` of every error in a GraphQL response body, in order."""
    return [e["extensions"]["code"] for e in body.get("errors") or []]


def passport(registry: PolicyRegistry, role: str, **extra: str) -> dict[str, str]:
    """The development passport of ``role``, with ``extra`` headers (narrowing) on top."""
    return {**headers_for(registry, role), **extra}


def entity_graph_write(edge_types: Sequence[str]) -> str:
    """One statement that replaces every Entity with ``$decisions`` and ``$events`` and links them
    by ``$<edge type in lower case>`` rows ``{a, b, relation}`` (one transaction, one round trip per
    hypothesis example; a module's first wipe clears whatever an earlier module left)."""
    links = "".join(
        f"""CALL () {{
  UNWIND ${t.lower()} AS row
  MATCH (a:Entity {{id: row.a}}), (b:Entity {{id: row.b}})
  CREATE (a)-[:{t} {{relation: row.relation}}]->(b)
}}
"""
        for t in edge_types
    )
    return (
        """OPTIONAL MATCH (old:Entity)
DETACH DELETE old
WITH count(*) AS _
CALL () {
  UNWIND $decisions AS row
  CREATE (n:Entity:Decision) SET n = row
}
CALL () {
  UNWIND $events AS row
  CREATE (n:Entity:Event) SET n = row
}
"""
        + links
    )
