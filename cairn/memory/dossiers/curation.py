"""Curation (docs/design.md §Curation): merge, archive, cross-link, related dossiers and JSON export.

Every change takes the routing lock (so no packet is appended to a dossier while it is being
merged or archived) and is journalled ABOUT each dossier it touches. A merge moves the
source's facts to the target, keeps both histories (the source's history reads on in the
target's), marks the source ``merged`` with ``merged_into``, and journals one ``merged``
entry about both. Two dossiers can be merged or linked only when their access fields are
equal, so neither operation can move text across a visibility boundary. A caller writing on
its own behalf (``writer``) can only touch dossiers its profile covers; others read as absent.
Nor may it change a field its field rules hide: a merge, an archive or a link that must set or
read one (``status``, ``merged_into``, the access fields a merge or a link compares, the ``op``
of the journal entry that records it) is refused, and the ``last_updated`` and ``summary`` they
refresh keep their stored values where hidden (``cairn.policy.writes``; docs/design.md §Policy module).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from neo4j import Driver, ManagedTransaction

from cairn.errors import CairnError
from cairn.graph import dossiers as cypher
from cairn.graph.dossiers import index_score
from cairn.memory.dossiers.journal import Entry, write_entries
from cairn.memory.dossiers.lock import keyed_lock, take_lock
from cairn.memory.dossiers.models import Access
from cairn.memory.dossiers.retriever import get_dossier
from cairn.memory.dossiers.summary import SUMMARY_PARAMS, centroid_sum
from cairn.memory.dossiers.voting import VOTE_THRESHOLD
from cairn.policy.preselector import mask
from cairn.policy.scope import Scope
from cairn.policy.writes import kept_on_update, unreadable_set_problems


class CurationError(CairnError, ValueError):
    """A merge, archive or link that cannot be done (the message says why)."""

    def __init__(self, message: str) -> None:
        super().__init__("DOSSIER_CONFLICT", message)


@dataclass(frozen=True)
class CurationResult:
    op: str
    dossier_ids: tuple[str, ...]
    moved_facts: tuple[str, ...] = ()
    already_done: bool = False

    def as_json(self) -> dict[str, Any]:
        return {
            "op": self.op,
            "dossier_ids": list(self.dossier_ids),
            "moved_facts": list(self.moved_facts),
            "already_done": self.already_done,
        }


def _load(
    tx: ManagedTransaction, ids: list[str], writer: Scope | None, edges: tuple[str, ...] = ("ABOUT",)
) -> dict[str, dict[str, Any]]:
    """The dossiers' rows; one that is absent, or outside ``writer``'s profile, is "no dossier".
    The change journals ABOUT them (a merge also moves HAS_FACT): a writer that could not walk
    those edges back may not make it."""
    found = {r["id"]: r.data() for r in tx.run(cypher.LOAD_DOSSIER_ACCESS, ids=ids)}
    missing = [
        i for i in ids if i not in found or (writer is not None and _access(found[i]).problems_for(writer))
    ]
    if missing:
        raise CurationError(f"no dossier {missing[0]!r}")
    for i in ids:
        _access(found[i]).check_writer(writer, "dossier change", edges=edges)
    return found


def _unreadable(
    rows: dict[str, dict[str, Any]],
    needs: dict[str, tuple[str, ...]],
    writer: Scope | None,
    what: str,
    label: str = "Dossier",
) -> None:
    """A writer whose field rules hide a field the change sets or reads (``needs``: dossier id ->
    fields of the dossier, or of its journal entries (``label``), which carry its domain;
    ``status`` is read into errors and set) may not make it: refused in words that depend on its
    rules alone, before any status is read (docs/design.md §Policy module, "Updates leave
    alone what the writer cannot read")."""
    if writer is None:
        return
    for did, fields in needs.items():
        problems = unreadable_set_problems(writer, label, rows[did]["domain"], fields, what)
        if problems:
            raise CurationError(f"cannot {what}: {problems[0].message}")


def _kept(writer: Scope | None, row: dict[str, Any], fields: tuple[str, ...]) -> frozenset[str]:
    """Of the dossier fields a change refreshes as a side effect (``last_updated``, ``summary``),
    those the writer may not read: left as stored (``cairn.policy.writes.kept_on_update``)."""
    return frozenset() if writer is None else kept_on_update(writer, "Dossier", [row["domain"]], fields)


def _access(row: dict[str, Any]) -> Access:
    return Access(
        domain=row["domain"],
        sensitivity=row["sensitivity"],
        namespaces=tuple(row["namespaces"] or ()),
        roles_allowed=tuple(row["roles_allowed"] or ()),
    )


# What ``_same_access`` compares: a merge or a link reads them, so a writer whose field rules
# hide one of them may make neither (``_unreadable``), else "different access fields" would tell
# it that the hidden field differs (docs/design.md §Policy module).
ACCESS_FIELDS = ("domain", "sensitivity", "namespaces", "roles_allowed")
# A merge or a link finds a unit done by its journal entry (``alreadyDone``) and writes one of op
# ``merged`` or ``linked``: a writer whose rules hide an entry's op would learn, or set, one.
ENTRY_FIELDS = ("op",)


def _same_access(a: dict[str, Any], b: dict[str, Any], what: str) -> Access:
    if _access(a) != _access(b):
        raise CurationError(f"cannot {what} dossiers with different access fields")
    return _access(a)


def _write(driver: Driver, work: Any, *args: Any) -> CurationResult:
    with driver.session() as session:
        result: CurationResult = session.execute_write(work, *args)
    return result


def _merge(
    tx: ManagedTransaction, source: str, target: str, rationale: str | None, writer: Scope | None
) -> CurationResult:
    key, applied = keyed_lock(tx, "merge", source, target)
    done = applied is not None
    rows = _load(tx, [source, target], writer, ("ABOUT", "HAS_FACT"))  # before anything is said about them
    needs = {source: ("status", "merged_into", *ACCESS_FIELDS), target: ("status", *ACCESS_FIELDS)}
    _unreadable(rows, needs, writer, "merge")
    _unreadable(rows, {source: ENTRY_FIELDS, target: ENTRY_FIELDS}, writer, "merge", "JournalEntry")
    if done:
        return CurationResult("merged", (target, source), already_done=True)
    for did in (source, target):
        if rows[did]["status"] != "active":
            raise CurationError(f"dossier {did!r} is {rows[did]['status']}, not active")
    access = _same_access(rows[source], rows[target], "merge")
    after = tx.run(cypher.MOVE_FACTS, source=source, target=target).single(strict=True)
    moved = [str(i) for i in after["moved"]]
    total = centroid_sum(after["fact_vectors"])  # the target's, over all its facts now
    now = datetime.now(UTC).isoformat()
    kept_source = _kept(writer, rows[source], ("last_updated",))
    kept_target = _kept(writer, rows[target], ("last_updated", "summary"))
    record = tx.run(
        cypher.MARK_MERGED,
        source=source,
        target=target,
        now=now,
        keep_source=sorted(kept_source),
        keep_target=sorted(kept_target),
        centroid_sum=None if total is None else [float(x) for x in total],
        **SUMMARY_PARAMS,
    ).single(strict=True)
    entries = [
        Entry(
            "merged",
            (target, source),
            previous_value=source,
            new_value=target,
            rationale=rationale or "merged by an operator",
            details={"source": source, "target": target, "moved_fact_ids": moved},
        ),
        Entry("summary_updated", (target,), rationale=f"{len(moved)} fact(s) merged in", summary_of=target),
    ]
    write_entries(tx, key, entries, access, now, {target: (record["previous"], record["summary"])})
    return CurationResult("merged", (target, source), tuple(moved))


def merge_dossiers(
    driver: Driver, source_id: str, target_id: str, rationale: str | None = None, writer: Scope | None = None
) -> CurationResult:
    """Move every fact of ``source_id`` into ``target_id``; the source stays, marked ``merged``."""
    if source_id == target_id:
        raise CurationError("cannot merge a dossier into itself")
    return _write(driver, _merge, source_id, target_id, rationale, writer)


def _archive(
    tx: ManagedTransaction, dossier_id: str, rationale: str | None, writer: Scope | None
) -> CurationResult:
    take_lock(tx)
    rows = _load(tx, [dossier_id], writer)
    _unreadable(rows, {dossier_id: ("status",)}, writer, "archive")
    row = rows[dossier_id]
    if row["status"] == "archived":
        return CurationResult("archived", (dossier_id,), already_done=True)
    if row["status"] != "active":
        raise CurationError(f"dossier {dossier_id!r} is {row['status']}; only active dossiers are archived")
    now = datetime.now(UTC).isoformat()
    keep = sorted(_kept(writer, row, ("last_updated",)))
    tx.run(cypher.MARK_ARCHIVED, id=dossier_id, now=now, keep=keep).consume()
    entry = Entry(
        "archived", (dossier_id,), previous_value="active", new_value="archived", rationale=rationale
    )
    write_entries(tx, secrets.token_hex(10), [entry], _access(row), now)  # no unit to recognise
    return CurationResult("archived", (dossier_id,))


def archive_dossier(
    driver: Driver, dossier_id: str, rationale: str | None = None, writer: Scope | None = None
) -> CurationResult:
    """Archive: the dossier keeps its facts and history but receives no packets and leaves search."""
    return _write(driver, _archive, dossier_id, rationale, writer)


def _link(
    tx: ManagedTransaction, a: str, b: str, rationale: str | None, writer: Scope | None
) -> CurationResult:
    first, second = sorted((a, b))
    key, applied = keyed_lock(tx, "link", first, second)
    done = applied is not None
    rows = _load(tx, [first, second], writer)  # before anything is said about them
    _unreadable(rows, {first: ACCESS_FIELDS, second: ACCESS_FIELDS}, writer, "link")
    _unreadable(rows, {first: ENTRY_FIELDS, second: ENTRY_FIELDS}, writer, "link", "JournalEntry")
    if done:
        return CurationResult("linked", (first, second), already_done=True)
    access = _same_access(rows[first], rows[second], "link")
    now = datetime.now(UTC).isoformat()
    entry = Entry(
        "linked", (first, second), rationale=rationale or "related", details={"dossiers": [first, second]}
    )
    write_entries(tx, key, [entry], access, now)
    return CurationResult("linked", (first, second))


def link_dossiers(
    driver: Driver, a: str, b: str, rationale: str | None = None, writer: Scope | None = None
) -> CurationResult:
    """Record that two dossiers are related: one ``linked`` journal entry ABOUT both."""
    if a == b:
        raise CurationError("cannot link a dossier to itself")
    return _write(driver, _link, a, b, rationale, writer)


def related_dossiers(
    driver: Driver, scope: Scope, dossier_id: str, top_k: int = 5, threshold: float = VOTE_THRESHOLD
) -> list[dict[str, Any]]:
    """Dossiers related to this one: explicit links first, then by multi-vector vote of its facts.

    Both are computed over what the scope may see only.
    """
    params = {**scope.cypher_params(), "id": dossier_id}
    linked, _, _ = driver.execute_query(cypher.LINKED_DOSSIERS, params)
    voted, _, _ = driver.execute_query(
        cypher.RELATED_BY_FACTS,
        {**params, "min_score": index_score(threshold), "top_k": top_k, "statuses": ["active"]},
    )
    out: list[dict[str, Any]] = [
        {
            "id": r["id"],
            "title": _shown(r["props"], scope),
            "linked": True,
            "rationale": _rationale(r["entry"], scope),
        }
        for r in linked
    ]
    seen = {o["id"] for o in out}
    out += [
        {
            "id": r["id"],
            "title": _shown(r["props"], scope),
            "linked": False,
            "hits": r["hits"],
            "score_sum": round(r["score_sum"], 4),
        }
        for r in voted
        if r["id"] not in seen
    ]
    return out


def _shown(props: dict[str, Any], scope: Scope) -> Any:
    """A related dossier's title as the scope reads it: null where its rule, or the fact text it
    is written from, is masked (``cairn.policy.preselector.mask``, as ``dossier`` reads it)."""
    return mask("Dossier", props, scope)[0].get("title")


def _rationale(entry: dict[str, Any], scope: Scope) -> Any:
    """A link's rationale where the scope may read its journal entry's ``rationale``."""
    return mask("JournalEntry", entry, scope)[0].get("rationale")


EXPORT_FORMAT = "cairn.dossier/1"


def export_dossier(driver: Driver, scope: Scope, dossier_id: str) -> dict[str, Any] | None:
    """The dossier with its facts, history and related dossiers as one JSON document (None if hidden)."""
    view = get_dossier(driver, scope, dossier_id)
    if view is None:
        return None
    return {
        "format": EXPORT_FORMAT,
        "exported_at": datetime.now(UTC).isoformat(),
        "dossier": view.fields,
        "facts": view.facts,
        "history": view.history,
        "related": related_dossiers(driver, scope, dossier_id),
    }
