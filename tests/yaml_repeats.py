"""A YAML file with one key repeated: what the duplicate-key tests feed the loaders."""

from __future__ import annotations

from pathlib import Path


def repeat_after(path: Path, text: str, anchor: str, repeat: str, into: Path) -> tuple[Path, int]:
    """``text`` (a file's) with ``repeat`` inserted as the line after the first ``anchor`` line;
    the copy's path and the inserted line's number."""
    lines = text.splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if line.strip() == anchor) + 1
    lines.insert(at, repeat + "\n")
    out = into / path.name
    out.write_text("".join(lines), encoding="utf-8")
    return out, at + 1
