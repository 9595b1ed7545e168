"""The vertex ACL as Cypher, shared by every query that reads on a caller's behalf.

Parameters come from ``Scope.cypher_params()``. Filtering inside the query (not after
it) means a node the caller may not see is never fetched, ranked or counted.
"""

from __future__ import annotations


def acl_reason(var: str) -> str:
    """Cypher expression: null when ``var`` is visible, else the first reason it is not."""
    return f"""
CASE
  WHEN $unrestricted THEN null
  WHEN NOT coalesce({var}.domain, '') =~ $domain_re THEN 'scope:domain'
  WHEN NOT $role IN coalesce({var}.roles_allowed, []) THEN 'acl:role_missing'
  WHEN NOT any(ns IN coalesce({var}.namespaces, []) WHERE ns IN $namespaces) THEN 'acl:namespace_mismatch'
  WHEN coalesce({{low: 0, medium: 1, high: 2}}[{var}.sensitivity], 99) > $ceiling
    THEN 'acl:sensitivity_exceeded'
  ELSE null
END"""


def acl_visible(var: str) -> str:
    """Cypher predicate: true when ``var`` is visible to the scope."""
    return f"""($unrestricted OR (
  coalesce({var}.domain, '') =~ $domain_re
  AND $role IN coalesce({var}.roles_allowed, [])
  AND any(ns IN coalesce({var}.namespaces, []) WHERE ns IN $namespaces)
  AND coalesce({{low: 0, medium: 1, high: 2}}[{var}.sensitivity], 99) <= $ceiling))"""
