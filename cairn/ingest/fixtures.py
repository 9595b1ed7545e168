"""Read and validate an org-memory fixture set (decisions, events, transitions, aliases).

Validation is complete before anything is written: every problem in every file is
collected — per-record errors, references, self-loops and cycles, in one run — each naming
the file, the record id and the field, so one run shows the user all that is wrong. Only a
set with no problems reaches the writer. Warnings (a cause dated after its effect) do not
stop a write; the caller decides whether to refuse on them.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from graphlib import CycleError, TopologicalSorter
from pathlib import Path
from typing import Any, TypeVar

from pydantic import ValidationError

from cairn.errors import CairnError
from cairn.ingest.records import (
    DATE_FORMAT,
    AliasRecord,
    DecisionRecord,
    EventRecord,
    Record,
    TransitionRecord,
    iso_utc,
)
from cairn.schema import unique_json
from cairn.schema.catalog import CAUSAL_RELATIONS, stated_on_cause

FOLDERS: dict[str, type[Record]] = {
    "decisions": DecisionRecord,
    "events": EventRecord,
    "transitions": TransitionRecord,
    "edges/aliases": AliasRecord,
}
# When two sources state the same cause → effect pair, the edge keeps the strongest name
# (the catalog lists them strongest first).
RELATION_PRIORITY = tuple(CAUSAL_RELATIONS)

R = TypeVar("R", bound=Record)
# Where a record states something: its file, its id, the field (None: the record as a whole).
Place = tuple[str, str, str | None]


@dataclass(frozen=True)
class Problem:
    file: str
    record_id: str | None
    field: str | None
    message: str

    def __str__(self) -> str:
        return f"{_where(self.file, self.record_id, self.field)}: {self.message}"


def _where(file: str, record_id: str | None, field_name: str | None) -> str:
    where = file
    if record_id:
        where += f" [id={record_id}]"
    if field_name:
        where += f" field '{field_name}'"
    return where


class FixtureError(CairnError, ValueError):
    """The fixture set is invalid; nothing was written."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        lines = "\n".join(f"  - {p}" for p in problems[:50])
        more = f"\n  … and {len(problems) - 50} more" if len(problems) > 50 else ""
        message = f"{len(problems)} problem(s) in the fixture set:\n{lines}{more}"
        super().__init__("INVALID_INPUT", message, problems=problems)


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
    # Where each source states it (file, record id, field; None for a transition record's own
    # file), strongest claim first: what a warning about the link points at.
    stated: tuple[Place, ...] = ()


@dataclass
class FixtureSet:
    decisions: list[DecisionRecord] = field(default_factory=list)
    events: list[EventRecord] = field(default_factory=list)
    transitions: list[TransitionRecord] = field(default_factory=list)
    aliases: list[AliasRecord] = field(default_factory=list)
    origin: dict[str, str] = field(default_factory=dict)  # record id → file
    # ids of records that failed to parse: already reported, so references to them are not again
    broken: set[str] = field(default_factory=set)
    # a transition naming several records at one end: its id as written → the one-pair ids
    listed: dict[str, list[str]] = field(default_factory=dict)
    # a transition written in a decision's own ``transitions``: its id → (decision id, field)
    inline: dict[str, tuple[str, str]] = field(default_factory=dict)

    def causal_edges(self) -> list[CausalEdge]:
        """Transitions plus supported_by / based_on / led_to, one edge per ordered pair."""
        stated: dict[tuple[str, str], list[tuple[str, str, str | None, str, dict[str, Any], str, Place]]] = {}

        def state(
            a: str,
            b: str,
            relation: str,
            reason: str,
            ts: str | None,
            domain: str,
            extra: dict[str, Any],
            edge_id: str,
            place: Place,
        ) -> None:
            stated.setdefault((a, b), []).append((relation, reason, ts, domain, extra, edge_id, place))

        def on(record_id: str, field_name: str | None) -> Place:
            return (self.origin.get(record_id, "input"), record_id, field_name)

        for t in self.transitions:
            written = self.inline.get(t.id)
            place = (self.origin.get(t.id, "input"), *written) if written else on(t.id, None)
            state(
                t.from_id,
                t.to_id,
                t.relation,
                t.reason,
                iso_utc(t.timestamp),
                t.domain,
                t.x_extra,
                t.id,
                place,
            )
        for d in self.decisions:
            ts = iso_utc(d.timestamp)
            for e in d.supported_by:
                state(e, d.id, "supported_by", "", ts, d.domain, {}, f"{e}>{d.id}", on(d.id, "supported_by"))
            for b in d.based_on:
                state(b, d.id, "based_on", "", ts, d.domain, {}, f"{b}>{d.id}", on(d.id, "based_on"))
            for x in d.led_to:
                state(d.id, x, "led_to", "", ts, d.domain, {}, f"{d.id}>{x}", on(d.id, "led_to"))
        for ev in self.events:
            for x in ev.led_to:
                ts = iso_utc(ev.timestamp)
                state(ev.id, x, "led_to", "", ts, ev.domain, {}, f"{ev.id}>{x}", on(ev.id, "led_to"))

        edges = []
        for (a, b), claims in sorted(stated.items()):
            claims.sort(key=lambda c: _priority(c[0]))
            relation, reason, ts, domain, extra, edge_id, _ = claims[0]
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
                    stated=tuple(c[6] for c in claims),
                )
            )
        return edges


