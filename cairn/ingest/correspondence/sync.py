"""Append-only sync of a correspondence file into ``Section`` nodes (SPEC §9, docs/design.md §Correspondence).

The markdown is the source of truth and is only ever read. A section's identity is its
source name and its position in the file (``source``, ``ordinal``); its id is random
(``section:<hex>``), so an id tells a reader nothing about the order or the hidden sections;
its content hash says whether the stored copy still matches the file. So a sync:

- parses and validates the whole file first (a refused file writes nothing);
- creates only sections the store does not have, in file order, each with canonical
  ``section_number`` = the store's current maximum + 1, its filed number kept as
  ``filed_id``/``filed_number`` and ``collision`` set when the two differ (logged to the
  collision log, never corrected in the markdown);
- never rewrites a stored section: one whose text or access changed in the file, one that
  disappeared from it, and a "new" section that repeats a stored one (an insertion
  shifted the file) are reported as conflicts and not applied; appends still go in;
- embeds only the title and body without tags and decisions, recording the model name;
  a text longer than the model's window (256 word pieces) is truncated, never chunked:
  one section, one vector, covering its title and opening (docs/design.md §What is embedded).

Embedding dominates a full sync, so it runs at the model's own speed: sections are embedded
in windows of ``CAIRN_CORRESPONDENCE_EMBED_WINDOW`` sections (512) in file order (the model sorts
each window by length, so batches pad little), and window n+1 is embedded in a worker thread
while window n is written in transactions of ``CAIRN_CORRESPONDENCE_WRITE_BATCH`` sections
(256). Each transaction still holds whole sections only, in file order, so a kill mid-sync
leaves a prefix of the new sections and the next sync goes on from it.

Two syncs of one source may run at once (the CLI, the watcher, callers of the GraphQL
mutation): each compares its file with the store, embeds, and only then writes. Every write
transaction therefore first takes one lock (``TAKE_SECTIONS_LOCK``), then reads the canonical
maximum and the source's state, and checks that state against what the file was compared with
(``_Place``): a section the writer may read that appeared in the meantime refuses the rest of
the sync (``SyncRaceError``, ``CONFLICT_RETRY``: run it again to compare the file with it), a
section it may not read only moves its new sections' ordinals past it, unseen. So two appends
both land or the second is told, never dropped in silence, and a hidden section's arrival
changes nothing a narrowed writer is told (docs/design.md §Numbering collisions).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
from neo4j import Driver, ManagedTransaction, RoutingControl
from numpy.typing import NDArray

from cairn.errors import CairnError
from cairn.graph.correspondence import (
    COUNT_STALE,
    CREATE_SECTIONS,
    FIND_EXISTING,
    LINK_RESPONSES,
    OWN_NUMBERS,
    READ_COLLISIONS,
    READ_MAX,
    READ_STALE,
    READ_STORED,
    SECTIONS_LOCK,
    SOURCE_STATE,
    TAKE_SECTIONS_LOCK,
    WRITE_EMBEDDINGS,
)
from cairn.ingest.correspondence import collisions
from cairn.ingest.correspondence.parser import (
    DEFAULT_ACCESS,
    Access,
    CorrespondenceError,
    Issue,
    ParsedSection,
    parse_bytes,
)
from cairn.memory.correspondence import Numbering
from cairn.policy.scope import Scope
from cairn.policy.writes import create_problems, edges_problems
from cairn.runtime.embedder import MODEL_NAME, Embedder, get_embedder
from cairn.runtime.settings import get_settings
from cairn.schema.section_text import embeddable_text

SOURCE_PATTERN = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}$")

Progress = Callable[[str, int, int], None]  # (stage, done, total)


class SyncRaceError(CairnError, RuntimeError):
    """Another sync added a section the writer may read while its file was being synced: the
    rest is not written, and running again compares the file with that section."""

    def __init__(self, message: str) -> None:
        super().__init__("CONFLICT_RETRY", message)


@dataclass(frozen=True)
class Conflict:
    """A stored section the file now contradicts; reported, never applied."""

    ordinal: int
    line: int | None
    filed_id: str
    kind: str  # edited | access_changed | missing | duplicate
    detail: str

    def __str__(self) -> str:
        where = f"line {self.line}" if self.line else f"section #{self.ordinal}"
        return f"{where} ({self.filed_id}): {self.kind}: {self.detail}"


@dataclass(frozen=True)
class CreatedSection:
    id: str
    ordinal: int
    section_number: int
    filed_id: str
    filed_number: int
    collision: bool
    line: int


@dataclass
class SyncReport:
    source: str
    path: str
    file_sha256: str
    sections_in_file: int
    unchanged: int
    embedding_model: str
    created: list[CreatedSection] = field(default_factory=list)
    conflicts: list[Conflict] = field(default_factory=list)
    warnings: list[Issue] = field(default_factory=list)
    collisions_logged: int = 0
    stale_embeddings: int = 0

    @property
    def collisions(self) -> list[CreatedSection]:
        return [c for c in self.created if c.collision]


def new_section_id() -> str:
    """An opaque id for a new section: random, so it says nothing about the file's order.

    A section is found again by (source, ordinal), never by its id; an id built from the
    ordinal would tell a reader who may not see every section how many are hidden, and where.
    """
    return f"section:{uuid.uuid4().hex}"


def source_name(path: Path) -> str:
    """The default source name of a file: its stem as a lower-case slug."""
    slug = re.sub(r"[^a-z0-9]+", "-", path.stem.lower()).strip("-")[:64]
    return slug or "correspondence"


def check_source(source: str) -> str:
    if not SOURCE_PATTERN.fullmatch(source):  # not match: "$" also matches before a final newline
        raise ValueError(f"source name '{source}' must be a lower-case slug (a-z, 0-9, '-'; at most 64)")
    return source


def _access_of(row: dict[str, Any]) -> Access:
    return Access(
        domain=row["domain"],
        sensitivity=row["sensitivity"],
        namespaces=tuple(row["namespaces"] or ()),
        roles_allowed=tuple(row["roles_allowed"] or ()),
    )


def classify(
    sections: Sequence[ParsedSection], stored: dict[int, dict[str, Any]]
) -> tuple[int, list[ParsedSection], list[Conflict]]:
    """(unchanged count, sections to create, conflicts) — pure, so it is tested without a DB."""
    unchanged = 0
    fresh: list[ParsedSection] = []
    conflicts: list[Conflict] = []
    stored_hashes = {row["hash"]: ordinal for ordinal, row in stored.items()}
    for s in sections:
        row = stored.get(s.ordinal)
        if row is None:
            twin = stored_hashes.get(s.content_hash)
            if twin is None:
                fresh.append(s)
            else:
                conflicts.append(
                    Conflict(
                        s.ordinal,
                        s.line,
                        s.filed_id,
                        "duplicate",
                        f"repeats stored section #{twin}: was a section inserted or moved? not applied",
                    )
                )
        elif row["hash"] != s.content_hash:
            conflicts.append(
                Conflict(
                    s.ordinal,
                    s.line,
                    s.filed_id,
                    "edited",
                    f"differs from the stored section #{s.ordinal} (filed {row['filed_id']}); "
                    "sections are append-only, the edit is not applied",
                )
            )
        elif _access_of(row) != s.access:
            conflicts.append(
                Conflict(
                    s.ordinal,
                    s.line,
                    s.filed_id,
                    "access_changed",
                    "its access fields differ from the stored ones; not applied",
                )
            )
        else:
            unchanged += 1
    conflicts.extend(
        Conflict(o, None, stored[o]["filed_id"], "missing", "stored section is no longer in the file; kept")
        for o in sorted(set(stored) - {s.ordinal for s in sections})
    )
    return unchanged, fresh, conflicts


def _props(s: ParsedSection, source: str, embedding: list[float], model: str) -> dict[str, Any]:
    return {
        "source": source,
        "ordinal": s.ordinal,
        "source_line": s.line,
        "content_hash": s.content_hash,
        "filed_id": s.filed_id,
        "filed_number": s.filed_number,
        "title": s.title,
        "author": s.author,
        "is_external_caller": s.is_external_caller,
        "date": s.date,
        "body": s.body,
        "exec_tags": list(s.exec_tags),
        "exec_decisions": list(s.exec_decisions),
        "status_tags": list(s.status_tags),
        "responds_to_filed": list(s.references),
        "knowledge_refs": list(s.knowledge_refs),
        "domain": s.access.domain,
        "sensitivity": s.access.sensitivity,
        "namespaces": list(s.access.namespaces),
        "roles_allowed": list(s.access.roles_allowed),
        "embedding": embedding,
        "embedding_model": model,
    }


@dataclass
class _Place:
    """Where a sync's new sections go, as its file was compared with the store.

    ``start`` is the source's last ordinal then (hidden sections included): planned ordinals past
    it are new. ``visible`` counts the source's sections the writer may read (those its file was
    compared with, and those it created since), ``end`` is the last ordinal as last seen,
    ``offset`` how far sections it may not read, appended since, moved its new ones, and
    ``placed`` maps each planned ordinal this sync created to the ordinal it was stored at.

    A race is told by the *count* of readable sections, which holds because stored sections are
    never deleted and never change access. A transaction the driver retries after a commit whose
    acknowledgement was lost sees its own batch as a racing append and refuses (CONFLICT_RETRY,
    nothing duplicated); the re-run of the sync then finds that batch stored and goes on.
    """

    start: int
    visible: int
    end: int
    offset: int = 0
    placed: dict[int, int] = field(default_factory=dict)


def _write_batch(
    tx: ManagedTransaction,
    scope: Scope,
    source: str,
    batch: list[tuple[ParsedSection, dict[str, Any]]],
    place: _Place,
) -> tuple[list[CreatedSection], dict[int, int], int, int]:
    """Under the sections lock: check the source, number and place the batch, create it and link
    its responses. Returns (created, planned -> stored ordinal, the source's new last ordinal,
    the offset now); ``place`` itself is left as it was, as the transaction may be retried."""
    tx.run(TAKE_SECTIONS_LOCK, lock=SECTIONS_LOCK).consume()
    state = tx.run(SOURCE_STATE, {**scope.cypher_params(), "source": source}).single(strict=True)
    if int(state["visible"]) != place.visible:
        done = len(place.placed)
        raise SyncRaceError(
            f"source '{source}' changed while this sync ran: another sync added a section you may "
            f"read; {done} new section(s) of this file were stored before it, the rest not; "
            "sync again to compare the file with it"
        )
    end = int(state["end"])
    offset = place.offset + end - place.end  # hidden sections appended since, if any

    def stored_at(planned: int) -> int:
        if planned in place.placed:  # created by an earlier batch of this sync
            return place.placed[planned]
        return planned + offset if planned > place.start else planned

    placed = {s.ordinal: stored_at(s.ordinal) for s, _ in batch}
    targets = sorted({stored_at(t) for s, _ in batch for t in s.responds_to} - set(placed.values()))
    ids = {int(r["ordinal"]): str(r["id"]) for r in tx.run(FIND_EXISTING, source=source, ordinals=targets)}
    top = int(tx.run(READ_MAX).single(strict=True)["top"])
    rows: list[dict[str, Any]] = []
    created: list[CreatedSection] = []
    links: list[dict[str, str]] = []
    for k, (s, props) in enumerate(batch):
        number, ordinal = top + 1 + k, placed[s.ordinal]
        sid = ids[ordinal] = new_section_id()
        collided = s.filed_number != number
        row = {**props, "ordinal": ordinal, "section_number": number, "collision": collided}
        rows.append({"id": sid, "props": row})
        created.append(CreatedSection(sid, ordinal, number, s.filed_id, s.filed_number, collided, s.line))
        links.extend({"from_id": sid, "to_id": ids[t]} for t in map(stored_at, s.responds_to) if t in ids)
    tx.run(CREATE_SECTIONS, rows=rows).consume()
    tx.run(LINK_RESPONSES, {**scope.cypher_params(), "links": links}).consume()
    return created, placed, max(end, *placed.values()), offset


def _write(
    driver: Driver,
    scope: Scope,
    source: str,
    batch: list[tuple[ParsedSection, dict[str, Any]]],
    place: _Place,
) -> list[CreatedSection]:
    with driver.session() as session:
        created, placed, place.end, place.offset = session.execute_write(
            _write_batch, scope, source, batch, place
        )
    place.placed.update(placed)
    place.visible += len(created)  # a writer creates only inside its scope (policy/writes.py)
    return created


def embedded_windows(
    embedder: Embedder, texts: Sequence[str], window: int
) -> Iterator[tuple[int, NDArray[np.float32]]]:
    """(start, vectors) for each window of ``texts`` in order; window n+1 embeds while n is consumed.

    The model runs in one worker thread (ONNX Runtime releases the GIL), so the caller's writes overlap
    the next window's embedding. If the caller stops early, the window in flight is abandoned.
    """
    starts = list(range(0, len(texts), window))
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cairn-embed")
    try:
        pending: Future[NDArray[np.float32]] | None = None
        for i, start in enumerate(starts):
            current = pending or pool.submit(embedder.embed, texts[start : start + window])
            vectors = current.result()
            pending = None
            if i + 1 < len(starts):
                nxt = starts[i + 1]
                pending = pool.submit(embedder.embed, texts[nxt : nxt + window])
            yield start, vectors
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


def sync_bytes(
    driver: Driver,
    data: bytes,
    source: str,
    *,
    collision_log: Path,
    path_label: str | None = None,
    embedder: Embedder | None = None,
    defaults: Access = DEFAULT_ACCESS,
    progress: Progress | None = None,
    writer: Scope | None = None,
) -> SyncReport:
    """Sync the bytes of one correspondence file under ``source``; see the module doc.

    ``writer`` is the scope of a caller syncing on its own behalf (GraphQL): every section's
    access fields must lie inside it, or the file is refused whole; the operator passes none.
    """
    check_source(source)
    label = path_label or source
    parsed = parse_bytes(data, label, defaults)  # raises before anything is written
    scope = writer or Scope.system()
    refused = [
        Issue(s.line, f"access {p.field}: {p.message}")
        for s in parsed.sections
        for p in create_problems(
            scope,
            domain=s.access.domain,
            sensitivity=s.access.sensitivity,
            namespaces=s.access.namespaces,
            roles_allowed=s.access.roles_allowed,
        )
    ]
    refused += [  # a reply is stored as a RESPONDS_TO edge, which the writer must be able to walk
        Issue(s.line, f"responds to: {p.message}")
        for s in parsed.sections
        if s.responds_to
        for p in edges_problems(scope, ["RESPONDS_TO"], s.access.domain)
    ]
    if refused:
        raise CorrespondenceError(label, refused)
    model = embedder.name if embedder else MODEL_NAME  # no model load for a sync with nothing new
    records, _, _ = driver.execute_query(
        READ_STORED, {**scope.cypher_params(), "source": source}, routing_=RoutingControl.READ
    )
    stored = {int(r["ordinal"]): r.data() for r in records}
    state, _, _ = driver.execute_query(
        SOURCE_STATE, {**scope.cypher_params(), "source": source}, routing_=RoutingControl.READ
    )
    place = _Place(start=int(state[0]["end"]), visible=len(stored), end=int(state[0]["end"]))
    to_store = None if scope.unrestricted else _store_ordinals(place.start, sorted(stored))
    if to_store is not None:  # the writer's file is its own view of the source: compare with that
        stored = {i + 1: stored[o] for i, o in enumerate(sorted(stored))}
    unchanged, fresh, conflicts = classify(parsed.sections, stored)
    if to_store is not None:
        fresh = [
            replace(s, ordinal=to_store(s.ordinal), responds_to=tuple(map(to_store, s.responds_to)))
            for s in fresh
        ]
    report = SyncReport(
        source=source,
        path=label,
        file_sha256=parsed.sha256,
        sections_in_file=len(parsed.sections),
        unchanged=unchanged,
        embedding_model=model,
        conflicts=conflicts,
        warnings=list(parsed.warnings),
    )
    if fresh:
        emb = embedder or get_embedder()
        settings = get_settings()
        size = settings.correspondence_write_batch
        texts = [s.embed_text for s in fresh]
        for first, vectors in embedded_windows(emb, texts, settings.correspondence_embed_window):
            for offset in range(0, len(vectors), size):
                stop = min(offset + size, len(vectors))  # a batch never crosses a window
                chunk = fresh[first + offset : first + stop]
                batch = [
                    (s, _props(s, source, v.tolist(), emb.name))
                    for s, v in zip(chunk, vectors[offset:stop], strict=True)
                ]
                report.created.extend(_write(driver, scope, source, batch, place))
                if progress:
                    progress("sync", first + stop, len(fresh))
    collided, _, _ = driver.execute_query(READ_COLLISIONS, source=source, routing_=RoutingControl.READ)
    report.collisions_logged = collisions.record(
        collision_log, [{"source": source, "file": label, **r.data()} for r in collided]
    )
    stale, _, _ = driver.execute_query(
        COUNT_STALE, {**scope.cypher_params(), "model": model}, routing_=RoutingControl.READ
    )
    report.stale_embeddings = int(stale[0]["n"])
    return report if scope.unrestricted else _in_own_numbers(driver, scope, report)


def _store_ordinals(end: int, seen: list[int]) -> Callable[[int], int]:
    """For a writer that may not read every section: its file's positions -> the store's ordinals.

    The file is the writer's view of the source: position k is the k-th stored section it may
    read, and positions past those are appended after the source's end, hidden sections
    included. So a hidden section's place never decides what is created or reported
    (docs/design.md §Correspondence). ``end`` is the source's last ordinal as the file was
    compared; sections appended after it move the new ones further at the write (``_Place``).
    """

    def to_store(position: int) -> int:
        return seen[position - 1] if position <= len(seen) else end + position - len(seen)

    return to_store


def _in_own_numbers(driver: Driver, scope: Scope, report: SyncReport) -> SyncReport:
    """The report as a scoped writer sees the store: its created sections numbered 1..n over the
    sections it may read, a collision against that number, and the collisions counted among them.

    Canonical numbers count every section, so telling the writer its new section is 44 where its
    own tail says 41 would say three are hidden (docs/design.md §Correspondence). The collision log
    keeps the canonical numbers: it is the operator's file.
    """
    records, _, _ = driver.execute_query(OWN_NUMBERS, scope.cypher_params(), routing_=RoutingControl.READ)
    numbering = Numbering.dense(records[0]["numbers"] if records else [])
    ranks = numbering.ranks or {}
    # A writer creates only inside its scope (policy/writes.py), so it reads every section it created.
    own = {c.id: ranks[c.section_number] for c in report.created}
    created = [
        replace(c, section_number=own[c.id], collision=c.filed_number != own[c.id]) for c in report.created
    ]
    return replace(report, created=created, collisions_logged=sum(c.collision for c in created))


def sync_file(
    driver: Driver,
    path: Path,
    *,
    collision_log: Path,
    source: str | None = None,
    embedder: Embedder | None = None,
    defaults: Access = DEFAULT_ACCESS,
    progress: Progress | None = None,
) -> SyncReport:
    """Read ``path`` once (read-only) and sync it; the file itself is never written."""
    return sync_bytes(
        driver,
        path.read_bytes(),
        source or source_name(path),
        collision_log=collision_log,
        path_label=str(path),
        embedder=embedder,
        defaults=defaults,
        progress=progress,
    )


def reembed(
    driver: Driver,
    embedder: Embedder | None = None,
    batch_size: int | None = None,
    progress: Progress | None = None,
) -> int:
    """Re-embed only sections embedded with another model (or none); return how many.

    Only ``embedding`` and ``embedding_model`` change: the section itself stays as filed.
    """
    emb = embedder or get_embedder()
    settings = get_settings()
    batch_size = batch_size or settings.correspondence_write_batch
    records, _, _ = driver.execute_query(READ_STALE, model=emb.name, routing_=RoutingControl.READ)
    rows = [r.data() for r in records]
    done = 0
    texts = [embeddable_text(r["title"] or "", r["body"] or "") for r in rows]
    for first, vectors in embedded_windows(emb, texts, max(batch_size, settings.correspondence_embed_window)):
        for offset in range(0, len(vectors), batch_size):
            stop = min(offset + batch_size, len(vectors))
            chunk = rows[first + offset : first + stop]
            payload = [
                {"id": r["id"], "embedding": v.tolist()}
                for r, v in zip(chunk, vectors[offset:stop], strict=True)
            ]
            driver.execute_query(WRITE_EMBEDDINGS, rows=payload, model=emb.name)
            done += len(chunk)
            if progress:
                progress("reembed", done, len(rows))
    return done
