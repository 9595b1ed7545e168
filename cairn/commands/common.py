"""What every command group shares: the consoles, a plain failure message with its exit code (and
the one CLI rendering of a ``CairnError``), a driver to a migrated database, the ``--role``
options and the scope they give, progress bars, and the skeleton of an ingest command."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Annotated, Any

import typer
from neo4j import Driver
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from typer.core import TyperGroup

from cairn.errors import EXIT_BAD_INPUT, EXIT_FAILED, CairnError
from cairn.policy.profiles import PolicyRegistry, RoleProfile
from cairn.policy.scope import Scope
from cairn.runtime import neo4j_server
from cairn.runtime.database import sync_driver
from cairn.runtime.settings import get_settings
from cairn.schema.migrate import SCHEMA_VERSION, schema_version

# soft_wrap: off a terminal rich would hard-wrap at 80 columns, breaking ids and paths.
console = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)

RoleOption = Annotated[
    str | None, typer.Option("--role", help="read as this role profile (default: operator, unmasked)")
]
ActingRoleOption = Annotated[
    str | None, typer.Option("--role", help="act as this role profile (default: operator, sees everything)")
]


def fail(message: str, code: int = EXIT_FAILED) -> typer.Exit:
    """Print the message (user text is escaped, never read as markup) and return the exit to raise."""
    err.print(f"[bold red]error:[/] {escape(message)}")
    return typer.Exit(code)


def refusal(exc: CairnError) -> typer.Exit:
    """The one CLI rendering of a refusal: ``error: CODE: message``, then each problem the message
    does not already show and, for input problems, that nothing was written; exit ``exit_code``."""
    lines = [exc.message]
    if exc.problem_texts is not None:
        lines += [f"  {p}" for p in exc.problem_texts if p not in exc.message]
        lines.append("nothing was written")
    return fail(f"{exc.code}: " + "\n".join(lines), exc.exit_code)


class RefusalsGroup(TyperGroup):
    """The root command group: a ``CairnError`` from any command ends it through ``refusal``."""

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except CairnError as exc:
            raise refusal(exc) from None


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


def role_profile(role: str) -> RoleProfile:
    """The role's profile from the policy file, or a plain refusal."""
    profile = PolicyRegistry.load(get_settings().policy_file).get(role)
    if profile is None:
        raise fail(f"no role '{role}' in the policy file")
    return profile


def scope_for(role: str | None, *, search: bool = False, write: bool = False) -> Scope:
    """The operator's scope without a role; otherwise the role's, refused plainly when the command
    needs a right (``search``, ``write``) the role lacks."""
    if role is None:
        return Scope.system()
    profile = role_profile(role)
    if search and not profile.can_search:
        raise fail(f"role '{role}' may not search")
    if write and not profile.can_write:
        raise fail(f"role '{role}' may not write")
    return Scope.from_profile(profile)


def print_json(data: Any) -> None:
    """JSON on stdout, unwrapped (``print``, not rich: ids in brackets are not markup)."""
    print(json.dumps(data, indent=2, ensure_ascii=False, default=str))


def progress() -> Progress:
    """A transient bar with a count and the elapsed time, for work whose total is known (or learnt)."""
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    )


@contextmanager
def stage_progress() -> Iterator[Callable[[str, int], None]]:
    """A transient progress bar per ingest stage; yields the ``advance(stage, n)`` ingests call."""
    with Progress(console=console, transient=True) as bar:
        tasks: dict[str, TaskID] = {}

        def advance(stage: str, n: int) -> None:
            if stage not in tasks:
                tasks[stage] = bar.add_task(stage, total=None)
            bar.advance(tasks[stage], n)

        yield advance


@contextmanager
def refusing(*errors: type[Exception], code: int = EXIT_BAD_INPUT) -> Iterator[None]:
    """Turn the listed errors (plain ones, not a ``CairnError``) into one message and exit ``code``."""
    try:
        yield
    except errors as exc:
        raise fail(str(exc), code=code) from None


@contextmanager
def ingesting() -> Iterator[tuple[Driver, Callable[[str, int], None]]]:
    """The skeleton of an ingest command: a driver to a migrated database and a bar per stage
    (ingests validate whole before they write; a refusal exits through ``refusal``)."""
    with open_driver() as driver, stage_progress() as advance:
        yield driver, advance
