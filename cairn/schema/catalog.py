"""The relation catalog: every relationship type Cairn stores, and what it may join.

The policy layer gates traversal by these names, so a type that is not here cannot be
walked by anyone; ingest refuses an edge whose endpoints do not fit its entry.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Rel(StrEnum):
    CAUSAL_PRECEDES = "CAUSAL_PRECEDES"
    ALIAS_OF = "ALIAS_OF"
    DEPENDS_ON = "DEPENDS_ON"
    INFLUENCED_BY = "INFLUENCED_BY"
    HAS_FACT = "HAS_FACT"
    ABOUT = "ABOUT"
    CURRENT_STATE = "CURRENT_STATE"
    PART_OF = "PART_OF"
    FROM_BLOCK = "FROM_BLOCK"
    RESPONDS_TO = "RESPONDS_TO"


@dataclass(frozen=True)
class RelationSpec:
    rel: Rel
    sources: frozenset[str]
    targets: frozenset[str]
    causal: bool
    meaning: str


def _spec(rel: Rel, sources: str, targets: str, causal: bool, meaning: str) -> RelationSpec:
    return RelationSpec(rel, frozenset(sources.split()), frozenset(targets.split()), causal, meaning)


CATALOG: dict[Rel, RelationSpec] = {
    s.rel: s
    for s in (
        _spec(
            Rel.CAUSAL_PRECEDES,
            "Decision Event Fact",
            "Decision Event Fact",
            True,
            "cause precedes effect (fixture relation kept in property `relation`)",
        ),
        _spec(Rel.ALIAS_OF, "Decision", "Event", False, "projection of a decision into a lower domain"),
        _spec(Rel.DEPENDS_ON, "Factor Option", "Factor", False, "prerequisite with min_value"),
        _spec(Rel.INFLUENCED_BY, "JournalEntry", "Factor", False, "factors behind a change"),
        _spec(Rel.HAS_FACT, "Dossier", "Fact", False, "dossier holds fact"),
        _spec(Rel.ABOUT, "JournalEntry", "Dossier Factor", False, "journalled change of"),
        _spec(Rel.CURRENT_STATE, "Factor", "JournalEntry", False, "latest journal entry"),
        _spec(Rel.PART_OF, "JournalEntry Turn", "Session Block", False, "belongs to"),
        _spec(Rel.FROM_BLOCK, "Fact", "Block", False, "extracted from block"),
        _spec(Rel.RESPONDS_TO, "Section", "Section", False, "section answers section"),
    )
}

RELATION_TYPES: tuple[str, ...] = tuple(r.value for r in Rel)


@dataclass(frozen=True)
class CausalRelation:
    """A kind of cause → effect link a fixture may state; stored as CAUSAL_PRECEDES{relation}."""

    name: str
    reads_as: str  # how an answer names it ("replaces", "supported by", …)
    meaning: str


# Strongest first: when two sources state the same cause → effect pair, the edge keeps the
# name that comes first here. Ingest refuses any relation name that is not in this table.
CAUSAL_RELATIONS: dict[str, CausalRelation] = {
    r.name: r
    for r in (
        CausalRelation("causal", "led to", "the cause directly brought the effect about"),
        CausalRelation("replaces", "replaces", "the effect supersedes the cause"),
        CausalRelation("requires", "requires", "the effect depends on the cause being in place"),
        CausalRelation("supported_by", "supported by", "an event that supports a decision"),
        CausalRelation("based_on", "based on", "a decision that builds on an earlier one"),
        CausalRelation("led_to", "led to", "stated on the cause: it led to the effect"),
    )
}
