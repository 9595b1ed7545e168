"""Write a validated org-memory fixture set: vertices → transitions → alias overlays.

Every write is an UNWIND over a batch, one managed transaction per batch (retried by
the driver on transient errors). MERGE on ``id`` with ``SET +=`` makes a second run a
no-op, and a run killed mid-way is completed by running it again.

A caller writing on its own behalf (the GraphQL upsert) passes its ``Scope`` as
``writer``: it may create only what it could read, and a stored node it cannot read is
neither overwritten nor joined by an edge — it is reported exactly like a missing one
(``cairn.policy.writes``). Every write query repeats that check in Cypher, so a node
hidden from the writer is skipped even if it appeared after validation. The operator CLI
writes as ``Scope.system()``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from neo4j import Driver, ManagedTransaction

from cairn.graph.org import (
    LOCKED_ALIAS_EXTRA,
    LOCKED_CAUSAL_EXTRA,
    LOCKED_NODE_EXTRA,
    STORED_CAUSAL,
    STORED_EMBEDDINGS,
    STORED_TEXTS,
    UPSERT_ALIASES,
    UPSERT_CAUSAL,
    UPSERT_DECISIONS,
    UPSERT_EVENTS,
)
from cairn.ingest.fixtures import (
    FixtureError,
    FixtureSet,
    Problem,
    check_references,
    chronology_warnings,
    parse_fixture_dir,
    parse_payload,
)
from cairn.ingest.records import DecisionRecord, EventRecord, iso_utc
from cairn.policy.profiles import PolicyRegistry, matches
from cairn.policy.scope import Scope
from cairn.policy.writes import (
    TAKEN_ID,
    create_problems,
    domain_problem,
    edge_problem,
    extra_problems,
    kept_on_update,
    merged_extra,
    readable_by_some_role,
    readable_extra_keys,
    stored_ids,
)
from cairn.runtime.embedder import Embedder, get_embedder
from cairn.runtime.settings import get_settings

EMBED_BATCH = 64

Progress = Callable[[str, int], None]


@dataclass(frozen=True)
class Counts:
    created: int = 0
    updated: int = 0

    def __add__(self, other: Counts) -> Counts:
        return Counts(self.created + other.created, self.updated + other.updated)


@dataclass(frozen=True)
class IngestReport:
    decisions: int
    events: int
    causal_edges: int
    aliases: int
    nodes: Counts = Counts()
    edges: Counts = Counts()
    warnings: tuple[Problem, ...] = ()

    @property
    def nodes_unchanged(self) -> int:
        return self.decisions + self.events - self.nodes.created - self.nodes.updated

    @property
    def edges_unchanged(self) -> int:
        return self.causal_edges + self.aliases - self.edges.created - self.edges.updated


def _access(r: Any) -> dict[str, Any]:
    return {
        "domain": r.domain,
        "sensitivity": r.sensitivity,
        "namespaces": list(r.namespaces),
        "roles_allowed": list(r.roles_allowed),
        "x_extra": json.dumps(r.x_extra, sort_keys=True),
        "tags": list(r.tags),
        "importance": r.importance,
    }


def decision_rows(fs: FixtureSet) -> list[dict[str, Any]]:
    return [
        {
            "id": d.id,
            "timestamp": iso_utc(d.timestamp),
            "props": {
                **_access(d),
                "option": d.option,
                "rationale": d.rationale,
                "decision_maker": d.decision_maker,
            },
        }
        for d in fs.decisions
    ]


def event_rows(fs: FixtureSet) -> list[dict[str, Any]]:
    return [
        {
            "id": e.id,
            "timestamp": iso_utc(e.timestamp),
            "props": {
                **_access(e),
                "summary": e.summary,
                "description": e.description,
                "snippet": e.snippet,
                "alias_of_decision": e.alias_of_decision,
            },
        }
        for e in fs.events
    ]


def causal_rows(fs: FixtureSet) -> list[dict[str, Any]]:
    return [
        {
            "from_id": e.from_id,
            "to_id": e.to_id,
            "timestamp": e.timestamp,
            "props": {
                "id": e.id,
                "relation": e.relation,
                "relations": list(e.relations),
                "reason": e.reason,
                "domain": e.domain,
                "x_extra": json.dumps(e.x_extra, sort_keys=True),
            },
        }
        for e in fs.causal_edges()
    ]


def alias_rows(fs: FixtureSet) -> list[dict[str, Any]]:
    return [
        {
            "decision_id": a.decision_id,
            "event_id": a.event_id,
            "props": {
                "id": a.id,
                "scope": a.scope,
                "domain_from": a.domain_from,
                "domain_to": a.domain_to,
                "x_extra": json.dumps(a.x_extra, sort_keys=True),
            },
        }
        for a in fs.aliases
    ]


def _referenced_ids(fs: FixtureSet) -> set[str]:
    refs: set[str] = set()
    for d in fs.decisions:
        refs.update(d.supported_by, d.based_on, d.led_to)
    for e in fs.events:
        refs.update(e.led_to)
        if e.alias_of_decision:
            refs.add(e.alias_of_decision)
    for t in fs.transitions:
        refs.update((t.from_id, t.to_id))
    for a in fs.aliases:
        refs.update((a.decision_id, a.event_id))
    return refs


def stored_causal_edges(driver: Driver) -> list[tuple[str, str]]:
    """Every stored cause → effect pair (org scale: thousands), for the acyclicity check."""
    records, _, _ = driver.execute_query(STORED_CAUSAL)
    return [(str(r["a"]), str(r["b"])) for r in records]


def scope_problems(
    fs: FixtureSet, writer: Scope, stored_domains: Mapping[str, str] | None = None
) -> list[Problem]:
    """Records ``writer`` may not create: access fields beyond its own profile, edges whose
    domain lies outside its domains, or edges it could not walk (``cairn.policy.writes``): a
    writer never stores what it cannot read back. ``stored_domains``: the domains of stored
    endpoints the writer may read."""
    problems = [
        Problem(fs.origin[r.id], r.id, p.field, p.message)
        for r in [*fs.decisions, *fs.events]
        for p in create_problems(
            writer,
            domain=r.domain,
            sensitivity=r.sensitivity,
            namespaces=r.namespaces,
            roles_allowed=r.roles_allowed,
        )
    ]
    claims = [(t.id, "domain", t.domain) for t in fs.transitions]
    claims += [
        (a.id, f, d)
        for a in fs.aliases
        for f, d in (("domain_from", a.domain_from), ("domain_to", a.domain_to))
    ]
    for rid, fld, domain in claims:
        if (p := domain_problem(writer, domain)) is not None:
            problems.append(Problem(fs.origin[rid], rid, fld, p.message))
    extras: list[tuple[str, str | None, str, dict[str, Any]]] = [
        *((d.id, "Decision", d.domain, d.x_extra) for d in fs.decisions),
        *((e.id, "Event", e.domain, e.x_extra) for e in fs.events),
        *((t.id, None, t.domain, t.x_extra) for t in fs.transitions),
        *((a.id, None, a.domain_from, a.x_extra) for a in fs.aliases),
    ]
    for rid, label, domain, extra in extras:
        for p in extra_problems(writer, label, domain, extra):
            problems.append(Problem(fs.origin[rid], rid, p.field, p.message))
    domain_of = {**(stored_domains or {}), **{r.id: r.domain for r in [*fs.decisions, *fs.events]}}
    edges: list[tuple[str, str, str, str, str | None, str | None]]
    edges = [(t.id, "CAUSAL_PRECEDES", t.from_id, t.to_id, None, None) for t in fs.transitions]
    edges += [(a.id, "ALIAS_OF", a.decision_id, a.event_id, a.domain_from, a.domain_to) for a in fs.aliases]
    for rid, rel_type, start, end, start_claim, end_claim in edges:
        start_domain, end_domain = domain_of.get(start, start_claim), domain_of.get(end, end_claim)
        if start_domain is None or end_domain is None:
            continue  # an endpoint the writer cannot see is reported as a missing reference
        if (p := edge_problem(writer, rel_type, start_domain, end_domain)) is not None:
            problems.append(Problem(fs.origin[rid], rid, p.field, p.message))
    return problems


def validate_against_store(
    driver: Driver, fs: FixtureSet, writer: Scope | None = None, problems: Sequence[Problem] = ()
) -> list[Problem]:
    """Every check that needs the database, reported together with ``problems`` (the
    per-record ones): write scope, label clashes, references to stored nodes, cycles with
    stored edges. Raises FixtureError with all of them; returns the warnings otherwise.

    Stored ids are looked up as ``writer`` sees them: one it cannot read is reported as
    missing when referenced, and as taken (without its label) when the set reuses it.
    """
    scope = writer or Scope.system()
    own = {d.id: "Decision" for d in fs.decisions} | {e.id: "Event" for e in fs.events}
    stored = stored_ids(driver, scope, _referenced_ids(fs) | set(own))
    found = [*problems, *scope_problems(fs, scope, stored.domains)]
    for rid, label in own.items():
        if rid in stored.hidden:
            found.append(Problem(fs.origin[rid], rid, "id", f"'{rid}' {TAKEN_ID}"))
        elif rid in stored.visible and stored.visible[rid] != label:
            found.append(
                Problem(
                    fs.origin[rid], rid, "id", f"already stored as a {stored.visible[rid]}, not a {label}"
                )
            )
    found += check_references(
        fs,
        {k: v for k, v in stored.visible.items() if k not in own},
        stored_causal_edges(driver),
        name_stored=scope.unrestricted,
    )
    if found:
        raise FixtureError(found)
    return chronology_warnings(fs, stored.times)


def access_warnings(driver: Driver, fs: FixtureSet, registry: PolicyRegistry) -> list[Problem]:
    """Records no role of the policy file can read, each with what makes it unreadable."""
    rows = [
        {
            "id": r.id,
            "domain": r.domain,
            "sensitivity": r.sensitivity,
            "namespaces": list(r.namespaces),
            "roles_allowed": list(r.roles_allowed),
        }
        for r in [*fs.decisions, *fs.events]
    ]
    readable = readable_by_some_role(driver, registry, rows)
    profiles = list(registry.roles.values())
    warnings = []
    for r in [*fs.decisions, *fs.events]:
        if r.id in readable:
            continue
        why = []
        if unknown := [x for x in r.roles_allowed if x not in registry.roles]:
            why.append(f"roles_allowed names unknown role(s) {', '.join(unknown)}")
        if unheld := [n for n in r.namespaces if not any(n in p.namespaces for p in profiles)]:
            why.append(f"namespace(s) {', '.join(unheld)} held by no role")
        if not any(matches(r.domain, p.domains) for p in profiles):
            why.append(f"domain '{r.domain}' granted to no role")
        reason = (
            "; ".join(why) or "no role meets its domain, sensitivity, namespaces and roles_allowed together"
        )
        warnings.append(
            Problem(fs.origin[r.id], r.id, None, f"no role in the policy file can read it ({reason})")
        )
    return warnings


def _batches(rows: Sequence[dict[str, Any]]) -> Iterable[list[dict[str, Any]]]:
    size = get_settings().fixture_write_batch  # records per transaction (CAIRN_FIXTURE_WRITE_BATCH)
    for i in range(0, len(rows), size):
        yield list(rows[i : i + size])


def _write(
    driver: Driver,
    scope: Scope,
    query: str,
    rows: Sequence[dict[str, Any]],
    stage: str,
    progress: Progress | None,
    locked_extra: str | None = None,
) -> Counts:
    def work(tx: ManagedTransaction, batch: list[dict[str, Any]]) -> Counts:
        if locked_extra is not None:
            _merge_extra(tx, locked_extra, batch)
        record = tx.run(query, {**scope.cypher_params(), "rows": batch}).single()
        return Counts(int(record["created"]), int(record["updated"])) if record else Counts()

    total = Counts()
    with driver.session() as session:
        for batch in _batches(rows):
            total += session.execute_write(work, batch)
            if progress:
                progress(stage, len(batch))
    return total


# What an update row carries to merge its x_extra inside the write transaction: the keys the writer
# may read and the map it wrote (cairn.policy.writes.merged_extra).
EXTRA = "merge_extra"


def _row_key(row: dict[str, Any]) -> tuple[str, ...]:
    if "id" in row:
        return (row["id"],)
    if "from_id" in row:
        return (row["from_id"], row["to_id"])
    return (row["decision_id"], row["event_id"])


def _merge_extra(tx: ManagedTransaction, query: str, batch: list[dict[str, Any]]) -> None:
    """Set each update row's x_extra to its written keys over the stored keys its writer may not
    read, read under the write lock of this transaction."""
    merging = [row for row in batch if EXTRA in row]
    if not merging:
        return
    keys = [_row_key(row) for row in merging]
    stored: dict[tuple[str, ...], Any]
    if len(keys[0]) == 1:
        records = tx.run(query, ids=[k[0] for k in keys])
        stored = {(r["id"],): r["extra"] for r in records}
    else:
        records = tx.run(query, pairs=[list(k) for k in keys])
        stored = {(r["a"], r["b"]): r["extra"] for r in records}
    for row, key in zip(merging, keys, strict=True):
        spec = row[EXTRA]
        row["props"]["x_extra"] = merged_extra(frozenset(spec["readable"]), stored.get(key), spec["written"])


def _readable_both(scope: Scope, label: str | None, domains: Iterable[str]) -> list[str]:
    """The x_extra keys the writer reads in every one of ``domains`` (the stored node's and the one
    written): a key hidden in either is kept as stored."""
    readable: frozenset[str] | None = None
    for domain in domains:
        keys = readable_extra_keys(scope, label, domain) or frozenset()
        readable = keys if readable is None else readable & keys
    return sorted(readable or ())


def _restrict_updates(
    driver: Driver,
    scope: Scope,
    decisions: list[dict[str, Any]],
    events: list[dict[str, Any]],
    causal: list[dict[str, Any]],
    aliases: list[dict[str, Any]],
) -> dict[str, dict[str, Any]]:
    """Limit each update of a stored node or edge to what ``scope`` may read on it: fields its rules
    hide there are dropped from the row (the stored value stays), and x_extra is merged in the
    write transaction (``EXTRA``). Returns, per updated node, the stored text fields its new
    vector must be made from (those the writer may not read). The operator's rows are unchanged."""
    if scope.unrestricted:
        return {}
    stored = stored_ids(driver, scope, [r["id"] for r in [*decisions, *events]])
    kept_texts: dict[str, set[str]] = {}
    for label, rows, texts in (
        ("Decision", decisions, ("option", "rationale")),
        ("Event", events, ("summary", "description")),
    ):
        for row in rows:
            if row["id"] not in stored.visible:
                continue
            domains = {str(row["props"]["domain"]), stored.domains.get(row["id"], "")}
            hidden = kept_on_update(scope, label, domains, [*row["props"], "timestamp"])
            written = json.loads(row["props"]["x_extra"])
            for name in hidden:
                row["props"].pop(name, None)
            if "timestamp" in hidden:
                row["timestamp"] = None
            if "x_extra" not in hidden:
                row[EXTRA] = {"readable": _readable_both(scope, label, domains), "written": written}
            if hidden & set(texts):
                kept_texts[row["id"]] = set(hidden & set(texts))
    for edge in [*causal, *aliases]:
        # An edge the writer may attach is between nodes it reads: merge with what the edge holds
        # (a new edge has nothing stored, and its map is written whole).
        domains = {str(edge["props"].get("domain") or edge["props"].get("domain_from"))}
        edge[EXTRA] = {
            "readable": _readable_both(scope, None, domains),
            "written": json.loads(edge["props"]["x_extra"]),
        }
    if not kept_texts:
        return {}
    records, _, _ = driver.execute_query(STORED_TEXTS, ids=sorted(kept_texts))
    return {
        str(r["id"]): {k: v for k, v in dict(r["texts"]).items() if k in kept_texts[str(r["id"])]}
        for r in records
    }


