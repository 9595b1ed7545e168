"""`cairn ingest correspondence FILE [--watch]` and `cairn correspondence search|tail|divergence|reembed`.

Reads run as the operator (everything, unmasked) unless ``--role`` names a role profile,
in which case they see exactly what that role would see through GraphQL.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Annotated

import typer
from neo4j import Driver
from rich.markdown import Markdown
from rich.markup import escape
from rich.table import Table

from cairn.commands.common import (
    RoleOption,
    console,
    err,
    open_driver,
    progress,
    refusing,
    role_profile,
)
from cairn.ingest.correspondence.collisions import default_log_path
from cairn.ingest.correspondence.sync import SyncReport, check_source, reembed, sync_file
from cairn.ingest.correspondence.watch import DEFAULT_INTERVAL_S, watch_file
from cairn.memory import correspondence as corr
from cairn.policy.scope import Scope
from cairn.runtime.settings import get_settings

correspondence_app = typer.Typer(help="Read the correspondence store.", no_args_is_help=True)


def _reader(role: str | None) -> corr.Reader:
    if role is None:
        return corr.Reader.system()
    profile = role_profile(role)
    return corr.Reader(Scope.from_profile(profile), profile.can_search)


def _print_report(report: SyncReport) -> None:
    console.print(
        f"{escape(report.path)} → source [bold]{report.source}[/]: "
        f"{report.sections_in_file} sections in file, {len(report.created)} created, "
        f"{report.unchanged} unchanged, {len(report.conflicts)} conflicts"
    )
    for c in report.created:
        if c.collision:
            console.print(
                f"  [yellow]collision[/] line {c.line}: filed {c.filed_id} ({c.filed_number}) "
                f"→ canonical § {c.section_number}"
            )
    for conflict in report.conflicts:
        console.print(f"  [red]conflict[/] {escape(str(conflict))}")
    for warning in report.warnings:
        console.print(f"  [dim]warning[/] {escape(str(warning))}")
    if report.collisions_logged:
        console.print(f"  {report.collisions_logged} collision(s) appended to the collision log")
    if report.stale_embeddings:
        console.print(
            f"  {report.stale_embeddings} section(s) embedded with another model than "
            f"{report.embedding_model}: run `cairn correspondence reembed`"
        )


def ingest_correspondence(
    file: Annotated[Path, typer.Argument(help="the correspondence markdown file (read, never written)")],
    watch: Annotated[bool, typer.Option(help="keep running and sync every change")] = False,
    source: Annotated[str | None, typer.Option(help="source name (default: the file's stem)")] = None,
    collision_log: Annotated[
        Path | None, typer.Option(help="collision log (JSON lines; default: DATA_DIR/correspondence/)")
    ] = None,
    interval: Annotated[float, typer.Option(help="--watch polling interval, seconds")] = DEFAULT_INTERVAL_S,
) -> None:
    """Sync a correspondence file into Section nodes: append-only, idempotent."""
    if source is not None:
        with refusing(ValueError):
            check_source(source)
    log = collision_log or default_log_path(get_settings())
    with open_driver() as driver:
        if watch:
            _watch(driver, file, log, source, interval)
            return
        with progress() as bar:
            task = bar.add_task("embedding and writing new sections", total=None)
            with refusing(FileNotFoundError, IsADirectoryError):
                report = sync_file(
                    driver,
                    file,
                    collision_log=log,
                    source=source,
                    progress=lambda _stage, done, total: bar.update(task, completed=done, total=total),
                )
    _print_report(report)


def _watch(driver: Driver, file: Path, log: Path, source: str | None, interval: float) -> None:
    stop = threading.Event()
    console.print(f"watching {escape(str(file))} every {interval:g}s (Ctrl-C to stop)")

    def on_error(exc: Exception) -> None:
        err.print(f"[red]not synced:[/] {escape(str(exc))}")

    try:
        watch_file(
            driver,
            file,
            collision_log=log,
            on_report=_print_report,
            on_error=on_error,
            stop=stop,
            source=source,
            interval=interval,
        )
    except KeyboardInterrupt:
        stop.set()
        console.print("stopped")


def _section_table(views: list[corr.SectionView], with_score: bool) -> Table:
    table = Table(show_lines=False)
    for name in ("§", "filed", "author", "date", "title", *(["score"] if with_score else [])):
        table.add_column(name)
    for v in views:
        f = v.fields
        row = [
            str(f.get("section_number", "")),
            str(f.get("filed_id", "")) + (" ⚠" if f.get("collision") else ""),
            escape(str(f.get("author", ""))),
            str(f.get("date") or ""),
            escape(str(f.get("title", ""))),
        ]
        table.add_row(*row, *([f"{v.score:.3f}"] if with_score and v.score is not None else []))
    return table


@correspondence_app.command("search")
def search(
    query: Annotated[str, typer.Argument(help="what to look for")],
    k: Annotated[int, typer.Option(help="how many sections")] = 10,
    author: Annotated[list[str] | None, typer.Option(help="only this author (repeatable)")] = None,
    exec_tag: Annotated[list[str] | None, typer.Option(help="e.g. GOV or EXEC:MICRO (repeatable)")] = None,
    status: Annotated[list[str] | None, typer.Option(help="status tag (repeatable)")] = None,
    date_from: Annotated[str | None, typer.Option(help="YYYY-MM-DD, inclusive")] = None,
    date_to: Annotated[str | None, typer.Option(help="YYYY-MM-DD, inclusive")] = None,
    role: RoleOption = None,
) -> None:
    """Sections nearest QUERY, filtered before ranking."""
    reader = _reader(role)
    filters = corr.Filters(
        authors=tuple(author or ()),
        exec_tags=tuple(exec_tag or ()),
        status_tags=tuple(status or ()),
        date_from=date_from,
        date_to=date_to,
    )
    with open_driver() as driver:
        result = corr.semantic_search(driver, reader, query, k, filters)
    console.print(_section_table(result.hits, with_score=True))
    console.print(f"{result.total} visible section(s) matched the filters")


@correspondence_app.command("tail")
def tail(
    n: Annotated[int, typer.Option("-n", help="how many sections")] = 10,
    from_section: Annotated[int | None, typer.Option(help="start at this canonical number")] = None,
    role: RoleOption = None,
) -> None:
    """The last N sections in order (or N from a section on), with their text."""
    reader = _reader(role)
    with open_driver() as driver:
        views = corr.linear_tail(driver, reader, n, from_section)
    for v in views:
        f = v.fields
        filed = escape(str(f.get("filed_id")))
        console.rule(f"§ {f.get('section_number')} (filed {filed}) — {escape(str(f.get('title', '')))}")
        console.print(f"[italic]{escape(str(f.get('author', '')))} · {f.get('date') or 'no date'}[/]")
        console.print(Markdown(str(f.get("body", ""))))


@correspondence_app.command("divergence")
def divergence(
    question: Annotated[str, typer.Argument(help="the question to compare authors on")],
    being: Annotated[list[str], typer.Option(help="an author (repeat for each)")],
    k: Annotated[int, typer.Option(help="sections per author")] = 3,
    role: RoleOption = None,
) -> None:
    """What each named author said nearest to QUESTION."""
    reader = _reader(role)
    with open_driver() as driver:
        grouped = corr.being_divergence(driver, reader, question, being, k)
    for name, views in grouped.items():
        console.print(f"[bold]{escape(name)}[/] — {len(views)} section(s)")
        console.print(_section_table(views, with_score=True))


@correspondence_app.command("reembed")
def reembed_command() -> None:
    """Re-embed only the sections embedded with another model than the configured one."""
    with open_driver() as driver, progress() as bar:
        task = bar.add_task("re-embedding", total=None)
        done = reembed(driver, progress=lambda _stage, d, total: bar.update(task, completed=d, total=total))
    console.print(f"re-embedded {done} section(s)")
