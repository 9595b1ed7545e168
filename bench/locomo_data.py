"""Reading LoCoMo (``locomo10.json`` and its splits) for bench/locomo.py: facts, packets, questions.

Kept apart from the bench (which points the settings at its own Neo4j when imported) so that the
reader can be tested alone. The public file has known irregularities, all met by other projects'
loaders of it (snap-research/locomo issues and the evaluation code of memory systems run on it):
evidence written ``"D8:6; D9:17"`` or ``"D9:1 D4:4 D4:6"``, ``"D:11:26"``, ``"D30:05"``, a bare
``"D"``, ids naming turns that do not exist, questions without evidence, category 5 questions
carrying ``adversarial_answer`` instead of ``answer``. Each is normalised when the meaning is
unambiguous, and otherwise skipped or kept on purpose, and counted (``Quirks``) in the results.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar

from cairn.memory.dossiers.models import MAX_FACT_CHARS, MAX_FACTS_PER_PACKET, FactPacket
from cairn.schema.timestamps import storable_problem

CATEGORIES = ("1", "2", "3", "4")
# A dia_id as the data writes it, typos included: "D3:5", "D:11:26", "D30:05", "D 3 : 5".
LOOSE_DIA_ID = re.compile(r"D\s*:?\s*(?P<session>\d+)\s*:\s*(?P<turn>\d+)")
SEPARATORS = re.compile(r"[\s;,/&+|]+|\band\b")
SESSION = re.compile(r"session_(\d+)")
OBSERVATION = re.compile(r"session_(\d+)_observation")
# LoCoMo's "1:56 pm on 8 May, 2023" (commas removed before parsing), then nearby forms
DATE_FORMATS = (
    "%I:%M %p on %d %B %Y",
    "%I:%M %p on %d %b %Y",
    "%H:%M on %d %B %Y",
    "%I:%M %p %d %B %Y",
    "%d %B %Y",
    "%d %b %Y",
    "%B %d %Y",
    "%b %d %Y",
)


@dataclass(frozen=True)
class Fact:
    text: str
    dia_ids: frozenset[str]


@dataclass(frozen=True)
class Question:
    text: str
    category: str
    evidence: frozenset[str]


class Quirks:
    """What the reader normalised, skipped or kept of the data's known irregularities, counted and
    reported in the results, so a held-out file that differs from the development split is scored
    on purpose, not silently. The public ``locomo10.json`` has evidence such as ``"D:11:26"`` (a
    stray colon), ``"D30:05"`` (a zero-padded turn: the turn is ``D30:5``), several ids in one
    string (``"D8:6; D9:17"``, ``"D9:1 D4:4 D4:6"``), a bare ``"D"``, ids of turns that do not
    exist, and category 3 questions with no evidence."""

    # what each count means, in report order (the markdown's wording)
    MEANING: ClassVar[dict[str, str]] = {
        "evidence_normalised": "evidence ids rewritten to D<session>:<turn> (stray colon, zero padding)",
        "evidence_unreadable": "evidence fragments that hold no id (dropped)",
        "evidence_unknown_turn": "evidence ids naming no turn of this conversation (kept: never covered)",
        "questions_no_evidence": "category 1-4 questions without a readable evidence id (left out)",
        "questions_adversarial": "category 5 questions (left out by the measure)",
        "questions_other": "questions with no question text or an unknown category (left out)",
        "facts_normalised": "observation ids rewritten to D<session>:<turn>",
        "facts_no_turn": "observation facts without a readable dia_id (not ingested)",
        "facts_blank": "observation facts with no text (not ingested)",
        "facts_too_long": f"observation facts over {MAX_FACT_CHARS:,} characters (not ingested)",
        "facts_malformed": "observation entries that are not [text, dia_id(s)] (not ingested)",
        "facts_unknown_turn": "observation ids naming no turn of the conversation (ingested)",
        "sessions_without_observations": "sessions with turns but no observations (nothing to ingest)",
        "sessions_undated": "observed sessions whose date could not be read (ingested without a timestamp)",
        "packets_split": f"session-speaker packets of more than {MAX_FACTS_PER_PACKET} facts split",
    }
    EXAMPLES = 5  # raw values kept per kind, to show what was met

    def __init__(self) -> None:
        self.counts: dict[str, int] = dict.fromkeys(self.MEANING, 0)
        self.examples: dict[str, list[str]] = {}

    def note(self, kind: str, example: Any = None, n: int = 1) -> None:
        self.counts[kind] += n
        if example is None:
            return
        shown = self.examples.setdefault(kind, [])
        if len(shown) < self.EXAMPLES and str(example) not in shown:
            shown.append(str(example))

    def as_json(self) -> dict[str, Any]:
        return {"counts": dict(self.counts), "examples": dict(self.examples)}


def read_ids(value: Any) -> tuple[frozenset[str], list[str], list[str]]:
    """The ids ``D<session>:<turn>`` in a string or list (``"D8:6; D9:17"``, ``"D9:1 D4:4"``),
    written canonically (``"D:11:26"`` -> ``D11:26``, ``"D30:05"`` -> ``D30:5``: a turn id has
    no leading zero and the data's turns are written so); with the raw ids that were rewritten and
    the fragments that hold no id (a bare ``"D"``)."""
    items = value if isinstance(value, list) else [value]
    ids: set[str] = set()
    rewritten: list[str] = []
    unreadable: list[str] = []
    for item in items:
        text = str(item)
        for m in LOOSE_DIA_ID.finditer(text):
            canonical = f"D{int(m['session'])}:{int(m['turn'])}"
            ids.add(canonical)
            if m.group(0) != canonical:
                rewritten.append(m.group(0))
        rest = SEPARATORS.sub("", LOOSE_DIA_ID.sub("", text))
        if rest:
            unreadable.append(text)
    return frozenset(ids), rewritten, unreadable


def dia_ids(value: Any) -> frozenset[str]:
    """Every id ``D<session>:<turn>`` in a string or list, canonical (see ``read_ids``)."""
    return read_ids(value)[0]


def turn_order(dia_id: str) -> tuple[int, int]:
    """``D15:9`` before ``D15:10``: the order the turns were spoken in."""
    session, turn = dia_id[1:].split(":")
    return int(session), int(turn)


def session_date(text: Any) -> datetime | None:
    """The session's date as LoCoMo writes it (``"1:56 pm on 8 May, 2023"``), or in a few nearby
    forms (no time, no comma, a short month, ISO); None when none reads, or when the graph could
    not store it (``cairn.schema.timestamps.storable_problem``)."""
    if not isinstance(text, str):
        return None
    cleaned = " ".join(text.replace(",", " ").split())
    for form in DATE_FORMATS:
        try:
            return datetime.strptime(cleaned, form)
        except ValueError:
            continue
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        return None
    return None if storable_problem(when) else when  # an offset beyond +-18:00: no packet takes it


def turns_of(conv: dict[str, Any]) -> frozenset[str]:
    """The dia_ids of every turn of the conversation (canonical)."""
    sessions = [v for k, v in conv["conversation"].items() if SESSION.fullmatch(k) and isinstance(v, list)]
    return frozenset(
        i for turns in sessions for t in turns if isinstance(t, dict) for i in dia_ids(t.get("dia_id"))
    )


def packets_of(conv: dict[str, Any], quirks: Quirks | None = None) -> tuple[list[FactPacket], list[Fact]]:
    """One packet per session and speaker, in session order; and the flat list of facts. What is
    skipped or rewritten on the way is counted in ``quirks``."""
    quirks = quirks or Quirks()
    sample = conv["sample_id"]
    turns = turns_of(conv)
    dialogue = conv["conversation"]
    packets: list[FactPacket] = []
    facts: list[Fact] = []
    observed = {
        int(m[1]): v
        for k, v in conv.get("observation", {}).items()
        if (m := OBSERVATION.fullmatch(k)) and isinstance(v, dict)
    }
    for k, v in dialogue.items():
        m = SESSION.fullmatch(k)
        if m and v and int(m[1]) not in observed:
            quirks.note("sessions_without_observations", k)
    for n, by_speaker in sorted(observed.items()):
        when = session_date(dialogue.get(f"session_{n}_date_time"))
        if when is None:
            quirks.note("sessions_undated", f"session_{n}: {dialogue.get(f'session_{n}_date_time')!r}")
        for speaker, items in by_speaker.items():
            rows = []
            for item in items if isinstance(items, list) else [items]:
                if not (isinstance(item, list | tuple) and len(item) == 2 and isinstance(item[0], str)):
                    quirks.note("facts_malformed", repr(item)[:80])
                    continue
                text, raw = item
                ids, rewritten, _ = read_ids(raw)
                if rewritten:
                    quirks.note("facts_normalised", raw)
                if not text.strip():
                    quirks.note("facts_blank", raw)
                    continue
                if not ids:
                    quirks.note("facts_no_turn", f"{raw!r}: {text[:40]}")
                    continue
                if len(" ".join(text.split())) > MAX_FACT_CHARS:  # as FactItem counts it
                    quirks.note("facts_too_long", f"{raw!r}: {text[:40]}")
                    continue
                for unknown in sorted(ids - turns, key=turn_order):
                    quirks.note("facts_unknown_turn", unknown)
                rows.append({"text": text, "turn_id": "; ".join(sorted(ids, key=turn_order))})
            parts = [rows[i : i + MAX_FACTS_PER_PACKET] for i in range(0, len(rows), MAX_FACTS_PER_PACKET)]
            if len(parts) > 1:
                quirks.note("packets_split", f"{speaker}, session {n}: {len(rows)} facts")
            for part in parts:
                packets.append(
                    FactPacket.model_validate(
                        {
                            "cluster_label": f"{speaker}, session {n}",
                            "facts": part,
                            "source_block_id": f"{sample}-session-{n}",
                            "timestamp": when,
                        }
                    )
                )
                facts += [Fact(f.text, dia_ids(f.turn_id)) for f in packets[-1].facts]
    return packets, facts


def questions_of(conv: dict[str, Any], quirks: Quirks | None = None) -> list[Question]:
    """The questions the measure scores (categories 1-4 with evidence); what is left out, and the
    evidence rewritten, dropped or naming no turn, is counted in ``quirks``."""
    quirks = quirks or Quirks()
    turns = turns_of(conv)
    out = []
    for qa in conv["qa"]:
        category = str(qa.get("category"))
        question = qa.get("question")
        if category == "5":
            quirks.note("questions_adversarial")
            continue
        if category not in CATEGORIES or not isinstance(question, str) or not question.strip():
            quirks.note("questions_other", f"category {category}: {str(question)[:40]!r}")
            continue
        evidence, rewritten, unreadable = read_ids(qa.get("evidence") or [])
        for raw in rewritten:
            quirks.note("evidence_normalised", raw)
        for raw in unreadable:
            quirks.note("evidence_unreadable", raw)
        if not evidence:
            quirks.note("questions_no_evidence", f"{question[:60]!r} evidence={qa.get('evidence')!r}")
            continue
        # Kept in the denominator, as the measure defines it: no system can cover them, so they
        # lower every system's recall (and the oracle's) alike; guessing the meant turn is not
        # unambiguous.
        for unknown in sorted(evidence - turns, key=turn_order):
            quirks.note("evidence_unknown_turn", unknown)
        out.append(Question(question, category, evidence))
    return out
