"""Load the factor domain: factors, options, DEPENDS_ON, sessions and journal histories
(docs/design.md §Factor journal).

Input is YAML (a folder of files, or one payload object for tests and tools) with the sections
``defaults`` (access fields applied to records that do not state them), ``factors``, ``options``,
``depends_on``, ``sessions`` and ``journal``. Validation is complete before anything is written:
every problem names the file, the record and the field, and one bad record refuses the whole set.
A cyclic DEPENDS_ON (within the set, or closed through edges already stored) is refused.

Writing is one transaction (a domain's journal appears whole or not at all), MERGE on ids so
a re-run is a no-op. After the entries are written each factor's state is re-derived from its
newest stored entry, so re-loading the demo after live updates never rolls a factor back.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from graphlib import CycleError, TopologicalSorter
from pathlib import Path
from typing import Any, Literal

from neo4j import Driver, ManagedTransaction
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from yaml import YAMLError

from cairn.graph import factors as queries
from cairn.ingest.fixtures import FixtureError, Problem
from cairn.ingest.records import DOMAIN_PATTERN, ID_PATTERN
from cairn.memory.factors.models import INFERENCE_STATUSES, Scale, fmt
from cairn.runtime.embedder import Embedder, get_embedder
from cairn.runtime.settings import REPO_ROOT
from cairn.schema import unique_yaml
from cairn.schema.nodes import MAX_INDEXED_CHARS
from cairn.schema.timestamps import StoredDateTime

DEMO_DIR = REPO_ROOT / "fixtures" / "factors"
LABELLED_SET = "questions.yaml"  # the router's labelled questions live beside the domain files
SECTIONS = ("defaults", "factors", "options", "depends_on", "sessions", "journal")
BATCH = 1000
# A journal entry id already stored in another journal (another factor's, or a dossier's).
ENTRY_OF_ANOTHER_JOURNAL = "already stored as an entry of another journal; a journal entry cannot move"

Progress = Callable[[str, int], None]


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)


class _Access(_Record):
    domain: str = Field(pattern=DOMAIN_PATTERN, max_length=MAX_INDEXED_CHARS)
    sensitivity: Literal["low", "medium", "high"]
    namespaces: list[str] = Field(min_length=1)
    roles_allowed: list[str] = Field(min_length=1)

    def access(self) -> dict[str, Any]:
        return {
            "domain": self.domain,
            "sensitivity": self.sensitivity,
            "namespaces": list(self.namespaces),
            "roles_allowed": list(self.roles_allowed),
        }


class FactorRecord(_Access):
    id: str = Field(pattern=ID_PATTERN)
    name: str = Field(min_length=1)
    category: str = Field(min_length=1, max_length=MAX_INDEXED_CHARS)  # range-indexed (Factor)
    scale: str = "0-100"
    description: str = ""
    aliases: list[str] = Field(default_factory=list)

    @field_validator("scale")
    @classmethod
    def _scale(cls, value: str) -> str:
        Scale.parse(value)
        return value


class OptionRecord(_Access):
    id: str = Field(pattern=ID_PATTERN)
    name: str = Field(min_length=1)
    description: str = ""
    aliases: list[str] = Field(default_factory=list)


class DependsRecord(_Record):
    source: str = Field(pattern=ID_PATTERN)
    target: str = Field(pattern=ID_PATTERN)
    min_value: float
    weight: float | None = Field(default=None, ge=0.0, le=1.0)


class SessionRecord(_Access):
    id: str = Field(pattern=ID_PATTERN)
    title: str = ""
    started_at: StoredDateTime


class JournalRecord(_Record):
    id: str = Field(pattern=ID_PATTERN)
    factor: str = Field(pattern=ID_PATTERN)
    timestamp: StoredDateTime
    value: float
    confidence: float = Field(ge=0.0, le=1.0)
    rationale: str = Field(min_length=1)
    excerpt: str = ""
    influenced_by: list[str] = Field(default_factory=list)
    session: str = Field(pattern=ID_PATTERN)
    op: Literal["update", "correct", "confirm", "recalculate"] = "update"
    status: str = "unconfirmed"

    @field_validator("status")
    @classmethod
    def _status(cls, value: str) -> str:
        if value not in INFERENCE_STATUSES:
            raise ValueError(f"must be one of {', '.join(INFERENCE_STATUSES)}")
        return value


_MODELS: dict[str, type[_Record]] = {
    "factors": FactorRecord,
    "options": OptionRecord,
    "depends_on": DependsRecord,
    "sessions": SessionRecord,
    "journal": JournalRecord,
}
_ACCESS_SECTIONS = ("factors", "options", "sessions")


@dataclass
class FactorSet:
    factors: list[FactorRecord] = field(default_factory=list)
    options: list[OptionRecord] = field(default_factory=list)
    depends_on: list[DependsRecord] = field(default_factory=list)
    sessions: list[SessionRecord] = field(default_factory=list)
    journal: list[JournalRecord] = field(default_factory=list)
    origin: dict[str, str] = field(default_factory=dict)  # record key -> "file[index]"

    def add(self, section: str, record: _Record, where: str) -> None:
        getattr(self, section).append(record)
        self.origin[_key(section, record)] = where


@dataclass(frozen=True)
class FactorIngestReport:
    factors: int
    options: int
    depends_on: int
    sessions: int
    journal: int


def _key(section: str, record: _Record) -> str:
    if isinstance(record, DependsRecord):
        return f"depends_on:{record.source}>{record.target}"
    return f"{section}:{getattr(record, 'id', '')}"


def _where(fs: FactorSet, section: str, record: _Record) -> str:
    return fs.origin.get(_key(section, record), section)


# -- parsing -----------------------------------------------------------------------------------


def _parse_document(fs: FactorSet, name: str, data: Any, problems: list[Problem]) -> None:
    if not isinstance(data, dict):
        problems.append(Problem(name, None, None, "expected a mapping of sections"))
        return
    for key in data:
        if key not in SECTIONS:
            problems.append(
                Problem(name, None, str(key), f"unknown section (expected {', '.join(SECTIONS)})")
            )
    defaults = data.get("defaults") or {}
    if not isinstance(defaults, dict):
        problems.append(Problem(name, None, "defaults", "must be a mapping of access fields"))
        defaults = {}
    for section, model in _MODELS.items():
        items = data.get(section) or []
        if not isinstance(items, list):
            problems.append(Problem(name, None, section, "must be a list"))
            continue
        for i, raw in enumerate(items):
            where = f"{name}:{section}[{i}]"
            if not isinstance(raw, dict):
                problems.append(Problem(where, None, None, "expected a mapping"))
                continue
            merged = {**defaults, **raw} if section in _ACCESS_SECTIONS else raw
            rid = raw.get("id") if isinstance(raw.get("id"), str) else None
            try:
                fs.add(section, model.model_validate(merged), where)
            except ValidationError as exc:
                for err in exc.errors():
                    loc = ".".join(str(p) for p in err["loc"]) or None
                    problems.append(Problem(where, rid, loc, err["msg"]))


def parse_factor_dir(root: Path) -> tuple[FactorSet, list[Problem]]:
    """Every YAML file of ``root`` (or ``root`` itself if it is a file), except the labelled questions."""
    fs = FactorSet()
    if root.is_file():
        files = [root]
    elif root.is_dir():
        files = sorted(p for p in root.glob("*.yaml") if p.name != LABELLED_SET)
    else:
        return fs, [Problem(str(root), None, None, "no such file or directory")]
    if not files:
        return fs, [Problem(str(root), None, None, "no .yaml files")]
    problems: list[Problem] = []
    for file in files:
        try:
            data = unique_yaml.loads(file.read_text(encoding="utf-8"), file.name)
        except (YAMLError, UnicodeDecodeError) as exc:
            problems.append(Problem(file.name, None, None, f"not valid YAML: {exc}"))
            continue
        _parse_document(fs, file.name, data, problems)
    return fs, problems


def parse_factor_payload(payload: Any) -> tuple[FactorSet, list[Problem]]:
    fs = FactorSet()
    problems: list[Problem] = []
    _parse_document(fs, "input", payload, problems)
    return fs, problems


# -- cross checks ------------------------------------------------------------------------------


@dataclass
class _Stored:
    labels: dict[str, str]
    scales: dict[str, str]
    edges: list[tuple[str, str]]
    latest: dict[str, datetime]
    entry_ids: set[str]
    embedded: dict[str, tuple[str, str]] = field(default_factory=dict)  # id -> (text hash, model)
    # stored journal entries among the set's: id -> the ids of what each is ABOUT
    entry_owners: dict[str, set[str]] = field(default_factory=dict)


def _stored(driver: Driver, fs: FactorSet) -> _Stored:
    ids = {f.id for f in fs.factors} | {o.id for o in fs.options}
    ids |= {s.id for s in fs.sessions} | {j.id for j in fs.journal}
    ids |= {d.source for d in fs.depends_on} | {d.target for d in fs.depends_on}
    ids |= {j.factor for j in fs.journal} | {j.session for j in fs.journal}
    ids |= {i for j in fs.journal for i in j.influenced_by}
    records, _, _ = driver.execute_query(queries.STORED_NODES, ids=sorted(ids))
    labels = {str(r["id"]): str(r["label"]) for r in records}
    scales = {str(r["id"]): str(r["scale"]) for r in records if r["scale"]}
    edge_rows, _, _ = driver.execute_query(queries.STORED_DEPENDS_ON)
    factors = sorted({j.factor for j in fs.journal})
    latest_rows, _, _ = driver.execute_query(queries.STORED_LATEST_ENTRIES, factors=factors)
    latest = {str(r["factor"]): r["latest"].to_native() for r in latest_rows if r["latest"] is not None}
    entry_ids = {str(i) for r in latest_rows for i in r["ids"]}
    embedded = {str(r["id"]): (str(r["source"]), str(r["model"])) for r in records if r["source"]}
    entries = sorted({j.id for j in fs.journal})
    owner_rows, _, _ = driver.execute_query(queries.STORED_ENTRY_OWNERS, ids=entries)
    owners = {str(r["id"]): {str(i) for i in r["about"]} for r in owner_rows}
    return _Stored(
        labels,
        scales,
        [(str(r["source"]), str(r["target"])) for r in edge_rows],
        latest,
        entry_ids,
        embedded,
        owners,
    )


def check_factor_set(fs: FactorSet, stored: _Stored | None = None) -> list[Problem]:
    """Identity, references, scales, ordering and acyclicity; ``stored`` adds what the DB holds."""
    stored = stored or _Stored({}, {}, [], {}, set())
    problems: list[Problem] = []
    own: dict[str, str] = {}
    identified: list[tuple[str, str, _Record, str]] = [
        *(("factors", "Factor", r, r.id) for r in fs.factors),
        *(("options", "Option", r, r.id) for r in fs.options),
        *(("sessions", "Session", r, r.id) for r in fs.sessions),
        *(("journal", "JournalEntry", r, r.id) for r in fs.journal),
    ]
    for section, kind, record, rid in identified:
        where = _where(fs, section, record)
        if rid in own:
            problems.append(Problem(where, rid, "id", f"duplicate id (already a {own[rid]} in this set)"))
        elif rid in stored.labels and stored.labels[rid] != kind:
            problems.append(
                Problem(where, rid, "id", f"already stored as a {stored.labels[rid]}, not a {kind}")
            )
        own[rid] = kind
    label = {**stored.labels, **own}
    scales = {**stored.scales, **{f.id: f.scale for f in fs.factors}}
    problems += _check_edges(fs, label, scales)
    problems += _check_journal(fs, label, scales, stored)
    if not problems:
        problems += _check_cycles(fs, stored.edges)
    return problems


def _check_edges(fs: FactorSet, label: dict[str, str], scales: dict[str, str]) -> list[Problem]:
    problems: list[Problem] = []
    seen: set[tuple[str, str]] = set()
    for d in fs.depends_on:
        where = _where(fs, "depends_on", d)
        rid = f"{d.source}>{d.target}"
        if label.get(d.source) not in ("Factor", "Option"):
            problems.append(Problem(where, rid, "source", f"'{d.source}' is not a known factor or option"))
        if label.get(d.target) != "Factor":
            problems.append(Problem(where, rid, "target", f"'{d.target}' is not a known factor"))
        elif not Scale.parse(scales[d.target]).contains(d.min_value):
            problems.append(
                Problem(
                    where, rid, "min_value", f"{fmt(d.min_value)} is outside the scale {scales[d.target]}"
                )
            )
        if d.source == d.target:
            problems.append(Problem(where, rid, "target", "a node cannot depend on itself"))
        if (d.source, d.target) in seen:
            problems.append(Problem(where, rid, None, "duplicate DEPENDS_ON edge"))
        seen.add((d.source, d.target))
    return problems


def _check_journal(
    fs: FactorSet, label: dict[str, str], scales: dict[str, str], stored: _Stored
) -> list[Problem]:
    problems: list[Problem] = []
    for j in fs.journal:
        where = _where(fs, "journal", j)
        if label.get(j.factor) != "Factor":
            problems.append(Problem(where, j.id, "factor", f"'{j.factor}' is not a known factor"))
        elif not Scale.parse(scales[j.factor]).contains(j.value):
            problems.append(
                Problem(where, j.id, "value", f"{fmt(j.value)} is outside the scale {scales[j.factor]}")
            )
        if label.get(j.session) != "Session":
            problems.append(Problem(where, j.id, "session", f"'{j.session}' is not a known session"))
        for ref in j.influenced_by:
            if label.get(ref) != "Factor":
                problems.append(Problem(where, j.id, "influenced_by", f"'{ref}' is not a known factor"))
            elif ref == j.factor:
                problems.append(
                    Problem(where, j.id, "influenced_by", "a factor cannot be influenced by itself")
                )
        if stored.entry_owners.get(j.id, {j.factor}) - {j.factor}:
            # An entry cannot move: MERGE would tie it to two journals and give it this factor's
            # access. The other journal is not named, whether the operator could read it or not.
            problems.append(Problem(where, j.id, "id", ENTRY_OF_ANOTHER_JOURNAL))
        latest = stored.latest.get(j.factor)
        if j.id not in stored.entry_ids and latest is not None and j.timestamp < latest:
            problems.append(
                Problem(
                    where,
                    j.id,
                    "timestamp",
                    f"predates the factor's newest stored entry ({latest.isoformat()}); "
                    "the journal is append-only",
                )
            )
    return problems


def _check_cycles(fs: FactorSet, stored_edges: Iterable[tuple[str, str]]) -> list[Problem]:
    graph: dict[str, set[str]] = defaultdict(set)
    for source, target in [*stored_edges, *((d.source, d.target) for d in fs.depends_on)]:
        graph[source].add(target)
    try:
        tuple(TopologicalSorter(graph).static_order())
    except CycleError as exc:
        cycle = " -> ".join(str(n) for n in reversed(exc.args[1]))
        return [Problem("depends_on", None, None, f"DEPENDS_ON edges form a cycle: {cycle}")]
    return []


# -- writing -----------------------------------------------------------------------------------


def _factor_text(name: str, description: str, aliases: list[str]) -> str:
    also = f" Also called: {', '.join(aliases)}." if aliases else ""
    return f"{name}. {description}{also}".strip()


def _texts(fs: FactorSet) -> dict[str, str]:
    """What each embedded node is embedded from (names, descriptions and aliases; entry evidence)."""
    names = {f.id: f.name for f in fs.factors}
    texts = {f.id: _factor_text(f.name, f.description, f.aliases) for f in fs.factors}
    texts |= {o.id: _factor_text(o.name, o.description, o.aliases) for o in fs.options}
    texts |= {
        j.id: f"{names.get(j.factor, j.factor)}: {j.rationale}. {j.excerpt}".strip() for j in fs.journal
    }
    return texts


def _embeddings(
    fs: FactorSet, embedder: Embedder, stored: dict[str, tuple[str, str]]
) -> dict[str, dict[str, Any]]:
    """Embedding properties for nodes whose text or model changed; an unchanged node keeps its vector."""
    texts = _texts(fs)
    source = {rid: hashlib.sha256(text.encode("utf-8")).hexdigest()[:16] for rid, text in texts.items()}
    stale = [rid for rid in texts if stored.get(rid) != (source[rid], embedder.name)]
    vectors = embedder.embed([texts[rid] for rid in stale])
    return {
        rid: {
            "embedding": [float(x) for x in v],
            "embedding_model": embedder.name,
            "embedding_source": source[rid],
        }
        for rid, v in zip(stale, vectors, strict=True)
    }


def _rows(
    fs: FactorSet, embedder: Embedder, stored: dict[str, tuple[str, str]]
) -> dict[str, list[dict[str, Any]]]:
    vectors = _embeddings(fs, embedder, stored)
    factors = [
        {
            "id": f.id,
            "props": {
                **f.access(),
                "name": f.name,
                "category": f.category,
                "scale": f.scale,
                "description": f.description,
                "aliases": f.aliases,
                **vectors.get(f.id, {}),
            },
        }
        for f in fs.factors
    ]
    options = [
        {
            "id": o.id,
            "props": {
                **o.access(),
                "name": o.name,
                "description": o.description,
                "aliases": o.aliases,
                **vectors.get(o.id, {}),
            },
        }
        for o in fs.options
    ]
    return {
        "factors": factors,
        "options": options,
        "depends_on": [
            {"source": d.source, "target": d.target, "min_value": d.min_value, "weight": d.weight}
            for d in fs.depends_on
        ],
        "sessions": [
            {"id": s.id, "started_at": s.started_at, "props": {**s.access(), "title": s.title}}
            for s in fs.sessions
        ],
        "journal": _entry_rows(fs, vectors),
    }


def _entry_rows(fs: FactorSet, vectors: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Entries in journal order per factor, each with the value before it and its sequence number."""
    by_factor: dict[str, list[JournalRecord]] = defaultdict(list)
    for j in fs.journal:
        by_factor[j.factor].append(j)
    rows = []
    for factor, entries in sorted(by_factor.items()):
        previous: tuple[float, float] | None = None
        for seq, j in enumerate(sorted(entries, key=lambda e: (e.timestamp, e.id)), start=1):
            rows.append(
                {
                    "id": j.id,
                    "factor": factor,
                    "session": j.session,
                    "timestamp": j.timestamp,
                    "influenced_by": list(dict.fromkeys(j.influenced_by)),
                    "props": {
                        "op": j.op,
                        "previous_value": None if previous is None else fmt(previous[0]),
                        "new_value": fmt(j.value),
                        "previous_number": None if previous is None else previous[0],
                        "new_number": j.value,
                        "previous_confidence": None if previous is None else previous[1],
                        "rationale": j.rationale,
                        "excerpt": j.excerpt,
                        "confidence": j.confidence,
                        "session_id": j.session,
                        "inference_status": j.status,
                        "details": json.dumps({}),
                        "seq": seq,
                        **vectors.get(j.id, {}),
                    },
                }
            )
            previous = (j.value, j.confidence)
    return rows