def decision_text(d: DecisionRecord) -> str:
    return f"{d.option}. {d.rationale}".strip()


def event_text(e: EventRecord) -> str:
    return f"{e.summary}. {e.description}".strip()


# The header vector: made from the header fields alone (cairn.schema.nodes.SEARCH_TEXT_FIELDS),
# it ranks a node for a caller whose field rules hide the rest of the embedded text
# (docs/design.md §Policy module, "Masked fields and search").
def decision_header_text(d: DecisionRecord) -> str:
    return d.option.strip()


def event_header_text(e: EventRecord) -> str:
    return e.summary.strip()


def _embed_rows(
    driver: Driver,
    rows: list[dict[str, Any]],
    texts: list[str],
    embedder: Embedder,
    stage: str,
    progress: Progress | None,
    prefix: str = "",
) -> None:
    """Attach embeddings in one batch per kind, only where the stored one is stale.

    A vector is reused when the node already holds one made by the same model from the same
    text (sha256 kept in ``embedding_text_sha``): re-running an ingest, or resuming one that
    was killed, costs a lookup instead of the model. With ``prefix="header_"`` the vectors are
    the header vectors (``header_embedding``, ``header_text_sha``; the sha covers the model too).
    """
    if prefix:
        shas = [hashlib.sha256(f"{embedder.name}\0{t}".encode()).hexdigest() for t in texts]
    else:
        shas = [hashlib.sha256(t.encode()).hexdigest() for t in texts]
    records, _, _ = driver.execute_query(STORED_EMBEDDINGS, ids=[r["id"] for r in rows])
    if prefix:
        stored = {r["id"]: (embedder.name, r["header_sha"]) for r in records}
    else:
        stored = {r["id"]: (r["model"], r["sha"]) for r in records}
    stale = [i for i, row in enumerate(rows) if stored.get(row["id"]) != (embedder.name, shas[i])]
    for start in range(0, len(stale), EMBED_BATCH):
        chunk = stale[start : start + EMBED_BATCH]
        for i, vector in zip(chunk, embedder.embed([texts[i] for i in chunk]), strict=True):
            rows[i]["props"][f"{prefix}embedding"] = [float(x) for x in vector]
            if not prefix:
                rows[i]["props"]["embedding_model"] = embedder.name
            rows[i]["props"][f"{prefix}text_sha" if prefix else "embedding_text_sha"] = shas[i]
        if progress:
            progress(stage, len(chunk))


