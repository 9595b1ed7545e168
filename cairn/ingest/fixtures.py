"""Read and validate an org-memory fixture set (decisions, events, transitions, aliases).

Validation is complete before anything is written: every problem in every file is
collected, each naming the file, the record id and the field, so one run shows the user
all that is wrong. Only a set with no problems reaches the writer.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from graphlib import CycleError, TopologicalSorter
from pathlib import Path
from typing import Any, TypeVar

from pydantic import ValidationError

from cairn.ingest.records import (
    AliasRecord,
    DecisionRecord,
    EventRecord,
    Record,
    TransitionRecord,
    iso_utc,
)

FOLDERS: dict[str, type[Record]] = {
    "decisions": DecisionRecord,
    "events": EventRecord,
    "transitions": TransitionRecord,
    "edges/aliases": AliasRecord,
}
# When two sources state the same cause → effect pair, the edge keeps the strongest name.
RELATION_PRIORITY = ("causal", "supported_by", "based_on", "led_to")

R = TypeVar("R", bound=Record)


@dataclass(frozen=True)
class Problem:
    file: str
    record_id: str | None
    field: str | None
    message: str

    def __str__(self) -> str:
        where = self.file
        if self.record_id:
            where += f" [id={self.record_id}]"
        if self.field:
            where += f" field '{self.field}'"
        return f"{where}: {self.message}"


class FixtureError(ValueError):
    """The fixture set is invalid; nothing was written."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        lines = "\n".join(f"  - {p}" for p in problems[:50])
        more = f"\n  … and {len(problems) - 50} more" if len(problems) > 50 else ""
        super().__init__(f"{len(problems)} problem(s) in the fixture set:\n{lines}{more}")


@dataclass(frozen=True)
class CausalEdge:
    """One CAUSAL_PRECEDES edge, cause → effect, merged from every source that states it."""

    id: str
    from_id: str
    to_id: str
    relation: str
    relations: tuple[str, ...]
    reason: str
    timestamp: str | None
    domain: str
    x_extra: dict[str, Any]


@dataclass
class FixtureSet:
    decisions: list[DecisionRecord] = field(default_factory=list)
    events: list[EventRecord] = field(default_factory=list)
    transitions: list[TransitionRecord] = field(default_factory=list)
    aliases: list[AliasRecord] = field(default_factory=list)
    origin: dict[str, str] = field(default_factory=dict)  # record id → file

    def causal_edges(self) -> list[CausalEdge]:
        """Transitions plus supported_by / based_on / led_to, one edge per ordered pair."""
        stated: dict[tuple[str, str], list[tuple[str, str, str | None, str, dict[str, Any], str]]] = {}

        def state(
            a: str,
            b: str,
            relation: str,
            reason: str,
            ts: str | None,
            domain: str,
            extra: dict[str, Any],
            edge_id: str,
        ) -> None:
            stated.setdefault((a, b), []).append((relation, reason, ts, domain, extra, edge_id))

        for t in self.transitions:
            state(t.from_id, t.to_id, t.relation, t.reason, iso_utc(t.timestamp), t.domain, t.x_extra, t.id)
        for d in self.decisions:
            ts = iso_utc(d.timestamp)
            for e in d.supported_by:
                state(e, d.id, "supported_by", "", ts, d.domain, {}, f"{e}>{d.id}")
            for b in d.based_on:
                state(b, d.id, "based_on", "", ts, d.domain, {}, f"{b}>{d.id}")
            for x in d.led_to:
                state(d.id, x, "led_to", "", ts, d.domain, {}, f"{d.id}>{x}")
        for ev in self.events:
            for x in ev.led_to:
                state(ev.id, x, "led_to", "", iso_utc(ev.timestamp), ev.domain, {}, f"{ev.id}>{x}")

        edges = []
        for (a, b), claims in sorted(stated.items()):
            claims.sort(key=lambda c: _priority(c[0]))
            relation, reason, ts, domain, extra, edge_id = claims[0]
            edges.append(
                CausalEdge(
                    id=edge_id,
                    from_id=a,
                    to_id=b,
                    relation=relation,
                    relations=tuple(sorted({c[0] for c in claims})),
                    reason=reason or next((c[1] for c in claims if c[1]), ""),
                    timestamp=ts,
                    domain=domain,
                    x_extra=extra,
                )
            )
        return edges


