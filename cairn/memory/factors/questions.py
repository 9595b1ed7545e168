"""The four traversal questions (docs/design.md §Factor questions), with evidence and a template.

* ``why_blocked``  — option (or factor) → every unmet DEPENDS_ON prerequisite it reaches, with the
  current value, the threshold, the chain that makes it a prerequisite and the dated journal
  entries that set the value;
* ``why_value``    — a factor's history, what it depends on (ranked by how much each pulls the
  value down) and what depends on it;
* ``what_if``      — a hypothetical value for one factor (nothing is written) → every factor and
  option whose readiness changes, transitively;
* ``what_changed`` — journal entries in a window, grouped by factor, with the value before and after.

Policy: everything is read under the caller's scope. Of the prerequisites the caller cannot see,
an answer says only whether there are any, once per visible node that needs them — no id, name,
value or threshold, never met or unmet (see dependencies.py: hidden nodes cannot change a
verdict), and never how many: one hidden prerequisite or ten give byte-identical answers.
Hidden influences are a flag; hidden dependents are left out.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from neo4j import Driver

from cairn.graph import factors as queries
from cairn.memory.factors import templates
from cairn.memory.factors.dependencies import DepGraph, DepNode
from cairn.memory.factors.journal import entries_from_rows, state_from_row
from cairn.memory.factors.models import (
    Dependency,
    Dependent,
    FactorChange,
    FactorError,
    JournalEntryView,
    NodeRef,
    Prerequisite,
    StatusChange,
    Step,
    StillBlocked,
    WhatChanged,
    WhatIf,
    WhyBlocked,
    WhyValue,
    aware,
    fmt,
    unknown_factor,
)
from cairn.memory.factors.traversal import what_if_subgraph, why_blocked_subgraph, why_value_rows
from cairn.policy.scope import Scope
from cairn.runtime.database import read

Direction = Literal["improve", "lower"]


def _not_found(node_id: str) -> FactorError:
    return FactorError("NOT_FOUND", f"unknown factor or option '{node_id}'", "id")


# -- why blocked -------------------------------------------------------------------------------


def why_blocked(driver: Driver, scope: Scope, node_id: str, entries_per_factor: int = 3) -> WhyBlocked:
    """Why an option (or a factor) cannot be relied on yet: its unmet prerequisites, transitively."""
    graph, entries = why_blocked_subgraph(driver, scope, node_id, entries_per_factor)
    return explain_blocked(graph, node_id, entries)


def _newest_first(entries: list[JournalEntryView]) -> dict[str, list[JournalEntryView]]:
    found: dict[str, list[JournalEntryView]] = {}
    for entry in entries:
        found.setdefault(entry.factor_id, []).append(entry)
    for listed in found.values():
        listed.sort(key=JournalEntryView.newest_key, reverse=True)
    return found


def explain_blocked(graph: DepGraph, node_id: str, entries: list[JournalEntryView]) -> WhyBlocked:
    """The why-blocked answer over a fetched subgraph and its blockers' entries (no I/O)."""
    if node_id not in graph.nodes:
        raise _not_found(node_id)
    status = graph.statuses()[node_id]
    found, hidden = graph.blockers(node_id)
    by_factor = _newest_first(entries)
    ref = {nid: NodeRef.of(n) for nid, n in graph.nodes.items()}
    blockers = tuple(
        Prerequisite(
            factor=ref[b.edge.target],
            value=b.value,
            threshold=b.edge.min_value,
            confidence=graph.nodes[b.edge.target].confidence,
            required_by=ref[b.edge.source],
            via=tuple(ref[n] for n in b.path),
            entries=tuple(by_factor.get(b.edge.target, ())),
        )
        for b in found
        if b.edge.target is not None
    )
    hidden_by = tuple(ref[h.source] for h in hidden)
    reached = sum(1 for n in graph.reach(node_id) for e in graph.out[n] if e.target is not None)
    subject = ref[node_id]
    return WhyBlocked(
        subject=subject,
        status=status,
        blockers=blockers,
        hidden_required_by=hidden_by,
        prerequisites_reached=reached,
        answer=templates.why_blocked(subject.name, status, blockers, hidden_by, reached),
    )


