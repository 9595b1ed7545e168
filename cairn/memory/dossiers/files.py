"""Reading packets and blocks from files: a JSON array, one JSON object, or JSON lines.

Every record is validated before anything is written, and a problem names its line (JSON
lines) or array position, so a 10 000-line file with one bad line fails with the line
number and writes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from cairn.memory.dossiers.models import (
    BlockInput,
    FactPacket,
    InputError,
    Problem,
    parse_block,
    parse_packet,
)
from cairn.schema import unique_json

T = TypeVar("T")


def _records(path: Path) -> list[tuple[str, Any]]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError("file", [Problem(str(path), exc.strerror or str(exc))]) from None
    except UnicodeDecodeError as exc:
        raise InputError("file", [Problem(f"{path.name}", f"not UTF-8 text (byte {exc.start})")]) from None
    stripped = text.lstrip()
    if stripped.startswith(("[", "{")) and not _is_json_lines(stripped):
        try:
            data = unique_json.loads(text)
        except unique_json.DuplicateKey as exc:
            raise InputError("file", [_repeat(path, exc, 1)]) from None
        except ValueError as exc:
            raise InputError("file", [Problem(str(path), f"not valid JSON: {exc}")]) from None
        items = data if isinstance(data, list) else [data]
        return [(f"{path.name}[{i}]: ", item) for i, item in enumerate(items)]
    out: list[tuple[str, Any]] = []
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            out.append((f"{path.name}:{n}: ", unique_json.loads(line)))
        except unique_json.DuplicateKey as exc:
            out.append((f"{path.name}:{n}: ", _repeat(path, exc, n)))
        except ValueError as exc:
            out.append((f"{path.name}:{n}: ", Problem(f"{path.name}:{n}", f"not valid JSON: {exc}")))
    return out


def _repeat(path: Path, exc: unique_json.DuplicateKey, first_line: int) -> Problem:
    """A repeated key (``cairn.schema.unique_json``) in text starting at ``first_line`` of the
    file: refused, since another reader of the file may keep the first of the two values where
    Python keeps the last."""
    return Problem(
        f"{path.name}:{first_line + (exc.line or 1) - 1}",
        f"col {exc.column}: an object repeats the key {exc.shown_key()}",
    )


def _is_json_lines(text: str) -> bool:
    """More than one non-blank line, each a complete JSON value."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if len(lines) < 2:
        return False
    try:
        for ln in lines[:2]:
            json.loads(ln)
    except ValueError:
        return False
    return True


def _parse_all(path: Path, parse: Callable[[Any, str], T], key: Callable[[T], str] | None = None) -> list[T]:
    """Every record of the file, or every problem with its place; ``key`` names what must be
    unique in the file, so a repeat is reported at its line rather than later without one."""
    parsed: list[T] = []
    problems: list[Problem] = []
    first_seen: dict[str, str] = {}
    for where, raw in _records(path):
        if isinstance(raw, Problem):
            problems.append(raw)
            continue
        try:
            record = parse(raw, where)
        except InputError as exc:
            problems += exc.problems
            continue
        parsed.append(record)
        if key is not None:
            name, place = key(record), where.rstrip(": ")
            if name in first_seen:
                problems.append(Problem(place, f"'{name}' is listed twice (first at {first_seen[name]})"))
            first_seen.setdefault(name, place)
    if problems:
        raise InputError("file", problems)
    if not parsed:
        raise InputError("file", [Problem(path.name, "no records: the file is empty")])
    return parsed


def read_packets(path: Path) -> list[FactPacket]:
    return _parse_all(path, parse_packet)


def read_blocks(path: Path) -> list[BlockInput]:
    return _parse_all(path, parse_block, key=lambda block: block.block_id)