def _priority(relation: str) -> int:
    return RELATION_PRIORITY.index(relation) if relation in RELATION_PRIORITY else 0


def _records_in(path: Path) -> Iterator[tuple[Path, int | None, Any]]:
    """Yield (file, index-in-file or None, raw record) for every JSON file under path."""
    for file in sorted(path.glob("*.json")):
        try:
            data = json.loads(file.read_text(encoding="utf-8"))
        except UnicodeDecodeError as exc:
            yield file, None, ValueError(f"not UTF-8 text ({exc.reason})")
            continue
        except json.JSONDecodeError as exc:
            yield file, None, ValueError(f"malformed JSON at line {exc.lineno} col {exc.colno}: {exc.msg}")
            continue
        if isinstance(data, list) and not data:
            yield file, None, ValueError("an empty list: the file holds no records")
        elif isinstance(data, list):
            for i, item in enumerate(data):
                yield file, i, item
        else:
            yield file, None, data


def _parse(model: type[R], file: str, raw: Any, problems: list[Problem]) -> R | None:
    if isinstance(raw, ValueError):
        problems.append(Problem(file, None, None, str(raw)))
        return None
    if not isinstance(raw, dict):
        problems.append(Problem(file, None, None, f"expected a JSON object, got {type(raw).__name__}"))
        return None
    record_id = raw.get("id") if isinstance(raw.get("id"), str) else None
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        for err in exc.errors():
            loc = ".".join(str(p) for p in err["loc"]) or None
            problems.append(Problem(file, record_id, loc, err["msg"]))
        return None


PAYLOAD_KEYS = {
    "decisions": "decisions",
    "events": "events",
    "transitions": "transitions",
    "aliases": "edges/aliases",
}


def _collect(fs: FixtureSet, folder: str, name: str, raw: Any, problems: list[Problem]) -> None:
    record = _parse(FOLDERS[folder], name, raw, problems)
    if record is None:
        return
    rid = record.id
    if rid in fs.origin:
        problems.append(Problem(name, rid, "id", f"duplicate id, also in {fs.origin[rid]}"))
        return
    fs.origin[rid] = name
    targets: dict[str, list[Any]] = {
        "decisions": fs.decisions,
        "events": fs.events,
        "transitions": fs.transitions,
        "edges/aliases": fs.aliases,
    }
    targets[folder].append(record)


def parse_fixture_dir(root: Path) -> tuple[FixtureSet, list[Problem]]:
    """Parse every record; return the set and the per-record problems (no cross checks)."""
    fs = FixtureSet()
    problems: list[Problem] = []
    if not root.is_dir():
        return fs, [Problem(str(root), None, None, "fixture directory does not exist")]
    if not any((root / folder).is_dir() for folder in FOLDERS):
        return fs, [Problem(str(root), None, None, f"no fixture folders ({', '.join(FOLDERS)})")]
    for folder in FOLDERS:
        for file, index, raw in _records_in(root / folder):
            name = str(file.relative_to(root)) + (f"[{index}]" if index is not None else "")
            _collect(fs, folder, name, raw, problems)
    if not problems and not fs.origin:
        problems.append(Problem(str(root), None, None, "no records found"))
    return fs, problems


def parse_payload(payload: Any) -> tuple[FixtureSet, list[Problem]]:
    """The same records as one JSON object (GraphQL upserts): {decisions, events, transitions, aliases}."""
    fs = FixtureSet()
    if not isinstance(payload, dict):
        return fs, [
            Problem("input", None, None, "expected an object with decisions/events/transitions/aliases")
        ]
    problems = [Problem("input", None, key, "unknown key") for key in payload if key not in PAYLOAD_KEYS]
    for key, folder in PAYLOAD_KEYS.items():
        items = payload.get(key, [])
        if not isinstance(items, list):
            problems.append(Problem("input", None, key, "must be a list"))
            continue
        for i, raw in enumerate(items):
            _collect(fs, folder, f"input.{key}[{i}]", raw, problems)
    if not problems and not fs.origin:
        problems.append(Problem("input", None, None, "no records given"))
    return fs, problems