# -- why value ---------------------------------------------------------------------------------


def _drag(node: DepNode, weight: float) -> float:
    if node.value is None or node.scale is None:
        return round(weight, 4)
    return round(weight * (node.scale.high - node.value) / node.scale.span, 4)


def why_value(driver: Driver, scope: Scope, factor_id: str, history_limit: int = 5) -> WhyValue:
    """How a factor got its value: its journal, and the factors it rests on, largest drag first."""
    rows = why_value_rows(driver, scope, factor_id, history_limit)
    if rows is None:
        raise unknown_factor(factor_id)
    state = state_from_row(rows.factor, rows.current, None, scope)
    chain = tuple(rows.history)
    graph = rows.graph
    edges = graph.out.get(factor_id, [])
    visible = [e for e in edges if e.target is not None]
    stated = [e.weight for e in visible if e.weight is not None]
    default_weight = (
        (1.0 - sum(stated)) / max(1, len(visible) - len(stated)) if len(stated) < len(visible) else 0.0
    )
    last = _newest_first(rows.last)
    deps = []
    for e in visible:
        if e.target is None:
            continue
        node = graph.nodes[e.target]
        weight = e.weight if e.weight is not None else max(default_weight, 0.0)
        found_entries = last.get(e.target) or []
        entry = found_entries[0] if found_entries else None
        deps.append(
            Dependency(
                factor=NodeRef.of(node),
                value=node.value,
                confidence=node.confidence,
                threshold=e.min_value,
                weight=weight,
                drag=_drag(node, weight),
                met=graph.met(e, {}),
                last_entry=entry,
                changed_after_subject=bool(
                    entry
                    and state.entry is not None
                    and state.entry.order_at is not None
                    and entry.order_at is not None
                    and entry.order_at > state.entry.order_at
                    and entry.new_value != entry.previous_value
                ),
            )
        )
    deps.sort(key=lambda d: (-d.drag, d.factor.name))
    statuses = graph.statuses()
    ups = tuple(
        Dependent(node, threshold, state.value is not None and state.value >= threshold)
        for node, threshold in rows.dependents
    )
    needs_hidden = any(e.target is None for e in edges)
    return WhyValue(
        factor=state,
        history=chain,
        dependencies=tuple(deps),
        has_hidden_dependencies=needs_hidden,
        dependents=ups,
        answer=templates.why_value(state, statuses.get(factor_id, "ready"), chain, deps, needs_hidden, ups),
    )


# -- what if -----------------------------------------------------------------------------------


def _levels(graph: DepGraph, factor_id: str, value: float | None, direction: Direction) -> list[float]:
    node = graph.nodes[factor_id]
    if value is not None:
        return [value]
    scale_low = node.scale.low if node.scale else 0.0
    scale_high = node.scale.high if node.scale else 100.0
    if direction == "lower":
        return [scale_low]
    current = node.value
    unmet = sorted(
        {e.min_value for e in graph.incoming[factor_id] if current is None or e.min_value > current}
    )
    return unmet or [scale_high]


def what_if(
    driver: Driver,
    scope: Scope,
    factor_id: str,
    value: float | None = None,
    direction: Direction = "improve",
) -> WhatIf:
    """Set ``factor_id`` to ``value`` in memory only and report every readiness change, transitively.

    Without a value, "improve" tries each visible threshold on the factor that it does not meet
    yet, lowest first (the ladder in ``steps``), and reports the top rung; "lower" tries the
    bottom of the scale.
    """
    return evaluate_what_if(what_if_subgraph(driver, scope, factor_id), factor_id, value, direction)


