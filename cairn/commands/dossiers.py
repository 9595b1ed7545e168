"""`cairn dossier search|ask|show|export|merge|archive|link|related`, `cairn garden BLOCK_ID | --all`,
`cairn ingest packets FILE` and `cairn ingest blocks FILE`.

Reads run as the operator (everything, unmasked) unless ``--role`` names a role profile, in
which case they see exactly what that role would see through GraphQL. ``--json`` prints the
GraphQL answer's own projection (``Dossier``, ``MemoryHit``; field names in snake case), for the
operator too: the CLI shows no field, score or id the API does not. Files are validated
whole before anything is written; a bad record is reported with its line and nothing lands.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from cairn.commands.common import RoleOption, console, fail, open_driver, print_json, progress, scope_for
from cairn.memory.dossiers import blocks, curation, facts, files, gardener, governor, retriever
from cairn.resolvers.dossiers import Dossier, MemoryHit

dossier_app = typer.Typer(help="Search and curate dossiers.", no_args_is_help=True)

AsJson = Annotated[bool, typer.Option("--json", help="print JSON instead of a table")]
Rationale = Annotated[str | None, typer.Option("--rationale", help="why (kept in the journal)")]


@dossier_app.command("search")
def search(
    query: Annotated[str, typer.Argument(help="what to look for")],
    top_k: Annotated[int, typer.Option("--top-k", min=1, max=50)] = 3,
    threshold: Annotated[float, typer.Option("--threshold", min=-1.0, max=1.0)] = 0.4,
    archived: Annotated[bool, typer.Option("--archived", help="include archived dossiers")] = False,
    role: RoleOption = None,
    as_json: AsJson = False,
) -> None:
    """Dossiers whose facts are nearest the query (cosine >= threshold), best first."""
    scope = scope_for(role, search=True)
    with open_driver() as driver:
        result = retriever.retrieve_relevant_dossiers(
            driver, scope, query, top_k, threshold, include_archived=archived
        )
    if as_json:
        print_json({"count": result.total, "dossiers": [asdict(Dossier.of(d)) for d in result.dossiers]})
        return
    table = Table(title=f"{result.total} dossier(s) match; top {len(result.dossiers)}")
    for col in ("score", "id", "title", "facts", "summary"):
        table.add_column(col)
    for d in result.dossiers:
        table.add_row(f"{d.score or 0:.2f}", d.id, escape(d.title), str(len(d.facts)), escape(d.summary))
    console.print(table)


@dossier_app.command("ask")
def ask(
    question: Annotated[str, typer.Argument(help="the question to find facts for")],
    top_k: Annotated[int, typer.Option("--top-k", min=1, max=50)] = 10,
    max_tokens: Annotated[
        int | None,
        typer.Option("--max-tokens", min=1, help="print the facts as LLM context within this budget"),
    ] = None,
    role: RoleOption = None,
    as_json: AsJson = False,
) -> None:
    """The facts that best answer the question (vector + full-text, fused), under their dossiers."""
    scope = scope_for(role, search=True)
    with open_driver() as driver:
        result = facts.FactRetriever(driver).search(scope, question, top_k)
    if as_json:
        print_json({"count": result.total, "hits": [asdict(MemoryHit.of(h)) for h in result.hits]})
        return
    if max_tokens is not None:
        print(facts.format_for_context(result.hits, max_tokens=max_tokens), end="")
        return
    table = Table(title=f"{len(result.hits)} fact(s) of {result.total} candidate(s)")
    for col in ("#", "observed", "fact", "dossier", "turns"):
        table.add_column(col)
    for n, h in enumerate(result.hits, start=1):
        table.add_row(
            str(n),
            str(h.observed_at or "")[:10],
            escape(str(h.fact.get("text", ""))),
            escape(h.dossier.title),
            escape(", ".join(h.fact.get("source_turn_ids") or [])),
        )
    console.print(table)


@dossier_app.command("show")
def show(
    dossier_id: Annotated[str, typer.Argument(help="dossier id")],
    role: RoleOption = None,
    as_json: AsJson = False,
) -> None:
    """One dossier: summary, facts and history."""
    scope = scope_for(role, search=True)
    with open_driver() as driver:
        view = retriever.get_dossier(driver, scope, dossier_id)
    if view is None:
        raise fail("no such dossier")
    if as_json:
        print_json(asdict(Dossier.of(view)))
        return
    console.print(f"[bold]{escape(view.title)}[/] ({view.id}, {view.fields.get('status')})")
    console.print(f"Summary: {escape(view.summary)}")
    for f in view.facts:
        console.print(f"  - {escape(str(f.get('text')))}  [dim]{f.get('added_at')}[/]")
    console.print("History:")
    for e in view.history:
        what = e.get("new_value") or e.get("excerpt") or ""
        console.print(f"  {e.get('timestamp')}  [cyan]{e.get('op')}[/]  {escape(str(what))}")


@dossier_app.command("export")
def export(
    dossier_id: Annotated[str, typer.Argument(help="dossier id")],
    out: Annotated[Path | None, typer.Option("--out", help="write to this file instead of stdout")] = None,
    role: RoleOption = None,
) -> None:
    """The dossier with its facts, history and related dossiers as JSON."""
    scope = scope_for(role, search=True)
    with open_driver() as driver:
        doc = curation.export_dossier(driver, scope, dossier_id)
    if doc is None:
        raise fail("no such dossier")
    text = json.dumps(doc, indent=2, ensure_ascii=False, default=str)
    if out is None:
        print(text)
    else:
        out.write_text(text + "\n", encoding="utf-8")
        console.print(f"exported {dossier_id} to {out}")


def _curate(work: Any) -> None:
    with open_driver() as driver:
        result = work(driver)
    done = " (already done)" if result.already_done else ""
    moved = f", {len(result.moved_facts)} fact(s) moved" if result.moved_facts else ""
    console.print(f"{result.op}: {', '.join(result.dossier_ids)}{moved}{done}")


@dossier_app.command("merge")
def merge(
    source: Annotated[str, typer.Argument(help="dossier merged away (kept, marked merged)")],
    target: Annotated[str, typer.Argument(help="dossier that receives the facts")],
    rationale: Rationale = None,
) -> None:
    """Merge SOURCE into TARGET: facts move, both histories stay, SOURCE is marked merged."""
    _curate(lambda d: curation.merge_dossiers(d, source, target, rationale))


@dossier_app.command("archive")
def archive(
    dossier_id: Annotated[str, typer.Argument(help="dossier id")], rationale: Rationale = None
) -> None:
    """Archive a dossier: kept with its history, but out of routing and default search."""
    _curate(lambda d: curation.archive_dossier(d, dossier_id, rationale))


@dossier_app.command("link")
def link(
    a: Annotated[str, typer.Argument(help="dossier id")],
    b: Annotated[str, typer.Argument(help="dossier id")],
    rationale: Rationale = None,
) -> None:
    """Record that two dossiers are related (a journal entry about both)."""
    _curate(lambda d: curation.link_dossiers(d, a, b, rationale))


@dossier_app.command("related")
def related(
    dossier_id: Annotated[str, typer.Argument(help="dossier id")],
    top_k: Annotated[int, typer.Option("--top-k", min=1, max=50)] = 5,
    role: RoleOption = None,
) -> None:
    """Linked dossiers, then those whose facts vote for this one's."""
    scope = scope_for(role, search=True)
    with open_driver() as driver:
        print_json(curation.related_dossiers(driver, scope, dossier_id, top_k))


