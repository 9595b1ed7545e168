"""Journal entries about dossiers: the provenance of every change (SPEC §7).

Each create, fact added, summary update, duplicate skipped, merge, split, archive and link is one
``JournalEntry`` node with an ``ABOUT`` edge to every dossier it concerns. An entry carries
the access fields of the dossier it is about, so a role sees a dossier's history exactly when
it sees the dossier. The entries of one unit of work share a timestamp and are ordered by
``seq``; ids are derived from the unit of work (``je-<key>-<seq>``), so a unit applied twice
is recognised by its first entry (see ``lock.take_lock``). A packet's key is its client's own;
a merge's or a link's is keyed with the database's secret (``lock.keyed_lock``), so no reader
can compute it from the dossier ids and so recognise an entry whose ``op`` it may not read.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from neo4j import ManagedTransaction

from cairn.graph import dossiers as cypher
from cairn.memory.dossiers.models import Access

OPS = (
    "created",
    "fact_added",
    "fact_skipped",
    "summary_updated",
    "merged",
    "merged_into",
    "archived",
    "linked",
    "split",
)


@dataclass(frozen=True)
class Entry:
    op: str
    about: tuple[str, ...]
    new_value: str | None = None
    previous_value: str | None = None
    excerpt: str | None = None
    rationale: str | None = None
    confidence: float | None = None
    session_id: str | None = None
    details: dict[str, Any] = field(default_factory=dict)
    # A ``summary_updated`` whose values are a write's: journalled only if the write changed this
    # dossier's summary, with the summaries before and after as the write left them. A packet's
    # are decided inside ``cypher.WRITE_ROUTES``, any other unit's by ``write_entries`` from the
    # summaries its write returned: the same entries for the same change on either path.
    summary_of: str | None = None


def entry_id(key: str, seq: int) -> str:
    return f"je-{key}-{seq}"


Summaries = Mapping[str, tuple[str | None, str | None]]


def entry_rows(
    key: str, entries: list[Entry], access: Access, now: str, summaries: Summaries | None = None
) -> list[dict[str, Any]]:
    """``WRITE_JOURNAL_ENTRIES`` rows: each entry under its id, numbered in order once the
    unchanged summaries are left out, as ``WRITE_ROUTES`` does for a packet. ``summaries``: per
    dossier, its summary before and after the unit's write (a missing one reads as ''); an entry
    ``summary_of`` a dossier it does not name is refused, since nothing says what the write did."""
    kept = []
    for e in entries:
        if e.summary_of is None:
            kept.append(e)
            continue
        if summaries is None or e.summary_of not in summaries:
            raise ValueError(
                f"journal entry {e.op!r} is of {e.summary_of!r}'s summary, which no write returned"
            )
        previous, summary = (v or "" for v in summaries[e.summary_of])
        if summary != previous:
            kept.append(replace(e, previous_value=previous, new_value=summary, summary_of=None))
    return [
        {"id": entry_id(key, seq), "about": row["about"], "props": row["props"], "now": now}
        for seq, row in enumerate(unit_rows(key, kept, access))
    ]


def unit_rows(key: str, entries: list[Entry], access: Access) -> list[dict[str, Any]]:
    """One unit of work's entries as rows (``about``, ``props``, ``summary_of``), numbered in
    order; ``WRITE_ROUTES`` numbers a packet's again once it has left out its unchanged summaries."""
    rows = []
    for seq, e in enumerate(entries):
        if e.op not in OPS:
            raise ValueError(f"unknown journal op {e.op!r}")
        props = {
            "op": e.op,
            "seq": seq,
            "work_key": key,
            "new_value": e.new_value,
            "previous_value": e.previous_value,
            "excerpt": e.excerpt,
            "rationale": e.rationale,
            "confidence": e.confidence,
            "session_id": e.session_id,
            "details": json.dumps(e.details, sort_keys=True),
            **access.props(),
        }
        rows.append({"about": list(e.about), "props": props, "summary_of": e.summary_of})
    return rows


def write_entries(
    tx: ManagedTransaction,
    key: str,
    entries: list[Entry],
    access: Access,
    now: str,
    summaries: Summaries | None = None,
) -> None:
    """One unit of work's entries in one statement (a packet's are written by ``WRITE_ROUTES``);
    ``summaries`` as ``entry_rows`` reads them."""
    rows = entry_rows(key, entries, access, now, summaries)
    if rows:
        tx.run(cypher.WRITE_JOURNAL_ENTRIES, entries=rows).consume()
