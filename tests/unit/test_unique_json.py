"""``unique_json.loads``: a repeated key is refused at any depth the parser accepts."""

from __future__ import annotations

import pytest

from cairn.schema.unique_json import DuplicateKey, loads


def test_a_repeat_is_placed_by_line_and_column() -> None:
    with pytest.raises(DuplicateKey) as caught:
        loads('{"a": 1,\n "a": 2}')
    assert (caught.value.key, caught.value.line, caught.value.column) == ("a", 2, 2)


def test_a_repeat_nested_deeper_than_the_placing_scanner_reaches_is_still_refused() -> None:
    """The C parser takes about one frame per level, the pure-Python scanner that places the
    repeat about three: at 400 levels placing it overflows the stack. The repeat is refused
    all the same, unplaced, never a RecursionError (review of stop 27)."""
    text = '{"a":' * 400 + '{"k": 1, "k": 2}' + "}" * 400
    with pytest.raises(DuplicateKey) as caught:
        loads(text)
    assert caught.value.key == "k"
    assert caught.value.place() == ""
