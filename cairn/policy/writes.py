"""Write scope: what a caller may create, and which stored ids it may touch.

The one enforcement point for every mutation (org-memory ingest, correspondence sync,
fact packets, blocks, curation, factor journal). Two rules:

- **Create only what you could read.** A node a caller writes must lie inside its domains,
  its sensitivity ceiling and its namespaces, and name the caller's own role in
  ``roles_allowed`` — otherwise a writer could place data it can never see again, or
  relabel something out of its own view.
- **A stored node you cannot read does not exist for you.** Which stored ids a caller
  may overwrite or attach an edge to is decided by the read ACL itself
  (``acl_visible``), so the write path cannot drift from what reads show; a hidden node
  is reported with the very words used for a missing one.

A third rule keeps an update from reaching past the writer's view of a node it may read:

- **Leave alone what you cannot read.** An update of a stored node sets only the fields the
  writer's field rules show on it (``kept_on_update``), and replaces only the ``x_extra`` keys
  it may read (``merged_extra``): every other field and key keeps its stored value, so the
  write neither destroys nor alters it, and nothing in the answer depends on it.

The operator CLI passes ``Scope.system()`` (unrestricted): every check here passes, except
``less_visible``, which protects the readers of what is written, not the writer.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from neo4j import Driver, ManagedTransaction

from cairn.policy.acl import access_covers, acl_visible, field_shown
from cairn.policy.profiles import SENSITIVITY_RANK, PolicyRegistry, matches
from cairn.policy.scope import Scope

# Every stored id with its label and whether the caller may read it. Hidden rows are
# returned (not filtered) only so an id that is taken can be refused without overwriting
# it; callers never echo their label or properties.
STORED_FOR_SCOPE = f"""
UNWIND $ids AS id
MATCH (n:Entity {{id: id}})
WITH n, {acl_visible("n")} AS visible
RETURN n.id AS id, visible,
       CASE WHEN visible THEN [l IN labels(n) WHERE l <> 'Entity'][0] END AS label,
       CASE WHEN visible AND {field_shown("n", "timestamp")} THEN toString(n.timestamp) END AS timestamp,
       CASE WHEN visible THEN n.domain END AS domain
"""


def hidden_among(ids: str) -> str:
    """A subquery body: ``hidden``, the stored ids among the list expression ``ids`` that the
    scope in the parameters may not read (``hidden_ids`` in Cypher, for a statement that checks
    them on its way, under the locks its earlier clauses took: ``CLAIM_PACKETS``)."""
    return f"""UNWIND {ids} AS id
  MATCH (n:Entity {{id: id}})
  WHERE NOT {acl_visible("n")}
  RETURN collect(DISTINCT n.id) AS hidden"""


# The read ACL applied to records not yet stored (maps with the same access fields), so
# "could anyone read this?" is answered by the very predicate reads use.
READABLE_ROWS = f"""
UNWIND $rows AS n
WITH n WHERE {acl_visible("n")}
RETURN n.id AS id
"""

# The stored ids among $ids that some reader of $holder could not see (access_covers).
LESS_VISIBLE = f"""
MATCH (h:Entity {{id: $holder}})
UNWIND $ids AS id
MATCH (t:Entity {{id: id}})
WHERE NOT {access_covers("t", "h")}
RETURN t.id AS id
"""

TAKEN_ID = "is already used by a node outside your write scope; choose another id"


@dataclass(frozen=True)
class WriteProblem:
    field: str
    message: str


def create_problems(
    scope: Scope,
    *,
    domain: str,
    sensitivity: str,
    namespaces: Sequence[str],
    roles_allowed: Sequence[str],
) -> list[WriteProblem]:
    """Why ``scope`` may not create a node with these access fields (empty: it may).

    Stricter than the read ACL on namespaces (every namespace must be one the caller holds,
    not just one of them): a writer places data inside its own namespaces only.
    """
    if scope.unrestricted:
        return []
    problems = []
    if not matches(domain, scope.domains):
        problems.append(WriteProblem("domain", f"{domain!r} is outside this role's domains"))
    if SENSITIVITY_RANK.get(sensitivity, len(SENSITIVITY_RANK)) > scope.ceiling:
        problems.append(WriteProblem("sensitivity", "above this role's sensitivity ceiling"))
    if not namespaces:
        # The read ACL needs one shared namespace: a node with none could never be read back.
        problems.append(WriteProblem("namespaces", "must name at least one namespace this role holds"))
    elif not set(namespaces) <= set(scope.namespaces):
        problems.append(WriteProblem("namespaces", "names a namespace this role does not hold"))
    if scope.role not in roles_allowed:
        problems.append(WriteProblem("roles_allowed", "must include the writing role itself"))
    return problems


def readable_extra_keys(scope: Scope, label: str | None, domain: str) -> frozenset[str] | None:
    """The ``x_extra`` keys ``scope`` reads on a ``label`` node in ``domain`` (None: every key):
    its whitelist where its field rule shows ``x_extra`` there, else none. ``label`` None: an
    edge's map, which no field rule describes (the whitelist alone)."""
    if scope.unrestricted:
        return None
    if label is not None:
        shown = scope.visible_fields(label, domain)
        if shown is not None and "x_extra" not in shown:
            return frozenset()
    return frozenset(scope.x_extra)