def evaluate_what_if(
    graph: DepGraph, factor_id: str, value: float | None = None, direction: Direction = "improve"
) -> WhatIf:
    """The what-if answer over a fetched subgraph (no I/O): see ``what_if``."""
    if factor_id not in graph.nodes or graph.nodes[factor_id].label != "Factor":
        raise unknown_factor(factor_id)
    node = graph.nodes[factor_id]
    if value is not None and node.scale is not None and not node.scale.contains(value):
        raise FactorError("INVALID_INPUT", f"value {fmt(value)} is outside the scale {node.scale}", "value")
    ref = {nid: NodeRef.of(n) for nid, n in graph.nodes.items()}
    before = graph.statuses()
    steps: list[Step] = []
    after = before
    seen_ready = {n for n, s in before.items() if s == "ready"}
    for level in _levels(graph, factor_id, value, direction):
        after = graph.statuses({factor_id: level})
        fresh = sorted((n for n, s in after.items() if s == "ready" and n not in seen_ready), key=_order(ref))
        seen_ready |= set(fresh)
        steps.append(Step(level, tuple(ref[n] for n in fresh)))
    final = steps[-1].value
    changed = sorted((n for n in graph.nodes if before[n] != after[n]), key=_order(ref))
    unblocked = tuple(ref[n] for n in changed if after[n] == "ready")
    blocked = tuple(ref[n] for n in changed if before[n] == "ready")
    others = tuple(
        StatusChange(ref[n], before[n], after[n])
        for n in changed
        if after[n] != "ready" and before[n] != "ready"
    )
    overrides = {factor_id: final}
    met_now = [(ref[e.source], e.min_value) for e in graph.incoming[factor_id] if graph.met(e, {})]
    met_then = [(ref[e.source], e.min_value) for e in graph.incoming[factor_id] if graph.met(e, overrides)]
    gained = tuple(x for x in met_then if x not in met_now)
    lost = tuple(x for x in met_now if x not in met_then)
    still = []
    for source, threshold in gained:
        if after[source.id] == "ready":
            continue
        found, _ = graph.blockers(source.id, overrides)
        still.append(
            StillBlocked(
                source,
                threshold,
                tuple((ref[b.edge.target], b.value, b.edge.min_value) for b in found if b.edge.target),
            )
        )
    return WhatIf(
        factor=ref[factor_id],
        current=node.value,
        value=final,
        unblocked=unblocked,
        blocked=blocked,
        other_changes=others,
        thresholds_met=gained,
        thresholds_lost=lost,
        still_blocked=tuple(still),
        steps=tuple(steps),
        answer=templates.what_if(
            ref[factor_id].name, node.value, final, steps, unblocked, blocked, others, still, value is None
        ),
    )


def _order(ref: dict[str, NodeRef]) -> Any:
    """Options before factors, then by name: what a reader looks for first."""
    return lambda n: (ref[n].label != "Option", ref[n].name)


# -- what changed ------------------------------------------------------------------------------


def what_changed(
    driver: Driver,
    scope: Scope,
    since: datetime,
    until: datetime | None = None,
    factor_ids: list[str] | None = None,
) -> WhatChanged:
    """Journal entries in [since, until], grouped by factor (most recently changed first)."""
    aware(since, "since")
    if until is not None:
        aware(until, "until")
    if until is not None and until < since:
        raise FactorError("INVALID_INPUT", "until is before since", "until")
    params = {**scope.cypher_params(), "since": since, "until": until, "factors": factor_ids}
    rows = read(driver, queries.WHAT_CHANGED, params)
    # Factors in the order their first entry in the window came (then sorted, ties kept so): every
    # entry here has a time the caller sees, WHAT_CHANGED matches no other.
    rows.sort(key=lambda r: (r["entries"][0]["entry"]["timestamp"], r["entries"][0]["entry"]["seq"] or 0))
    changes = []
    for r in rows:
        entries = entries_from_rows(r["entries"], scope)
        fid = str(r["id"])
        changes.append(
            FactorChange(
                factor=NodeRef(fid, "Factor", str(r["name"] or fid), tuple(r["masked"] or ())),
                before=r["before"],
                after=entries[-1].new_value,
                entries=tuple(entries),
            )
        )
    changes.sort(key=lambda c: (-c.entries[-1].newest_key()[1], c.factor.name))
    return WhatChanged(since, until, tuple(changes), templates.what_changed(since, until, changes))
