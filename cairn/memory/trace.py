"""Trace bundles: the files of docs/design.md §Trace bundles for one request, and their role-gated zips.

A bundle lives under its owner's folder: a hash of (user id, role, policy key), so a user
never reads another user's trace, nor the same user's trace under another role or an older
policy, by knowing a request id. Every id is hostile: only a whole-string match of the
X-Request-Id pattern is looked up, and the folder must resolve inside the owner's folder of
the trace root; anything else answers exactly as a request id nobody used (FileNotFoundError).
``bundle_view`` carries what the caller was shown; ``bundle_full`` adds pre-policy evidence
and the audit meta with the withheld ids, and is built only for roles whose profile allows it.

Storage (docs/design.md §Trace bundles): one gzip'd compact JSON file per request, holding each
piece of the trace once, the canonical evidence as columns (``pack_evidence``). The bundle files
that repeat another piece are cut out of it when read:
the caller's meta is the audit meta with withheld ids replaced by placeholders
(``redact_meta``, the same function the ask answers with); ``plan.json``, ``response.json`` and
``validator_report.json`` are sections of that meta; ``evidence_pre.json`` is the canonical
evidence plus the edges; ``evidence_post.json`` is three sections of the audit meta.

What the audit meta repeats of the evidence is not stored either (``pack_audit``): the pool and
payload id lists are the ids of the canonical evidence, the excluded payload ids are the withheld
ids with their reasons, and the selector's scores and the prompt's exclusions (duplicates, then
every ranked id the gate left out, in ranked order) are what the Selector computes again from the
stored evidence — it is deterministic over the CandidateSet alone (cairn/memory/selector.py). The
stored trace keeps what was shown (the evidence, the card, the response), what was clipped (the
prompt's ids and the count it left out), what was withheld (ids and reasons) and the ids cited.
The evidence's fields are stored for the nodes the answer was built from (anchor, prompt lines,
cited ids); the rest of the pool by id, read back from the graph under the reader's scope when
the trace is read (``refetch``) and checked against ``bundle_fp`` (``evidence_check.json``).

An ask's trace is written off the request path (``submit_trace``): the ask hands over what
builds it; one writer thread takes the traces from a bounded queue, in order, builds, encodes,
compresses and writes each. A read of a trace whose write is still queued waits for it, so the
owner can read it as soon as the ask returns; the queue is drained at a clean stop (``flush``:
the app's shutdown and interpreter exit).
"""

from __future__ import annotations

import atexit
import gzip
import hashlib
import io
import json
import queue
import re
import threading
import zipfile
from collections.abc import Callable, Sequence
from functools import lru_cache
from itertools import repeat
from pathlib import Path
from typing import Any

import orjson
import structlog
from neo4j import Driver

from cairn.errors import EXIT_FAILED, CairnError
from cairn.memory.selector import select
from cairn.policy.passport import Caller, is_request_id
from cairn.policy.preselector import (
    CandidateEdge,
    CandidateNode,
    CandidateSet,
    drop_dangling_references,
    refetch,
    scope_params,
)

