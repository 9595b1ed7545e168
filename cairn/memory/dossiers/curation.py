"""Curation (docs/design.md §Curation): merge, archive, cross-link, related dossiers and JSON export.

Every change takes the routing lock (so no packet is appended to a dossier while it is being
merged or archived) and is journalled ABOUT each dossier it touches. A merge moves the
source's facts to the target, keeps both histories (the source's history reads on in the
target's), marks the source ``merged`` with ``merged_into``, and journals one ``merged``
entry about both. Two dossiers can be merged or linked only when their access fields are
equal, so neither operation can move text across a visibility boundary. A caller writing on
its own behalf (``writer``) can only touch dossiers its profile covers; others read as absent.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from neo4j import Driver, ManagedTransaction

from cairn.errors import CairnError
from cairn.memory.dossiers.journal import Entry, entry_id, write_entries
from cairn.memory.dossiers.lock import take_lock
from cairn.memory.dossiers.models import Access
from cairn.memory.dossiers.retriever import get_dossier
from cairn.memory.dossiers.summary import CENTRAL_FACTS, CENTROID_FROM_FACTS, SUMMARY_TEXT
from cairn.memory.dossiers.voting import VOTE_THRESHOLD, index_score
from cairn.policy.acl import acl_visible, edge_allowed
from cairn.policy.scope import Scope

LOAD = """
UNWIND $ids AS did
MATCH (d:Dossier {id: did})
RETURN d.id AS id, d.status AS status, d.merged_into AS merged_into,
       d.domain AS domain, d.sensitivity AS sensitivity, d.namespaces AS namespaces,
       d.roles_allowed AS roles_allowed
"""

MOVE_FACTS = """
MATCH (s:Dossier {id: $source})-[r:HAS_FACT]->(f:Fact)
MATCH (t:Dossier {id: $target})
MERGE (t)-[:HAS_FACT]->(f)
DELETE r
RETURN f.id AS id
"""

# After the move: the target's centroid and summary recomputed from all its facts.
MARK_MERGED = f"""
MATCH (s:Dossier {{id: $source}}), (d:Dossier {{id: $target}})
SET s.status = 'merged', s.merged_into = $target, s.last_updated = datetime($now),
    d.last_updated = datetime($now)
WITH d, d.summary AS previous
CALL (d) {{
  {CENTROID_FROM_FACTS}
}}
SET d.centroid_sum = centroid_sum, d.summary_pool = null
WITH d, previous
CALL (d) {{
  {CENTRAL_FACTS}
}}
WITH d, previous, {SUMMARY_TEXT} AS summary
SET d.summary = summary
RETURN previous, summary
"""

MARK_ARCHIVED = """
MATCH (d:Dossier {id: $id})
SET d.status = 'archived', d.last_updated = datetime($now)
"""

RELATED_BY_FACTS = f"""
MATCH (d:Dossier {{id: $id}})-[:HAS_FACT]->(src:Fact)
WHERE {acl_visible("d")} AND {acl_visible("src")} AND src.embedding IS NOT NULL
  AND {edge_allowed("HAS_FACT", "d", "src", "out")}
WITH collect(src.embedding) AS vecs
MATCH (o:Dossier)-[:HAS_FACT]->(f:Fact)
WHERE o.id <> $id AND o.status = 'active' AND f.embedding IS NOT NULL
  AND {acl_visible("o")} AND {acl_visible("f")} AND {edge_allowed("HAS_FACT", "o", "f", "out")}
UNWIND vecs AS v
WITH o, vector.similarity.cosine(f.embedding, v) AS s
WHERE s >= $min_score
WITH o, count(*) AS hits, sum(2 * s - 1) AS score_sum
ORDER BY hits DESC, score_sum DESC, o.id
LIMIT $top_k
RETURN o.id AS id, o.title AS title, hits, score_sum
"""

LINKED = f"""
MATCH (d:Dossier {{id: $id}})<-[:ABOUT]-(j:JournalEntry {{op: 'linked'}})-[:ABOUT]->(o:Dossier)
WHERE o.id <> $id AND {acl_visible("d")} AND {acl_visible("j")} AND {acl_visible("o")}
  AND {edge_allowed("ABOUT", "j", "d", "in")} AND {edge_allowed("ABOUT", "j", "o", "out")}