def extra_problems(
    scope: Scope, label: str | None, domain: str, extra: Mapping[str, Any]
) -> list[WriteProblem]:
    """An ``x_extra`` key the writer could not read back is refused, like a node outside its
    domains: it names only the writer's own keys, never a stored one."""
    readable = readable_extra_keys(scope, label, domain)
    if readable is None:
        return []
    return [
        WriteProblem("x-extra", f"key {key!r} is not one this role may read")
        for key in sorted(extra)
        if key not in readable
    ]


def merged_extra(readable: frozenset[str] | None, stored: Any, written: Mapping[str, Any]) -> str:
    """The ``x_extra`` text an update stores: the stored keys the writer may not read, untouched,
    and the written keys (readable ones: ``extra_problems``) for the rest; a written key the
    writer may not read on the stored node (it moves the node to a domain where it may) does not
    replace the stored one. ``readable`` None (the operator): the written map replaces the
    stored one."""
    kept: dict[str, Any] = {}
    if readable is not None and isinstance(stored, str) and stored not in ("", "{}"):
        parsed = json.loads(stored)
        if isinstance(parsed, dict):
            kept = {k: v for k, v in parsed.items() if k not in readable}
    return json.dumps({**written, **kept}, sort_keys=True)


def kept_on_update(scope: Scope, label: str, domains: Iterable[str], fields: Iterable[str]) -> frozenset[str]:
    """Of the ``fields`` an update would set on a stored ``label`` node, those ``scope`` may not
    read there, in any of ``domains`` (the stored one and the one written): the update leaves
    them as stored. Decided from the scope alone, so whether a stored value is there or what it
    holds changes nothing in the write's answer."""
    if scope.unrestricted:
        return frozenset()
    names = [f for f in fields if f != "id"]
    hidden: set[str] = set()
    for domain in domains:
        shown = scope.visible_fields(label, domain)
        if shown is not None:
            hidden.update(f for f in names if f not in shown)
        # a field written from one the scope hides there (a block's pending_facts) is hidden too
        hidden.update(f for f in scope.derived_hidden(label, domain) if f in names)
    return frozenset(hidden)


def unreadable_set_problems(
    scope: Scope, label: str, domain: str, fields: Iterable[str], what: str
) -> list[WriteProblem]:
    """The ``fields`` an operation (``what``: "archive", "merge") must set or read on a stored
    ``label`` node in ``domain`` that ``scope`` may not read there: the operation is refused,
    since it would alter them (a dossier's ``status``) or say what they hold (an error naming a
    status). Decided from the scope alone (``kept_on_update``), before any stored value is read,
    so the refusal is the same whatever the node holds (docs/design.md §Policy module)."""
    hidden = kept_on_update(scope, label, [domain], fields)
    return [
        WriteProblem(name, f"this role may not read a {label.lower()}'s {name}, so it may not {what} it")
        for name in sorted(hidden)
    ]


def domain_problem(scope: Scope, domain: str) -> WriteProblem | None:
    """An edge's own ``domain`` must lie inside the caller's domains, like a node's."""
    if scope.unrestricted or matches(domain, scope.domains):
        return None
    return WriteProblem("domain", f"{domain!r} is outside this role's domains")


