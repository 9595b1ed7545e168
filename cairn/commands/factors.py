"""`cairn factor show|history|assessment|why-blocked|why-value|what-if|what-changed|ask|update|confirm|
recalculate|router-eval` and `cairn ingest factors PATH`.

Reads run as the operator (everything) unless ``--role`` names a role profile, in which case they
see exactly what that role would see through GraphQL. Writes refuse bad input before anything is
written. ``--json`` prints the structured evidence instead of the templated answer.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Literal

import typer
from rich.markup import escape
from rich.table import Table

from cairn.commands.common import ActingRoleOption as RoleOption
from cairn.commands.common import console, err, ingesting, open_driver, scope_for
from cairn.ingest.factors import DEMO_DIR, ingest_factor_dir
from cairn.memory.factors import questions
from cairn.memory.factors.ask import answer_question
from cairn.memory.factors.assessment import assessment_summary
from cairn.memory.factors.evaluation import evaluate
from cairn.memory.factors.intents import load_labelled
from cairn.memory.factors.journal import (
    MAX_HISTORY,
    confirm_factor,
    factor_state,
    history,
    recalculate_factor,
    update_factor,
)
from cairn.memory.factors.models import day, fmt
from cairn.memory.factors.router import LearnedRouter
from cairn.runtime.embedder import get_embedder

factor_app = typer.Typer(help="The factor journal: why, what if, what changed.", no_args_is_help=True)

AsJson = Annotated[bool, typer.Option("--json", help="print the structured evidence as JSON")]
Moment = Annotated[datetime | None, typer.Option(help="ISO time (UTC if no zone given)")]


def _aware(moment: datetime | None) -> datetime | None:
    if moment is None or moment.tzinfo is not None:
        return moment
    return moment.replace(tzinfo=UTC)


def _emit(answer: str, evidence: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print(json.dumps(evidence, indent=2, default=str))
    else:
        console.print(escape(answer))


@factor_app.command("show")
def show(factor_id: str, as_of: Moment = None, role: RoleOption = None, as_json: AsJson = False) -> None:
    """A factor now, or as of a past moment (from the journal)."""
    with open_driver() as driver:
        state = factor_state(driver, scope_for(role), factor_id, _aware(as_of))
    when = f" as of {day(state.as_of)}" if state.as_of else ""
    conf = "n/a" if state.confidence is None else f"{state.confidence:g}"
    text = (
        f"{state.label}{when}: {fmt(state.value)}"
        + ("" if state.scale is None else f" (scale {state.scale})")
        + f", confidence {conf}, "
        f"{state.status or 'unassessed'}, last updated {day(state.last_updated)}"
    )
    _emit(text, state.evidence(), as_json)


@factor_app.command("history")
def show_history(
    factor_id: str,
    limit: Annotated[int, typer.Option(min=1, max=MAX_HISTORY)] = 20,
    role: RoleOption = None,
    as_json: AsJson = False,
) -> None:
    """A factor's journal, newest first."""
    with open_driver() as driver:
        entries = history(driver, scope_for(role), factor_id, limit=limit)
    if as_json:
        print(json.dumps([e.evidence() for e in entries], indent=2, default=str))
        return
    table = Table("when", "op", "value", "confidence", "rationale", "session")
    for e in entries:
        table.add_row(
            "" if e.timestamp is None else e.timestamp.isoformat(timespec="minutes"),
            e.op or "",
            f"{fmt(e.previous_value)} → {fmt(e.new_value)}",
            "" if e.confidence is None else f"{e.confidence:g}",
            escape(e.rationale or ""),
            e.session_id or "",
        )
    console.print(table)


@factor_app.command("assessment")
def show_assessment(role: RoleOption = None, as_json: AsJson = False) -> None:
    """Where are we: completeness and confidence per category, tier, capabilities."""
    with open_driver() as driver:
        a = assessment_summary(driver, scope_for(role))
    _emit(a.status_answer, a.evidence(), as_json)


@factor_app.command("why-blocked")
def why_blocked(node_id: str, role: RoleOption = None, as_json: AsJson = False) -> None:
    """Why an option (or factor) is blocked: its unmet prerequisites, transitively."""
    with open_driver() as driver:
        result = questions.why_blocked(driver, scope_for(role), node_id)
    _emit(result.answer, result.evidence(), as_json)


@factor_app.command("why-value")
def why_value(factor_id: str, role: RoleOption = None, as_json: AsJson = False) -> None:
    """How a factor got its value: history and what it depends on."""
    with open_driver() as driver:
        result = questions.why_value(driver, scope_for(role), factor_id)
    _emit(result.answer, result.evidence(), as_json)


@factor_app.command("what-if")
def what_if(
    factor_id: str,
    value: Annotated[
        float | None, typer.Option(help="hypothetical value (default: each unmet threshold)")
    ] = None,
    lower: Annotated[bool, typer.Option(help="without --value: try the bottom of the scale")] = False,
    role: RoleOption = None,
    as_json: AsJson = False,
) -> None:
    """Hypothetically set a factor (nothing is written): what becomes unblocked or blocked."""
    with open_driver() as driver:
        direction: Literal["improve", "lower"] = "lower" if lower else "improve"
        result = questions.what_if(driver, scope_for(role), factor_id, value, direction)
    _emit(result.answer, result.evidence(), as_json)


