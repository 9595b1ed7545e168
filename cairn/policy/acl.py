"""The scope as Cypher: the one place that writes the predicates every read on a caller's behalf uses.

Node visibility (domain globs, roles_allowed, namespaces, sensitivity ceiling), edge rules
(type, direction, from/to domain globs) and hop limits are built here and nowhere else;
their parameters come from ``Scope.cypher_params()``. Filtering inside the query (not after
it) means a node the caller may not see is never fetched, ranked or counted, and an edge the
caller may not walk is never followed.
"""

from __future__ import annotations

from cairn.policy.profiles import SENSITIVITY_RANK
from cairn.policy.scope import (
    DERIVED_FIELDS,
    FACTOR_ENTRY_DERIVED,
    FACTOR_ENTRY_MARK,
    FACTOR_MIRRORS,
    derivation_sources,
)
from cairn.schema.catalog import RELATION_TYPES
from cairn.schema.nodes import SEARCH_TEXT_FIELDS

# The largest hop limit a profile may carry (RoleProfile.max_hops); quantified paths take
# literal bounds, so walks are built once per possible limit.
MAX_HOPS = 6


def acl_reason(var: str, in_scope: str | None = None) -> str:
    """Cypher expression: null when ``var`` is visible, else the first reason it is not.

    ``in_scope`` is an expression already holding ``coalesce(var.domain, '') =~ $domain_re``,
    for a query that needs that test for several predicates of one row (the walk,
    cairn/policy/walk.py, with ``edge_allowed_from``)."""
    in_scope = in_scope or f"coalesce({var}.domain, '') =~ $domain_re"
    return f"""
CASE
  WHEN $unrestricted THEN null
  WHEN NOT {in_scope} THEN 'scope:domain'
  WHEN NOT $role IN coalesce({var}.roles_allowed, []) THEN 'acl:role_missing'
  WHEN NOT any(ns IN coalesce({var}.namespaces, []) WHERE ns IN $namespaces) THEN 'acl:namespace_mismatch'
  WHEN NOT coalesce({var}.sensitivity, '') IN $sensitivities THEN 'acl:sensitivity_exceeded'
  ELSE null
END"""


def acl_visible(var: str) -> str:
    """Cypher predicate: true when ``var`` is visible to the scope.

    The domain is looked up among the scope's globs without a wildcard (``$domain_exact``) before
    the regex: the same verdict (a literal glob matches only itself), but ``=~`` with a parameter
    compiles its pattern on every row, and a search checks hundreds (docs/design.md §Policy module)."""
    return f"""($unrestricted OR (
  (coalesce({var}.domain, '') IN $domain_exact OR coalesce({var}.domain, '') =~ $domain_re)
  AND $role IN coalesce({var}.roles_allowed, [])
  AND any(ns IN coalesce({var}.namespaces, []) WHERE ns IN $namespaces)
  AND coalesce({var}.sensitivity, '') IN $sensitivities))"""


# The sensitivity levels as a Cypher map literal, for comparing two stored levels.
_LEVELS = "{" + ", ".join(f"`{level}`: {rank}" for level, rank in SENSITIVITY_RANK.items()) + "}"


def access_covers(target: str, holder: str) -> str:
    """Cypher predicate: every scope that may see ``holder`` may also see ``target`` (two nodes,
    or maps with the access fields), under any narrowing headers: the same domain, every role and
    namespace of ``holder`` also in ``target``, and ``target`` no more sensitive. A node that
    names, or hangs off, another one less visible than itself would tell some of its readers that
    a node they may not see exists, and its id (docs/design.md §Policy module)."""
    return f"""(coalesce({target}.domain, '') = coalesce({holder}.domain, '')
  AND all(r IN coalesce({holder}.roles_allowed, []) WHERE r IN coalesce({target}.roles_allowed, []))
  AND all(ns IN coalesce({holder}.namespaces, []) WHERE ns IN coalesce({target}.namespaces, []))
  AND coalesce({_LEVELS}[{target}.sensitivity], {len(SENSITIVITY_RANK)})
      <= coalesce({_LEVELS}[{holder}.sensitivity], -1))"""


