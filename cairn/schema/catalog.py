"""The relation catalog: every relationship type Cairn stores, and the causal relations.

The policy layer gates traversal by these names, so a type that is not here cannot be
walked by anyone; ingest refuses a causal relation name that is not in ``CAUSAL_RELATIONS``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum


class Rel(StrEnum):
    """Every relationship type, with the labels it joins (start -> end) and what it means."""

    CAUSAL_PRECEDES = "CAUSAL_PRECEDES"  # Decision|Event|Fact -> the same: cause precedes effect
    ALIAS_OF = "ALIAS_OF"  # Decision -> Event: a decision's projection into a lower domain
    DEPENDS_ON = "DEPENDS_ON"  # Factor|Option -> Factor: a prerequisite with min_value
    INFLUENCED_BY = "INFLUENCED_BY"  # JournalEntry -> Factor: the factors behind a change
    HAS_FACT = "HAS_FACT"  # Dossier -> Fact
    ABOUT = "ABOUT"  # JournalEntry -> Dossier|Factor: the journalled change's subject
    CURRENT_STATE = "CURRENT_STATE"  # Factor -> JournalEntry: the latest entry
    PART_OF = "PART_OF"  # JournalEntry|Turn -> Session|Block
    FROM_BLOCK = "FROM_BLOCK"  # Fact -> Block it was extracted from
    RESPONDS_TO = "RESPONDS_TO"  # Section -> Section it answers


RELATION_TYPES: tuple[str, ...] = tuple(r.value for r in Rel)


@dataclass(frozen=True)
class CausalRelation:
    """A kind of cause → effect link a fixture may state; stored as CAUSAL_PRECEDES{relation}."""

    name: str
    reads_as: str  # how "<effect> <reads_as> <cause>" names it in an answer
    meaning: str
    # The same link stated on the cause, as the earlier record's header says it ("Superseded-By"
    # on PEP 333, "Obsoleted by" on RFC 2616): "<cause> <stated_on_cause> <effect>".
    stated_on_cause: str | None = None


# Strongest first: when two sources state the same cause → effect pair, the edge keeps the
# name that comes first here. Ingest refuses any relation name that is not in this table
# (after `relation_name`). Beside the seed fixtures' names, the vocabulary of public decision
# records (PEP and KEP headers, RFC "Obsoletes"/"Updates", ADR status links), each read from
# the effect's side: the effect is the later record (docs/design.md §Relation catalog).
CAUSAL_RELATIONS: dict[str, CausalRelation] = {
    r.name: r
    for r in (
        CausalRelation("causal", "follows from", "the cause directly brought the effect about"),
        CausalRelation("replaces", "replaces", "the effect supersedes the cause", "replaced_by"),
        CausalRelation("requires", "requires", "the effect needs the cause in place", "required_by"),
        CausalRelation("supersedes", "supersedes", "the effect takes the cause's place", "superseded_by"),
        CausalRelation("obsoletes", "obsoletes", "the effect makes the cause obsolete", "obsoleted_by"),
        CausalRelation("deprecates", "deprecates", "the effect retires the cause", "deprecated_by"),
        CausalRelation("reverts", "reverts", "the effect undoes the cause", "reverted_by"),
        # An ADR's "Partly superseded" status ("This ADR in part supersedes 0003"): the effect
        # takes the place of part of the cause, which otherwise stands; neither `supersedes`
        # (the answer would say the whole record was replaced) nor `amends` (its own word).
        CausalRelation(
            "partly_supersedes",
            "partly supersedes",
            "the effect takes the place of part of the cause",
            "partly_superseded_by",
        ),
        CausalRelation("depends_on", "depends on", "the effect needs the cause"),
        CausalRelation("amends", "amends", "the effect changes part of the cause", "amended_by"),
        CausalRelation("updates", "updates", "the effect revises the cause", "updated_by"),
        CausalRelation("extends", "extends", "the effect adds to the cause", "extended_by"),
        CausalRelation("refines", "refines", "the effect makes the cause more precise", "refined_by"),
        CausalRelation("clarifies", "clarifies", "the effect explains the cause", "clarified_by"),
        CausalRelation("implements", "implements", "the effect carries the cause out", "implemented_by"),
        CausalRelation("supported_by", "supported by", "an event that supports a decision"),
        CausalRelation("based_on", "based on", "a decision that builds on an earlier one"),
        CausalRelation("informed_by", "informed by", "the cause informed the effect"),
        CausalRelation("motivated_by", "motivated by", "the cause is why the effect was made"),
        CausalRelation("triggered_by", "triggered by", "the cause set the effect off"),
        CausalRelation("enables", "enabled by", "stated on the cause: it made the effect possible"),
        CausalRelation("led_to", "prompted by", "stated on the cause: it led to the effect"),
    )
}


# Each relation's name as the earlier record states it, to the name it is stored under.
STATED_ON_CAUSE: dict[str, str] = {
    r.stated_on_cause: r.name for r in CAUSAL_RELATIONS.values() if r.stated_on_cause
}


def _spelled(written: str) -> str:
    return re.sub(r"[\s\-]+", "_", written.strip()).lower()


def stated_on_cause(written: str) -> bool | None:
    """Which record a relation's words are written on: True for the earlier record's words
    ("Superseded by", "Amended by"), False for the later record's ("Supersedes", "Amends"),
    None for a name with one form only ("based_on", "causal"): it does not say."""
    name = _spelled(written)
    if name in STATED_ON_CAUSE:
        return True
    relation = CAUSAL_RELATIONS.get(name)
    return False if relation is not None and relation.stated_on_cause else None


def relation_name(written: str) -> str:
    """The catalog spelling of a relation as a record writes it: "Depends-On" -> "depends_on";
    a link stated on the cause is the same link: "Superseded-By" -> "supersedes"."""
    name = _spelled(written)
    return STATED_ON_CAUSE.get(name, name)
