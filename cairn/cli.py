"""The ``cairn`` command: one entry point for running, loading and inspecting the service.

Only the assembly lives here; every command is defined in ``cairn/commands/`` (one module per
capability), with what they share in ``cairn/commands/common.py``."""

from __future__ import annotations

import os

import typer
from neo4j.exceptions import ServiceUnavailable, SessionExpired
from rich.markup import escape

from cairn.commands import correspondence, database, dossiers, factors, org, service
from cairn.commands.common import RefusalsGroup, err
from cairn.errors import EXIT_NEO4J_UNAVAILABLE
from cairn.runtime.database import connection
from cairn.runtime.settings import get_settings

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

app = typer.Typer(
    cls=RefusalsGroup, help="Cairn: an organisation's memory as one Neo4j graph.", no_args_is_help=True
)
ingest_app = typer.Typer(help="Load data into the graph.", no_args_is_help=True)

app.add_typer(database.neo4j_app, name="neo4j")
app.command("ask")(org.ask)
app.command("bench")(org.bench)
app.add_typer(database.db_app, name="db")
app.add_typer(ingest_app, name="ingest")
app.add_typer(correspondence.correspondence_app, name="correspondence")
app.add_typer(dossiers.dossier_app, name="dossier")
app.command("garden")(dossiers.garden)
app.add_typer(factors.factor_app, name="factor")
app.command("serve")(service.serve)
app.command("passport")(service.passport)
app.command("backup")(database.backup_command)
app.command("restore")(database.restore_command)

ingest_app.command("correspondence")(correspondence.ingest_correspondence)
ingest_app.command("packets")(dossiers.ingest_packets)
ingest_app.command("blocks")(dossiers.ingest_block_file)
ingest_app.command("factors")(factors.ingest_factors)
ingest_app.command("fixtures")(org.ingest_fixtures)


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