def search_vector(var: str) -> str:
    """Cypher expression: the vector ``var`` may be ranked by for the scope, or null.

    A vector made from a field the caller may not see would let scores tell what that field
    says, so a node is ranked by its full ``embedding`` only where the scope's field rules show
    every field it was made from, by its ``header_embedding`` where they show the header
    fields, and not at all otherwise; parameters from ``Scope.search_vector_params()``.
    """
    use = f"""head([r IN $vector_rules WHERE r.label IN labels({var})
  AND coalesce({var}.domain, '') =~ r.re | r.use])"""
    return f"""CASE WHEN $unrestricted THEN {var}.embedding
  ELSE CASE {use} WHEN 'full' THEN {var}.embedding WHEN 'header' THEN {var}.header_embedding END END"""


def search_fields_shown(var: str, label: str) -> str:
    """Cypher predicate: the scope shows every field ``var`` (a ``label`` node) is searched by.

    For the labels ranked only by their full vector or their text (a fact by its ``text``, in
    the vector and the full-text index; a section by its title and body): a node whose search
    fields the caller may not all see is not a search candidate at all, neither ranked, nor
    counted, nor part of a score's statistics, so nothing it hides moves an answer (docs/design.md
    §Policy module, "Masked fields and search"). Parameters from ``Scope.search_vector_params()``
    (part of ``Scope.cypher_params()``); ``$searchable_everywhere`` skips the per-node rule.
    """
    rule = f"[r IN $vector_rules WHERE r.label = '{label}' AND coalesce({var}.domain, '') =~ r.re | r.use]"
    shown = f"""($unrestricted OR '{label}' IN $searchable_everywhere OR head({rule}) = 'full')"""
    if label != "JournalEntry":
        return shown
    # A factor entry's rationale is written from its numbers (scope.FACTOR_ENTRY_DERIVED): its
    # vector ranks only where they show too.
    derived = [n for n in SEARCH_TEXT_FIELDS[label][0] if n in FACTOR_ENTRY_DERIVED]
    return " AND ".join([shown, *(field_shown(var, n) for n in derived)])


def field_shown(var: str, name: str) -> str:
    """Cypher predicate: the scope shows field ``name`` on node ``var``.

    The first field rule of the node's label whose domain glob matches the node's domain decides,
    as in ``Scope.visible_fields``; a label the profile does not describe shows its id only.
    Parameters ``$field_rules`` from ``Scope.field_rule_params()`` (part of
    ``Scope.cypher_params()``). A read that orders or filters by a field a policy may mask
    orders by it only where this holds (docs/design.md §Policy module, "Ordering by a maskable
    field"), so the order of what it returns never depends on what the caller may not see."""
    rule = f"""head([r IN $field_rules WHERE r.label IN labels({var})
  AND coalesce({var}.domain, '') =~ r.re | r.all OR '{name}' IN r.fields])"""
    shown = f"coalesce({rule}, {'true' if name == 'id' else 'false'})"
    # A factor's value and its entries' numbers are copies (scope.FACTOR_MIRRORS): each shows only
    # where the other label's rule shows its copy too.
    if name in FACTOR_MIRRORS:
        source = _label_shows(var, "JournalEntry", FACTOR_MIRRORS[name][0])
        shown += f" AND (NOT 'Factor' IN labels({var}) OR {source})"
    for factor_field, (_, copies) in FACTOR_MIRRORS.items():
        if name in copies:
            shown += (
                f" AND (NOT 'JournalEntry' IN labels({var}) OR {var}.{FACTOR_ENTRY_MARK} IS NULL"
                f" OR {_label_shows(var, 'Factor', factor_field)})"
            )
    # A factor entry's field written from its numbers or time (scope.FACTOR_ENTRY_DERIVED) shows
    # only where they all do.
    if name in FACTOR_ENTRY_DERIVED:
        sources = " AND ".join(field_shown(var, s) for s in FACTOR_ENTRY_DERIVED[name])
        shown += (
            f" AND (NOT 'JournalEntry' IN labels({var}) OR {var}.{FACTOR_ENTRY_MARK} IS NULL OR ({sources}))"
        )
    # A field written from another label's field (scope.DERIVED_FIELDS: a session's title, a
    # dossier entry's time) shows only where that field does, as Scope.derived_hidden decides; a
    # factor entry's own derivations are the ones above.
    for label, derivations in DERIVED_FIELDS.items():
        for names, source_label, source_field in derivations:
            if name not in names:
                continue
            sources = " AND ".join(
                _label_shows(var, s_label, s_field)
                for s_label, s_field in derivation_sources(label, source_label, source_field)
            )
            own = f" OR {var}.{FACTOR_ENTRY_MARK} IS NOT NULL" if label == "JournalEntry" else ""
            shown += f" AND (NOT '{label}' IN labels({var}){own} OR ({sources}))"
    return f"($unrestricted OR ({shown}))"


