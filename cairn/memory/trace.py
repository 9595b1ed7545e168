"""Trace bundles: the files of docs/design.md §Trace bundles for one request, and their role-gated zips.

A bundle lives under its owner's folder: a hash of (user id, role, policy key), so a user
never reads another user's trace, nor the same user's trace under another role or an older
policy, by knowing a request id. Every id is hostile: only a whole-string match of the
X-Request-Id pattern is looked up, and the folder must resolve inside the owner's folder of
the trace root; anything else answers exactly as a request id nobody used (FileNotFoundError).
``bundle_view`` carries what the caller was shown; ``bundle_full`` adds pre-policy evidence
and the audit meta with the withheld ids, and is built only for roles whose profile allows it.
"""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from pathlib import Path
from typing import Any

from cairn.policy.passport import Caller, is_request_id

VIEW_FILES = (
    "_meta.json",
    "envelope.json",
    "evidence_canonical.json",
    "response.json",
    "plan.json",
    "validator_report.json",
)
FULL_FILES = (*VIEW_FILES, "_meta_audit.json", "evidence_pre.json", "evidence_post.json", "llm_raw.json")
BUNDLES = ("bundle_view", "bundle_full")
# One file per request: an ask writes its whole trace in one compact JSON object.
TRACE_FILE = "trace.json"
# Bundle files that are sections of the caller's meta: stored once, cut out when read.
FROM_META = {
    "plan.json": "selection_metrics",
    "response.json": "response",
    "validator_report.json": "validator",
}


class BundleRefused(PermissionError):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _owner(caller: Caller) -> str:
    # NUL cannot occur in a user id, role name or policy key, so the parts cannot run together.
    key = "\0".join((caller.user_id, caller.role, caller.profile.policy_key))
    return hashlib.sha256(key.encode()).hexdigest()[:32]


def _folder(root: Path, caller: Caller, request_id: str) -> Path:
    """The owner's folder for ``request_id``; FileNotFoundError, as for a missing trace, when
    the id is not a request id or the path would leave the owner's folder (e.g. a symlink)."""
    if not is_request_id(request_id):
        raise FileNotFoundError("no such trace")
    owner = root.resolve() / _owner(caller)
    folder = (owner / request_id).resolve()
    if folder.parent != owner:
        raise FileNotFoundError("no such trace")
    return folder


def write_trace(root: Path, caller: Caller, files: dict[str, Any]) -> Path:
    """Write all of the caller's current request's files as one compact JSON object
    (atomically: temp file then rename).

    One file and compact on purpose: the trace is written on the request path, and one file per
    part plus ``indent`` (json's pure-Python encoder) made it the most expensive stage of an ask."""
    folder = _folder(root, caller, caller.request_id)
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{TRACE_FILE}.tmp"
    tmp.write_text(json.dumps(files, separators=(",", ":"), default=str), encoding="utf-8")
    tmp.replace(folder / TRACE_FILE)
    return folder


def _parts(folder: Path) -> dict[str, Any]:
    path = folder / TRACE_FILE
    if not path.is_file():
        raise FileNotFoundError("no such trace")
    parts: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    meta = parts.get("_meta.json")
    if isinstance(meta, dict):
        for name, section in FROM_META.items():
            if name not in parts and section in meta:
                parts[name] = meta[section]
    return parts


def read_trace_file(root: Path, caller: Caller, request_id: str, name: str) -> Any:
    parts = _parts(_folder(root, caller, request_id))
    if name not in parts:
        raise FileNotFoundError("no such trace")
    return parts[name]


def bundle_zip(root: Path, caller: Caller, request_id: str, name: str) -> bytes:
    """The zip for ``name``; BundleRefused with a reason when the role may not have it."""
    if name not in BUNDLES:
        raise BundleRefused("unknown bundle")
    if name == "bundle_full" and not caller.profile.can_download_full:
        raise BundleRefused("policy:bundle_full_not_permitted")
    folder = _folder(root, caller, request_id)
    if not folder.is_dir():
        raise FileNotFoundError("no such trace")
    parts = _parts(folder)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for file in VIEW_FILES if name == "bundle_view" else FULL_FILES:
            if file in parts:
                zf.writestr(file, json.dumps(parts[file], separators=(",", ":"), default=str))
    return buffer.getvalue()