VIEW_FILES = (
    "_meta.json",
    "envelope.json",
    "evidence_canonical.json",
    "evidence_check.json",
    "response.json",
    "plan.json",
    "validator_report.json",
)
FULL_FILES = (*VIEW_FILES, "_meta_audit.json", "evidence_pre.json", "evidence_post.json", "llm_raw.json")
BUNDLES = ("bundle_view", "bundle_full")
# One file per request: the whole trace as one compact, gzip'd JSON object, named with the
# version of what a role is shown. A trace holds the text its reader was shown when it was written:
# one written by an earlier version holds what that version's mask showed (a section's title and
# body before the governance strip of schema 7: exec tags, decision lines, the access line; a
# factor's mirrored fields before pass 11; journal times, excerpts and session titles before pass
# 13; a section's body before the strip closed up behind what it dropped, pass 16, or inside a
# block quote, pass 17, or before every paragraph was wrapped at one width, pass 18, or when a
# reference in fenced code took its closing fence or a table row its later cells, review 36),
# which the same reader today may not be shown. So a
# trace is read only in the form this version writes, an older one reads as missing, and
# ``cairn db migrate`` deletes the older ones (``drop_stale_traces``). Bump TRACE_VERSION whenever
# what the mask shows a role changes.
TRACE_VERSION = 7
TRACE_FILE = f"trace.v{TRACE_VERSION}.json.gz"
# Trace file names of earlier versions: "trace.json", "trace.json.gz", "trace.v<n>.json.gz" with n
# below TRACE_VERSION (a later version's, left by a downgrade, is not this version's to delete).
_EARLIER_TRACE = re.compile(r"trace\.json(\.gz)?|trace\.v(\d+)\.json\.gz")
# Bundle files that are sections of the caller's meta: stored once, cut out when read.
FROM_META = {
    "plan.json": "selection_metrics",
    "response.json": "response",
    "validator_report.json": "validator",
}
# Stored pieces that are not bundle files: what evidence_pre.json adds to the canonical evidence.
EVIDENCE_PRE = "_evidence_pre"
QUEUE_SIZE = 256  # asks whose trace is not yet written; a full queue makes the next ask wait
READ_WAIT_S = 30.0
WRITE_EVERY_S = 0.05
# A queued trace: (owner folder name, request id).
Key = tuple[str, str]
# A queued trace's files (bundle file name -> content), or what builds them on the writer thread.
Files = dict[str, Any] | Callable[[], dict[str, Any]]


class BundleRefused(CairnError):
    """A bundle the caller's role may not download (the HTTP route answers 403 with ``reason``)."""

    exit_code = EXIT_FAILED

    def __init__(self, reason: str) -> None:
        super().__init__("BUNDLE_REFUSED", reason)
        self.reason = reason


def _owner(caller: Caller) -> str:
    """Who may read a trace: the user, its role, the policy and the scope it asked under, so a
    passport narrowed by its headers never reads what the same user saw with a wider view."""
    # NUL cannot occur in a user id, role name, policy key or JSON text, so the parts cannot run together.
    # The scope's parameters as the walk got them (built once per distinct scope, not per ask).
    view = _view(scope_params(caller.scope))
    return _owner_of("\0".join((caller.user_id, caller.role, caller.profile.policy_key, view)))


# The JSON text of each scope's parameters, once per parameters object (scope_params hands the
# same one to every ask under an equal scope); the object is held, so its id is not reused.
_VIEWS: dict[int, tuple[dict[str, object], str]] = {}


def _view(params: dict[str, object]) -> str:
    held = _VIEWS.get(id(params))
    if held is not None and held[0] is params:
        return held[1]
    view = json.dumps(params, sort_keys=True, default=str)
    if len(_VIEWS) >= 1024:
        _VIEWS.clear()
    _VIEWS[id(params)] = (params, view)
    return view


