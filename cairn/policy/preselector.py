"""The Pre-Selector: the one place that walks graph edges on behalf of a caller.

It expands from an anchor along the scope's allowlisted edge types and directions, up to
its hop limit, and applies the vertex ACL *in Cypher*: a node the scope may not see comes
back as an id and a reason, never with its text. Field masking happens here too, so what
leaves this module (a CandidateSet) is already safe to rank, count and show. The withheld
ids go only into the PolicyTrace, which is audit material.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from functools import lru_cache
from operator import attrgetter
from typing import Any

from neo4j import Driver

from cairn.errors import EXIT_NOT_VISIBLE, CairnError
from cairn.policy.acl import acl_reason
from cairn.policy.scope import FACTOR_ENTRY_MARK, MASKED_BY_OTHER_FIELDS, Scope
from cairn.policy.walk import EXPAND_QUERIES, node_props
from cairn.runtime.database import read
from cairn.schema.nodes import DECLARED_FIELDS, INTERNAL_FIELDS
from cairn.schema.section_text import without_governance

DEFAULT_NEIGHBOUR_CAP = 25  # per frontier node and edge type, beyond the first hop
# Properties that name another node: shown only when that node is itself in the result,
# otherwise an alias event would hand a staff caller the id of the hidden decision.
REFERENCE_FIELDS = ("alias_of_decision",)
# Where a section sits among all sections (its canonical number, its place in the file, and
# ``collision``: whether the filed number differs from the canonical one): a caller who may not
# see every section would read the hidden ones off the gaps. Callers get their own dense number,
# and a collision against it, through the correspondence reads (cairn/memory/correspondence.py).
POSITIONAL_FIELDS = {"Section": ("section_number", "ordinal", "source_line", "collision")}


@dataclass(frozen=True, slots=True)
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
        """The anchor and the nodes by id; built once (an ask reads it at several stages, and a
        CandidateSet is not changed once built): the same dict each time, read, never changed."""
        found: dict[str, CandidateNode] | None = self.__dict__.get("_by_id")
        if found is None:
            found = self.__dict__["_by_id"] = {n.id: n for n in [self.anchor, *self.nodes]}
        return found


class AnchorNotVisible(CairnError, LookupError):
    """The anchor does not exist or the scope may not see it (the two are never told apart).

    The operator at the shell is told the id they typed; an API caller only "no such node"."""

    exit_code = EXIT_NOT_VISIBLE

    def __init__(self, anchor_id: str) -> None:
        super().__init__("NOT_FOUND", f"no node '{anchor_id}' visible to this role", anchor_id)

    @property
    def public_message(self) -> str:
        return "no such node"


def mask(label: str, props: dict[str, Any], scope: Scope) -> tuple[dict[str, Any], tuple[str, ...]]:
    """Keep the fields the scope shows for this label and domain; x_extra only on whitelisted keys."""
    domain = str(props.get("domain") or "")
    return _mask(label, props, scope, _derived(label, props, scope, scope.visible_fields(label, domain)))


def _derived(
    label: str, props: dict[str, Any], scope: Scope, allowed: tuple[str, ...] | None
) -> tuple[str, ...] | None:
    """``allowed`` less the fields derived from a field the scope hides in the node's domain
    (``Scope.derived_hidden``: a dossier title built from masked fact text; a factor journal
    entry's values, which it writes from its own numbers; a factor's value and its entries'
    numbers, copies of one another)."""
    if label not in MASKED_BY_OTHER_FIELDS:
        return allowed
    factor_entry = props.get(FACTOR_ENTRY_MARK) is not None
    hidden = scope.derived_hidden(label, str(props.get("domain") or ""), factor_entry=factor_entry)
    if not hidden:
        return allowed
    base = (set(props) | DECLARED_FIELDS.get(label, frozenset())) if allowed is None else set(allowed)
    return tuple(sorted(base - set(hidden)))


def _mask(
    label: str, props: dict[str, Any], scope: Scope, allowed: tuple[str, ...] | None
) -> tuple[dict[str, Any], tuple[str, ...]]:
    """``mask`` with the field rule already looked up: one pass, one new dict per node."""
    positional = () if scope.unrestricted else POSITIONAL_FIELDS.get(label, ())
    masked: list[str] = []
    clean: dict[str, Any]
    if allowed is None and not positional and _all_plain(props):
        clean = props.copy()  # every field shown, as stored (the walk sends no internal field)
    elif allowed is None and not positional:  # every field shown: one comprehension, no checks per name
        clean = {
            name: value if value.__class__ in _PLAIN_TYPES else _plain(value)
            for name, value in props.items()
            if value is not None and name not in INTERNAL_FIELDS
        }
    else:
        clean = {}
        masked = list(_withheld(label, allowed, positional))
        for name, value in props.items():
            if value is None or name in INTERNAL_FIELDS:
                continue
            # Withheld, and named by the rule alone (``_withheld``), never by what is stored.
            if (allowed is None or name == "id" or name in allowed) and name not in positional:
                clean[name] = value if value.__class__ in _PLAIN_TYPES else _plain(value)
    extra = clean.get("x_extra")
    if extra is not None:
        clean["x_extra"] = {} if extra == "{}" else _x_extra(extra, scope)  # most nodes carry none
    if label == "Section" and masked:
        _strip_section_text(clean, masked)
    return clean, tuple(sorted(set(masked))) if masked else ()


# What a section's own access line states (cairn/ingest/correspondence/parser.py).
SECTION_ACCESS_FIELDS = ("domain", "sensitivity", "namespaces", "roles_allowed")


def _strip_section_text(clean: dict[str, Any], masked: list[str]) -> None:
    """A section's title and body without the exec tags, decision lines, section references,
    knowledge references and access line the parser read into the fields the rule hides: a role
    that may not see ``exec_decisions`` (or a section's roles) must not read them word for word
    in the body, whichever read shows the section (the tail, ``node``, a walk, an ask's evidence
    and prompt). Each is stripped where the parser reads it: knowledge references and the
    access line from the body only; and closed up, so the text reads as the letter written
    without them (their place told which letters hold them). Where a reference may be cut out of
    its sentence, every paragraph of the body is wrapped again at one width, so the wrap does not
    tell which paragraphs lost one (``reflow``)."""
    tags, decisions = "exec_tags" in masked, "exec_decisions" in masked
    responses = "responds_to_filed" in masked
    refs = "knowledge_refs" in masked
    access = any(name in masked for name in SECTION_ACCESS_FIELDS)
    if isinstance(clean.get("title"), str) and (tags or decisions or responses):
        clean["title"] = without_governance(
            clean["title"], tags=tags, decisions=decisions, responses=responses
        )
    if isinstance(clean.get("body"), str) and (tags or decisions or responses or refs or access):
        clean["body"] = without_governance(
            clean["body"],
            tags=tags,
            decisions=decisions,
            refs=refs,
            access=access,
            responses=responses,
            reflow=refs or responses,
        )


@lru_cache(maxsize=1024)
def _withheld(label: str, allowed: tuple[str, ...] | None, positional: tuple[str, ...]) -> tuple[str, ...]:
    """The label's declared fields the rule hides, named as masked whether or not a node holds a
    value there: naming only the non-empty ones told a caller which hidden rationales exist, and
    naming a stored field the schema did not declare (a journal entry's ``previous_number``, a
    fact's ``turn_index``) told which nodes hold it; such a field is withheld unnamed
    (docs/design.md §Pre-Selector)."""
    declared = DECLARED_FIELDS.get(label, frozenset())
    return tuple(
        name
        for name in declared
        if name != "id" and ((allowed is not None and name not in allowed) or name in positional)
    ) + tuple(name for name in positional if name not in declared)


def _x_extra(stored: Any, scope: Scope) -> Any:
    """x_extra as shown: parsed, and outside the system scope only its whitelisted keys. The
    others are not named in ``masked``: their names are free-form data, and naming them told
    what a node holds past the whitelist (an alias event's ``alias_of_decision`` said a decision
    the caller may not see stood behind it; docs/design.md §Pre-Selector). Most nodes carry
    none: ``{}`` is answered without parsing."""
    if scope.unrestricted:
        return _extra(stored)
    if stored == "{}" or not isinstance(stored, str):
        return {}
    return {k: v for k, v in _extra(stored).items() if k in scope.x_extra}


def _extra(text: str) -> Any:
    """x_extra as stored (JSON text); most nodes carry none, so skip the parser for ``{}``."""
    return {} if text == "{}" else json.loads(text)


def drop_dangling_references(node: CandidateNode, visible: set[str]) -> CandidateNode:
    """Drop reference fields whose target the caller cannot see. They are not listed as masked:
    a reference to a node the caller may not see reads as no reference at all, as one to a node
    never stored would, not as a field withheld (which would tell that a hidden node is there)."""
    if _REFERENCES.isdisjoint(node.fields):  # most nodes hold no reference: one set operation
        return node
    dangling = [f for f in REFERENCE_FIELDS if f in node.fields and node.fields[f] not in visible]
    if not dangling:
        return node
    fields = {k: v for k, v in node.fields.items() if k not in dangling}
    return CandidateNode(node.id, node.label, node.hop, fields, node.masked)


_REFERENCES = frozenset(REFERENCE_FIELDS)
_new = object.__new__
_set_dict = object.__setattr__
_SET_NODE = tuple(CandidateNode.__dict__[name].__set__ for name in ("id", "label", "hop", "fields", "masked"))


def _node(
    node_id: str, label: str, hop: int, fields: dict[str, Any], masked: tuple[str, ...]
) -> CandidateNode:
    """``CandidateNode(...)`` for the walk's many nodes, without the frozen dataclass's generic
    ``__init__`` (one ``object.__setattr__`` per field): the same object, its slots set directly."""
    node = _new(CandidateNode)
    set_id, set_label, set_hop, set_fields, set_masked = _SET_NODE
    set_id(node, node_id)
    set_label(node, label)
    set_hop(node, hop)
    set_fields(node, fields)
    set_masked(node, masked)
    return node


def _edge(
    source: str,
    target: str,
    rel_type: str,
    relation: str | None,
    relations: tuple[str, ...],
    reason: str | None,
) -> CandidateEdge:
    """``CandidateEdge(...)`` for the walk's many edges, its attributes set as one dict rather
    than one ``object.__setattr__`` each (the frozen dataclass's ``__init__``)."""
    edge = _new(CandidateEdge)
    _set_dict(
        edge,
        "__dict__",
        {
            "source": source,
            "target": target,
            "type": rel_type,
            "relation": relation,
            "relations": relations,
            "reason": reason,
        },
    )
    return edge


# Values that leave the driver as they are (no temporal type to turn into text): most of them.
_PLAIN_TYPES = frozenset({str, int, float, bool, list})


def _all_plain(props: dict[str, Any]) -> bool:
    """Whether ``props`` shows as it is: no internal field, no null, no value to turn into text."""
    return INTERNAL_FIELDS.isdisjoint(props) and _PLAIN_TYPES.issuperset(map(type, props.values()))


def _plain(value: Any) -> Any:
    """Neo4j temporal values as ISO text, so candidates serialise to JSON as they are."""
    if hasattr(value, "iso_format"):
        return value.iso_format()
    return value


_UNKNOWN: Any = object()  # a (label, domain) whose rule is not looked up yet (None: every field)


class _FieldRules:
    """The scope's field rule per (label, domain), looked up once per walk, not once per node."""

    def __init__(self, scope: Scope) -> None:
        self.scope = scope
        self.cache: dict[tuple[str, str], tuple[str, ...] | None] = {}
        self.rationale: dict[str, bool] = {}

    def allowed(self, label: str, domain: str) -> tuple[str, ...] | None:
        key = (label, domain)
        if key not in self.cache:
            self.cache[key] = self.scope.visible_fields(label, domain)
        return self.cache[key]

    def node(self, node_id: str, label: str, hop: int, props: dict[str, Any]) -> CandidateNode:
        domain = props.get("domain")
        key = (label, "" if domain is None else str(domain))
        allowed = self.cache.get(key, _UNKNOWN)
        if allowed is _UNKNOWN:
            allowed = self.allowed(*key)
        if label in MASKED_BY_OTHER_FIELDS:
            allowed = _derived(label, props, self.scope, allowed)
        fields, masked = _mask(label, props, self.scope, allowed)
        return _node(node_id, label, hop, fields, masked)

    def shows_rationale(self, node: CandidateNode) -> bool:
        """A transition's reason is a rationale: shown only where the scope shows decision rationales."""
        shown = self.rationale.get(node.id)
        if shown is None:
            allowed = self.allowed("Decision", str(node.fields.get("domain", "")))
            shown = self.rationale[node.id] = allowed is None or "rationale" in allowed
        return shown


def _assemble(
    scope: Scope, anchor_id: str, record: dict[str, Any] | None
) -> tuple[CandidateSet, PolicyTrace]:
    """The walk's rows (their layouts: ``cairn.policy.walk._hop_stage``) as a CandidateSet
    (masked) and a PolicyTrace (withheld ids and reasons)."""
    if record is None or record["reason"] is not None:
        raise AnchorNotVisible(anchor_id)
    rules = _FieldRules(scope)
    node = rules.node
    anchor = node(record["id"], record["label"], 0, record["props"])
    seen = {anchor.id: anchor}
    for node_id, hop, label, props in record["nodes"]:
        seen[node_id] = node(node_id, label, hop, props)
    trace = PolicyTrace()
    hidden: dict[str, str] = {}
    for node_id, edge_ok, acl in record["hidden"]:
        if node_id in seen:
            continue
        # An ACL reason outranks an edge reason: it holds whatever path is taken.
        if hidden.get(node_id, "edge:not_allowed") == "edge:not_allowed":
            hidden[node_id] = acl if edge_ok else "edge:not_allowed"
    edges: dict[tuple[str, str, str], CandidateEdge] = {}
    used: set[str] = set()
    shows = rules.shows_rationale
    # An edge between two visible nodes comes back once from each end it was walked from, and
    # the last row of a key is the one kept: read backwards, the first row of a key is kept and
    # its repeats are skipped before any work.
    for from_id, node_id, rel_type, relation, relations, reason, outgoing in reversed(record["edges"]):
        src, dst = (from_id, node_id) if outgoing else (node_id, from_id)
        key = (rel_type, src, dst)
        if key in edges:
            continue
        used.add(rel_type)
        # A reason is shown only where both ends' rationales are (no reason: nothing to check).
        shown = reason is not None and shows(seen[src]) and shows(seen[dst])
        edges[key] = _edge(
            src, dst, rel_type, relation, tuple(relations) if relations else (), reason if shown else None
        )
    # Numbered (withheld-1, …) by reason first: the caller sees the placeholders and their
    # reasons, so an order by id alone told it which of two hidden ids sorts first.
    trace.withheld_ids = sorted(hidden, key=lambda i: (hidden[i], i))
    trace.reasons_by_id = {i: hidden[i] for i in trace.withheld_ids}
    trace.hidden_vertices = len(hidden)
    # Hidden edges are counted once per withheld neighbour, however many edges (from however
    # many walked nodes) lead to it: counted per edge, two edges to one hidden node said 2, so the
    # count told how connected a hidden node is (README "Threat model: reads", disclosed by
    # design (1)). An edge the walk may not take to a node it shows is not counted either: it
    # would tell that such an edge exists between two nodes the caller sees.
    trace.hidden_edges = len(hidden)
    trace.neighbours_scanned = len(record["edges"]) + len(hidden)
    trace.edge_types_used = sorted(used)
    visible = set(seen)
    anchor = drop_dangling_references(anchor, visible)
    no_refs = _REFERENCES.isdisjoint  # most nodes hold no reference: kept as they are
    others = sorted(
        (
            n if no_refs(n.fields) else drop_dangling_references(n, visible)
            for n in seen.values()
            if n.id != anchor.id
        ),
        key=_NODE_KEY,
    )
    # Keyed (type, source, target), one edge per key: the sorted keys are the edges' order.
    return CandidateSet(anchor, others, [edges[k] for k in sorted(edges)]), trace


# (hop, id): the order of the walk's nodes after the anchor.
_NODE_KEY = attrgetter("hop", "id")


# Scope.cypher_params per scope (scope_params; the trace's owner key reads them too): a caller's
# scope is rebuilt per request from the same profile and headers, and its regexes were built
# again each time. Keyed by every field of the scope, so two scopes share parameters only when
# they are equal in everything.
_PARAMS: dict[tuple[Any, ...], dict[str, object]] = {}
_MAX_PARAMS = 1024


def scope_params(scope: Scope) -> dict[str, object]:
    key = tuple(
        tuple(value.items()) if isinstance(value, dict) else value
        for value in (getattr(scope, f.name) for f in fields(scope))
    )
    try:
        params = _PARAMS.get(key)
    except TypeError:  # a field that cannot be a key: built afresh, as before
        return scope.cypher_params()
    if params is None:
        if len(_PARAMS) >= _MAX_PARAMS:
            _PARAMS.clear()
        params = _PARAMS[key] = scope.cypher_params()
    return params


def preselect(
    driver: Driver,
    scope: Scope,
    anchor_id: str,
    hops: int | None = None,
    cap: int = DEFAULT_NEIGHBOUR_CAP,
) -> tuple[CandidateSet, PolicyTrace]:
    """Scoped k-hop expansion from ``anchor_id`` in one round trip (the hop limit is the scope's)."""
    depth = max(0, scope.max_hops if hops is None else min(hops, scope.max_hops))
    params = {**scope_params(scope), "anchor": anchor_id, "cap": cap}
    # One round trip: an auto-commit read, no COMMIT after it (runtime.database.read).
    records = read(driver, EXPAND_QUERIES[depth], params)
    # The values are plain maps and lists already: Record.data() would walk every one again.
    return _assemble(scope, anchor_id, dict(records[0]) if records else None)


def refetch(driver: Driver, scope: Scope, rows: list[tuple[str, str, int]]) -> dict[str, CandidateNode]:
    """The nodes of ``rows`` (id, label, hop) as the scope sees them now, masked as a walk masks
    them; a node that is gone, or that the scope may no longer see, is left out.

    A stored trace keeps the text of the nodes its answer was built from and only the ids of the
    rest of the pool (docs/design.md §Trace bundles); this reads those back, through the same
    vertex ACL, when the trace is read. A node read back must still carry the label the trace
    stored, whose field rules mask it: an id now held by a node of another label (an Event's id
    reused by a Decision) is left out like a gone one, not masked by the old label's rules."""
    if not rows:
        return {}
    records = read(
        driver,
        REFETCH_QUERY,
        {**scope_params(scope), "rows": [{"id": i, "label": label} for i, label, _ in rows]},
    )
    props = {r["id"]: r["props"] for r in records}
    rules = _FieldRules(scope)
    return {i: rules.node(i, label, hop, props[i]) for i, label, hop in rows if i in props}


REFETCH_QUERY = f"""
UNWIND $rows AS row
MATCH (n:Entity {{id: row.id}})
WHERE row.label IN labels(n)
WITH n, {acl_reason("n")} AS reason
WHERE reason IS NULL
RETURN n.id AS id, {node_props("n")} AS props
"""