def edge_problem(scope: Scope, rel_type: str, start_domain: str, end_domain: str) -> WriteProblem | None:
    """An edge stored as ``(start)-[rel_type]->(end)`` must be one the caller may walk, in either
    direction: a rule of its type whose from/to domain globs match the stored start and end
    nodes (the rule ``cairn.policy.acl.edge_allowed`` applies to reads). Otherwise the writer
    would store an edge it can never read back."""
    if scope.unrestricted:
        return None
    for rule in scope.edges:
        if (
            rule.type == rel_type
            and matches(start_domain, rule.from_domains)
            and matches(end_domain, rule.to_domains)
        ):
            return None
    return WriteProblem("type", f"this role may not walk {rel_type} edges between these domains")


def edges_problems(scope: Scope, rel_types: Iterable[str], domain: str) -> list[WriteProblem]:
    """The edge types, stored between nodes of ``domain``, that ``scope`` could not walk back: a
    write that stores them (a dossier's HAS_FACT, a journal's ABOUT, ...) would put data where
    the writer cannot read it, e.g. when its X-Edge-Allow header dropped their type."""
    return [p for rel in rel_types if (p := edge_problem(scope, rel, domain, domain)) is not None]


@dataclass(frozen=True)
class StoredIds:
    """What the store holds under some ids, as far as one scope may know it."""

    visible: dict[str, str]  # id → label, readable by the scope
    times: dict[str, str]  # id → ISO timestamp, readable ones that have one
    hidden: frozenset[str]  # taken, but not readable: never overwrite, never name
    domains: dict[str, str]  # id → domain, readable ones that have one


def stored_ids(driver: Driver, scope: Scope, ids: Iterable[str]) -> StoredIds:
    """The given ids that are stored, split by whether ``scope`` may read them (one round trip)."""
    records, _, _ = driver.execute_query(STORED_FOR_SCOPE, {**scope.cypher_params(), "ids": sorted(set(ids))})
    visible = {str(r["id"]): str(r["label"]) for r in records if r["visible"]}
    times = {str(r["id"]): str(r["timestamp"]) for r in records if r["visible"] and r["timestamp"]}
    hidden = frozenset(str(r["id"]) for r in records if not r["visible"])
    domains = {str(r["id"]): str(r["domain"]) for r in records if r["visible"] and r["domain"]}
    return StoredIds(visible, times, hidden, domains)


def less_visible(tx: ManagedTransaction, holder: str, ids: Iterable[str]) -> frozenset[str]:
    """The stored ids among ``ids`` that some reader of the stored node ``holder`` may not see,
    read inside the write transaction ``tx`` (after it has claimed them, so no concurrent write
    changes the answer before commit).

    A write that makes ``holder`` name or hang off one of them (a journal entry's session, whose
    access is its factor's) would show those readers a node they may not see: its id, and that it
    exists. Asked for ids the writer may read (the write scope's own checks come first), so the
    answer tells the writer nothing it cannot read; it holds for every writer, the operator too,
    because what it protects is the readers."""
    wanted = sorted(set(ids))
    if not wanted:
        return frozenset()
    records = tx.run(LESS_VISIBLE, {"holder": holder, "ids": wanted})
    return frozenset(str(r["id"]) for r in records)


def hidden_ids(tx: ManagedTransaction, scope: Scope, ids: Iterable[str]) -> frozenset[str]:
    """The given ids that are stored but hidden from ``scope``, read inside ``tx`` (so under the
    locks it holds): ids a write derives from a caller's key must not land on one of them."""
    if scope.unrestricted:
        return frozenset()
    records = tx.run(STORED_FOR_SCOPE, {**scope.cypher_params(), "ids": sorted(set(ids))})
    return frozenset(str(r["id"]) for r in records if not r["visible"])


def readable_by_some_role(driver: Driver, registry: PolicyRegistry, rows: list[dict[str, Any]]) -> set[str]:
    """Ids of the given access rows (id, domain, sensitivity, namespaces, roles_allowed) that at
    least one role of the policy file could read: one query per role, through the read ACL."""
    readable: set[str] = set()
    for profile in registry.roles.values():
        params = {**Scope.from_profile(profile).cypher_params(), "rows": rows}
        records, _, _ = driver.execute_query(READABLE_ROWS, params)
        readable.update(str(r["id"]) for r in records)
    return readable
