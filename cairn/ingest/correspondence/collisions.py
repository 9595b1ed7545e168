"""The collision log: one JSON line per section whose filed number differs from its canonical one.

Collisions are data (docs/design.md §Numbering collisions): the markdown is never corrected
and each section keeps both numbers; this file is the separate, human-readable record of
every collision. It is a projection of the store, appended to and never rewritten: after
each sync, every collided section of the source that the log does not list yet is appended,
so a crash between the database commit and the log write heals on the next run instead of
losing an entry.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cairn.runtime.settings import Settings

LOG_NAME = "collisions.jsonl"


def default_log_path(settings: Settings) -> Path:
    return settings.data_dir / "correspondence" / LOG_NAME


Key = tuple[str, str, int]


def _key(entry: dict[str, Any]) -> Key:
    """One collision: which section, filed as what, numbered what."""
    return (str(entry.get("section_id")), str(entry.get("filed_id")), int(entry.get("canonical_number") or 0))


def logged(path: Path) -> set[Key]:
    """The collisions the log already records (lines that are not JSON objects are skipped)."""
    if not path.exists():
        return set()
    keys: set[Key] = set()
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(entry, dict):
            keys.add(_key(entry))
    return keys


def _torn(path: Path) -> bool:
    """Whether the log's last line was cut off (the file does not end with a newline)."""
    if not path.exists() or path.stat().st_size == 0:
        return False
    with path.open("rb") as f:
        f.seek(-1, 2)
        return f.read(1) != b"\n"


def record(path: Path, collided: list[dict[str, Any]]) -> int:
    """Append the collided sections not yet logged; return how many lines were written."""
    if not collided:
        return 0
    known = logged(path)
    fresh = [c for c in collided if _key(c) not in known]
    if not fresh:
        return 0
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)  # titles of sections of every access
    stamp = datetime.now(UTC).isoformat(timespec="seconds")
    with path.open("a", encoding="utf-8") as log:
        if _torn(path):
            log.write("\n")  # a run killed mid-line: end the fragment so the next entry stays whole
        for entry in fresh:
            log.write(json.dumps({"logged_at": stamp, **entry}, ensure_ascii=False, sort_keys=True) + "\n")
    return len(fresh)