def _priority(relation: str) -> int:
    return RELATION_PRIORITY.index(relation) if relation in RELATION_PRIORITY else 0


def _records_in(path: Path) -> Iterator[tuple[Path, int | None, Any]]:
    """Yield (file, index-in-file or None, raw record) for every JSON file under path."""
    for file in sorted(path.glob("*.json")):
        try:
            data = unique_json.loads(file.read_text(encoding="utf-8"))
        except UnicodeDecodeError as exc:
            yield file, None, ValueError(f"not UTF-8 text ({exc.reason})")
            continue
        except unique_json.DuplicateKey as exc:
            yield file, None, ValueError(f"{exc.place()}: an object repeats the key {exc.shown_key()}")
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


def _message(err: Any) -> str:
    """Pydantic's error as a sentence for the user: dates name the expected format."""
    kind = str(err["type"])
    if kind.startswith(("datetime", "date_", "timezone")):
        shown = json.dumps(err.get("input"), ensure_ascii=False, default=str)[:60]
        return f"{shown} is not a valid date-time: expected {DATE_FORMAT}"
    if kind == "value_error" and "error" in err.get("ctx", {}):
        return str(err["ctx"]["error"])
    return str(err["msg"])


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
            problems.append(Problem(file, record_id, loc, _message(err)))
        return None


PAYLOAD_KEYS = {
    "decisions": "decisions",
    "events": "events",
    "transitions": "transitions",
    "aliases": "edges/aliases",
}


def _pairs(raw: Any) -> list[dict[str, Any]] | None:
    """A transition naming several records at one end ("Obsoletes: 2145, 2616" is one header)
    as one transition per cause → effect pair, each id the record's id and the listed end(s);
    None for a record with a list at neither end. A list of one is a list like any other
    ("Requires: 440"); an empty list gives no pair (reported by _collect)."""
    if not isinstance(raw, dict):
        return None
    froms, tos = raw.get("from"), raw.get("to")
    if not isinstance(froms, list) and not isinstance(tos, list):
        return None
    starts = froms if isinstance(froms, list) else [froms]
    ends = tos if isinstance(tos, list) else [tos]
    many = (isinstance(froms, list), isinstance(tos, list))
    out = []
    for a in starts:
        for b in ends:
            listed = [str(end) for end, several in zip((a, b), many, strict=True) if several]
            out.append({**raw, "from": a, "to": b, "id": ":".join([str(raw.get("id")), *listed])})
    return out


def _own_transitions(fs: FixtureSet, d: DecisionRecord, name: str, problems: list[Problem]) -> None:
    """A decision's ``transitions``, read rather than dropped: an object is a transition from or
    to the decision (the end it leaves out is the decision; its id and domain default to the
    decision's), a string the id of a transition record of the set (checked in check_references).
    A link between two other records is refused: filed under this decision, it would read as
    stated here while saying nothing about it."""
    for i, item in enumerate(d.transitions):
        if isinstance(item, str):
            continue
        where = f"transitions[{i}]"
        if not isinstance(item, dict):
            problems.append(Problem(name, d.id, where, "expected a transition object or a transition id"))
            continue
        if "from" not in item and "to" not in item:
            problems.append(Problem(name, d.id, where, "names neither 'from' nor 'to'"))
            continue
        backwards = _backwards(d.id, item)
        if backwards:
            problems.append(Problem(name, d.id, f"{where}.relation", backwards))
            continue
        raw = {"from": d.id, "to": d.id, "id": f"{d.id}.transitions.{i}", "domain": d.domain, **item}
        ends = [(p.get("from"), p.get("to")) for p in _pairs(raw) or [raw]]
        # (an end that is not an id is the transition's own problem, reported when it is parsed)
        foreign = [e for e in ends if all(isinstance(x, str) for x in e) and d.id not in e]
        if foreign:
            problems.append(Problem(name, d.id, where, _not_own(d.id, *foreign[0])))
            continue
        _collect(fs, "transitions", name, raw, problems)
        rid = raw.get("id")
        if isinstance(rid, str):
            for one in fs.listed.get(rid, [rid]):
                fs.inline[one] = (d.id, where)