RETURN DISTINCT o.id AS id, o.title AS title, j.rationale AS rationale
ORDER BY o.id
"""


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


def _key(*parts: str) -> str:
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:20]


def _load(tx: ManagedTransaction, ids: list[str], writer: Scope | None) -> dict[str, dict[str, Any]]:
    """The dossiers' rows; one that is absent, or outside ``writer``'s profile, is "no dossier"."""
    found = {r["id"]: r.data() for r in tx.run(LOAD, ids=ids)}
    missing = [
        i for i in ids if i not in found or (writer is not None and _access(found[i]).problems_for(writer))
    ]
    if missing:
        raise CurationError(f"no dossier {missing[0]!r}")
    return found


def _access(row: dict[str, Any]) -> Access:
    return Access(
        domain=row["domain"],
        sensitivity=row["sensitivity"],
        namespaces=tuple(row["namespaces"] or ()),
        roles_allowed=tuple(row["roles_allowed"] or ()),
    )


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
    key = _key("merge", source, target)
    done = take_lock(tx, entry_id(key, 0)) is not None
    rows = _load(tx, [source, target], writer)  # before anything is said about them
    if done:
        return CurationResult("merged", (target, source), already_done=True)
    for did in (source, target):
        if rows[did]["status"] != "active":
            raise CurationError(f"dossier {did!r} is {rows[did]['status']}, not active")
    access = _same_access(rows[source], rows[target], "merge")
    moved = [r["id"] for r in tx.run(MOVE_FACTS, source=source, target=target)]
    now = datetime.now(UTC).isoformat()
    record = tx.run(MARK_MERGED, source=source, target=target, now=now).single(strict=True)
    previous, summary = record["previous"] or "", record["summary"]
    entries = [
        Entry(
            "merged",
            (target, source),
            previous_value=source,
            new_value=target,
            rationale=rationale or "merged by an operator",
            details={"source": source, "target": target, "moved_fact_ids": moved},
        )
    ]
    if summary != previous:
        entries.append(
            Entry(
                "summary_updated",
                (target,),
                previous_value=previous,
                new_value=summary,
                rationale=f"{len(moved)} fact(s) merged in",
            )
        )
    write_entries(tx, key, entries, access, now)
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
    row = _load(tx, [dossier_id], writer)[dossier_id]
    if row["status"] == "archived":
        return CurationResult("archived", (dossier_id,), already_done=True)
    if row["status"] != "active":
        raise CurationError(f"dossier {dossier_id!r} is {row['status']}; only active dossiers are archived")
    now = datetime.now(UTC).isoformat()
    tx.run(MARK_ARCHIVED, id=dossier_id, now=now).consume()
    entry = Entry(
        "archived", (dossier_id,), previous_value="active", new_value="archived", rationale=rationale
    )
    write_entries(tx, _key("archive", dossier_id, now), [entry], _access(row), now)
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
    key = _key("link", first, second)
    done = take_lock(tx, entry_id(key, 0)) is not None
    rows = _load(tx, [first, second], writer)  # before anything is said about them
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
    linked, _, _ = driver.execute_query(LINKED, params)
    voted, _, _ = driver.execute_query(
        RELATED_BY_FACTS, {**params, "min_score": index_score(threshold), "top_k": top_k}
    )
    out: list[dict[str, Any]] = [
        {"id": r["id"], "title": r["title"], "linked": True, "rationale": r["rationale"]} for r in linked
    ]
    seen = {o["id"] for o in out}
    out += [
        {
            "id": r["id"],
            "title": r["title"],
            "linked": False,
            "hits": r["hits"],
            "score_sum": round(r["score_sum"], 4),
        }
        for r in voted
        if r["id"] not in seen
    ]
    return out


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
