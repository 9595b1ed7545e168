"""The Templater: composes the short answer (note 004 §2) from the items the gate let through.

It is the last step before text reaches a user, so it is where the prose guarantees are kept:
it reads only the anchor and the included items (never the rest of the pool), every free-text
piece is clamped so one long summary cannot swamp the card, and every known node id, visible or
withheld, is scrubbed from the prose, because an id is itself evidence that a node exists. The
permissions note is the only trace of withheld items a reader ever sees.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

from cairn.memory.selector import headline, node_timestamp
from cairn.policy.preselector import CandidateNode, CandidateSet

__all__ = [
    "MAX_FACTS",
    "MAX_SENTENCE_CHARS",
    "PERMISSIONS_NOTE",
    "REDACTED",
    "Envelope",
    "compose",
    "render_evidence_line",
    "scrub_ids",
]

PERMISSIONS_NOTE = "Note: Some evidence was withheld due to your permissions."
REDACTED = "[redacted]"
MAX_FACTS = 3
MAX_SENTENCE_CHARS = 200
MAX_MAKER_CHARS = 80
ELLIPSIS = "…"
_ALNUM = re.compile(r"[^\W_]")
_NOT_AFTER_ALNUM = r"(?<![^\W_])"
_NOT_BEFORE_ALNUM = r"(?![^\W_])"


@dataclass(frozen=True)
class Envelope:
    """The UI card: the answer text, the ids it rests on (for the trace only) and the note, if any."""

    text: str
    cited_ids: list[str]
    permissions_note: str | None


def render_evidence_line(node: CandidateNode, known_ids: Iterable[str] = ()) -> str:
    """The one line an item contributes to a prompt; ids are scrubbed since prompts are shown too."""
    return _dated(_title(node, {node.id, *known_ids}), _date(node))


def compose(
    cs: CandidateSet,
    included_ids: list[str],
    withheld_by_policy: bool,
    extra_ids: Iterable[str] = (),
) -> Envelope:
    """The §2 answer for ``cs.anchor`` built only from ``included_ids`` (in their given order).

    ``extra_ids`` are ids the caller knows but the CandidateSet does not carry (the policy-withheld
    ones), so they are scrubbed too. Parts without visible data are left out rather than filled.
    """
    nodes = cs.by_id()
    known = {*nodes, *extra_ids, *(e.source for e in cs.edges), *(e.target for e in cs.edges)}
    anchor = cs.anchor
    included = [nodes[i] for i in dict.fromkeys(included_ids) if i in nodes and i != anchor.id]
    before, after, aliases = _neighbours(cs)

    facts = [
        n for n in included if n.label != "Decision" and (n.id in before or n.id in aliases) and headline(n)
    ][:MAX_FACTS]
    origin = _first_decision(included, before)
    successor = _first_decision(included, after)

    lines = [_opening(anchor, known)]
    if facts:
        lines.append("Supporting Facts: " + "; ".join(_dated(_title(n, known), _date(n)) for n in facts))
    links = [f"{label}: {_title(n, known)}." for label, n in (("From", origin), ("Next", successor)) if n]
    if links:
        lines.append(" ".join(links))
    # Pieces were scrubbed one by one; scrubbing the joined text also catches an id spelled
    # across two pieces.
    text = scrub_ids("\n".join(lines), known)
    note = PERMISSIONS_NOTE if withheld_by_policy else None
    if note:
        text = f"{text}\n{note}"
    cited = [anchor.id, *(n.id for n in facts), *(n.id for n in (origin, successor) if n)]
    return Envelope(text, cited, note)


def scrub_ids(text: str, ids: Iterable[str]) -> str:
    """Replace every occurrence of any of ``ids`` (case-insensitive, longest first) with REDACTED.

    An occurrence counts unless a letter or digit touches its letter-or-digit edge, so
    ``acme-e-x_v2``, ``(acme-e-x)`` and ``acme-e-x-2`` are all caught, yet a short id such as
    ``x`` cannot eat into ordinary words. Edges that are punctuation need no boundary: otherwise
    replacing a neighbour could turn a glued occurrence into a free-standing one after the pass.
    """
    known = tuple(sorted({i for i in ids if i}, key=lambda i: (-len(i), i)))
    if not known:
        return text
    return _scrubber(known).sub(REDACTED, text)


@lru_cache(maxsize=1024)
def _scrubber(known: tuple[str, ...]) -> re.Pattern[str]:
    """One compiled alternation per id set: an ask scrubs many strings against the same ids."""
    return re.compile("|".join(_bounded(i) for i in known), re.IGNORECASE)


def _bounded(node_id: str) -> str:
    before = _NOT_AFTER_ALNUM if _ALNUM.match(node_id[0]) else ""
    after = _NOT_BEFORE_ALNUM if _ALNUM.match(node_id[-1]) else ""
    return f"{before}{re.escape(node_id)}{after}"


def _neighbours(cs: CandidateSet) -> tuple[set[str], set[str], set[str]]:
    """Ids directly before the anchor, directly after it, and its alias projections.

    The decision an alias-event anchor projects counts as "before": it is where the event came from.
    """
    anchor = cs.anchor.id
    before: set[str] = set()
    after: set[str] = set()
    aliases: set[str] = set()
    for edge in cs.edges:
        if edge.type == "CAUSAL_PRECEDES":
            if edge.target == anchor:
                before.add(edge.source)
            elif edge.source == anchor:
                after.add(edge.target)
        elif edge.type == "ALIAS_OF":
            if edge.source == anchor:
                aliases.add(edge.target)
            elif edge.target == anchor:
                before.add(edge.source)
    return before, after, aliases


def _first_decision(included: list[CandidateNode], ids: set[str]) -> CandidateNode | None:
    return next((n for n in included if n.label == "Decision" and n.id in ids and headline(n)), None)


def _opening(anchor: CandidateNode, known: set[str]) -> str:
    """'{maker} on {date}: {title}.' with the maker and date dropped when masked or absent."""
    title = _title(anchor, known)
    date = _date(anchor)
    raw_maker = anchor.text("decision_maker") if anchor.label == "Decision" else None
    maker = _clamp(scrub_ids(" ".join(raw_maker.split()), known), MAX_MAKER_CHARS) if raw_maker else ""
    if maker and date:
        return f"{maker} on {date}: {title}."
    if maker:
        return f"{maker}: {title}."
    return f"{_dated(title, date)}."


def _title(node: CandidateNode, known: set[str]) -> str:
    """The node's headline, scrubbed then clamped (clamping cannot bring an id back; the reverse could)."""
    text = headline(node) or f"Untitled {node.label.lower()}"
    return _clamp(scrub_ids(text, known), MAX_SENTENCE_CHARS).rstrip(" .")


def _dated(text: str, date: str | None) -> str:
    return f"{text} ({date})" if date else text


def _date(node: CandidateNode) -> str | None:
    ts = node_timestamp(node)
    return ts.date().isoformat() if ts else None


def _clamp(text: str, limit: int) -> str:
    """At most ``limit`` characters, cut at a word boundary when one is near, marked with an ellipsis."""
    if len(text) <= limit:
        return text
    cut = text[: limit - len(ELLIPSIS)]
    space = cut.rfind(" ")
    if space > limit // 2:
        cut = cut[:space]
    return cut.rstrip(" ,;:.-") + ELLIPSIS
