"""The factor journal: every change of a factor is a JournalEntry, and the factor node holds its state.

``update_factor`` writes the entry (previous and new value, rationale, excerpt, confidence,
INFLUENCED_BY factors, PART_OF session, ABOUT the factor), moves ``CURRENT_STATE`` to it and
sets the factor's value, confidence, status and ``last_updated`` — all in one transaction that
first takes the factor's write lock, so two concurrent updates cannot both read the same
"previous" value. The journal is append-only: an entry older than the factor's newest one is
refused, which keeps ``previous_value`` and the as-of reconstruction consistent.

Reads take the caller's Scope and filter in Cypher; of the influencing factors the caller cannot
see, only whether there are any leaves the database (``has_hidden_influences``): never an id, a
name or how many.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from neo4j import Driver, ManagedTransaction

from cairn.graph import factors as queries
from cairn.memory.factors.models import (
    INFERENCE_STATUSES,
    FactorError,
    FactorState,
    JournalEntryView,
    Scale,
    UnconfirmedInference,
    aware,
    fmt,
    native,
    unknown_factor,
)
from cairn.memory.factors.recalculation import (
    EVIDENCE_OPS,
    RULE_TEXT,
    Contradiction,
    Evidence,
    synthesise,
)
from cairn.policy.preselector import mask
from cairn.policy.scope import Scope
from cairn.policy.writes import TAKEN_ID, edge_problem, hidden_ids, less_visible, stored_ids
from cairn.runtime.database import read
from cairn.runtime.embedder import Embedder, get_embedder

SESSION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,199}$")
CONFIRM_BOOST = 0.1
CORRECTION_CONFIDENCE = 0.95
EXCERPT_MAX = 2000
MAX_HISTORY = 500  # entries one history read returns (GraphQL's `journal` and the CLI refuse more)


# Kept beside the field rules: what entries are ordered by, never shown (``order_at`` is already
# the time the caller sees, or null; ``seq`` is a public order, docs/design.md §Policy module).
_ORDER_KEYS = ("order_at", "seq")


def shown(label: str, row: dict[str, Any], scope: Scope) -> tuple[dict[str, Any], tuple[str, ...]]:
    """The fields of a factor or entry ``row`` the scope shows, and the stored fields it hides
    (``preselector.mask``, as every other read: docs/design.md §Policy module)."""
    order = {k: row.pop(k) for k in _ORDER_KEYS if k in row}
    clean, masked = mask(label, row, scope)
    # The kept fields with their stored values (mask renders times as text; the views take them native).
    return {**{k: row[k] for k in clean}, **order}, masked


def entry_from_row(
    factor_id: str, entry: dict[str, Any], influence: Sequence[str], hidden_influence: bool, scope: Scope
) -> JournalEntryView:
    entry, masked = shown("JournalEntry", entry, scope)
    details = entry.get("details")
    return JournalEntryView(
        id=entry["id"],
        factor_id=factor_id,
        op=None if "op" in masked else entry.get("op") or "update",
        timestamp=native(entry.get("timestamp")),
        previous_value=entry.get("previous_number"),
        new_value=entry.get("new_number"),
        rationale=None if "rationale" in masked else entry.get("rationale") or "",
        excerpt=None if "excerpt" in masked else entry.get("excerpt") or "",
        confidence=entry.get("confidence"),
        session_id=entry.get("session_id"),
        inference_status=entry.get("inference_status"),
        influenced_by=tuple(sorted(set(influence))),
        has_hidden_influences=bool(hidden_influence),
        details=json.loads(details) if isinstance(details, str) and details else {},
        order_at=native(entry.get("order_at")),
        seq=int(entry.get("seq") or 0),
        masked=masked,
    )


def entries_from_rows(rows: Sequence[Any], scope: Scope) -> list[JournalEntryView]:
    """Entries from the entry rows of cairn.graph.factors: one per record, or collected as maps;
    each with the fields the scope hides null."""
    return [
        entry_from_row(r["factor_id"], dict(r["entry"]), r["influence"], r["hidden_influence"], scope)
        for r in rows
    ]


def state_from_row(
    factor: dict[str, Any], entry: JournalEntryView | None, as_of: datetime | None, scope: Scope
) -> FactorState:
    factor, masked = shown("Factor", factor, scope)
    return FactorState(
        id=factor["id"],
        # A hidden name, category, scale or aliases is None (named in ``masked``), never a default
        # that reads as the stored value (an empty list of aliases); a stored absent one keeps its
        # default.
        name=None if "name" in masked else factor.get("name") or factor["id"],
        category=None if "category" in masked else factor.get("category") or "uncategorised",
        scale=None if "scale" in masked else Scale.parse(factor.get("scale") or "0-100"),
        value=factor.get("current_value"),
        confidence=factor.get("current_confidence"),
        status=factor.get("inference_status"),
        last_updated=native(factor.get("last_updated")),
        aliases=None if "aliases" in masked else tuple(factor.get("aliases") or ()),
        as_of=as_of,
        entry=entry,
        masked=masked,
    )


def scale_for_write(state: FactorState) -> Scale:
    """The scale a value written to the factor must lie on. A caller whose scope hides the scale
    cannot write a value: checking it against the scale, or clamping to it, would tell them the
    scale (docs/design.md §Policy module)."""
    if state.scale is None:
        raise FactorError(
            "INVALID_INPUT", f"the scale of factor '{state.id}' is hidden from your role", "value"
        )
    return state.scale


# The factor's fields a journal write sets (queries.WRITE_ENTRY), each from the writer's input or
# from the stored state: none of them may be hidden from the writer.
STATE_WRITTEN = ("current_value", "current_confidence", "inference_status", "last_updated", "journal_seq")


def readable_for_write(state: FactorState, names: Sequence[str], what: str) -> None:
    """A write that reads the factor's ``names`` (its value, its confidence) to decide what it
    writes over them: read through a scope that hides them (null), it would overwrite a field the
    writer cannot read, so it is refused, naming the field, whatever the factor holds
    (docs/design.md §Policy module)."""
    for name in names:
        if name in state.masked:
            raise FactorError(
                "INVALID_INPUT",
                f"this role may not read a factor's {name}, so it may not {what} it",
                "value" if name == "current_value" else "factor_id",
            )


def get_entry(driver: Driver, scope: Scope, entry_id: str) -> JournalEntryView | None:
    records, _, _ = driver.execute_query(queries.ENTRY_BY_ID, {**scope.cypher_params(), "entry": entry_id})
    found = entries_from_rows(records, scope)
    return found[0] if found else None


def factor_state(driver: Driver, scope: Scope, factor_id: str, as_of: datetime | None = None) -> FactorState:
    """The factor now, or — with ``as_of`` — as the journal had it at that moment."""
    params = {**scope.cypher_params(), "factor": factor_id}
    if as_of is None:
        records, _, _ = driver.execute_query(queries.FACTOR_NOW, params)
        if not records:
            raise unknown_factor(factor_id)
        entry_id = records[0]["entry_id"]
        entry = get_entry(driver, scope, entry_id) if entry_id else None
        return state_from_row(dict(records[0]["factor"]), entry, None, scope)
    at = aware(as_of, "as_of")
    records, _, _ = driver.execute_query(queries.FACTOR_AS_OF, {**params, "at": at})
    if not records:
        raise unknown_factor(factor_id)
    factor = dict(records[0]["factor"])
    row = records[0]["entry"]
    if row is None:
        factor.update(current_value=None, current_confidence=None, inference_status=None, last_updated=None)
        return state_from_row(factor, None, at, scope)
    # The state then is the entry's, as the caller sees the entry: a field its scope hides on the
    # entry stays hidden on the factor (and the factor's own rule applies on top).
    entry = get_entry(driver, scope, row["id"])
    factor.update(
        current_value=None if entry is None else entry.new_value,
        current_confidence=None if entry is None else entry.confidence,
        inference_status=None if entry is None else entry.inference_status,
        last_updated=None if entry is None else entry.timestamp,
    )
    return state_from_row(factor, entry, at, scope)


def history(
    driver: Driver,
    scope: Scope,
    factor_id: str,
    *,
    limit: int = 50,
    since: datetime | None = None,
    until: datetime | None = None,
    ops: Sequence[str] | None = None,
) -> list[JournalEntryView]:
    """Entries about a visible factor, newest first (raises NOT_FOUND for an unseen factor)."""
    factor_state(driver, scope, factor_id)
    params = {
        **scope.cypher_params(),
        "factor": factor_id,
        "limit": max(0, limit),
        "since": None if since is None else aware(since, "since"),
        "until": None if until is None else aware(until, "until"),
        "ops": None if ops is None else list(ops),
    }
    records, _, _ = driver.execute_query(queries.FACTOR_HISTORY, params)
    return entries_from_rows(records, scope)


def unconfirmed_inferences(driver: Driver, scope: Scope) -> list[UnconfirmedInference]:
    """Assessed factors still marked unconfirmed, least confident first, with their evidence count."""
    records = read(driver, queries.UNCONFIRMED_FACTORS, scope.cypher_params())
    return [
        UnconfirmedInference(
            id=r["id"],
            name=r["name"] or r["id"],
            value=r["value"],
            confidence=r["confidence"],
            evidence_count=int(r["evidence_count"]),
            latest_mention=native(r["latest"]),
        )
        for r in records
    ]


# -- writes ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Write:
    """One validated journal write, ready for the transaction."""

    factor_id: str
    op: str
    value: float
    confidence: float
    rationale: str
    excerpt: str
    status: str
    influenced_by: tuple[str, ...]
    session_id: str
    session_title: str
    timestamp: datetime | None  # None: now, read under the factor's lock
    details: dict[str, Any]


def _check_inputs(
    driver: Driver,
    scope: Scope,
    factor_id: str,
    value: float,
    confidence: float,
    rationale: str,
    excerpt: str,
    status: str,
    influenced_by: Sequence[str],
    session_id: str | None,
    what: str,
) -> str:
    """Everything that can be checked without the factor's lock; returns the factor's name.
    ``what``: the write's verb for a refusal (its op: update, correct, confirm, recalculate).

    Raises FactorError naming the field; the factor itself is looked up under the caller's scope.
    """
    state = factor_state(driver, scope, factor_id)
    # The entry becomes the factor's current state (queries.WRITE_ENTRY sets these fields).
    readable_for_write(state, STATE_WRITTEN, what)
    scale = scale_for_write(state)
    if not scale.contains(value):
        raise FactorError(
            "INVALID_INPUT",
            f"value {fmt(value)} is outside the scale {scale} of factor '{factor_id}'",
            "value",
        )
    if not rationale or not rationale.strip():
        raise FactorError("INVALID_INPUT", "a rationale is required: say why the value changed", "rationale")
    if not 0.0 <= confidence <= 1.0:
        raise FactorError("INVALID_INPUT", f"confidence must be within 0-1, got {confidence:g}", "confidence")
    if status not in INFERENCE_STATUSES:
        raise FactorError(
            "INVALID_INPUT", f"inference_status must be one of {', '.join(INFERENCE_STATUSES)}", "status"
        )
    if len(excerpt) > EXCERPT_MAX:
        raise FactorError("INVALID_INPUT", f"excerpt is longer than {EXCERPT_MAX} characters", "excerpt")
    if session_id is not None and not SESSION_ID.match(session_id):
        raise FactorError("INVALID_INPUT", "session_id is malformed", "session_id")
    wanted = list(dict.fromkeys(influenced_by))
    if factor_id in wanted:
        raise FactorError("INVALID_INPUT", "a factor cannot be influenced by itself", "influenced_by")
    if wanted:
        records, _, _ = driver.execute_query(
            queries.VISIBLE_FACTOR_IDS, {**scope.cypher_params(), "ids": wanted}
        )
        found = {str(r["id"]) for r in records}
        missing = [i for i in wanted if i not in found]
        if missing:
            raise FactorError("NOT_FOUND", f"unknown influencing factor '{missing[0]}'", "influenced_by")
    _check_edges(driver, scope, factor_id, wanted, session_id)
    return state.label


def _check_edges(
    driver: Driver, scope: Scope, factor_id: str, influences: Sequence[str], session_id: str | None
) -> None:
    """The entry is stored with ABOUT, CURRENT_STATE, PART_OF and INFLUENCED_BY edges: a writer
    whose headers drop one of these types (X-Edge-Allow) could not read back what it wrote, so
    it may not write it (cairn.policy.writes.edge_problem; docs/design.md §Policy module)."""
    if scope.unrestricted:
        return
    ids = [factor_id, *influences, *([session_id] if session_id else [])]
    # The factor and influences are visible (checked above); a session is checked when claimed.
    domains = stored_ids(driver, scope, ids).domains
    home = domains.get(factor_id, "")
    edges = [
        ("ABOUT", home, home, "factor_id"),
        ("CURRENT_STATE", home, home, "factor_id"),
        ("PART_OF", home, domains.get(session_id, home) if session_id else home, "session_id"),
        *(("INFLUENCED_BY", home, domains.get(i, ""), "influenced_by") for i in influences),
    ]
    for rel, start, end, field in edges:
        if (problem := edge_problem(scope, rel, start, end)) is not None:
            raise FactorError("INVALID_INPUT", problem.message, field)


def _claim_session(tx: ManagedTransaction, scope: Scope, write: _Write, when: datetime) -> None:
    """Create the entry's session, or take the one stored under its id, inside the write
    transaction: checked there, a session another writer creates between any earlier look and
    this write cannot slip through (``queries.CLAIM_SESSION``). Seen through the caller's scope,
    an id it cannot read is taken and nothing more is said; an entry takes its factor's access,
    so one filed under a session some of its readers may not see would show them that session's
    id (``cairn.policy.writes.less_visible``). A refusal rolls the transaction back."""
    is_session = tx.run(
        queries.CLAIM_SESSION,
        factor=write.factor_id,
        session_id=write.session_id,
        timestamp=when,
        session_title=write.session_title,
    ).single(strict=True)["is_session"]
    if hidden_ids(tx, scope, [write.session_id]):
        raise FactorError("INVALID_INPUT", f"session_id '{write.session_id}' {TAKEN_ID}", "session_id")
    if not is_session:
        raise FactorError("INVALID_INPUT", "session_id names something that is not a session", "session_id")
    if less_visible(tx, write.factor_id, [write.session_id]):
        raise FactorError(
            "INVALID_INPUT",
            f"session_id '{write.session_id}' names a session some readers of factor '{write.factor_id}'"
            " may not see; choose another id",
            "session_id",
        )


def _entry_text(name: str, rationale: str, excerpt: str) -> str:
    return f"{name}: {rationale}. {excerpt}".strip()


def _write_entry(
    driver: Driver, scope: Scope, write: _Write, name: str, embedder: Embedder | None
) -> JournalEntryView:
    entry_id = f"je-{uuid.uuid4().hex[:16]}"
    model = embedder or get_embedder()
    vector = [float(x) for x in model.embed([_entry_text(name, write.rationale, write.excerpt)])[0]]

    def work(tx: ManagedTransaction) -> str:
        row = tx.run(queries.LOCK_FACTOR, {**scope.cypher_params(), "factor": write.factor_id}).single()
        if row is None:
            raise unknown_factor(write.factor_id)
        factor = dict(row["factor"])
        last = native(factor.get("last_updated"))
        # "now" is read under the lock, so concurrent writers get ordered timestamps.
        when = write.timestamp or max(datetime.now(UTC), last or datetime.now(UTC))
        if last is not None and when < last:
            raise FactorError(
                "INVALID_INPUT",
                f"timestamp {when.isoformat()} predates the factor's latest entry "
                f"({last.isoformat()}); the journal is append-only",
                "timestamp",
            )
        _claim_session(tx, scope, write, when)
        previous = factor.get("current_value")
        props = {
            "op": write.op,
            "previous_value": None if previous is None else fmt(previous),
            "new_value": fmt(write.value),
            "previous_number": previous,
            "new_number": float(write.value),
            "previous_confidence": factor.get("current_confidence"),
            "rationale": write.rationale.strip(),
            "excerpt": write.excerpt,
            "confidence": float(write.confidence),
            "session_id": write.session_id,
            "inference_status": write.status,
            "details": json.dumps(write.details, sort_keys=True),
            "seq": int(factor.get("journal_seq") or 0) + 1,
            "embedding": vector,
            "embedding_model": model.name,
        }
        tx.run(
            queries.WRITE_ENTRY,
            factor=write.factor_id,
            entry_id=entry_id,
            props=props,
            timestamp=when,
            session_id=write.session_id,
            session_title=write.session_title,
            influenced_by=list(write.influenced_by),
        ).consume()
        return entry_id

    with driver.session() as session:
        session.execute_write(work)
    written = get_entry(driver, scope, entry_id)
    if written is None:  # the writer could see the factor a moment ago; this is a real fault
        raise RuntimeError("journal entry vanished after commit")
    return written


def update_factor(
    driver: Driver,
    scope: Scope,
    factor_id: str,
    value: float,
    *,
    rationale: str,
    confidence: float,
    excerpt: str = "",
    influenced_by: Sequence[str] = (),
    session_id: str | None = None,
    session_title: str = "",
    status: str = "unconfirmed",
    timestamp: datetime | None = None,
    op: str = "update",
    details: dict[str, Any] | None = None,
    embedder: Embedder | None = None,
) -> JournalEntryView:
    """Journal a new value for a factor and make it the factor's current state (one transaction).

    Raises:
        FactorError: NOT_FOUND for an unknown or unseen factor; INVALID_INPUT for a value outside
            the scale, confidence outside 0-1, a missing rationale, or an out-of-order timestamp.
            Nothing is written in either case.
    """
    name = _check_inputs(
        driver,
        scope,
        factor_id,
        float(value),
        confidence,
        rationale,
        excerpt,
        status,
        influenced_by,
        session_id,
        op,
    )
    when = aware(timestamp, "timestamp") if timestamp is not None else None
    write = _Write(
        factor_id=factor_id,
        op=op,
        value=float(value),
        confidence=float(confidence),
        rationale=rationale,
        excerpt=excerpt,
        status=status,
        influenced_by=tuple(dict.fromkeys(influenced_by)),
        # Not named after the time: a session's id is shown wherever the session is, the entry's
        # time only where its rule shows it.
        session_id=session_id or f"session-{uuid.uuid4().hex[:16]}",
        session_title=session_title or "ad-hoc update",
        timestamp=when,
        details=details or {},
    )
    return _write_entry(driver, scope, write, name, embedder)


def confirm_factor(
    driver: Driver,
    scope: Scope,
    factor_id: str,
    value: float | None = None,
    *,
    excerpt: str = "",
    session_id: str | None = None,
    timestamp: datetime | None = None,
    embedder: Embedder | None = None,
) -> JournalEntryView:
    """The user confirms the inferred value (confidence +0.1, status confirmed) or corrects it.

    A correction is journalled as op ``correct`` with confidence 0.95 and status ``user_provided``;
    a confirmation is journalled too (op ``confirm``), because it changes confidence and status
    and the as-of view must be able to replay that.
    """
    state = factor_state(driver, scope, factor_id)
    # A confirmation raises the stored confidence, a correction quotes the stored value, and which
    # one it is depends on that value.
    readable_for_write(state, ("current_value",), "confirm or correct")
    if value is None or value == state.value:  # a confirmation: the value is readable by now
        readable_for_write(state, ("current_confidence",), "confirm or correct")
    if value is not None and value != state.value:
        return update_factor(
            driver,
            scope,
            factor_id,
            value,
            rationale=f"User corrected from {fmt(state.value)} to {fmt(value)}",
            confidence=CORRECTION_CONFIDENCE,
            excerpt=excerpt or "User explicitly provided correction",
            session_id=session_id,
            status="user_provided",
            timestamp=timestamp,
            op="correct",
            embedder=embedder,
        )
    if state.value is None:
        raise FactorError("INVALID_INPUT", f"factor '{factor_id}' has no value to confirm yet", "value")
    return update_factor(
        driver,
        scope,
        factor_id,
        state.value,
        rationale=f"User confirmed {fmt(state.value)}",
        confidence=min(1.0, round((state.confidence or 0.0) + CONFIRM_BOOST, 3)),
        excerpt=excerpt or "User confirmed the inferred value",
        session_id=session_id,
        status="confirmed",
        timestamp=timestamp,
        op="confirm",
        embedder=embedder,
    )


@dataclass(frozen=True)
class Recalculation:
    factor_id: str
    previous_value: float | None
    previous_confidence: float | None
    value: float | None
    confidence: float | None
    evidence_count: int
    weights: dict[str, float]
    contradictions: tuple[Contradiction, ...]
    entry: JournalEntryView | None  # None when nothing changed (nothing written)
    answer: str

    def evidence(self) -> dict[str, Any]:
        return {
            "factor_id": self.factor_id,
            "previous_value": self.previous_value,
            "previous_confidence": self.previous_confidence,
            "value": self.value,
            "confidence": self.confidence,
            "evidence_count": self.evidence_count,
            "weights": self.weights,
            "contradictions": [c.evidence() for c in self.contradictions],
            "rule": RULE_TEXT,
            "entry": None if self.entry is None else self.entry.evidence(),
        }


def recalculate_factor(
    driver: Driver,
    scope: Scope,
    factor_id: str,
    *,
    timestamp: datetime | None = None,
    embedder: Embedder | None = None,
) -> Recalculation:
    """Re-derive value and confidence from all evidence with the documented rule (recalculation.py).

    The result is journalled as op ``recalculate`` only when value or confidence changes; the
    contradictions found are reported either way (and stored in the entry's details).
    """
    state = factor_state(driver, scope, factor_id)
    # It compares the result with the stored value and confidence, and writes over both.
    readable_for_write(state, ("current_value", "current_confidence"), "recalculate")
    entries = history(driver, scope, factor_id, limit=10_000, ops=EVIDENCE_OPS)
    evidence = [
        Evidence(
            e.id, e.timestamp, e.new_value, e.confidence if e.confidence is not None else 0.0, e.excerpt or ""
        )
        for e in entries
        # Only what the caller sees is evidence: an entry whose time or value its scope hides
        # cannot be weighed without telling them (docs/design.md §Policy module).
        if e.new_value is not None and e.timestamp is not None
    ]
    result = synthesise(evidence, scale_for_write(state))
    if result is None:
        return Recalculation(
            factor_id,
            state.value,
            state.confidence,
            state.value,
            state.confidence,
            0,
            {},
            (),
            None,
            f"{state.label} has no journalled evidence to recalculate from.",
        )
    changed = (
        state.value != result.value
        or state.confidence is None
        or abs(state.confidence - result.confidence) >= 0.001
    )
    contradiction_text = (
        f" {len(result.contradictions)} contradicting pair(s) lowered confidence."
        if result.contradictions
        else " The evidence is consistent."
    )
    answer = (
        f"From {len(evidence)} entries, {state.label} comes to {fmt(result.value)} "
        f"with confidence {result.confidence:.2f} (was {fmt(state.value)} at "
        f"{'n/a' if state.confidence is None else f'{state.confidence:.2f}'})." + contradiction_text
    )
    entry = None
    if changed:
        status = state.status if state.value == result.value and state.status else "unconfirmed"
        entry = update_factor(
            driver,
            scope,
            factor_id,
            result.value,
            rationale=f"Recalculated from {len(evidence)} journal entries; "
            f"{len(result.contradictions)} contradiction(s)",
            confidence=result.confidence,
            excerpt="",
            status=status,
            timestamp=timestamp,
            op="recalculate",
            session_title="recalculation",
            details={
                "rule": RULE_TEXT,
                "weights": result.weights,
                "spread": result.spread,
                "contradictions": [c.evidence() for c in result.contradictions],
            },
            embedder=embedder,
        )
    return Recalculation(
        factor_id=factor_id,
        previous_value=state.value,
        previous_confidence=state.confidence,
        value=result.value,
        confidence=result.confidence,
        evidence_count=len(evidence),
        weights=result.weights,
        contradictions=result.contradictions,
        entry=entry,
        answer=answer,
    )
