"""GraphQL types, declared once. They carry already-masked data; no resolver here reads the graph."""

from __future__ import annotations

from enum import Enum
from typing import Any, cast

import strawberry
from strawberry.scalars import JSON

from cairn.policy.preselector import CandidateEdge, CandidateNode

TITLE_FIELDS = ("option", "summary", "title", "name", "text")


@strawberry.type(description="A graph node as the caller's role may see it; masked fields are absent.")
class Node:
    id: strawberry.ID
    label: str
    hop: int
    domain: str | None
    title: str | None
    timestamp: str | None
    fields: JSON
    masked: list[str]

    @classmethod
    def of(cls, n: CandidateNode) -> Node:
        title = next((str(n.fields[f]) for f in TITLE_FIELDS if f in n.fields), None)
        ts = n.fields.get("timestamp")
        return cls(
            id=strawberry.ID(n.id),
            label=n.label,
            hop=n.hop,
            domain=n.fields.get("domain"),
            title=title,
            timestamp=str(ts) if ts is not None else None,
            fields=cast(JSON, n.fields),
            masked=list(n.masked),
        )


@strawberry.type
class Edge:
    source: strawberry.ID
    target: strawberry.ID
    type: str
    relation: str | None

    @classmethod
    def of(cls, e: CandidateEdge) -> Edge:
        return cls(
            source=strawberry.ID(e.source), target=strawberry.ID(e.target), type=e.type, relation=e.relation
        )


@strawberry.type
class Neighbourhood:
    anchor: Node
    nodes: list[Node]
    edges: list[Edge]


@strawberry.enum
class AskMode(Enum):
    ASK = "ask"
    QUERY = "query"


@strawberry.type
class Envelope:
    text: str
    permissions_note: str | None
    cited_ids: list[strawberry.ID]
    causes: JSON = strawberry.field(
        description="The visible direct causes named, in causal order: id, title, relation(s), date, why."
    )
    more_causes: int = strawberry.field(description="Visible causes the token budget left out of the text.")


@strawberry.type
class AskPayload:
    envelope: Envelope
    response: JSON
    meta: JSON
    evidence: list[Node]


@strawberry.type
class SearchHitView:
    node: Node
    score: float


@strawberry.type
class SearchPayload:
    total: int
    hits: list[SearchHitView]


@strawberry.type
class IngestSummary:
    decisions: int
    events: int
    causal_edges: int
    aliases: int
    nodes_created: int
    nodes_updated: int
    nodes_unchanged: int
    edges_created: int
    edges_updated: int
    edges_unchanged: int
    warnings: list[str] = strawberry.field(description="e.g. a cause dated after its effect; written anyway")


def envelope_of(data: dict[str, Any]) -> Envelope:
    return Envelope(
        text=data["text"],
        permissions_note=data["permissions_note"],
        cited_ids=[strawberry.ID(i) for i in data["cited_ids"]],
        causes=cast(JSON, data["causes"]),
        more_causes=data["more_causes"],
    )
