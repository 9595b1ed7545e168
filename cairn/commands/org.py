"""`cairn ingest fixtures PATH` (the org memory), `cairn ask` (the why pipeline from the shell) and
`cairn bench` (run the benchmarks)."""

from __future__ import annotations

import json
import subprocess
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from cairn.commands.common import console, err, open_driver, stage_progress
from cairn.ingest.org_memory import ingest_fixture_dir
from cairn.memory.ask import AskService
from cairn.policy.passport import headers_for, verify
from cairn.policy.profiles import PolicyRegistry
from cairn.runtime.database import sync_driver
from cairn.runtime.llm import LLMClient
from cairn.runtime.logging import configure_logging
from cairn.runtime.settings import REPO_ROOT, get_settings
from cairn.schema.checksum import graph_checksum


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
        with stage_progress() as advance:
            report = ingest_fixture_dir(driver, path, advance, registry=registry, refuse_warnings=strict)
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


class Mode(StrEnum):
    ask = "ask"
    query = "query"


def ask(
    anchor: Annotated[str, typer.Argument(help="decision or event id")],
    role: Annotated[str, typer.Option(help="role profile to ask as")] = "staff",
    mode: Annotated[Mode, typer.Option(help="ask = templater; query = LLM when allowed")] = Mode.ask,
    meta: Annotated[bool, typer.Option(help="print the full audit meta as JSON")] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="print the answer, its causes and the request id as JSON")
    ] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="stage logs on stderr")] = False,
) -> None:
    """Why was ANCHOR decided? Answered as ROLE would see it, with the audit meta on request.

    Only the answer goes to stdout, unwrapped (a terminal wraps it; a pipe gets whole lines);
    logs go to stderr and only warnings are shown unless --verbose.
    """
    configure_logging("INFO" if verbose else "WARNING")
    settings = get_settings()
    registry = PolicyRegistry.load(settings.policy_file)
    caller = verify(headers_for(registry, role), registry, None)

    with sync_driver(settings) as driver:  # an anchor absent or hidden: AnchorNotVisible, exit code 4
        result = AskService(driver, LLMClient(settings), settings.traces).ask(caller, anchor, mode=mode.value)
    if meta:
        print(json.dumps(result.meta, indent=2))
        return
    if as_json:
        answer = {
            "request_id": caller.request_id,
            "anchor_id": anchor,
            "role": role,
            **result.envelope,
            "response": result.response,
        }
        print(json.dumps(answer, indent=2, ensure_ascii=False))
        return
    # print, not console.print: rich would hard-wrap at 80 columns off a terminal and read the
    # [record-id] keys as markup.
    if result.response["mode"] == "llm":
        print(result.response["llm_completion"]["text"], end="\n\n")
    print(result.envelope["text"])
    err.print(f"[dim]request {caller.request_id}; trace in {escape(str(settings.traces))}[/]")


def bench(
    names: Annotated[list[str] | None, typer.Argument(help="benchmark modules (default: all)")] = None,
) -> None:
    """Run the benchmarks in bench/ (results in bench/results/)."""
    raise typer.Exit(subprocess.call([sys.executable, "-m", "bench", *(names or [])], cwd=REPO_ROOT))