def _backwards(decision: str, item: dict[str, Any]) -> str | None:
    """A decision's own link whose words and ends disagree, else None. On its own record a link
    is written as the record says it: "Amends 10" on ADR 17 makes 17 the later record, so 10 is
    named as ``from`` (the cause); "Superseded by 15" on ADR 4 makes 4 the earlier one, so 15 is
    named as ``to``. The other end, left to the decision, would turn the link round: an edge
    saying 10 amends 17, caught by nothing when both carry the same day."""
    written = item.get("relation")
    if not isinstance(written, str) or ("from" in item) == ("to" in item):
        return None  # no words, or both ends named: the transition says which is which
    on_cause = stated_on_cause(written)
    given = "from" if "from" in item else "to"
    other = json.dumps(item[given], ensure_ascii=False)
    if on_cause is False and given == "to":
        return (
            f"'{written}' on '{decision}' makes it the later record, but 'to' names {other} as "
            f"the later one: name {other} as 'from', the record '{decision}' follows"
        )
    if on_cause is True and given == "from":
        return (
            f"'{written}' on '{decision}' makes it the earlier record, but 'from' names {other} as "
            f"the earlier one: name {other} as 'to', the record that follows '{decision}'"
        )
    return None


def _not_own(decision: str, cause: Any, effect: Any) -> str:
    return (
        f"links '{cause}' to '{effect}': neither end is '{decision}' "
        "(a link between other records belongs in transitions/)"
    )


def _collect(fs: FixtureSet, folder: str, name: str, raw: Any, problems: list[Problem]) -> None:
    pairs = _pairs(raw) if folder == "transitions" else None
    if pairs is None:
        _collect_one(fs, folder, name, raw, problems)
        return
    written = raw.get("id")
    rid = written if isinstance(written, str) else None
    refused = [end for end in ("from", "to") if raw.get(end) == []]  # a list's own problems
    for end in refused:
        problems.append(Problem(name, rid, end, "an empty list names no record: name one or more ids"))
    for end in ("from", "to"):
        listed = raw.get(end)
        twice = [x for i, x in enumerate(listed) if x in listed[:i]] if isinstance(listed, list) else []
        for x in dict.fromkeys(map(str, twice)):
            problems.append(Problem(name, rid, end, f"names '{x}' twice"))
            refused.append(end)
    if rid is not None and rid in fs.origin:
        problems.append(Problem(name, rid, "id", f"duplicate id, also in {fs.origin[rid]}"))
        refused.append("id")
    # The record's other fields checked once, not once per pair (then the pairs' ends).
    whole = _parse(FOLDERS[folder], name, {**raw, "from": "-", "to": "-"}, problems)
    if whole is None or rid is None or refused:
        if rid is not None:
            fs.broken.add(rid)
        return
    fs.origin[rid] = name  # the id as written, for a decision naming the transition
    fs.listed[rid] = [one["id"] for one in pairs]
    for one in pairs:
        _collect_one(fs, folder, name, one, problems)


def _collect_one(fs: FixtureSet, folder: str, name: str, raw: Any, problems: list[Problem]) -> None:
    record = _parse(FOLDERS[folder], name, raw, problems)
    if record is None:
        if isinstance(raw, dict) and isinstance(raw.get("id"), str):
            fs.broken.add(raw["id"])
        elif isinstance(raw, ValueError):  # an unreadable file: fixture files are named by id
            fs.broken.add(Path(name).stem)
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
    if isinstance(record, DecisionRecord):
        _own_transitions(fs, record, name, problems)


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
    name_stored: bool = True,
) -> list[Problem]:
    """Referential integrity, alias consistency, self-loops and cycles.

    ``existing`` maps ids already in the database to their label, so a partial set (or a
    GraphQL upsert) may refer to what is stored; for a caller writing under its own scope it
    holds only the ids that caller may read, so a hidden id is reported exactly like a
    missing one. Records that failed to parse are still checked for what they can be.
    """
    existing = existing or {}
    label: dict[str, str] = dict(existing)
    label.update({d.id: "Decision" for d in fs.decisions})
    label.update({e.id: "Event" for e in fs.events})
    domain = {r.id: r.domain for r in [*fs.decisions, *fs.events]}
    # Transition ids, as written too (a transition naming several records is one per pair).
    transitions = set(fs.origin) - set(label) - {a.id for a in fs.aliases}
    ends = {t.id: (t.from_id, t.to_id) for t in fs.transitions}
    problems: list[Problem] = []

    def need(file: str, rid: str, fld: str, ref: str, kinds: tuple[str, ...]) -> None:
        kind = label.get(ref)
        if kind is None and ref in fs.broken:
            return  # its own parse problem is reported already
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
        for ref in d.transitions:
            if not isinstance(ref, str) or ref in fs.broken:
                continue
            if ref in label:
                msg = f"refers to '{ref}', a {label[ref]}; expected a transition id"
                problems.append(Problem(f, d.id, "transitions", msg))
            elif ref not in transitions:
                problems.append(Problem(f, d.id, "transitions", f"refers to '{ref}', which does not exist"))
            else:
                foreign = [ends[i] for i in fs.listed.get(ref, [ref]) if i in ends and d.id not in ends[i]]
                if foreign:
                    msg = f"refers to '{ref}', which " + _not_own(d.id, *foreign[0])
                    problems.append(Problem(f, d.id, "transitions", msg))
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
    problems.extend(_cycles(fs, stored_edges or [], name_stored, set(label)))
    return problems