@factor_app.command("what-changed")
def what_changed(
    since: Annotated[datetime, typer.Option(help="start of the window (ISO)")],
    until: Moment = None,
    factor: Annotated[list[str] | None, typer.Option(help="only these factors (repeatable)")] = None,
    role: RoleOption = None,
    as_json: AsJson = False,
) -> None:
    """Journal entries since a moment, grouped by factor."""
    start = since if since.tzinfo is not None else since.replace(tzinfo=UTC)
    with open_driver() as driver:
        result = questions.what_changed(driver, scope_for(role), start, _aware(until), factor)
    _emit(result.answer, result.evidence(), as_json)


@factor_app.command("ask")
def ask(question: str, now: Moment = None, role: RoleOption = None, as_json: AsJson = False) -> None:
    """A free-text question, routed without an LLM and answered from the graph."""
    with open_driver() as driver:
        router = LearnedRouter(driver, get_embedder())
        result = answer_question(driver, scope_for(role), question, router=router, now=_aware(now))
    route = result.route
    entities = ", ".join(e.name for e in route.entities) or "none"
    if not as_json:
        err.print(f"[dim]intent {route.intent}; entities {escape(entities)}[/]")
    _emit(result.answer, {"route": route.evidence(), "evidence": result.evidence}, as_json)


@factor_app.command("update")
def update(
    factor_id: str,
    value: float,
    rationale: Annotated[str, typer.Option(help="why the value changed (required)")],
    confidence: Annotated[float, typer.Option(help="0-1")],
    excerpt: Annotated[str, typer.Option(help="the conversation excerpt")] = "",
    influenced_by: Annotated[list[str] | None, typer.Option(help="influencing factor (repeatable)")] = None,
    session: Annotated[str | None, typer.Option(help="session id (created if new)")] = None,
    role: RoleOption = None,
) -> None:
    """Journal a new value for a factor (moves its current state)."""
    with open_driver() as driver:
        entry = update_factor(
            driver,
            scope_for(role, write=True),
            factor_id,
            value,
            rationale=rationale,
            confidence=confidence,
            excerpt=excerpt,
            influenced_by=influenced_by or [],
            session_id=session,
        )
    console.print(f"{factor_id}: {fmt(entry.previous_value)} → {fmt(entry.new_value)} (entry {entry.id})")


@factor_app.command("confirm")
def confirm(
    factor_id: str,
    value: Annotated[float | None, typer.Option(help="the corrected value, if it differs")] = None,
    session: Annotated[str | None, typer.Option(help="session id")] = None,
    role: RoleOption = None,
) -> None:
    """Confirm a factor's inferred value, or correct it."""
    with open_driver() as driver:
        entry = confirm_factor(driver, scope_for(role, write=True), factor_id, value, session_id=session)
    console.print(f"{factor_id}: {entry.op} {fmt(entry.new_value)}, confidence {entry.confidence:g}")


@factor_app.command("recalculate")
def recalculate(factor_id: str, role: RoleOption = None, as_json: AsJson = False) -> None:
    """Re-derive value and confidence from all journal evidence (reports contradictions)."""
    with open_driver() as driver:
        result = recalculate_factor(driver, scope_for(role, write=True), factor_id)
    _emit(result.answer, result.evidence(), as_json)


@factor_app.command("router-eval")
def router_eval(as_json: AsJson = False) -> None:
    """Accuracy of the router on the labelled questions (training set and holdout)."""
    labelled = load_labelled()
    with open_driver() as driver:
        router = LearnedRouter(driver, get_embedder())
        scope = scope_for(labelled.role)
        reports = {
            "development": evaluate(router, scope, labelled.questions, labelled.now),
            "holdout": evaluate(router, scope, labelled.holdout, labelled.now),
        }
    if as_json:
        print(json.dumps({k: r.evidence() for k, r in reports.items()}, indent=2))
        return
    table = Table("set", "questions", "intent", "entities", "joint")
    for name, r in reports.items():
        table.add_row(
            name,
            str(r.total),
            f"{r.intent_accuracy:.1%}",
            f"{r.entity_accuracy:.1%}",
            f"{r.joint_accuracy:.1%}",
        )
    console.print(table)
    for name, r in reports.items():
        for miss in r.misses:
            got = miss.evidence()["got"]
            console.print(f"[dim]{name} miss:[/] {escape(miss.question.text)} → {escape(json.dumps(got))}")


def ingest_factors(
    path: Annotated[
        Path, typer.Argument(help="a folder of factor YAML files, e.g. fixtures/factors")
    ] = DEMO_DIR,
) -> None:
    """Validate the factor domain (factors, options, DEPENDS_ON, sessions, journal), then write it whole."""
    with ingesting() as (driver, advance):
        report = ingest_factor_dir(driver, path, advance)
    console.print(
        f"ingested {report.factors} factors, {report.options} options, {report.depends_on} DEPENDS_ON edges, "
        f"{report.sessions} sessions and {report.journal} journal entries from {path}"
    )
