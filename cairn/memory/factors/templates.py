"""Templated answers (no LLM) for the factor questions, composed only from the evidence given.

Everything here names nodes by their display name and dates by day; ids never appear. What the
caller cannot see is only ever one of two fixed phrases, ``HIDDEN_NOTICE`` (a sentence) or
``HIDDEN`` (inline), optionally with the names of the visible nodes that need it: an answer says
whether something is withheld, and never reads differently for one hidden prerequisite or many.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from cairn.memory.factors.models import (
    HIDDEN_NOTICE,
    HIDDEN_PREREQUISITES,
    Dependency,
    Dependent,
    FactorChange,
    FactorState,
    JournalEntryView,
    NodeRef,
    Prerequisite,
    Status,
    StatusChange,
    Step,
    StillBlocked,
    day,
    fmt,
)

HIDDEN = HIDDEN_PREREQUISITES
QUOTE_MAX = 160


def quote(text: str) -> str:
    flat = " ".join(text.split())
    if len(flat) > QUOTE_MAX:
        flat = flat[: QUOTE_MAX - 1].rstrip() + "…"
    return f'"{flat}"'


def names(items: Sequence[str]) -> str:
    if not items:
        return "nothing"
    if len(items) == 1:
        return items[0]
    return ", ".join(items[:-1]) + f" and {items[-1]}"


def _said(e: JournalEntryView, *, on: str = " on ", sep: str = ": ") -> str:
    """When and why an entry was written, as far as the caller sees them: a field its scope hides
    is left out of the prose, not printed (docs/design.md §Policy module)."""
    when = "" if e.timestamp is None else f"{on}{day(e.timestamp)}"
    why = "" if e.rationale is None else f"{sep}{quote(e.rationale)}"
    return when + why


def _entry_line(e: JournalEntryView) -> str:
    when = "" if e.timestamp is None else f"{day(e.timestamp)} "
    why = "" if e.rationale is None else f" ({quote(e.rationale)})"
    if e.op == "confirm":
        return f"{when}confirmed {fmt(e.new_value)}"
    if e.previous_value is None:
        return f"{when}set to {fmt(e.new_value)}{why}"
    return f"{when.rstrip()}{': ' if when else ''}{fmt(e.previous_value)} → {fmt(e.new_value)}{why}"


def _hidden_sentence(hidden_by: Sequence[NodeRef]) -> str:
    """The fixed notice, naming the visible nodes that need something hidden (each once)."""
    needers = sorted({n.name for n in hidden_by})
    return f"{HIDDEN_NOTICE} (required by {names(needers)})." if needers else ""


def why_blocked(
    subject: str,
    status: Status,
    blockers: Sequence[Prerequisite],
    hidden_by: Sequence[NodeRef],
    reached: int,
) -> str:
    if status == "ready":
        return f"{subject} is not blocked: all {reached} prerequisite(s) it depends on are met."
    if status == "undetermined":
        return (
            f"No prerequisite of {subject} that you can see is unmet, but whether it is ready cannot "
            f"be determined from your view. {_hidden_sentence(hidden_by)}"
        )
    lines = [f"{subject} is blocked by {len(blockers)} unmet prerequisite(s):"]
    for i, b in enumerate(blockers, start=1):
        need = (
            f"it needs at least {fmt(b.threshold)}"
            if len(b.via) == 1
            else f"{b.required_by.name} needs at least {fmt(b.threshold)} "
            f"({' → '.join(n.name for n in (*b.via, b.factor))})"
        )
        line = f"{i}. {b.factor.name} is {fmt(b.value)}; {need}."
        if b.entries:
            latest, *earlier = b.entries
            conf = "" if latest.confidence is None else f" (confidence {latest.confidence:g})"
            line += f" Last set{_said(latest)}{conf}."
            if earlier:
                line += " Earlier: " + "; ".join(_entry_line(e) for e in earlier) + "."
        else:
            line += " It has not been assessed yet."
        lines.append(line)
    hidden = _hidden_sentence(hidden_by)
    if hidden:
        lines.append(hidden)
    return "\n".join(lines)


def why_value(
    state: FactorState,
    status: Status,
    chain: Sequence[JournalEntryView],
    deps: Sequence[Dependency],
    needs_hidden: bool,
    ups: Sequence[Dependent],
) -> str:
    if state.value is None:
        head = f"{state.label} has not been assessed yet."
    else:
        conf = "" if state.confidence is None else f"confidence {state.confidence:g}, "
        head = f"{state.label} is {fmt(state.value)} ({conf}{state.status or 'unconfirmed'})"
        if chain:
            head += f", last changed{_said(chain[0])}" if _said(chain[0]) else ""
        head += "."
    lines = [head]
    if deps:
        composite = any(d.weight for d in deps) and all(d.threshold == 0 for d in deps)
        lines.append("It is a composite of:" if composite else "It depends on:")
        for i, d in enumerate(deps, start=1):
            mark = " (largest drag)" if i == 1 and len(deps) > 1 else ""
            line = f"{i}. {d.factor.name}: {fmt(d.value)}{mark}"
            if not composite:
                line += f", needs at least {fmt(d.threshold)} ({'met' if d.met else 'not met'})"
            if d.last_entry is not None:
                line += f". Last assessed{_said(d.last_entry, on=' ')}"
            lines.append(line + ".")
        top = deps[0].drag
        heavy = [d.factor.name for d in deps if top > 0 and d.drag >= top / 2 and d.value is not None]
        if heavy:
            verb = "pulls" if len(heavy) == 1 else "pull"
            lines.append(f"{names(heavy)} {verb} the value down most.")
        for d in deps:
            if d.changed_after_subject and d.last_entry is not None and d.last_entry.timestamp is not None:
                lines.append(
                    f"{d.factor.name} changed on {day(d.last_entry.timestamp)}, after {state.label} was "
                    f"last set, so {state.label} may be out of date."
                )
    if needs_hidden:
        lines.append(f"{HIDDEN_NOTICE}.")
    if status == "blocked":
        lines.append(f"{state.label} itself is blocked by an unmet prerequisite further down.")
    if len(chain) > 1:
        lines.append("History: " + "; ".join(_entry_line(e) for e in chain) + ".")
    if ups:
        needed = [f"{u.node.name} (needs {fmt(u.threshold)}, {'met' if u.met else 'not met'})" for u in ups]
        lines.append("Needed by: " + "; ".join(needed) + ".")
    return "\n".join(lines)


def _blockers_text(still: StillBlocked) -> str:
    parts = [f"{f.name} ({fmt(v)}, needs {fmt(t)})" for f, v, t in still.blockers]
    return (
        f"{still.node.name} would still be blocked by {names(parts)}"
        if parts
        else (f"{still.node.name} would still depend on {HIDDEN}")
    )


def what_if(
    name: str,
    current: float | None,
    final: float,
    steps: Sequence[Step],
    unblocked: Sequence[NodeRef],
    blocked: Sequence[NodeRef],
    others: Sequence[StatusChange],
    still: Sequence[StillBlocked],
    ladder: bool,
) -> str:
    lines: list[str] = []
    if ladder and len(steps) > 1:
        lines.append(f"{name} is {fmt(current)} now.")
        for i, step in enumerate(steps):
            if step.unblocked:
                more = " also" if i else ""
                got = names([n.name for n in step.unblocked])
                lines.append(f"Raising it to {fmt(step.value)} would{more} unblock {got}.")
            else:
                lines.append(
                    f"Raising it to {fmt(step.value)} would unblock {'nothing more' if i else 'nothing yet'}."
                )
    else:
        lines.append(f"If {name} were {fmt(final)} instead of {fmt(current)}:")
        if unblocked:
            lines.append(f"{names([n.name for n in unblocked])} would become unblocked.")
        if blocked:
            lines.append(f"{names([n.name for n in blocked])} would become blocked.")
        if not unblocked and not blocked and not others:
            lines.append("nothing you can see would change its readiness.")
    for change in others:
        lines.append(f"{change.node.name} would go from {change.before} to {change.after}.")
    for s in still:
        lines.append(f"{_blockers_text(s)}.")
    lines.append("This is hypothetical; nothing was changed.")
    return "\n".join(lines)


def what_changed(since: datetime, until: datetime | None, changes: Sequence[FactorChange]) -> str:
    window = f"Since {day(since)}" + (f" (until {day(until)})" if until else "")
    if not changes:
        return f"{window}, nothing changed."
    lines = [f"{window}, {len(changes)} factor(s) changed:"]
    for c in changes:
        entries = "; ".join(_entry_line(e) for e in c.entries)
        lines.append(
            f"- {c.factor.name}: {fmt(c.before)} → {fmt(c.after)}, in {len(c.entries)} entr"
            f"{'y' if len(c.entries) == 1 else 'ies'}: {entries}."
        )
    return "\n".join(lines)