def check_references(
    fs: FixtureSet,
    existing: dict[str, str] | None = None,
    stored_edges: list[tuple[str, str]] | None = None,
) -> list[Problem]:
    """Referential integrity and alias consistency.

    ``existing`` maps ids already in the database to their label, so a partial set (or a
    GraphQL upsert) may refer to what is stored.
    """
    existing = existing or {}
    label: dict[str, str] = dict(existing)
    label.update({d.id: "Decision" for d in fs.decisions})
    label.update({e.id: "Event" for e in fs.events})
    domain = {r.id: r.domain for r in [*fs.decisions, *fs.events]}
    problems: list[Problem] = []

    def need(file: str, rid: str, fld: str, ref: str, kinds: tuple[str, ...]) -> None:
        kind = label.get(ref)
        if kind is None:
            problems.append(Problem(file, rid, fld, f"refers to '{ref}', which does not exist"))
        elif kind not in kinds:
            problems.append(
                Problem(file, rid, fld, f"refers to '{ref}', a {kind}; expected {' or '.join(kinds)}")
            )

    for d in fs.decisions:
        f = fs.origin[d.id]
        for ref in d.supported_by:
            need(f, d.id, "supported_by", ref, ("Event",))
        for ref in d.based_on:
            need(f, d.id, "based_on", ref, ("Decision",))
        for ref in d.led_to:
            need(f, d.id, "led_to", ref, ("Decision", "Event"))
    for ev in fs.events:
        f = fs.origin[ev.id]
        for ref in ev.led_to:
            need(f, ev.id, "led_to", ref, ("Decision",))
        if ev.alias_of_decision is not None:
            need(f, ev.id, "x-extra.alias_of_decision", ev.alias_of_decision, ("Decision",))
    for t in fs.transitions:
        f = fs.origin[t.id]
        need(f, t.id, "from", t.from_id, ("Decision", "Event"))
        need(f, t.id, "to", t.to_id, ("Decision", "Event"))
        if t.from_id == t.to_id:
            problems.append(Problem(f, t.id, "to", "a transition cannot point at its own source"))
    events = {e.id: e for e in fs.events}
    for a in fs.aliases:
        f = fs.origin[a.id]
        need(f, a.id, "decision_id", a.decision_id, ("Decision",))
        need(f, a.id, "event_id", a.event_id, ("Event",))
        target = events.get(a.event_id)
        if target is not None and target.alias_of_decision != a.decision_id:
            problems.append(
                Problem(
                    f,
                    a.id,
                    "event_id",
                    f"event '{a.event_id}' has x-extra.alias_of_decision="
                    f"{target.alias_of_decision!r}, not '{a.decision_id}'",
                )
            )
        for fld, ref, stated in (
            ("domain_from", a.decision_id, a.domain_from),
            ("domain_to", a.event_id, a.domain_to),
        ):
            if ref in domain and domain[ref] != stated:
                problems.append(Problem(f, a.id, fld, f"is '{stated}' but '{ref}' is in '{domain[ref]}'"))
    if not problems:
        problems.extend(_cycles(fs, stored_edges or []))
    return problems


def _cycles(fs: FixtureSet, stored_edges: list[tuple[str, str]]) -> list[Problem]:
    """Causality has no loops: the new edges together with the stored ones must stay acyclic."""
    graph: dict[str, set[str]] = {}
    origin: dict[tuple[str, str], str] = {}
    for e in fs.causal_edges():
        graph.setdefault(e.to_id, set()).add(e.from_id)
        origin[(e.from_id, e.to_id)] = fs.origin.get(e.id) or fs.origin.get(e.to_id) or "causal edges"
    for a, b in stored_edges:
        graph.setdefault(b, set()).add(a)
    try:
        tuple(TopologicalSorter(graph).static_order())
    except CycleError as exc:
        path = [str(n) for n in reversed(exc.args[1])]  # cause -> effect order
        files = sorted({origin[(a, b)] for a, b in itertools.pairwise(path) if (a, b) in origin})
        where = ", ".join(files) or "causal edges"
        return [Problem(where, None, None, f"causal edges form a cycle: {' -> '.join(path)}")]
    return []


def load_fixture_dir(root: Path, existing: dict[str, str] | None = None) -> FixtureSet:
    """Parse and fully validate; raise FixtureError listing every problem."""
    fs, problems = parse_fixture_dir(root)
    if not problems:
        problems = check_references(fs, existing)
    if problems:
        raise FixtureError(problems)
    return fs
