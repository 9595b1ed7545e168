"""The Pre-Selector: the one place that walks graph edges on behalf of a caller.

It expands from an anchor along the scope's allowlisted edge types and directions, up to
its hop limit, and applies the vertex ACL *in Cypher*: a node the scope may not see comes
back as an id and a reason, never with its text. Field masking happens here too, so what
leaves this module (a CandidateSet) is already safe to rank, count and show. The withheld
ids go only into the PolicyTrace, which is audit material.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from neo4j import AsyncDriver

from cairn.policy.acl import acl_reason, edge_allowed
from cairn.policy.scope import Scope

DEFAULT_NEIGHBOUR_CAP = 25  # per frontier node and edge type, beyond the first hop
# Stored for the machine, never shown: vectors and their bookkeeping.
INTERNAL_FIELDS = frozenset({"embedding", "centroid_sum", "summary_pool", "embedding_text_sha"})
# Properties that name another node: shown only when that node is itself in the result,
# otherwise an alias event would hand a staff caller the id of the hidden decision.
REFERENCE_FIELDS = ("alias_of_decision",)
# Where a section sits among all sections (its canonical number, its place in the file): a
# caller who may not see every section would read the hidden ones off the gaps. Callers get
# their own dense number instead, through the correspondence reads (cairn/memory/correspondence.py).
POSITIONAL_FIELDS = {"Section": ("section_number", "ordinal", "source_line")}

ACL_REASON = acl_reason("n")
EDGE_OK = edge_allowed("type(r)", "startNode(r)", "endNode(r)", "outgoing")

# Everything after the frontier node `f` is bound: classify each incident edge and
# neighbour, keep hidden ones as (id, reason) only, cap visible ones per edge type.
_HOP_BODY = f"""
MATCH (f)-[r]-(n:Entity)
WITH f, r, n, startNode(r) = f AS outgoing
WITH f, r, n, outgoing,
     {EDGE_OK} AS edge_ok,
     {ACL_REASON} AS reason
WITH f, r, n, outgoing, edge_ok, reason, (edge_ok AND reason IS NULL) AS visible
ORDER BY visible DESC, coalesce(n.importance, 0.0) DESC, n.id
WITH f, type(r) AS rel_type, visible,
     collect({{r: r, n: n, outgoing: outgoing, edge_ok: edge_ok, reason: reason}}) AS found
WITH f, rel_type, visible, CASE WHEN visible THEN found[0..$cap] ELSE found END AS kept
UNWIND kept AS k
WITH f, rel_type, visible, k, k.n AS n
RETURN {{from_id: f.id, id: n.id, rel_type: rel_type, relation: k.r.relation, relations: k.r.relations,
        reason: CASE WHEN visible THEN k.r.reason END, outgoing: k.outgoing,
        edge_ok: k.edge_ok, acl: k.reason, label: [l IN labels(n) WHERE l <> 'Entity'][0],
        props: CASE WHEN visible THEN n {{.*, embedding: null}} END}} AS row
"""

# The anchor and its first hop in one round trip; the hop runs only when the anchor is visible.
ANCHOR_QUERY = f"""
MATCH (f:Entity {{id: $anchor}})
WITH f, {acl_reason("f")} AS anchor_reason
OPTIONAL CALL (f, anchor_reason) {{
  WITH f WHERE anchor_reason IS NULL AND $first_hop
  {_HOP_BODY}
}}
WITH f, anchor_reason, collect(row) AS rows
RETURN f.id AS id,
       [l IN labels(f) WHERE l <> 'Entity'][0] AS label,
       anchor_reason AS reason,
       CASE WHEN anchor_reason IS NULL THEN f {{.*, embedding: null}} END AS props,
       rows