def garden(
    block_id: Annotated[str | None, typer.Argument(help="the block to garden")] = None,
    all_blocks: Annotated[bool, typer.Option("--all", help="garden every unprocessed block")] = False,
) -> None:
    """Tag a block, route its facts into dossiers and delete its turns; --all migrates every block."""
    if (block_id is None) == (not all_blocks):
        raise fail("give a BLOCK_ID or --all (not both)", code=2)
    with open_driver() as driver:
        if block_id is not None:
            report = gardener.garden_block(driver, block_id)
            print_json(report.as_json())
            return
        with progress() as bar:
            task = bar.add_task("gardening blocks", total=None)

            def advance(done_id: str, n: int, total: int) -> None:
                bar.update(task, total=total, completed=n, description=f"gardened {done_id}")

            migration = gardener.garden_all(driver, progress=advance)
    _print_migration(migration)


def _print_migration(m: gardener.MigrationReport) -> None:
    console.print(f"gardened {len(m.gardened)} block(s), {len(m.failed)} failed")
    for bid, why in m.failed.items():
        console.print(f"  [red]failed[/] {bid}: {escape(why)}")
    console.print(f"Validation: {m.dossiers} dossier(s); {m.facts_embedded}/{m.facts_total} facts embedded")
    dist = Table(title="facts per dossier")
    for col in ("id", "title", "status", "facts"):
        dist.add_column(col)
    for row in m.fact_distribution:
        dist.add_row(row["id"], escape(str(row["title"])), str(row["status"]), str(row["facts"]))
    console.print(dist)
    prov = Table(title="provenance (journal entries per dossier and op)")
    for col in ("id", "op", "count"):
        prov.add_column(col)
    for row in m.provenance:
        prov.add_row(row["id"], row["op"], str(row["n"]))
    console.print(prov)


def ingest_packets(
    path: Annotated[Path, typer.Argument(help="fact packets: JSON lines (or a JSON array)")],
) -> None:
    """Route every packet of FILE into dossiers (one transaction per packet; re-runs are no-ops)."""
    packets = files.read_packets(path)
    total_facts = sum(len(p.facts) for p in packets)
    with open_driver() as driver, progress() as bar:
        task = bar.add_task("routing facts", total=total_facts)
        results = governor.ingest_packets(driver, packets, progress=lambda n: bar.advance(task, n))
    created = sum(r.action == "created" for r in results)
    appended = sum(r.action == "appended" for r in results)
    repeated = sum(r.action == "already_applied" for r in results)
    skipped = sum(len(r.skipped) for r in results)
    console.print(
        f"{len(results)} packet(s): {created} created a dossier, {appended} appended, "
        f"{repeated} already applied; {skipped} duplicate fact(s) skipped"
    )


def ingest_block_file(
    path: Annotated[Path, typer.Argument(help="blocks with turns and facts: a JSON array or JSON lines")],
    garden_now: Annotated[bool, typer.Option("--garden", help="garden the blocks right away")] = False,
) -> None:
    """Store conversation blocks (turns and extracted facts) for the gardener."""
    parsed = files.read_blocks(path)
    with open_driver() as driver:
        reports = blocks.ingest_blocks(driver, parsed)
        console.print(
            f"stored {len(reports)} block(s), {sum(r.turns for r in reports)} turn(s), "
            f"{sum(r.facts for r in reports)} fact(s)"
        )
        if garden_now:
            report = gardener.MigrationReport()
            with progress() as bar:
                task = bar.add_task("gardening blocks", total=len(reports))
                for r in reports:
                    gardener.garden_block(driver, r.block_id)
                    report.gardened.append(r.block_id)
                    bar.advance(task)
            _print_migration(gardener.validation_counts(driver, report))