def write_factor_set(
    driver: Driver, fs: FactorSet, progress: Progress | None = None, embedder: Embedder | None = None
) -> FactorIngestReport:
    """Check against the store, then write everything in one transaction."""
    stored = _stored(driver, fs)
    problems = check_factor_set(fs, stored)
    if problems:
        raise FixtureError(problems)
    rows = _rows(fs, embedder or get_embedder(), stored.embedded)
    steps = (
        ("factors", queries.UPSERT_FACTORS),
        ("options", queries.UPSERT_OPTIONS),
        ("depends_on", queries.UPSERT_DEPENDS_ON),
        ("sessions", queries.UPSERT_SESSIONS),
        ("journal", queries.UPSERT_ENTRIES),
    )

    def work(tx: ManagedTransaction) -> None:
        for stage, query in steps:
            for i in range(0, len(rows[stage]), BATCH):
                tx.run(query, rows=rows[stage][i : i + BATCH]).consume()
        touched = sorted({j.factor for j in fs.journal})
        tx.run(queries.REFRESH_FACTOR_STATE, factors=touched).consume()

    with driver.session() as session:
        session.execute_write(work)
    if progress:
        for stage, _ in steps:
            progress(stage, len(rows[stage]))
    return FactorIngestReport(*(len(rows[s]) for s, _ in steps))


def ingest_factor_payload(
    driver: Driver, payload: Any, embedder: Embedder | None = None
) -> FactorIngestReport:
    fs, problems = parse_factor_payload(payload)
    if problems:
        raise FixtureError(problems)
    return write_factor_set(driver, fs, embedder=embedder)


def ingest_factor_dir(
    driver: Driver, root: Path, progress: Progress | None = None, embedder: Embedder | None = None
) -> FactorIngestReport:
    """Validate every file of ``root`` (FixtureError lists every problem; nothing written), then write."""
    fs, problems = parse_factor_dir(root)
    if problems:
        raise FixtureError(problems)
    return write_factor_set(driver, fs, progress, embedder)


def load_demo_factors(driver: Driver) -> FactorIngestReport:
    """The AI-readiness demo (docs/design.md §Factor journal; idempotent; for ``cairn serve --demo``)."""
    return ingest_factor_dir(driver, DEMO_DIR)
