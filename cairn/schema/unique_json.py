"""JSON in which no object repeats a key: request bodies and every JSON file a loader reads.

Python's parser keeps the last of two equal keys, another parser (a gateway's inspecting
``query``, a reviewer's tool reading a fixture file) may keep the first, so one text read two
ways could pass a check on one reading and be written as the other. A repeat is refused at any
depth, naming the key and, for text, its line and column (docs/design.md §Errors).
"""

from __future__ import annotations

import json
from json.decoder import WHITESPACE, JSONObject, scanstring  # type: ignore[attr-defined]
from json.scanner import py_make_scanner  # type: ignore[attr-defined]
from typing import Any


class DuplicateKey(ValueError):
    """A JSON object names one key twice; ``line`` and ``column`` (1-based) place the repeat."""

    def __init__(self, key: str, line: int | None = None, column: int | None = None) -> None:
        super().__init__(key)
        self.key, self.line, self.column = key, line, column

    def place(self) -> str:
        """``line L col C`` (empty when unknown)."""
        return "" if self.line is None else f"line {self.line} col {self.column}"

    def shown_key(self) -> str:
        """The key as a message quotes it: at most 64 characters."""
        return repr(self.key if len(self.key) <= 64 else self.key[:64] + "...")


def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``json.loads``'s ``object_pairs_hook``: the object, or DuplicateKey for a repeated key."""
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise DuplicateKey(key)
            seen.add(key)
    return out


def loads(text: str | bytes) -> Any:
    """``json.loads`` refusing a repeated key (DuplicateKey, placed when ``text`` is text)."""
    try:
        return json.loads(text, object_pairs_hook=unique_keys)
    except DuplicateKey as exc:
        if isinstance(text, str):
            offset = _repeat_offset(text)
            if offset is not None:
                line = text.count("\n", 0, offset) + 1
                raise DuplicateKey(exc.key, line, offset - text.rfind("\n", 0, offset)) from None
        raise


class _Placing(json.JSONDecoder):
    """The pure-Python scanner with its object parser wrapped (the C one cannot be), which notes
    where the first repeated key stands: used only once a repeat is known to be there."""

    def __init__(self) -> None:
        super().__init__(object_pairs_hook=unique_keys)
        self.found: int | None = None
        self.parse_object = self._parse_object
        self.scan_once = py_make_scanner(self)

    def _parse_object(self, s_and_end: tuple[str, int], *args: Any) -> Any:
        try:
            return JSONObject(s_and_end, *args)
        except DuplicateKey:
            if self.found is None:  # the innermost object holds it: the first to fail
                self.found = _repeat_in(*s_and_end, args[1])
            raise


def _repeat_offset(text: str) -> int | None:
    """Where the first repeated key of ``text`` stands."""
    decoder = _Placing()
    try:
        decoder.decode(text)
    except DuplicateKey:
        return decoder.found
    except RecursionError:  # the pure-Python scanner nests deeper per level than the C one
        return None
    return None


def _repeat_in(s: str, pos: int, scan_once: Any) -> int:
    """The offset of the first key of the object opened before ``pos`` that an earlier one repeats."""
    seen: set[str] = set()
    while True:
        pos = WHITESPACE.match(s, pos).end()
        start = pos
        key, pos = scanstring(s, pos + 1)
        if key in seen:
            return start
        seen.add(key)
        pos = WHITESPACE.match(s, WHITESPACE.match(s, pos).end() + 1).end()  # past the ':'
        _, pos = scan_once(s, pos)
        pos = WHITESPACE.match(s, pos).end() + 1  # past the ','