def fields_shown(var: str, names: tuple[str, ...]) -> str:
    """Cypher expression: a map from each of ``names`` to whether the scope shows that field on
    node ``var`` (``field_shown`` for each), the node's field rule found once for all of them: a
    read that needs several of one node's fields shown (a fact search's block neighbour, its block
    and its turn) matches the rules' domain regexes once per node, not once per field. Only for
    fields whose rule is the node's own label's alone; one that mirrors or is derived from another
    field (scope.FACTOR_MIRRORS, FACTOR_ENTRY_DERIVED, DERIVED_FIELDS) is refused: its
    ``field_shown`` reads other rules too."""
    for name in names:
        plain = f"""($unrestricted OR (coalesce(head([r IN $field_rules WHERE r.label IN labels({var})
  AND coalesce({var}.domain, '') =~ r.re | r.all OR '{name}' IN r.fields]), false)))"""
        if name == "id" or field_shown(var, name) != plain:
            raise ValueError(f"field {name!r} is not decided by its own rule alone: use field_shown")
    each = ", ".join(f"`{n}`: coalesce(r.all OR '{n}' IN r.fields, false)" for n in names)
    hidden = ", ".join(f"`{n}`: false" for n in names)
    shown = ", ".join(f"`{n}`: true" for n in names)
    return f"""CASE WHEN $unrestricted THEN {{{shown}}}
  ELSE coalesce(head([r IN $field_rules WHERE r.label IN labels({var})
  AND coalesce({var}.domain, '') =~ r.re | {{{each}}}]), {{{hidden}}}) END"""


def status_in_view(var: str) -> str:
    """Cypher predicate: dossier ``var`` is in the caller's view by its status (``$statuses``, the
    active ones unless archived are asked for), decided by its ``status`` only where the scope
    shows that field: where the rules hide it, every dossier is in view, or whether one turned up
    in a search or a relation would tell the hidden status (a merged dossier holds no facts, so it
    ranks nowhere anyway; docs/design.md §Correspondence, "Filters read only what the
    caller sees")."""
    return f"({var}.status IN $statuses OR NOT {field_shown(var, 'status')})"


def _label_shows(var: str, label: str, name: str) -> str:
    """Cypher predicate: the scope's rules for ``label`` show field ``name`` in ``var``'s domain."""
    rule = f"""head([r IN $field_rules WHERE r.label = '{label}'
  AND coalesce({var}.domain, '') =~ r.re | r.all OR '{name}' IN r.fields])"""
    return f"coalesce({rule}, false)"


def shown_or(var: str, name: str, default: str) -> str:
    """Cypher expression: ``var.name`` where the scope shows it (``field_shown``), else
    ``default`` (a constant): a sort key that reads no hidden value."""
    return f"CASE WHEN {field_shown(var, name)} THEN {var}.{name} ELSE {default} END"


def name_masked(var: str) -> str:
    """Cypher expression: ``['name']`` where the scope hides field ``name`` on node ``var``, else
    ``[]``: the ``masked`` list of a reference that shows a node by its id and name (a factor or
    option cited in an answer), decided by the field rule alone, as ``preselector.mask`` names a
    hidden field whether or not the node holds a value there."""
    return f"CASE WHEN {field_shown(var, 'name')} THEN [] ELSE ['name'] END"


def edge_allowed(rel: str, start: str, end: str, walk: str) -> str:
    """Cypher predicate: the scope may walk an edge stored as ``(start)-[rel]->(end)`` this way.

    ``rel`` is an edge type name (``'HAS_FACT'``) or, for a walk over any type, a Cypher
    expression such as ``type(r)``. ``walk`` is ``"out"`` (walked from ``start`` to ``end``),
    ``"in"`` (from ``end`` to ``start``), or a Cypher boolean expression that is true when the
    walk is outgoing. A rule's direction is relative to the stored edge, and its domain globs
    apply to the stored start and end nodes (fixtures/policy/roles.yaml).
    """
    type_expr = f"'{rel}'" if rel in RELATION_TYPES else rel
    if walk == "out":
        direction = "rule.out"
    elif walk == "in":
        direction = "rule.in"
    else:
        direction = f"((({walk}) AND rule.out) OR (NOT ({walk}) AND rule.in))"
    return f"""($unrestricted OR any(rule IN $rules WHERE rule.type = {type_expr} AND {direction}
  AND coalesce({start}.domain, '') =~ rule.from_re AND coalesce({end}.domain, '') =~ rule.to_re))"""