"""

HOP_QUERY = f"""
UNWIND $frontier AS fid
MATCH (f:Entity {{id: fid}})
CALL (f) {{
  {_HOP_BODY}
}}
RETURN row
"""


@dataclass(frozen=True)
class CandidateNode:
    id: str
    label: str
    hop: int
    fields: dict[str, Any]
    masked: tuple[str, ...]

    def text(self, name: str) -> str | None:
        value = self.fields.get(name)
        return None if value is None else str(value)


@dataclass(frozen=True)
class CandidateEdge:
    source: str
    target: str
    type: str
    relation: str | None
    relations: tuple[str, ...] = ()
    reason: str | None = None  # the transition's reason; None unless the scope shows rationales


@dataclass
class PolicyTrace:
    withheld_ids: list[str] = field(default_factory=list)
    reasons_by_id: dict[str, str] = field(default_factory=dict)
    hidden_vertices: int = 0
    hidden_edges: int = 0
    edge_types_used: list[str] = field(default_factory=list)
    neighbours_scanned: int = 0


@dataclass
class CandidateSet:
    anchor: CandidateNode
    nodes: list[CandidateNode]
    edges: list[CandidateEdge]

    def by_id(self) -> dict[str, CandidateNode]:
        return {n.id: n for n in [self.anchor, *self.nodes]}


class AnchorNotVisible(LookupError):
    """The anchor does not exist or the scope may not see it (the two are never told apart)."""


def mask(label: str, props: dict[str, Any], scope: Scope) -> tuple[dict[str, Any], tuple[str, ...]]:
    """Keep the fields the scope shows for this label and domain; x_extra only on whitelisted keys."""
    clean = {k: _plain(v) for k, v in props.items() if v is not None and k not in INTERNAL_FIELDS}
    allowed = scope.visible_fields(label, str(clean.get("domain", "")))
    masked: list[str] = []
    if allowed is not None:
        for name in list(clean):
            if name != "id" and name not in allowed:
                masked.append(name)
                del clean[name]
    if not scope.unrestricted:
        for name in POSITIONAL_FIELDS.get(label, ()):
            if name in clean:
                masked.append(name)
                del clean[name]
    if "x_extra" in clean and not scope.unrestricted:
        extra = json.loads(clean["x_extra"]) if isinstance(clean["x_extra"], str) else {}
        kept = {k: v for k, v in extra.items() if k in scope.x_extra}
        masked.extend(f"x_extra.{k}" for k in sorted(extra) if k not in kept)
        clean["x_extra"] = kept
    elif "x_extra" in clean:
        clean["x_extra"] = json.loads(clean["x_extra"])
    return clean, tuple(sorted(masked))


def drop_dangling_references(node: CandidateNode, visible: set[str]) -> CandidateNode:
    """Mask reference fields whose target the caller cannot see."""
    dangling = [f for f in REFERENCE_FIELDS if f in node.fields and node.fields[f] not in visible]
    if not dangling:
        return node
    fields = {k: v for k, v in node.fields.items() if k not in dangling}
    return CandidateNode(node.id, node.label, node.hop, fields, tuple(sorted({*node.masked, *dangling})))


def _plain(value: Any) -> Any:
    """Neo4j temporal values as ISO text, so candidates serialise to JSON as they are."""
    if hasattr(value, "iso_format"):
        return value.iso_format()
    return value


class _Walk:
    """Accumulates hop results into a CandidateSet and a PolicyTrace."""

    def __init__(self, scope: Scope, anchor_row: dict[str, Any] | None) -> None:
        if anchor_row is None or anchor_row["reason"] is not None:
            raise AnchorNotVisible("no such node")
        fields, masked = mask(anchor_row["label"], anchor_row["props"], scope)
        self.scope = scope
        self.anchor = CandidateNode(anchor_row["id"], anchor_row["label"], 0, fields, masked)
        self.seen: dict[str, CandidateNode] = {self.anchor.id: self.anchor}
        self.edges: dict[tuple[str, str, str], CandidateEdge] = {}
        self.hidden: dict[str, str] = {}
        self.trace = PolicyTrace()
        self.used: set[str] = set()

    def add_hop(self, hop: int, rows: list[dict[str, Any]]) -> list[str]:
        frontier: list[str] = []
        for row in rows:
            self.trace.neighbours_scanned += 1
            nid = row["id"]
            if row["props"] is None:
                self.trace.hidden_edges += 1
                if nid not in self.seen:
                    reason = row["acl"] if row["edge_ok"] else "edge:not_allowed"
                    # An ACL reason outranks an edge reason: it holds whatever path is taken.
                    if self.hidden.get(nid, "edge:not_allowed") == "edge:not_allowed":
                        self.hidden[nid] = reason
                continue
            self.used.add(row["rel_type"])
            src, dst = (row["from_id"], nid) if row["outgoing"] else (nid, row["from_id"])
            if nid not in self.seen:
                fields, masked = mask(row["label"], row["props"], self.scope)
                self.seen[nid] = CandidateNode(nid, row["label"], hop, fields, masked)
                frontier.append(nid)
            ends = (self.seen[row["from_id"]], self.seen[nid])
            self.edges[(src, dst, row["rel_type"])] = CandidateEdge(
                src,
                dst,
                row["rel_type"],
                row["relation"],
                tuple(row["relations"] or ()),
                row["reason"] if all(self._shows_rationale(n) for n in ends) else None,
            )
        return frontier

    def _shows_rationale(self, node: CandidateNode) -> bool:
        """A transition's reason is a rationale: shown only where the scope shows decision rationales."""
        allowed = self.scope.visible_fields("Decision", str(node.fields.get("domain", "")))
        return allowed is None or "rationale" in allowed

    def result(self) -> tuple[CandidateSet, PolicyTrace]:
        withheld = sorted(i for i in self.hidden if i not in self.seen)
        self.trace.withheld_ids = withheld
        self.trace.reasons_by_id = {i: self.hidden[i] for i in withheld}
        self.trace.hidden_vertices = len(withheld)
        self.trace.edge_types_used = sorted(self.used)
        visible = set(self.seen)
        nodes = [drop_dangling_references(n, visible) for n in self.seen.values()]
        anchor = next(n for n in nodes if n.id == self.anchor.id)
        others = sorted((n for n in nodes if n.id != anchor.id), key=lambda n: (n.hop, n.id))
        return CandidateSet(anchor, others, sorted(self.edges.values(), key=_edge_key)), self.trace


