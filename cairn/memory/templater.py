"""The Templater: composes the short answer from the items the gate let through.

docs/design.md §Answer pipeline.

A why answer is an explanation, so it is built from the structure the graph holds, not from
loose text: the decision (who, when, what, and its rationale when the role may read it), then
"Because:" every direct cause the caller may see, in causal order (oldest first), each with the
relation its CAUSAL_PRECEDES edge carries ("based on", "supported by", "replaces", …), its date,
its key (title plus id) and the transition's reason or the cause's own rationale; then what the
decision led to and where it was projected. When the budget gate clipped causes, the answer says
how many more there are and where to see them.

It is the last step before text reaches a user, so it is where the prose guarantees are kept:

* it reads only the anchor and the included items (never the rest of the pool);
* every free-text piece is clamped so one long summary cannot swamp the card;
* every withheld id is scrubbed from free text, and so is every visible id that occurs there:
  the only ids printed are the keys of visible nodes (the caller receives those nodes and ids
  as evidence anyway); a withheld id never appears, not even as a key, because the templater
  never holds a withheld node;
* records are told apart by id, never by text: two decisions sharing a title stay two records,
  and the anchor is never its own cause;
* every line of the answer maps to the ids it rests on (``Envelope.sentences``), and
  ``validate_answer`` checks that mapping, so an unsupported sentence is caught.

The permissions note is the only trace of withheld items a reader ever sees: a fixed sentence,
or, where the role profile allows disclosure, how many were withheld and why.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from cairn.memory.selector import _parse_timestamp, headline, node_timestamp, parts
from cairn.policy.preselector import CandidateEdge, CandidateNode, CandidateSet
from cairn.schema.catalog import CAUSAL_RELATIONS

__all__ = [
    "MAX_REASON_CHARS",
    "MAX_SENTENCE_CHARS",
    "MORE_CAUSES_WHERE",
    "PERMISSIONS_NOTE",
    "REDACTED",
    "Cause",
    "Envelope",
    "Sentence",
    "compose",
    "evidence_lines",
    "known_ids",
    "permissions_note",
    "relation_words",
    "render_evidence_line",
    "scrub_ids",
    "validate_answer",
]

PERMISSIONS_NOTE = "Note: Some evidence was withheld due to your permissions."
REDACTED = "[redacted]"
MAX_SENTENCE_CHARS = 200
MAX_REASON_CHARS = 240
MAX_MAKER_CHARS = 80
MORE_CAUSES_WHERE = "see the evidence list and the trace bundle"
ELLIPSIS = "…"
# How a stored relation name reads in "<decision> <relation> <cause>": the catalog's words; a
# name stored before the catalog knew it is shown as written (underscores as spaces).
RELATION_WORDS = {**{r.name: r.reads_as for r in CAUSAL_RELATIONS.values()}, "alias": "projected from"}
GENERIC_RELATIONS = frozenset({"causal", "led_to"})
# The links between records that change the earlier one's standing ("Superseded by", "Amended
# by"): the relations the catalog also knows as the earlier record states them.
STANDING_RELATIONS = frozenset(r.name for r in CAUSAL_RELATIONS.values() if r.stated_on_cause)
# Withheld reasons (policy/acl.py, preselector) as a reader would say them.
WITHHELD_WORDS = {
    "scope:domain": "outside your domains",
    "acl:role_missing": "not shared with your role",
    "acl:namespace_mismatch": "in a namespace you do not hold",
    "acl:sensitivity_exceeded": "above your sensitivity ceiling",
    "edge:not_allowed": "behind a link your role may not follow",
}
_ALNUM = re.compile(r"[^\W_]")
_RUN = re.compile(r"[^\W_]+")
_NOT_AFTER_ALNUM = r"(?<![^\W_])"
_NOT_BEFORE_ALNUM = r"(?![^\W_])"


@dataclass(frozen=True)
class Cause:
    """One visible direct cause as the answer names it (also what the UI lists and links)."""

    id: str
    label: str
    title: str
    relation: str  # the stored name of the strongest relation ("based_on", "replaces", …)
    relations: tuple[str, ...]  # every stored name, for an edge stated by several sources
    words: str  # how the relations read
    date: str | None
    why: str | None  # the transition's reason, else the cause's own rationale


@dataclass(frozen=True)
class Sentence:
    """One line of the answer and the ids it rests on."""

    text: str
    ids: tuple[str, ...]


@dataclass(frozen=True)
class Envelope:
    """The UI card: the answer text, the ids it rests on, its causes, and the note, if any."""

    text: str
    cited_ids: list[str]
    permissions_note: str | None
    causes: list[Cause] = field(default_factory=list)
    more_causes: int = 0
    sentences: list[Sentence] = field(default_factory=list)

    def causes_json(self) -> list[dict[str, Any]]:
        # Cause's fields, in order (what dataclasses.asdict gives, without its deep copy).
        return [{**c.__dict__, "relations": list(c.relations)} for c in self.causes]


@dataclass(frozen=True)
class KnownIds:
    """The ids free text is scrubbed of.

    Withheld ids always, with the full case-insensitive matcher: they must never show. Visible
    ids only where they occur: a visible id is no secret, it is printed as a key, and one matcher
    over every id of a large neighbourhood costs more to build than the rest of the answer. An
    id is scrubbed only where no letter or digit touches its letter-or-digit edges
    (``scrub_ids``), so an id that begins and ends with one can occur only with its first run of
    letters and digits standing as a whole word of the text: those ids are looked up by that
    word (``by_word``), the few others tested against the whole text (``others``), each with
    its case-folded form.
    """

    hidden: frozenset[str]
    by_word: dict[str, tuple[tuple[str, str], ...]]
    others: tuple[tuple[str, str], ...]
    hidden_matcher: re.Pattern[str] | None  # scrub_ids' matcher of the hidden ids alone

    @classmethod
    def of(cls, hidden: Iterable[str], visible: Iterable[str]) -> KnownIds:
        shown = set(visible)
        by_word: dict[str, tuple[tuple[str, str], ...]] = {}
        others: list[tuple[str, str]] = []
        # In no particular order: scrub_ids sorts the ids it is given (longest first, then by id).
        for i in shown:
            if not i:
                continue
            word, pair = _id_word(i)
            if word is None:
                others.append(pair)
            elif word in by_word:
                by_word[word] += (pair,)
            else:
                by_word[word] = (pair,)
        withheld = frozenset(set(hidden) - shown)
        known = tuple(sorted({i for i in withheld if i}, key=lambda i: (-len(i), i)))
        return cls(withheld, by_word, tuple(others), _scrubber(known) if known else None)

    def scrub(self, text: str) -> str:
        folded, runs = _folded_runs(text)
        by_word = self.by_word
        # Usually none: one test, no set built.
        present = []
        if not by_word.keys().isdisjoint(runs):
            present = [i for w in by_word.keys() & runs for i, f in by_word[w] if f in folded]
        if self.others:
            present += [i for i, f in self.others if f in folded]
        if present:
            return scrub_ids(text, [*self.hidden, *present])
        # What scrub_ids(text, self.hidden) does, without sorting the ids again for every text.
        return self.hidden_matcher.sub(REDACTED, text) if self.hidden_matcher else text


@lru_cache(maxsize=8192)
def _id_word(node_id: str) -> tuple[str | None, tuple[str, str]]:
    """When an id begins and ends with a letter or digit, the first run of letters and digits it
    can only occur with (``KnownIds.by_word``); and the id with its case-folded form; once per id."""
    folded = node_id.casefold()
    first = _RUN.search(folded)
    if first is not None and _ALNUM.match(node_id[0]) and _ALNUM.match(node_id[-1]) and first.start() == 0:
        return first.group(), (node_id, folded)
    return None, (node_id, folded)


@lru_cache(maxsize=8192)
def _folded_runs(text: str) -> tuple[str, frozenset[str]]:
    """A text case-folded, and its runs of letters and digits: once per text (titles recur)."""
    folded = text.casefold()
    return folded, frozenset(_RUN.findall(folded))


def relation_words(relations: Sequence[str]) -> str:
    """'based on', 'replaces and requires', … for the stored relation names.

    The generic names ("causal", "led_to") only say that a link exists; when an edge also carries
    a specific name, that name is the one a reader needs.
    """
    named = [r for r in dict.fromkeys(relations) if r]
    specific = [r for r in named if r not in GENERIC_RELATIONS]
    words = [RELATION_WORDS.get(r, r.replace("_", " ")) for r in (specific or named)]
    return " and ".join(words) if words else RELATION_WORDS["causal"]


def permissions_note(withheld_reasons: Sequence[str], disclose: bool) -> str | None:
    """None when nothing was withheld; the fixed note, or counts by reason where disclosed."""
    if not withheld_reasons:
        return None
    if not disclose:
        return PERMISSIONS_NOTE
    n = len(withheld_reasons)
    by_reason = Counter(WITHHELD_WORDS.get(r, "withheld by policy") for r in withheld_reasons)
    kinds = ", ".join(f"{count} {words}" for words, count in sorted(by_reason.items()))
    items = "1 item was" if n == 1 else f"{n} items were"
    return f"Note: {items} withheld due to your permissions ({kinds})."


def render_evidence_line(
    node: CandidateNode, known_ids: Iterable[str] = (), cs: CandidateSet | None = None
) -> str:
    """The one line an item contributes to a prompt: title and date, scrubbed of ``known_ids``
    and its own id; with ``cs``, the structured line of ``evidence_lines``."""
    if cs is not None:
        return evidence_lines(cs, [node.id], known_ids)[0]
    known = KnownIds.of({node.id, *known_ids}, ())
    return _dated(_title(node, known), _date(node))


def evidence_lines(
    cs: CandidateSet, ids: Sequence[str], withheld_ids: Iterable[str] = (), known: KnownIds | None = None
) -> list[str]:
    """The prompt line of each of ``ids``: its part, relation, key, date and reason.

    The same structured evidence the templater answers from, so an LLM answering instead is
    given exactly what the card would say; free text is scrubbed as in the card. ``known`` is
    ``known_ids(cs, withheld_ids)`` when the caller has it already.
    """
    nodes = cs.by_id()
    known = known or KnownIds.of(withheld_ids, nodes)
    role = parts(cs)
    into = _edges_into_anchor(cs)
    lines = []
    for node_id in ids:
        node = nodes[node_id]
        key = _key(node, known)
        part = role.get(node.id, "context")
        if node.id == cs.anchor.id:
            rationale = _rationale(node, known)
            lines.append(
                f"decision {_opening(node, known)}" + (f" Rationale: {rationale}." if rationale else "")
            )
        elif part == "cause":
            edge = into.get(node.id)
            why = _why(node, edge, known)
            words = relation_words(_relations(edge))
            lines.append(f"cause ({words}): {_dated(key, _date(node))}" + (f": {why}." if why else ""))
        else:
            date = _date(node)
            lines.append(f"{part}: {key} ({date})" if date else f"{part}: {key}")  # _dated, inline
    return lines


def compose(
    cs: CandidateSet,
    included_ids: list[str],
    withheld_by_policy: bool,
    extra_ids: Iterable[str] = (),
    note: str | None = None,
    known: KnownIds | None = None,
) -> Envelope:
    """The §2 answer for ``cs.anchor`` built only from ``included_ids``.

    ``extra_ids`` are ids the caller knows but the CandidateSet does not carry (the policy-withheld
    ones), so they are scrubbed too. ``note`` overrides the fixed permissions note (the disclosed
    counts); it is used only when ``withheld_by_policy``. Parts without visible data are left out.
    ``known`` is ``known_ids(cs, extra_ids)`` when the caller has it already.
    """
    nodes = cs.by_id()
    hidden = {*extra_ids} - set(nodes)
    known = known or known_ids(cs, hidden)
    into = _edges_into_anchor(cs)
    anchor = cs.anchor
    included = [nodes[i] for i in dict.fromkeys(included_ids) if i in nodes and i != anchor.id]
    role = parts(cs)

    all_causes = [n for n in nodes.values() if role.get(n.id) == "cause" and n.id != anchor.id]
    causes = _causal_order([n for n in included if role.get(n.id) == "cause"])
    named_ids = {n.id for n in causes}  # one node per id (by_id): the id tells them apart
    clipped = _causal_order([n for n in all_causes if n.id not in named_ids])
    effects = _causal_order([n for n in included if role.get(n.id) == "consequence"])
    aliases = _causal_order([n for n in included if role.get(n.id) == "alias"])

    sentences = [Sentence(_opening(anchor, known), (anchor.id,))]
    rationale = _rationale(anchor, known)
    if rationale:
        sentences.append(Sentence(f"Rationale: {rationale}.", (anchor.id,)))
    named = [_cause(n, into.get(n.id), known) for n in causes]
    if named or clipped:
        sentences.append(Sentence("Because:", tuple(c.id for c in named) or tuple(n.id for n in clipped)))
    for c in named:
        line = f"- {c.words}: {c.title} [{c.id}]" + (f" ({c.date})" if c.date else "")
        sentences.append(Sentence(line + (f" — {c.why}." if c.why else "."), (c.id,)))
    if clipped:
        more = f"- … and {len(clipped)} more cause{'s' if len(clipped) > 1 else ''} ({MORE_CAUSES_WHERE})."
        sentences.append(Sentence(more, tuple(n.id for n in clipped)))
    out_of = _edges_out_of_anchor(cs) if effects else {}
    for label, group in (("Led to", effects), ("Projected as", aliases)):
        if group:
            listed = "; ".join(_dated(_key(n, known), _date(n)) + _standing(out_of.get(n.id)) for n in group)
            sentences.append(Sentence(f"{label}: {listed}.", tuple(n.id for n in group)))

    # Pieces were scrubbed one by one; scrubbing each line again for the withheld ids also
    # catches one spelled across two pieces (visible ids are printed on purpose, as keys).
    sentences = [Sentence(scrub_ids(s.text, hidden), s.ids) for s in sentences]
    text = "\n".join(s.text for s in sentences)
    final_note = (note or PERMISSIONS_NOTE) if withheld_by_policy else None
    if final_note:
        text = f"{text}\n{final_note}"
    cited = list(dict.fromkeys(i for s in sentences for i in s.ids))
    return Envelope(text, cited, final_note, named, len(clipped), sentences)


def validate_answer(envelope: Envelope, visible_ids: Iterable[str], withheld_ids: Iterable[str]) -> list[str]:
    """Problems with an answer's grounding; empty when every sentence maps to visible cited ids.

    Checked: each line of the text (bar the note) is a sentence with at least one id; every id a
    sentence rests on is visible and cited; a line prints only the keys of records it cites; no
    withheld id appears anywhere in the text.
    """
    visible = set(visible_ids)
    cited = set(envelope.cited_ids)
    problems: list[str] = []
    lines = [ln for ln in envelope.text.split("\n") if ln != envelope.permissions_note]
    by_text = {s.text: s for s in envelope.sentences}
    for n, line in enumerate(lines, start=1):
        sentence = by_text.get(line)
        if sentence is None or not sentence.ids:
            problems.append(f"line {n} maps to no cited id")
            continue
        stray = [i for i in sentence.ids if i not in visible or i not in cited]
        if stray:
            problems.append(f"line {n} rests on {len(stray)} id(s) not visible or not cited")
        for key in re.findall(r"\[([^\[\]]+)\]", line):
            if key in visible and key not in sentence.ids:
                problems.append(f"line {n} prints the key of a record it does not cite")
    leaked = scrub_ids(envelope.text, withheld_ids) != envelope.text
    if leaked:
        problems.append("a withheld id appears in the text")
    return problems


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


def _edges_into_anchor(cs: CandidateSet) -> dict[str, CandidateEdge]:
    """Per cause id, the edge that makes it a cause of the anchor: its first causal edge into
    the anchor, else its first edge of any type into it (in ``cs.edges`` order)."""
    memo: dict[str, CandidateEdge] | None = cs.__dict__.get("_into")  # once per CandidateSet (by_id)
    if memo is not None:
        return memo
    into: dict[str, CandidateEdge] = cs.__dict__.setdefault("_into", {})
    anchor = cs.anchor.id
    for e in cs.edges:
        if e.target != anchor:
            continue
        held = into.get(e.source)
        if held is None or (held.type != "CAUSAL_PRECEDES" and e.type == "CAUSAL_PRECEDES"):
            into[e.source] = e
    return into


def _edges_out_of_anchor(cs: CandidateSet) -> dict[str, CandidateEdge]:
    """Per consequence id, the causal edge from the anchor to it (the first in ``cs.edges``)."""
    out: dict[str, CandidateEdge] = {}
    for e in cs.edges:
        if e.source == cs.anchor.id and e.type == "CAUSAL_PRECEDES":
            out.setdefault(e.target, e)
    return out


def _standing(edge: CandidateEdge | None) -> str:
    """ ", which supersedes it" after a consequence that superseded, amended, replaced … the
    anchor: asked why about ADR 4, a reader must learn that ADR 15 superseded it, not only that
    ADR 15 followed. A consequence that merely followed (led_to, based_on, …) reads as before."""
    standing = [r for r in _relations(edge) if r in STANDING_RELATIONS]
    return f", which {relation_words(standing)} it" if standing else ""


def known_ids(cs: CandidateSet, withheld_ids: Iterable[str]) -> KnownIds:
    """The ids free text of an answer on ``cs`` is scrubbed of: ``withheld_ids`` and every
    visible id (the nodes and the ends of the edges)."""
    nodes = cs.by_id()
    return KnownIds.of(withheld_ids, {*nodes, *(e.source for e in cs.edges), *(e.target for e in cs.edges)})


def _relations(edge: CandidateEdge | None) -> tuple[str, ...]:
    if edge is None:
        return ()
    if edge.type == "ALIAS_OF":
        return ("alias",)
    return edge.relations or ((edge.relation,) if edge.relation else ())


def _cause(node: CandidateNode, edge: CandidateEdge | None, known: KnownIds) -> Cause:
    relations = _relations(edge) or ("causal",)
    relation = edge.relation if edge is not None and edge.relation else relations[0]
    return Cause(
        id=node.id,
        label=node.label,
        title=_title(node, known),
        relation=relation,
        relations=relations,
        words=relation_words(relations),
        date=_date(node),
        why=_why(node, edge, known),
    )


def _why(node: CandidateNode, edge: CandidateEdge | None, known: KnownIds) -> str | None:
    """The transition's reason (it explains the link), else the cause's own rationale."""
    text = (edge.reason if edge is not None else None) or node.text("rationale")
    if not text or not text.strip():
        return None
    return _clamp(known.scrub(" ".join(text.split())), MAX_REASON_CHARS).rstrip(" .")


def _rationale(anchor: CandidateNode, known: KnownIds) -> str | None:
    text = anchor.text("rationale")
    if not text or not text.strip():
        return None
    return _clamp(known.scrub(" ".join(text.split())), MAX_REASON_CHARS).rstrip(" .")


def _causal_order(nodes: list[CandidateNode]) -> list[CandidateNode]:
    """Oldest first (a cause precedes what it caused); undated last; ties by id."""
    return sorted(nodes, key=lambda n: (node_timestamp(n) is None, _date(n) or "", n.id))


def _opening(anchor: CandidateNode, known: KnownIds) -> str:
    """'{maker} on {date}: {title} [{id}].' with the maker and date dropped when masked or absent."""
    title = _key(anchor, known)
    date = _date(anchor)
    raw_maker = anchor.text("decision_maker") if anchor.label == "Decision" else None
    maker = _clamp(known.scrub(" ".join(raw_maker.split())), MAX_MAKER_CHARS) if raw_maker else ""
    if maker and date:
        return f"{maker} on {date}: {title}."
    if maker:
        return f"{maker}: {title}."
    return f"{_dated(title, date)}."


def _key(node: CandidateNode, known: KnownIds) -> str:
    """Title plus id: the readable key of a visible node (two records may share a title)."""
    return f"{_title(node, known)} [{node.id}]"


def _title(node: CandidateNode, known: KnownIds) -> str:
    """The node's headline, scrubbed then clamped (clamping cannot bring an id back; the reverse could)."""
    text = headline(node) or f"Untitled {node.label.lower()}"
    return _clamp(known.scrub(text), MAX_SENTENCE_CHARS).rstrip(" .")


def _dated(text: str, date: str | None) -> str:
    return f"{text} ({date})" if date else text


def _date(node: CandidateNode) -> str | None:
    value = node.fields.get("timestamp")  # node.text("timestamp"), inline: it runs per line
    if value is None:
        return None
    raw = value if value.__class__ is str else str(value)
    return _iso_date(raw) if raw else None


@lru_cache(maxsize=8192)
def _iso_date(raw: str) -> str | None:
    """The day of a timestamp text (as node_timestamp reads it), once per text."""
    ts = _parse_timestamp(raw)
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
