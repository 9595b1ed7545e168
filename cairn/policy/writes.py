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

The operator CLI passes ``Scope.system()`` (unrestricted): every check here passes.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from neo4j import Driver, ManagedTransaction

from cairn.policy.acl import acl_visible
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
       CASE WHEN visible THEN toString(n.timestamp) END AS timestamp,
       CASE WHEN visible THEN n.domain END AS domain
"""

# The read ACL applied to records not yet stored (maps with the same access fields), so
# "could anyone read this?" is answered by the very predicate reads use.
READABLE_ROWS = f"""
UNWIND $rows AS n
WITH n WHERE {acl_visible("n")}
RETURN n.id AS id
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
