"""What every command group needs: a plain failure message and a driver to a migrated database."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import typer
from neo4j import Driver
from rich.console import Console
from rich.markup import escape
from rich.progress import Progress, TaskID

from cairn.runtime import neo4j_server
from cairn.runtime.database import sync_driver
from cairn.runtime.settings import get_settings
from cairn.schema.migrate import SCHEMA_VERSION, schema_version

err = Console(stderr=True, soft_wrap=True)


def fail(message: str, code: int = 1) -> typer.Exit:
    """Print the message (user text is escaped, never read as markup) and return the exit to raise."""
    err.print(f"[bold red]error:[/] {escape(message)}")
    return typer.Exit(code)


def old_schema(found: int | None) -> str:
    return f"the database schema is v{found}, this code needs v{SCHEMA_VERSION}: run `cairn db migrate`"


def open_driver(*, check_schema: bool = True) -> Driver:
    """A driver to the configured Neo4j, refusing plainly when it is down or its schema is old."""
    settings = get_settings()
    if settings.embedded and not neo4j_server.status(settings).running:
        raise fail("the embedded Neo4j is not running: start it with `cairn neo4j start`")
    driver = sync_driver(settings)
    if not check_schema:
        return driver
    version = schema_version(driver)
    if version != SCHEMA_VERSION:
        driver.close()
        raise fail(old_schema(version))
    return driver


@contextmanager
def stage_progress(console: Console) -> Iterator[Callable[[str, int], None]]:
    """A transient progress bar per ingest stage; yields the ``advance(stage, n)`` ingests call."""
    with Progress(console=console, transient=True) as bar:
        tasks: dict[str, TaskID] = {}

        def advance(stage: str, n: int) -> None:
            if stage not in tasks:
                tasks[stage] = bar.add_task(stage, total=None)
            bar.advance(tasks[stage], n)

        yield advance