def _cycles(
    fs: FixtureSet, stored_edges: list[tuple[str, str]], name_stored: bool, known: set[str]
) -> list[Problem]:
    """Causality has no loops: the new edges together with the stored ones must stay acyclic.

    Only new edges between ``known`` ids count: one to a missing (or, for a scoped caller,
    hidden) id is refused as such already, and letting it close a loop would tell a hidden
    id from a missing one.

    With ``name_stored`` false (a caller writing under its own scope) the message names only
    the caller's own new edges on the loop, never a stored node or edge: the stored part of
    the loop may run through nodes the caller cannot see, and a visible one is not named
    either, so the message is the same whichever it is.
    """
    graph: dict[str, set[str]] = {}
    origin: dict[tuple[str, str], str] = {}
    transitions = {t.id for t in fs.transitions}
    for e in fs.causal_edges():
        if (e.from_id == e.to_id and e.id in transitions) or not {e.from_id, e.to_id} <= known:
            continue  # reported on its record: a transition's self-loop, a missing endpoint
        graph.setdefault(e.to_id, set()).add(e.from_id)
        origin[(e.from_id, e.to_id)] = fs.origin.get(e.id) or fs.origin.get(e.to_id) or "causal edges"
    for a, b in stored_edges:
        graph.setdefault(b, set()).add(a)
    try:
        tuple(TopologicalSorter(graph).static_order())
    except CycleError as exc:
        path = [str(n) for n in exc.args[1]]  # each node an immediate predecessor (cause) of the next
        pairs = list(itertools.pairwise(path))
        files = sorted({origin[p] for p in pairs if p in origin})
        where = ", ".join(files) or "causal edges"
        if name_stored or all(p in origin for p in pairs):
            return [Problem(where, None, None, f"causal edges form a cycle: {' -> '.join(path)}")]
        own = "; ".join(f"{a} -> {b}" for a, b in pairs if (a, b) in origin)
        return [
            Problem(
                where, None, None, f"causal edges form a cycle: {own} would close a loop with stored edges"
            )
        ]
    return []


def chronology_warnings(fs: FixtureSet, stored_times: dict[str, str] | None = None) -> list[Problem]:
    """Causes dated after their effects: allowed, but said, pointing at where the link is written.

    A record's date need not be the day the link took hold (a PEP's is the day it was created,
    and a draft may come to require a later PEP, ``fixtures/peps/README.md``), so a date order
    cannot refuse a link. But a link written backwards (a decision's ``{"to": X}`` meant as
    "X ... this one") shows only here, so the warning names every file, record and field that
    states the link, how the link reads, and the fix. ``stored_times`` holds ISO timestamps of
    stored endpoints the caller may see.
    """
    when: dict[str, str] = dict(stored_times or {})
    when.update({r.id: iso_utc(r.timestamp) or "" for r in [*fs.decisions, *fs.events]})
    warnings = []
    for e in fs.causal_edges():
        cause, effect = when.get(e.from_id), when.get(e.to_id)
        if cause and effect and _instant(cause) > _instant(effect):
            (file, record_id, field_name), *others = e.stated or [("causal edges", e.id, None)]
            also = "".join(f"; also stated in {_where(*o)}" for o in others)
            reads = CAUSAL_RELATIONS[e.relation].reads_as
            warnings.append(
                Problem(
                    file,
                    record_id,
                    field_name,
                    f"cause '{e.from_id}' ({cause}) is dated after its effect '{e.to_id}' ({effect}): "
                    f"the link reads '{e.to_id} {reads} {e.from_id}'; if that is backwards, swap its "
                    f"cause and effect{also}",
                )
            )
    return warnings


def _instant(iso: str) -> datetime:
    return datetime.fromisoformat(iso.replace("Z", "+00:00"))


def load_fixture_dir(root: Path, existing: dict[str, str] | None = None) -> FixtureSet:
    """Parse and fully validate; raise FixtureError listing every problem."""
    fs, problems = parse_fixture_dir(root)
    if fs.origin:
        problems += check_references(fs, existing)
    if problems:
        raise FixtureError(problems)
    return fs