def edge_type_walkable(rel: str) -> str:
    """Cypher predicate: some rule of the scope walks edges of type ``rel`` (a Cypher expression
    such as ``type(r)``). An edge of a type outside the allowlist is outside the role's walk
    altogether: not met, so not withheld, counted or numbered either; a count of them gave a
    node's degree over edges the role may not know of (docs/design.md §Policy module)."""
    return f"($unrestricted OR {rel} IN $edge_types)"


def edge_allowed_between_visible(rel: str, start: str, end: str, walk: str) -> str:
    """``edge_allowed`` for an edge between two nodes that the same predicate already requires to be
    visible (``acl_visible`` on both ends, AND-ed with this): the same verdict, cheaper.

    ``rel`` is an edge type name; ``walk`` is ``"out"`` or ``"in"``. The scope's rules are looked
    up by type (``$edge_rules``) rather than scanned, and a rule whose from (to) globs cover every
    domain of the scope (``from_all``, ``to_all``: Scope.cypher_params) accepts a visible end
    without its regex, since a visible node's domain is in the scope (as ``edge_allowed_from``
    does for the walk); an end whose domain is one of the rule's globs without a wildcard
    (``from_exact``, ``to_exact``) is accepted without it too, as the regex would. Used alone,
    without ``acl_visible`` on both ends, it would accept too much: never use it so. A fact search
    evaluates it on every candidate (docs/design.md §Policy module)."""
    if rel not in RELATION_TYPES or walk not in ("out", "in"):
        raise ValueError(f"an edge type and a walk of 'out' or 'in', not {rel!r} and {walk!r}")
    return f"""($unrestricted OR any(rule IN coalesce($edge_rules['{rel}'], []) WHERE rule.{walk}
  AND (rule.from_all OR coalesce({start}.domain, '') IN rule.from_exact
       OR coalesce({start}.domain, '') =~ rule.from_re)
  AND (rule.to_all OR coalesce({end}.domain, '') IN rule.to_exact
       OR coalesce({end}.domain, '') =~ rule.to_re)))"""


def edge_allowed_from(rel: str, here: tuple[str, str], there: tuple[str, str], outgoing: str) -> str:
    """``edge_allowed`` for a walk standing on a node and looking at one of its edges.

    ``here`` (the node walked from) and ``there`` (the node reached) are pairs of expressions:
    the node's coalesced domain, and whether that domain is in the scope (``=~ $domain_re``,
    computed once per row and shared with ``acl_reason``). ``outgoing`` is true when the edge is
    stored from ``here`` to ``there``. The same rule as ``edge_allowed``, with two shortcuts that
    change no verdict: the scope's rules are looked up by edge type (``$edge_rules``) rather than
    scanned, and a rule whose from (to) globs cover every domain of the scope (``from_all``,
    ``to_all``: Scope.cypher_params) accepts an end whose domain is in the scope without its
    own regex; any other end is matched against the rule's regex as before. The walk evaluates
    this on every edge of every frontier node (docs/design.md §Queries by capability)."""
    (h, h_in), (t, t_in) = here, there
    return f"""($unrestricted OR any(rule IN coalesce($edge_rules[{rel}], []) WHERE CASE WHEN {outgoing}
  THEN rule.out AND ((rule.from_all AND {h_in}) OR {h} =~ rule.from_re)
       AND ((rule.to_all AND {t_in}) OR {t} =~ rule.to_re)
  ELSE rule.in AND ((rule.from_all AND {t_in}) OR {t} =~ rule.from_re)
       AND ((rule.to_all AND {h_in}) OR {h} =~ rule.to_re) END))"""


def step_allowed(rel: str, start: str, end: str, walk: str, reached: str) -> str:
    """One walked step: the edge is allowed and the node it reaches is visible."""
    return f"{edge_allowed(rel, start, end, walk)} AND {acl_visible(reached)}"


def within_hops(depth: str) -> str:
    """Cypher predicate: a node at ``depth`` may still take one more step (the system has no limit)."""
    return f"($unrestricted OR {depth} < $max_hops)"


def hop_bound(hops: int | None) -> str:
    """A quantified-path bound for at most ``hops`` steps (Cypher wants a literal there).

    ``None`` is no bound, for the system scope only (operator tools), never for a caller.
    """
    if hops is None:
        return "*"
    if not 0 <= hops <= MAX_HOPS:
        raise ValueError(f"hops must be between 0 and {MAX_HOPS}, not {hops}")
    return f"{{0,{hops}}}"
