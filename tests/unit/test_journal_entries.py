"""A ``summary_updated`` marked ``Entry.summary_of`` is journalled the same way on both journal
paths: kept only when the write changed the summary, with the write's values, the unit's
entries numbered once it is left out (``WRITE_ROUTES`` for a packet, ``entry_rows`` for a merge).
Before, ``entry_rows`` dropped the mark and wrote the entry whatever the write did."""

from __future__ import annotations

import pytest

from cairn.memory.dossiers.journal import Entry, entry_rows
from cairn.memory.dossiers.models import Access

ACCESS = Access(domain="acme/product", sensitivity="low", namespaces=("internal",), roles_allowed=("staff",))
ENTRIES = [
    Entry("merged", ("d-target", "d-source"), previous_value="d-source", new_value="d-target"),
    Entry("summary_updated", ("d-target",), rationale="2 fact(s) merged in", summary_of="d-target"),
    Entry("archived", ("d-target",)),
]


def _rows(summaries: dict[str, tuple[str | None, str | None]]) -> list[tuple[str, str, object, object]]:
    rows = entry_rows("k", ENTRIES, ACCESS, "2026-01-01T00:00:00Z", summaries)
    return [(r["id"], r["props"]["op"], r["props"]["previous_value"], r["props"]["new_value"]) for r in rows]


def test_a_changed_summary_is_journalled_with_the_writes_values() -> None:
    assert _rows({"d-target": ("old", "new")}) == [
        ("je-k-0", "merged", "d-source", "d-target"),
        ("je-k-1", "summary_updated", "old", "new"),
        ("je-k-2", "archived", None, None),
    ]
    # A dossier with no summary yet reads as '' before, as WRITE_ROUTES reads it.
    assert _rows({"d-target": (None, "new")})[1] == ("je-k-1", "summary_updated", "", "new")


@pytest.mark.parametrize("before,after", [("same", "same"), (None, ""), ("", None), (None, None)])
def test_an_unchanged_summary_is_left_out_and_leaves_no_gap(before: str | None, after: str | None) -> None:
    assert _rows({"d-target": (before, after)}) == [
        ("je-k-0", "merged", "d-source", "d-target"),
        ("je-k-1", "archived", None, None),
    ]


def test_an_entry_of_a_summary_no_write_returned_is_refused() -> None:
    with pytest.raises(ValueError, match="'d-target'"):
        entry_rows("k", ENTRIES, ACCESS, "2026-01-01T00:00:00Z")
    with pytest.raises(ValueError, match="'d-target'"):
        entry_rows("k", ENTRIES, ACCESS, "2026-01-01T00:00:00Z", {"d-other": ("a", "b")})
