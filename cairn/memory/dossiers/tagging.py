"""The gardener's three heuristics (docs/design.md §Gardener), deterministic and LLM-free.

Each fact of a block is tested in order and the first test that fires decides:

A. Environment — it sets a version, platform or system for the whole conversation
   ("I am using Python 3.9", "we are on Windows", "working on the Legacy System")
   → a global tag such as ``env: python-3.9``, ``os: windows``, ``context: legacy-system``.
B. Constraint — it forbids or mandates something ("Never use eval() in this code",
   "Always check permissions first") → a rule like ``no-eval`` / ``check-permissions``.
   A rule holds from the turn that states it to the end of the block (a section rule);
   it becomes a global tag (``constraint: check-permissions``) when it says so itself
   ("always", "everywhere", "throughout", ...) or its turn is unknown.
C. Definition — it names or re-labels something for a while ("For this test, call the
   server Box A", "Tartarus v3 is now deprecated") → a section rule ``alias: server=Box A``
   or ``status: deprecated`` from its turn until the block ends or the same thing is
   defined again.

Everything else is a narrative fact and goes to the dossiers. The tests are regular
expressions, so a fact is classified the same way every time.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from cairn.memory.dossiers.models import FactItem

Kind = Literal["environment", "constraint", "definition"]

_ENV_VERSIONED = re.compile(
    r"\b(?:using|use|uses|on|running|runs|run|with|targeting|targets)\s+"
    r"(?!(?:at|in|on|for|about|around|by|every|from|to|the|a|an|up|over|under|only|just|"
    r"version|page|step|level|chapter|day|days|number|line|item|floor|plan)\b)"
    r"(?P<name>[A-Za-z][A-Za-z+#]*)\s+v?(?P<ver>\d+(?:\.\d+)*)\b",
    re.IGNORECASE,
)
_ENV_OS = re.compile(
    r"\b(?:on|using|running|runs)\s+(?P<os>windows|linux|macos|mac\s?os|ubuntu|debian|fedora|android|ios)\b",
    re.IGNORECASE,
)
_ENV_CONTEXT = re.compile(
    r"\b(?:working|work|works)\s+(?:on|in|with)\s+the\s+(?P<ctx>[A-Za-z][\w-]*(?:\s+[A-Za-z][\w-]*){0,3}?)\s+"
    r"(?P<kind>system|project|codebase|repo|repository|stack|platform)\b",
    re.IGNORECASE,
)
_NEG = r"(?:never|do\s+not|don't|must\s+not|mustn't|avoid)"
_CONSTRAINT_NO_USE = re.compile(
    rf"^(?:please\s+)?{_NEG}\s+(?:use|using|call|calling|run|running|import|importing)\s+"
    r"(?:the\s+)?(?P<obj>[A-Za-z_][\w.]*(?:\s+(?!(?:in|for|on|at|with|when|here|inside|anywhere|again)\b)[a-z]\w*)?)",
    re.IGNORECASE,
)
_CONSTRAINT_NO = re.compile(
    r"^(?:please\s+)?(?:never|do\s+not|don't|must\s+not|mustn't)\s+(?P<rest>[A-Za-z]\w*(?:\s+[A-Za-z]\w*)?)",
    re.IGNORECASE,
)
_CONSTRAINT_MUST = re.compile(
    r"^(?:please\s+)?(?:always|must)\s+(?P<verb>[A-Za-z]\w*)\s+(?:the\s+|all\s+|your\s+)?(?P<obj>[A-Za-z]\w*)",
    re.IGNORECASE,
)
_GLOBAL_MARKER = re.compile(
    r"\b(?:always|everywhere|globally|throughout|across\s+(?:the|all)|in\s+all|for\s+the\s+whole)\b",
    re.IGNORECASE,
)
_ALIAS = re.compile(
    r"\b(?i:call|name|refer\s+to)\s+(?i:the\s+|this\s+|that\s+|our\s+)?"
    r"(?P<thing>[a-z][\w-]*(?:\s+[a-z][\w-]*){0,2}?)\s+(?i:as\s+)?"
    r"['\"“‘]?(?P<alias>[A-Z0-9][\w-]*(?:\s+[A-Z0-9][\w-]*){0,3})['\"”’]?"
)
_RENAMED = re.compile(
    r"^(?P<thing>.+?)\s+(?:is|was|has\s+been|got)\s+renamed\s+(?:to\s+)?['\"“]?(?P<alias>[^'\"”.]+)",
    re.IGNORECASE,
)
_STATUS = re.compile(
    r"^(?P<thing>.+?)\s+(?:is|are|has\s+been|have\s+been|was)\s+(?:now\s+)?"
    r"(?P<status>deprecated|obsolete|retired|end-of-life|frozen|read-only|discontinued)\b",
    re.IGNORECASE,
)


def slug(text: str) -> str:
    """Lower-case words joined by '-' (dots kept, so versions read as versions)."""
    return re.sub(r"[^a-z0-9.]+", "-", text.lower()).strip("-.")


@dataclass(frozen=True)
class Tag:
    """What one fact contributes: a global tag, or a section rule once its range is known."""

    kind: Kind
    tag: str  # as displayed, e.g. "env: python-3.9", "constraint: no-eval", "alias: server=Box A"
    rule: str  # the bare rule, e.g. "no-eval", "server=Box A", "deprecated"
    is_global: bool
    subject: str | None = None  # what a definition defines, to end its range at a redefinition


def environment_tag(text: str) -> Tag | None:
    if m := _ENV_VERSIONED.search(text):
        value = f"{slug(m['name'])}-{m['ver']}"
        return Tag("environment", f"env: {value}", value, True)
    if m := _ENV_OS.search(text):
        value = slug(m["os"].replace(" ", ""))
        return Tag("environment", f"os: {value}", value, True)
    if m := _ENV_CONTEXT.search(text):
        value = slug(f"{m['ctx']} {m['kind']}")
        return Tag("environment", f"context: {value}", value, True)
    return None


def constraint_tag(text: str) -> Tag | None:
    text = text.strip()
    if m := _CONSTRAINT_NO_USE.search(text):
        rule = "no-" + slug(m["obj"].split(".")[-1].removesuffix("()"))
    elif m := _CONSTRAINT_NO.search(text):
        rule = "no-" + slug(m["rest"])
    elif m := _CONSTRAINT_MUST.search(text):
        rule = slug(f"{m['verb']} {m['obj']}")
    else:
        return None
    return Tag("constraint", f"constraint: {rule}", rule, bool(_GLOBAL_MARKER.search(text)))


def definition_tag(text: str) -> Tag | None:
    if m := _STATUS.search(text):
        status = m["status"].lower()
        return Tag("definition", f"status: {status}", status, False, slug(_strip_article(m["thing"])))
    if m := _RENAMED.search(text):
        thing, alias = _strip_article(m["thing"]), m["alias"].strip()
        return Tag("definition", f"alias: {thing}={alias}", f"{thing}={alias}", False, slug(thing))
    if m := _ALIAS.search(text):
        thing, alias = m["thing"].strip(), m["alias"].strip()
        return Tag("definition", f"alias: {thing}={alias}", f"{thing}={alias}", False, slug(thing))
    return None


def _strip_article(text: str) -> str:
    return re.sub(r"^(?:the|our|this|that)\s+", "", text.strip(), flags=re.IGNORECASE)


def tag_for(text: str) -> Tag | None:
    """The first heuristic that fires, in the order environment, constraint, definition."""
    return environment_tag(text) or constraint_tag(text) or definition_tag(text)


@dataclass
class Classification:
    global_tags: list[str] = field(default_factory=list)
    section_rules: list[dict[str, Any]] = field(default_factory=list)
    dossier_facts: list[FactItem] = field(default_factory=list)
    tag_facts: list[tuple[FactItem, Tag]] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {
            "global_tags": self.global_tags,
            "section_rules": self.section_rules,
            "dossier_facts": [f.text for f in self.dossier_facts],
        }


def classify_facts(facts: Sequence[FactItem], last_turn: int | None = None) -> Classification:
    """Split a block's facts into global tags, section rules and narrative (dossier) facts.

    ``last_turn`` is the block's final turn number (defaults to the highest turn any fact
    names); section rules run from their fact's turn up to it.
    """
    turns = [t for f in facts if (t := f.resolved_turn_index) is not None]
    end = last_turn if last_turn is not None else max(turns, default=1)
    out = Classification()
    pending: list[tuple[Tag, int, FactItem]] = []
    for fact in facts:
        tag = tag_for(fact.text)
        if tag is None:
            out.dossier_facts.append(fact)
            continue
        out.tag_facts.append((fact, tag))
        turn = fact.resolved_turn_index
        if tag.is_global or turn is None:
            if tag.tag not in out.global_tags:
                out.global_tags.append(tag.tag)
        else:
            pending.append((tag, turn, fact))
    for tag, start, fact in pending:
        stop = end
        if tag.subject is not None:
            later = [s for t, s, _ in pending if t.subject == tag.subject and s > start]
            stop = min([*later, end + 1]) - 1 if later else end
        out.section_rules.append(
            {
                "kind": tag.kind,
                "rule": tag.rule,
                "tag": tag.tag,
                "start_turn": start,
                "end_turn": max(start, stop),
                "subject": tag.subject,
                "source_fact": fact.text,
            }
        )
    return out
