"""`cairn neo4j start|stop|status`, `cairn db migrate`, `cairn backup PATH` and `cairn restore PATH`:
the embedded Neo4j, its schema and its offline dumps."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from cairn.commands.common import console, open_driver
from cairn.errors import EXIT_NEO4J_UNAVAILABLE
from cairn.ingest.correspondence.sync import reembed
from cairn.memory import trace as bundles
from cairn.runtime import neo4j_server
from cairn.runtime.backup import backup, restore
from cairn.runtime.database import sync_driver
from cairn.runtime.settings import Settings, get_settings
from cairn.schema.checksum import graph_checksum
from cairn.schema.migrate import SCHEMA_VERSION, migrate, sections_to_reembed

neo4j_app = typer.Typer(help="Manage the embedded local Neo4j server.", no_args_is_help=True)
db_app = typer.Typer(help="Schema management.", no_args_is_help=True)


@neo4j_app.command("start")
def neo4j_start() -> None:
    """Fetch the pinned jars (once), start Neo4j in the background, wait for Bolt."""
    with console.status("starting Neo4j (first run fetches the jars with Maven)…"):
        st = neo4j_server.start(get_settings())
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
        raise typer.Exit(EXIT_NEO4J_UNAVAILABLE)
    console.print(f"Neo4j {st.version} running (pid {st.pid}) at {st.bolt_uri}; Browser {st.http_url}")


@db_app.command("migrate")
def db_migrate() -> None:
    """Create missing constraints and indexes, re-embed the sections the upgrade marked (idempotent)."""
    with open_driver(check_schema=False) as driver:
        created = migrate(driver)
        reembedded = reembed(driver) if sections_to_reembed(driver) else 0
    dropped = bundles.drop_stale_traces(get_settings().traces)
    console.print(f"schema v{SCHEMA_VERSION}: created {len(created)} item(s)")
    for name in created:
        console.print(f"  + {name}")
    if reembedded:
        console.print(f"re-embedded {reembedded} section(s)")
    if dropped:
        console.print(f"deleted {dropped} trace(s) written by an earlier version (never read)")


def backup_command(path: Annotated[Path, typer.Argument(help="folder for neo4j.dump")]) -> None:
    """Offline dump of the embedded Neo4j (stopped and restarted around the dump)."""
    settings = get_settings()
    with console.status("dumping (Neo4j is stopped meanwhile)…"):
        dump = backup(settings, path)
    console.print(f"backup written to {dump}")
    _print_checksum(settings)


def restore_command(
    path: Annotated[Path, typer.Argument(help="folder holding neo4j.dump, or the dump file")],
) -> None:
    """Replace the embedded database with a dump (Neo4j is stopped and restarted)."""
    settings = get_settings()
    with console.status("loading (Neo4j is stopped meanwhile)…"):
        restore(settings, path)
    console.print(f"restored from {path}")
    _print_checksum(settings)


def _print_checksum(settings: Settings) -> None:
    if neo4j_server.status(settings).running:
        with sync_driver(settings) as driver:
            console.print(f"graph checksum sha256:{graph_checksum(driver)}")