def write_fixture_set(
    driver: Driver,
    fs: FixtureSet,
    progress: Progress | None = None,
    embedder: Embedder | None = None,
    *,
    writer: Scope | None = None,
    problems: Sequence[Problem] = (),
    registry: PolicyRegistry | None = None,
    refuse_warnings: bool = False,
) -> IngestReport:
    """Validate (``problems`` are the parse's, reported together with the rest), then write in
    the order vertices → transitions → aliases as ``writer`` (None: the operator, unrestricted).

    With a ``registry``, records no role can read are warned about; ``refuse_warnings``
    turns every warning into a refusal (nothing written).
    """
    scope = writer or Scope.system()
    warnings = validate_against_store(driver, fs, scope, problems)
    if registry is not None:
        warnings = access_warnings(driver, fs, registry) + warnings
    if warnings and refuse_warnings:
        raise FixtureError(warnings)
    decisions, events = decision_rows(fs), event_rows(fs)
    causal, aliases = causal_rows(fs), alias_rows(fs)
    kept = _restrict_updates(driver, scope, decisions, events, causal, aliases)
    # Vectors are made from what each node will hold: a kept text field at its stored value.
    stored_decisions = [d.model_copy(update=kept.get(d.id, {})) for d in fs.decisions]
    stored_events = [e.model_copy(update=kept.get(e.id, {})) for e in fs.events]
    embedder = embedder or get_embedder()
    _embed_rows(
        driver, decisions, [decision_text(d) for d in stored_decisions], embedder, "embedding", progress
    )
    _embed_rows(driver, events, [event_text(e) for e in stored_events], embedder, "embedding", progress)
    headers = [decision_header_text(d) for d in stored_decisions]
    _embed_rows(driver, decisions, headers, embedder, "embedding", None, prefix="header_")
    headers = [event_header_text(e) for e in stored_events]
    _embed_rows(driver, events, headers, embedder, "embedding", None, prefix="header_")
    restricted = not scope.unrestricted
    node_lock = LOCKED_NODE_EXTRA if restricted else None
    nodes = _write(driver, scope, UPSERT_DECISIONS, decisions, "decisions", progress, node_lock)
    nodes += _write(driver, scope, UPSERT_EVENTS, events, "events", progress, node_lock)
    causal_lock = LOCKED_CAUSAL_EXTRA if restricted else None
    edges = _write(driver, scope, UPSERT_CAUSAL, causal, "transitions", progress, causal_lock)
    alias_lock = LOCKED_ALIAS_EXTRA if restricted else None
    edges += _write(driver, scope, UPSERT_ALIASES, aliases, "aliases", progress, alias_lock)
    return IngestReport(len(decisions), len(events), len(causal), len(aliases), nodes, edges, tuple(warnings))


def ingest_payload(driver: Driver, payload: Any, writer: Scope | None = None) -> IngestReport:
    """Validate and write records sent as one JSON object (the writer role's GraphQL upsert),
    as ``writer`` when given (a caller's scope), else as the operator."""
    fs, problems = parse_payload(payload)
    if not fs.origin:
        raise FixtureError(problems)
    return write_fixture_set(driver, fs, writer=writer, problems=problems)


def ingest_fixture_dir(
    driver: Driver,
    root: Path,
    progress: Progress | None = None,
    *,
    registry: PolicyRegistry | None = None,
    refuse_warnings: bool = False,
) -> IngestReport:
    """Validate every file of ``root`` — every problem in one FixtureError, nothing written —
    then write it as the operator (``Scope.system()``)."""
    fs, problems = parse_fixture_dir(root)
    if not fs.origin:
        raise FixtureError(problems)
    return write_fixture_set(
        driver, fs, progress, problems=problems, registry=registry, refuse_warnings=refuse_warnings
    )
