"""The ``cairn`` command: one entry point for running, loading and inspecting the service."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated

import typer
import uvicorn
from neo4j.exceptions import AuthError, ServiceUnavailable, SessionExpired
from rich.console import Console
from rich.markup import escape

from cairn.app import create_app, is_loopback
from cairn.commands.common import err, fail, old_schema, open_driver, stage_progress
from cairn.commands.correspondence import correspondence_app, ingest_correspondence
from cairn.commands.dossiers import dossier_app, garden, ingest_block_file, ingest_packets
from cairn.commands.factors import factor_app, ingest_factors
from cairn.commands.org import ask as ask_command
from cairn.commands.org import bench as bench_command
from cairn.ingest.demo import FIXTURES, load_demo
from cairn.ingest.fixtures import FixtureError
from cairn.ingest.org_memory import ingest_fixture_dir
from cairn.policy.passport import DEFAULT_LIFETIME_S, MAX_LIFETIME_S, headers_for
from cairn.policy.profiles import PolicyRegistry
from cairn.runtime import neo4j_server
from cairn.runtime.backup import backup, restore
from cairn.runtime.database import connection, sync_driver
from cairn.runtime.malloc import cap_malloc_arenas
from cairn.runtime.settings import Settings, get_settings
from cairn.schema.checksum import graph_checksum
from cairn.schema.migrate import SCHEMA_VERSION, migrate, schema_version

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

app = typer.Typer(help="Cairn: an organisation's memory as one Neo4j graph.", no_args_is_help=True)
neo4j_app = typer.Typer(help="Manage the embedded local Neo4j server.", no_args_is_help=True)
db_app = typer.Typer(help="Schema management.", no_args_is_help=True)
ingest_app = typer.Typer(help="Load data into the graph.", no_args_is_help=True)
app.add_typer(neo4j_app, name="neo4j")
app.command("ask")(ask_command)
app.command("bench")(bench_command)
app.add_typer(db_app, name="db")
app.add_typer(ingest_app, name="ingest")
app.add_typer(correspondence_app, name="correspondence")
ingest_app.command("correspondence")(ingest_correspondence)
app.add_typer(dossier_app, name="dossier")
app.command("garden")(garden)
ingest_app.command("packets")(ingest_packets)
ingest_app.command("blocks")(ingest_block_file)
app.add_typer(factor_app, name="factor")
ingest_app.command("factors")(ingest_factors)

console = Console()
EXIT_NEO4J_UNAVAILABLE = 3


@neo4j_app.command("start")
def neo4j_start() -> None:
    """Fetch the pinned jars (once), start Neo4j in the background, wait for Bolt."""
    try:
        with console.status("starting Neo4j (first run fetches the jars with Maven)…"):
            st = neo4j_server.start(get_settings())
    except neo4j_server.Neo4jProcessError as exc:
        raise fail(str(exc)) from None
    console.print(f"Neo4j {st.version} running (pid {st.pid})")
    console.print(f"  Bolt:    {st.bolt_uri}  user neo4j, password in {st.home / 'password'}")
    console.print(f"  Browser: {st.http_url}")


@neo4j_app.command("stop")
def neo4j_stop() -> None:
    """Stop the embedded Neo4j cleanly."""
    stopped = neo4j_server.stop(get_settings())
    console.print("Neo4j stopped" if stopped else "Neo4j was not running")


@neo4j_app.command("status")
def neo4j_status() -> None:
    """Tell whether the embedded Neo4j runs, where, and which version."""
    settings = get_settings()
    if settings.neo4j_uri:
        console.print(f"external Neo4j configured: {settings.neo4j_uri} (nothing embedded)")
        return
    st = neo4j_server.status(settings)
    if not st.running:
        console.print(f"Neo4j is not running (home {st.home})")
        raise typer.Exit(3)
    console.print(f"Neo4j {st.version} running (pid {st.pid}) at {st.bolt_uri}; Browser {st.http_url}")


@db_app.command("migrate")
def db_migrate() -> None:
    """Create missing constraints and indexes (idempotent)."""
    with open_driver(check_schema=False) as driver:
        created = migrate(driver)
    console.print(f"schema v{SCHEMA_VERSION}: created {len(created)} item(s)")
    for name in created:
        console.print(f"  + {name}")


@ingest_app.command("fixtures")
def ingest_fixtures(
    path: Annotated[Path, typer.Argument(help="fixture folder, e.g. fixtures/acme")],
    strict: Annotated[
        bool, typer.Option(help="refuse on warnings too (records no role can read, causes after effects)")
    ] = False,
) -> None:
    """Validate every file (every problem in one report), then write vertices → transitions →
    aliases (idempotent). Runs as the operator: full power, no role scope."""
    registry = PolicyRegistry.load(get_settings().policy_file)
    with open_driver() as driver:
        with stage_progress(console) as advance:
            try:
                report = ingest_fixture_dir(driver, path, advance, registry=registry, refuse_warnings=strict)
            except FixtureError as exc:
                raise fail(str(exc), code=2) from None
        checksum = graph_checksum(driver)
    for warning in report.warnings:
        err.print(f"[yellow]warning:[/] {escape(str(warning))}")
    console.print(
        f"ingested {report.decisions} decisions, {report.events} events, "
        f"{report.causal_edges} causal edges, {report.aliases} alias overlays from {escape(str(path))}"
    )
    console.print(
        f"  nodes: {report.nodes.created} created, {report.nodes.updated} updated, "
        f"{report.nodes_unchanged} unchanged; edges: {report.edges.created} created, "
        f"{report.edges.updated} updated, {report.edges_unchanged} unchanged"
    )
    console.print(f"  graph checksum {checksum}")


def _check_database(settings: Settings, demo: bool) -> None:
    """Fail early and plainly: unreachable server, wrong password, or an old schema."""
    try:
        with sync_driver(settings) as driver:
            driver.verify_connectivity()
            if demo:
                with console.status("loading the demo data (first run embeds every text)…"):
                    load_demo(driver)
                console.print(f"demo data loaded from {FIXTURES}")
            version = schema_version(driver)
    except AuthError:
        raise fail("Neo4j refused the credentials (check NEO4J_USER / NEO4J_PASSWORD)") from None
    except ServiceUnavailable as exc:
        raise fail(f"Neo4j is not reachable at {connection(settings)[0]}: {exc}") from None
    if version != SCHEMA_VERSION:
        raise fail(old_schema(version))


@app.command()
def serve(
    demo: Annotated[bool, typer.Option(help="migrate and load the demo data first")] = False,
    host: Annotated[str | None, typer.Option(help="bind address (default CAIRN_HOST)")] = None,
    port: Annotated[int | None, typer.Option(help="port (default CAIRN_PORT)")] = None,
) -> None:
    """Serve GraphQL (and the UI) — starting the embedded Neo4j when needed."""
    settings = get_settings().model_copy(
        update={k: v for k, v in {"host": host, "port": port}.items() if v is not None}
    )
    cap_malloc_arenas(settings.malloc_arenas)  # first, before any thread allocates
    if settings.passport_secret is None and not is_loopback(settings.host):
        raise fail("refusing to listen on a non-loopback address without CAIRN_PASSPORT_SECRET")
    if settings.embedded and not neo4j_server.status(settings).running:
        neo4j_start()
    _check_database(settings, demo)
    console.print(f"Cairn on http://{settings.host}:{settings.port}/  (GraphiQL at /graphql, UI at /ui/)")
    uvicorn.run(
        create_app(settings),
        host=settings.host,
        port=settings.port,
        timeout_graceful_shutdown=30,
        log_level="info",
    )


@app.command()
def passport(
    role: Annotated[str, typer.Option(help="role profile name")] = "staff",
    user: Annotated[str | None, typer.Option(help="X-User-Id (default u-demo-ROLE)")] = None,
    curl: Annotated[bool, typer.Option(help="print as curl -H flags")] = False,
    lifetime: Annotated[
        int, typer.Option(help="seconds a signed passport stays valid", min=1, max=MAX_LIFETIME_S)
    ] = DEFAULT_LIFETIME_S,
) -> None:
    """Print a fresh passport header set for ROLE (signed, issued now and expiring after
    --lifetime seconds, when a secret is configured)."""
    settings = get_settings()
    headers = headers_for(
        PolicyRegistry.load(settings.policy_file), role, settings.passport_secret, user, lifetime_s=lifetime
    )
    if curl:
        print(" ".join(f"-H '{k}: {v}'" for k, v in headers.items()))
    else:
        print(json.dumps(headers, indent=2))


@app.command("backup")
def backup_command(path: Annotated[Path, typer.Argument(help="folder for neo4j.dump")]) -> None:
    """Offline dump of the embedded Neo4j (stopped and restarted around the dump)."""
    settings = get_settings()
    with console.status("dumping (Neo4j is stopped meanwhile)…"):
        try:
            dump = backup(settings, path)
        except neo4j_server.Neo4jProcessError as exc:
            raise fail(str(exc)) from None
    console.print(f"backup written to {dump}")
    _print_checksum(settings)


@app.command("restore")
def restore_command(
    path: Annotated[Path, typer.Argument(help="folder holding neo4j.dump, or the dump file")],
) -> None:
    """Replace the embedded database with a dump (Neo4j is stopped and restarted)."""
    settings = get_settings()
    with console.status("loading (Neo4j is stopped meanwhile)…"):
        try:
            restore(settings, path)
        except neo4j_server.Neo4jProcessError as exc:
            raise fail(str(exc)) from None
    console.print(f"restored from {path}")
    _print_checksum(settings)


def _print_checksum(settings: Settings) -> None:
    if neo4j_server.status(settings).running:
        with sync_driver(settings) as driver:
            console.print(f"graph checksum sha256:{graph_checksum(driver)}")


def main() -> None:
    """The console script. A Neo4j outage in the middle of any command ends it with one plain
    message (not a traceback) and a non-zero exit: every write is a committed transaction, so
    the message can say what holds for all of them."""
    try:
        app()
    except (ServiceUnavailable, SessionExpired) as exc:
        uri = connection(get_settings())[0]
        err.print(
            f"[bold red]error:[/] lost the connection to Neo4j at {escape(uri)} ({escape(str(exc))}). "
            "Work committed before the outage is kept and nothing else was written; "
            "run the command again once Neo4j is back (re-runs skip what is already stored)."
        )
        raise SystemExit(EXIT_NEO4J_UNAVAILABLE) from None


if __name__ == "__main__":
    main()