@lru_cache(maxsize=1024)
def _owner_of(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()[:32]


def _folder(root: Path, caller: Caller, request_id: str) -> Path:
    """The owner's folder for ``request_id``; FileNotFoundError, as for a missing trace, when
    the id is not a request id or the path would leave the owner's folder (e.g. a symlink)."""
    return _owned_folder(root, _owner(caller), request_id)


def _owned_folder(root: Path, owner_name: str, request_id: str) -> Path:
    if not is_request_id(request_id):
        raise FileNotFoundError("no such trace")
    owner = root.resolve() / owner_name
    folder = (owner / request_id).resolve()
    if folder.parent != owner:
        raise FileNotFoundError("no such trace")
    return folder


def redact_meta(audit: dict[str, Any]) -> dict[str, Any]:
    """The caller's copy of an audit meta: every withheld id becomes its per-request placeholder
    ``withheld-<n>`` (n in the order of ``policy_trace.withheld_ids``). The ask answers with it and
    the trace derives ``_meta.json`` with it, so the two cannot differ.

    The sections that name withheld ids are new objects; the others are the audit's own (the
    meta is JSON-plain and nobody changes it once built), so the caller's copy costs no deep copy.
    """
    trace = audit["policy_trace"]
    placeholder = {wid: f"withheld-{i + 1}" for i, wid in enumerate(trace["withheld_ids"])}
    sets = audit["evidence_sets"]
    return {
        **audit,
        "policy_trace": {
            **trace,
            "withheld_ids": [placeholder[i] for i in trace["withheld_ids"]],
            "reasons_by_id": {placeholder[i]: r for i, r in trace["reasons_by_id"].items()},
        },
        "evidence_sets": {
            **sets,
            "payload_excluded_ids": [
                {"id": placeholder[e["id"]], "reason": e["reason"]} for e in sets["payload_excluded_ids"]
            ],
        },
    }


# A stored edge is a row of these fields (CandidateEdge's), not an object repeating their names.
EDGE_FIELDS = ("source", "target", "type", "relation", "relations", "reason")


def pack_edges(edges: list[CandidateEdge], nodes: list[CandidateNode]) -> dict[str, list[Any]]:
    """Edges as columns (each field's values side by side); an end that is one of ``nodes`` is
    stored as its place in that list."""
    at = {n.id: i for i, n in enumerate(nodes)}
    return {
        "source": [at.get(e.source, e.source) for e in edges],
        "target": [at.get(e.target, e.target) for e in edges],
        "type": [e.type for e in edges],
        "relation": [e.relation for e in edges],
        "relations": [e.relations for e in edges],
        "reason": [e.reason for e in edges],
    }


def _unpack_edges(stored: Any, ids: list[str]) -> list[dict[str, Any]]:
    rows = zip(*(stored[f] for f in EDGE_FIELDS), strict=True) if isinstance(stored, dict) else stored
    edges = []
    for row in rows:
        if isinstance(row, dict):  # stored as an object (an earlier trace)
            edges.append(row)
            continue
        # A row (an earlier trace) or the row of the columns.
        edge = dict(zip(EDGE_FIELDS, row, strict=True))
        edge["relations"] = list(edge["relations"] or [])
        for end in ("source", "target"):
            if isinstance(edge[end], int):
                edge[end] = ids[edge[end]]
        edges.append(edge)
    return edges


def pack_evidence(nodes: list[CandidateNode], by_ref: Sequence[int] = ()) -> bytes:
    """The canonical evidence as stored, encoded: columns, not one object per node.

    A field's values sit side by side (every node's domain, then every timestamp, ...), where
    the compressor finds their repeats; a node without the field holds null there (a shown
    field is never null: masking drops nulls). Sorted keys, so the bytes are canonical:
    ``bundle_fp`` is their hash (without ``by_ref``) and a reader checks the evidence it rebuilds
    against it.

    ``by_ref``: the places of the nodes whose fields are not stored (their id, label, hop and
    masked names are; ``in_full`` lists the others): a trace keeps the text of the nodes its
    answer was built from and reads the rest of the pool back from the graph by id
    (``refetch``), docs/design.md §Trace bundles.
    """
    fields = [n.fields for n in nodes]
    ids = [n.id for n in nodes]
    # Every node's own id among its fields (the usual case): said once, not stored twice.
    own_id = list(map(dict.get, fields, repeat("id"))) == ids
    names = set().union(*fields)
    if own_id:
        names.discard("id")
    # A column per field name, read per name (absent: None); orjson writes tuples as arrays.
    columns = {name: list(map(dict.get, fields, repeat(name))) for name in names}
    packed: dict[str, Any] = {
        "ids": ids,
        "labels": [n.label for n in nodes],
        "hops": [n.hop for n in nodes],
        "masked": [n.masked for n in nodes],
        "fields": columns,
        "id_in_fields": own_id,
    }
    if by_ref:
        # The columns hold the nodes stored in full (``in_full``) only; a column none of them has goes.
        skip = set(by_ref)
        in_full = [i for i in range(len(nodes)) if i not in skip]
        kept = {name: [values[i] for i in in_full] for name, values in columns.items()}
        packed["fields"] = {name: values for name, values in kept.items() if values.count(None) < len(values)}
        packed["in_full"] = in_full
    return canonical_json(packed)


# A node whose fields were stored by reference and that the graph no longer gives back (gone,
# or no longer visible to the reader's scope): its fields are not shown.
Fetch = Callable[[list[tuple[str, str, int]]], dict[str, CandidateNode]]


def _unpack_evidence(stored: Any, fetch: Fetch | None = None) -> tuple[Any, list[str]]:
    """``evidence_canonical.json``, one object per node, from the columns ``pack_evidence`` stored,
    the nodes stored by reference read back through ``fetch``; and the ids it could not read back."""
    if not isinstance(stored, dict):
        return stored, []  # stored as a list (an earlier trace)
    columns = stored["fields"].items()
    own_id = stored.get("id_in_fields", False)
    ids = stored["ids"]
    in_full = stored.get("in_full")
    rows = range(len(ids)) if in_full is None else in_full
    # The place of each node stored in full among the column values.
    at = {i: k for k, i in enumerate(rows)}
    nodes = [
        {
            "id": node_id,
            "label": label,
            "hop": hop,
            "fields": {
                **({"id": node_id} if own_id else {}),
                **{name: values[at[i]] for name, values in columns if values[at[i]] is not None},
            }
            if i in at
            else {},
            "masked": masked,
        }
        for i, (node_id, label, hop, masked) in enumerate(
            zip(ids, stored["labels"], stored["hops"], stored["masked"], strict=True)
        )
    ]
    if in_full is None:
        return nodes, []
    by_ref = [i for i in range(len(ids)) if i not in at]
    found = fetch([(ids[i], stored["labels"][i], stored["hops"][i]) for i in by_ref]) if fetch else {}
    visible = set(ids)
    missing = []
    for i in by_ref:
        node = found.get(ids[i])
        if node is None:
            missing.append(ids[i])
            continue
        node = drop_dangling_references(node, visible)
        nodes[i]["fields"], nodes[i]["masked"] = node.fields, list(node.masked)
    return nodes, missing


def _check_evidence(evidence: list[Any], stored: Any, audit: Any, missing: list[str]) -> dict[str, Any]:
    """``evidence_check.json``: whether the evidence as read is the evidence the ask fingerprinted
    (``bundle_fp``), how many nodes were read back by id, and which could not be."""
    in_full = stored.get("in_full") if isinstance(stored, dict) else None
    by_ref = 0 if in_full is None else len(stored["ids"]) - len(in_full)
    fp = audit.get("fingerprints", {}).get("bundle_fp") if isinstance(audit, dict) else None
    nodes = [CandidateNode(e["id"], e["label"], e["hop"], e["fields"], tuple(e["masked"])) for e in evidence]
    actual = "sha256:" + hashlib.sha256(pack_evidence(nodes)).hexdigest()
    return {"bundle_fp": fp, "verified": fp == actual, "by_reference": by_ref, "unavailable_ids": missing}


def pack_audit(audit: dict[str, Any]) -> dict[str, Any]:
    """The audit meta as stored: without what ``_unpack_audit`` rebuilds from the evidence."""
    sets = audit["evidence_sets"]
    return {
        **audit,
        "selection_metrics": {k: v for k, v in audit["selection_metrics"].items() if k != "scores"},
        "evidence_sets": {
            "prompt_included_ids": sets["prompt_included_ids"],
            "prompt_excluded_count": len(sets["prompt_excluded_ids"]),
        },
    }


def _unpack_audit(stored: dict[str, Any], evidence: list[Any], edges: list[dict[str, Any]]) -> dict[str, Any]:
    """The audit meta ``pack_audit`` stored, whole again: the Selector re-run on the stored evidence."""
    sets = stored["evidence_sets"]
    if "pool_ids" in sets:  # stored whole (an earlier trace)
        return stored
    nodes = [CandidateNode(e["id"], e["label"], e["hop"], e["fields"], tuple(e["masked"])) for e in evidence]
    cs = CandidateSet(
        nodes[0],
        nodes[1:],
        [CandidateEdge(**{**e, "relations": tuple(e["relations"] or ())}) for e in edges],
    )
    selection = select(cs)
    included = set(sets["prompt_included_ids"])
    excluded = [
        *({"id": i, "reason": "duplicate"} for i in selection.duplicates),
        *({"id": s.id, "reason": "token_budget"} for s in selection.ranked if s.id not in included),
    ]
    ids = [e["id"] for e in evidence]
    reasons = stored["policy_trace"]["reasons_by_id"]
    metrics = stored["selection_metrics"]
    return {
        **stored,
        "evidence_sets": {
            "pool_ids": ids,
            "prompt_included_ids": sets["prompt_included_ids"],
            "prompt_excluded_ids": excluded,
            "payload_included_ids": list(ids),
            "payload_excluded_ids": [{"id": i, "reason": r} for i, r in reasons.items()],
        },
        "selection_metrics": {
            "ranking_policy": metrics["ranking_policy"],
            "scores": {s.id: s.row for s in selection.ranked},
            **{k: v for k, v in metrics.items() if k != "ranking_policy"},
        },
    }


def fragment(encoded: bytes) -> orjson.Fragment:
    """Already encoded JSON, spliced into a trace as it is (the canonical evidence is encoded
    once, for its fingerprint, and stored from the same bytes)."""
    return orjson.Fragment(encoded)


def canonical_json(value: Any) -> bytes:
    """``value`` as compact UTF-8 JSON with sorted keys (values JSON cannot hold as their text)."""
    return _json(value, orjson.OPT_SORT_KEYS)


def _json(value: Any, option: int = 0) -> bytes:
    # orjson: the trace and the fingerprints encode a whole neighbourhood per ask, ~20x faster
    # than json's encoder; an integer beyond 64 bits (which orjson refuses) falls back to json.
    try:
        return orjson.dumps(value, default=str, option=option | orjson.OPT_NON_STR_KEYS)
    except orjson.JSONEncodeError:
        text = json.dumps(value, separators=(",", ":"), default=_plain_default, sort_keys=bool(option))
        return text.encode("utf-8")


def _plain_default(value: Any) -> Any:
    """json's fallback encoder: a spliced fragment is its decoded JSON, anything else its text."""
    if isinstance(value, orjson.Fragment):
        return json.loads(value.contents)
    return str(value)


def _store(folder: Path, data: bytes) -> None:
    """Compress the encoded trace and write it atomically: temp file, then rename. The owner's
    folder and the trace's are this user's only: a trace holds what its role was shown (and the
    audit meta, the withheld ids), so another account on the machine must not read it."""
    folder.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    folder.mkdir(mode=0o700, exist_ok=True)
    tmp = folder / f".{TRACE_FILE}.tmp"
    tmp.write_bytes(gzip.compress(data, compresslevel=6, mtime=0))
    tmp.replace(folder / TRACE_FILE)


class _Writer:
    """One thread writing queued traces in order; ``pending`` lets a read wait for its write.

    The thread is not woken per ask: waking it on the request path hands it the interpreter
    while the ask still runs. It wakes every ``WRITE_EVERY_S``, or at once when a read or a
    flush is waiting, or when the queue is full."""

    def __init__(self, size: int) -> None:
        self.jobs: queue.Queue[tuple[Key, Path, Files, threading.Event]] = queue.Queue(size)
        self.pending: dict[Key, threading.Event] = {}
        self.lock = threading.Lock()
        self.wake = threading.Event()
        self.thread: threading.Thread | None = None

    def submit(self, key: Key, root: Path, files: Files) -> None:
        done = threading.Event()
        with self.lock:
            self.pending[key] = done  # a later write of the same trace is the one to wait for
            if self.thread is None or not self.thread.is_alive():
                self.thread = threading.Thread(target=self._run, name="cairn-trace-writer", daemon=True)
                self.thread.start()
        try:
            self.jobs.put_nowait((key, root, files, done))
        except queue.Full:
            self.wake.set()
            self.jobs.put((key, root, files, done))  # waits for room: backpressure

    def _run(self) -> None:
        while True:
            self.wake.wait(WRITE_EVERY_S)
            self.wake.clear()
            while True:
                try:
                    job = self.jobs.get_nowait()
                except queue.Empty:
                    break
                self._write(*job)

    def _write(self, key: Key, root: Path, files: Files, done: threading.Event) -> None:
        owner, request_id = key
        try:
            _store(_owned_folder(root, owner, request_id), _json(files() if callable(files) else files))
        except Exception:  # a failed write must not stop the writer; it is logged, not lost silently
            structlog.get_logger("cairn.trace").exception("trace_write_failed", request_id=request_id)
        finally:
            with self.lock:
                if self.pending.get(key) is done:
                    del self.pending[key]
            done.set()
            self.jobs.task_done()

    def wait(self, key: Key) -> None:
        with self.lock:
            done = self.pending.get(key)
        if done is not None:
            self.wake.set()
            done.wait(READ_WAIT_S)

    def flush(self) -> None:
        if self.thread is not None and self.thread.is_alive():
            self.wake.set()
            self.jobs.join()


_WRITER = _Writer(QUEUE_SIZE)
# Daemon threads still run while exit handlers do: a clean exit (`cairn ask`) writes every trace.
atexit.register(_WRITER.flush)


def flush() -> None:
    """Block until every queued trace is written (a clean stop calls this)."""
    _WRITER.flush()


def write_trace(root: Path, caller: Caller, files: dict[str, Any]) -> Path:
    """Write ``files`` (bundle file name → content) as the caller's current request's trace, now."""
    folder = _folder(root, caller, caller.request_id)
    _store(folder, _json(files))
    return folder


def submit_trace(root: Path, caller: Caller, files: Files) -> None:
    """Queue the caller's current request's trace: the files, or what builds them from pieces no
    one changes afterwards (an ask's). Built and encoded (orjson), compressed and written on the
    writer thread, off the request path (the build and encoding hold the interpreter lock; zlib
    and the file system do not). The folder is resolved and checked there too
    (``_owned_folder``). A build or write that fails is logged (``trace_write_failed``) and the
    trace reads as missing: the answer it belongs to has already been given."""
    if not is_request_id(caller.request_id):
        raise FileNotFoundError("no such trace")
    _WRITER.submit((_owner(caller), caller.request_id), root, files)


def _load(folder: Path) -> dict[str, Any]:
    _WRITER.wait((folder.parent.name, folder.name))  # _folder checked: (owner, request id)
    packed = folder / TRACE_FILE
    if not packed.is_file():
        raise FileNotFoundError("no such trace")
    parts: dict[str, Any] = json.loads(gzip.decompress(packed.read_bytes()))
    return parts


def _is_earlier_trace(name: str) -> bool:
    match = _EARLIER_TRACE.fullmatch(name)
    return match is not None and (match[2] is None or int(match[2]) < TRACE_VERSION)


def drop_stale_traces(root: Path) -> int:
    """Delete every trace under ``root`` written in an earlier form (``TRACE_VERSION``), which is
    never read; the number deleted."""
    stale = [p for p in root.glob("*/*/trace*.json*") if _is_earlier_trace(p.name) and p.is_file()]
    for path in stale:
        path.unlink()
    return len(stale)


def _parts(folder: Path, caller: Caller, driver: Driver | None) -> dict[str, Any]:
    """The bundle files of a stored trace, those stored once cut out of the pieces that hold them;
    nodes stored by reference are read back through ``driver`` under the caller's scope."""
    parts = _load(folder)
    pre = parts.pop(EVIDENCE_PRE, None)
    stored = parts.get("evidence_canonical.json")
    missing: list[str] = []
    if "evidence_canonical.json" in parts:
        fetch = None if driver is None else (lambda rows: refetch(driver, caller.scope, rows))
        parts["evidence_canonical.json"], missing = _unpack_evidence(stored, fetch)
    evidence = parts.get("evidence_canonical.json")
    if isinstance(pre, dict):
        ids = [e["id"] for e in evidence] if isinstance(evidence, list) else []
        pre["edges"] = _unpack_edges(pre["edges"], ids)
    audit = parts.get("_meta_audit.json")
    if isinstance(audit, dict) and isinstance(pre, dict) and isinstance(evidence, list) and evidence:
        audit = parts["_meta_audit.json"] = _unpack_audit(audit, evidence, pre["edges"])
    if "_meta.json" not in parts and isinstance(audit, dict):
        parts["_meta.json"] = redact_meta(audit)
    if isinstance(stored, dict) and isinstance(evidence, list):
        check = parts["evidence_check.json"] = _check_evidence(evidence, stored, audit, missing)
        if not check["verified"] and check["by_reference"] and isinstance(parts.get("_meta.json"), dict):
            # The meta's scores were recomputed from evidence read back that is not what the ask
            # saw: say so where the GraphQL ``trace`` field, which answers with the meta alone, shows it.
            parts["_meta.json"] = {**parts["_meta.json"], "evidence_check": check}
    if isinstance(pre, dict) and isinstance(audit, dict) and isinstance(evidence, list) and evidence:
        policy = audit["policy_trace"]
        parts["evidence_pre.json"] = {
            "anchor": evidence[0],
            "nodes": evidence[1:],
            "edges": pre["edges"],
            "policy_trace": {
                "withheld_ids": policy["withheld_ids"],
                "reasons_by_id": policy["reasons_by_id"],
                "hidden_vertices": policy["counts"]["hidden_vertices"],
                "hidden_edges": policy["counts"]["hidden_edges"],
                "edge_types_used": policy["edge_types_used"],
                "neighbours_scanned": pre["neighbours_scanned"],
            },
        }
    if "evidence_post.json" not in parts and isinstance(audit, dict) and "evidence_sets" in audit:
        parts["evidence_post.json"] = {
            "prompt_included_ids": audit["evidence_sets"]["prompt_included_ids"],
            "prompt_excluded_ids": audit["evidence_sets"]["prompt_excluded_ids"],
            "gate": audit["truncation_metrics"]["passes"],
        }
    meta = parts.get("_meta.json")
    if isinstance(meta, dict):
        for name, section in FROM_META.items():
            if name not in parts and section in meta:
                parts[name] = meta[section]
    return parts


def read_trace_file(
    root: Path, caller: Caller, request_id: str, name: str, driver: Driver | None = None
) -> Any:
    """One bundle file of the caller's trace; ``driver`` reads back the nodes stored by reference
    (without it, they are listed as unavailable in ``evidence_check.json``)."""
    parts = _parts(_folder(root, caller, request_id), caller, driver)
    if name not in parts:
        raise FileNotFoundError("no such trace")
    return parts[name]


def bundle_zip(root: Path, caller: Caller, request_id: str, name: str, driver: Driver | None = None) -> bytes:
    """The zip for ``name``; BundleRefused with a reason when the role may not have it."""
    if name not in BUNDLES:
        raise BundleRefused("unknown bundle")
    if name == "bundle_full" and not caller.profile.can_download_full:
        raise BundleRefused("policy:bundle_full_not_permitted")
    parts = _parts(_folder(root, caller, request_id), caller, driver)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for file in VIEW_FILES if name == "bundle_view" else FULL_FILES:
            if file in parts:
                zf.writestr(file, json.dumps(parts[file], separators=(",", ":"), default=str))
    return buffer.getvalue()
