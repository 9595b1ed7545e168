"""The Pre-Selector's walk: the scoped traversal every "why" read starts from (SPEC §policy).

The policy module's own query (docs/design.md "Queries by capability"): it is the access rule
applied to a walk, so it lives beside the predicates it splices in rather than in a capability's
query module, and nothing below the policy layer needs to be imported to run it.
"""

from __future__ import annotations

from cairn.policy.acl import MAX_HOPS, acl_reason, edge_allowed_from, edge_type_walkable, shown_or
from cairn.schema.nodes import INTERNAL_FIELDS

# Both read what the hop body computes once per edge: each end's domain (``here``: the frontier
# node's, ``there``: the neighbour's) and whether it is in the scope (``here_in``, ``there_in``).
ACL_REASON = acl_reason("n", in_scope="there_in")
EDGE_OK = edge_allowed_from("type(r)", ("here", "here_in"), ("there", "there_in"), "outgoing")
# Only edges of a type the scope walks somewhere are met (acl.edge_type_walkable).
WALKABLE = edge_type_walkable("type(r)")
# The cap's sort key: a neighbour's importance where the scope shows it, else 0.0 (as a node
# without one): a masked importance must not choose which neighbours are kept.
IMPORTANCE_KEY = f"coalesce({shown_or('k.n', 'importance', '0.0')}, 0.0)"
# Node properties as they leave the database: vectors stay behind.
NODE_PROPS = "{.*, " + ", ".join(f"{name}: null" for name in sorted(INTERNAL_FIELDS)) + "}"
_INTERNAL_LIST = "[" + ", ".join(f"'{name}'" for name in sorted(INTERNAL_FIELDS)) + "]"


def node_props(var: str) -> str:
    """Cypher expression: ``var``'s properties without the internal ones (``NODE_PROPS``). A node
    that holds none of them (most of a walk) leaves as ``{.*}``: the projection's null entries
    would be sent, decoded and dropped (preselector._mask) once per node and name for nothing."""
    lean = f"none(k IN keys({var}) WHERE k IN {_INTERNAL_LIST})"
    return f"CASE WHEN {lean} THEN {var} {{.*}} ELSE {var} {NODE_PROPS} END"


def _hop_body(capped: bool) -> str:
    """Every edge of a walkable type incident to the frontier node ``f``, classified: the edge
    rule per step, the ACL on the node it reaches. Hidden neighbours stay (id, reason) material;
    visible ones are capped per edge type (``$cap``) beyond the first hop, most important first (ties by id),
    importance read only where the scope shows it (``IMPORTANCE_KEY``).

    Only a group over the cap is sorted: the rows leave in no particular order otherwise, and
    nothing downstream reads their order (preselector._assemble keys and sorts what it keeps),
    so the common case (a few neighbours per type) pays for no sort."""
    head = f"""
    WITH f, coalesce(f.domain, '') AS here
    WITH f, here, here =~ $domain_re AS here_in
    MATCH (f)-[r]-(n:Entity)
    WHERE {WALKABLE}
    WITH r, n, startNode(r) = f AS outgoing, here, here_in, coalesce(n.domain, '') AS there
    WITH r, n, outgoing, here, here_in, there, there =~ $domain_re AS there_in
    WITH r, n, outgoing, {EDGE_OK} AS edge_ok, {ACL_REASON} AS acl"""
    if not capped:
        return f"""{head}
    RETURN type(r) AS rel_type, (edge_ok AND acl IS NULL) AS visible, r, n, outgoing, edge_ok, acl"""
    return f"""{head}
    WITH type(r) AS rel_type, (edge_ok AND acl IS NULL) AS visible,
         collect({{r: r, n: n, outgoing: outgoing, edge_ok: edge_ok, acl: acl}}) AS found
    CALL (found, visible) {{
      WITH found WHERE visible AND size(found) > $cap
      UNWIND found AS k
      WITH k ORDER BY {IMPORTANCE_KEY} DESC, k.n.id
      LIMIT $cap
      RETURN collect(k) AS kept
    }}
    UNWIND CASE WHEN visible AND size(found) > $cap THEN kept ELSE found END AS k
    RETURN rel_type, visible, k.r AS r, k.n AS n, k.outgoing AS outgoing,
           k.edge_ok AS edge_ok, k.acl AS acl"""


def _hop_stage(hop: int) -> str:
    """One hop of the walk inside the single query: expand the frontier, keep edge rows (no
    text), hidden rows (id and reason only), and the newly reached visible nodes with their
    properties, once each; those become the next frontier. ``seen`` holds the nodes reached so
    far, compared as nodes (an id is unique), not by reading their ids again on every hop.

    Rows leave as lists, not maps, so no field name is sent, and decoded, once per row; by place,
    an edge row holds (from id, id, type, relation, relations, reason, outgoing), a hidden row
    (id, edge_ok, acl reason), a node row (id, hop, label, props), as
    ``cairn.policy.preselector._assemble`` unpacks them."""
    return f"""
CALL (frontier) {{
  UNWIND frontier AS f
  CALL (f) {{{_hop_body(hop > 1)}
  }}
  RETURN collect(CASE WHEN visible THEN [f.id, n.id, rel_type, r.relation, r.relations, r.reason, outgoing]
                 END) AS hop_edges,
         collect(CASE WHEN NOT visible THEN [n.id, edge_ok, acl] END) AS hop_hidden,
         collect(DISTINCT CASE WHEN visible THEN n END) AS reached
}}
WITH a, anchor_reason, seen, nodes, edges + hop_edges AS edges, hidden + hop_hidden AS hidden,
     [n IN reached WHERE NOT n IN seen] AS frontier
WITH a, anchor_reason, edges, hidden, frontier, seen + frontier AS seen,
     nodes + [n IN frontier | [n.id, {hop}, [l IN labels(n) WHERE l <> 'Entity'][0], {node_props("n")}]]
       AS nodes"""


def expand_query(depth: int) -> str:
    """The anchor and its whole walk up to ``depth`` hops in one round trip; nothing is
    expanded from an anchor the scope may not see."""
    hops = "".join(_hop_stage(hop) for hop in range(1, depth + 1))
    return f"""
MATCH (a:Entity {{id: $anchor}})
WITH a, {acl_reason("a")} AS anchor_reason
WITH a, anchor_reason, CASE WHEN anchor_reason IS NULL THEN [a] ELSE [] END AS frontier,
     [a] AS seen, [] AS nodes, [] AS edges, [] AS hidden{hops}
RETURN a.id AS id,
       [l IN labels(a) WHERE l <> 'Entity'][0] AS label,
       anchor_reason AS reason,
       CASE WHEN anchor_reason IS NULL THEN {node_props("a")} END AS props,
       nodes, edges, hidden
"""


# One query per possible hop limit (Cypher cannot loop a variable number of stages).
EXPAND_QUERIES = tuple(expand_query(depth) for depth in range(MAX_HOPS + 1))