def _edge_key(e: CandidateEdge) -> tuple[str, str, str]:
    return (e.type, e.source, e.target)


def _anchor_params(scope: Scope, anchor_id: str, depth: int) -> dict[str, Any]:
    return {**scope.cypher_params(), "anchor": anchor_id, "first_hop": depth >= 1, "cap": 1_000_000}


def _hop_params(scope: Scope, frontier: list[str], hop: int, cap: int) -> dict[str, Any]:
    return {**scope.cypher_params(), "frontier": frontier, "cap": 1_000_000 if hop == 1 else cap}


async def preselect(
    driver: AsyncDriver,
    scope: Scope,
    anchor_id: str,
    hops: int | None = None,
    cap: int = DEFAULT_NEIGHBOUR_CAP,
) -> tuple[CandidateSet, PolicyTrace]:
    """Scoped k-hop expansion from ``anchor_id``: one round trip per hop (the anchor rides on the first)."""
    depth = scope.max_hops if hops is None else min(hops, scope.max_hops)
    records, _, _ = await driver.execute_query(ANCHOR_QUERY, _anchor_params(scope, anchor_id, depth))
    walk = _Walk(scope, records[0].data() if records else None)
    frontier = walk.add_hop(1, records[0]["rows"]) if depth >= 1 else []
    for hop in range(2, depth + 1):
        if not frontier:
            break
        rows, _, _ = await driver.execute_query(HOP_QUERY, _hop_params(scope, frontier, hop, cap))
        frontier = walk.add_hop(hop, [r["row"] for r in rows])
    return walk.result()
