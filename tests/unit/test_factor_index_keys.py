"""A factor's ``category`` is kept in a range index (cairn/schema/nodes.py ``Factor``), like a
node's ``domain``: red-team pass 21 bounded every other writer-set indexed text by
``MAX_INDEXED_CHARS`` but not this one, so ``cairn factors load`` of a 9,000-character category
failed mid-write, Neo4j refusing the index key. It is refused while the payload is parsed,
naming the field, before anything is written."""

from __future__ import annotations

from cairn.ingest.factors import parse_factor_payload
from cairn.schema.nodes import MAX_INDEXED_CHARS

ACCESS = {
    "domain": "acme/assessment",
    "sensitivity": "low",
    "namespaces": ["internal"],
    "roles_allowed": ["staff"],
}


def problems_with(category: str) -> list[str]:
    factor = {"id": "probe_budget", "name": "Probe budget", "category": category}
    _, problems = parse_factor_payload({"defaults": ACCESS, "factors": [factor]})
    return [str(p) for p in problems]


def test_a_category_no_index_can_hold_is_refused_naming_it() -> None:
    problems = problems_with("x" * 9_000)
    assert len(problems) == 1 and "category" in problems[0], problems
    assert str(MAX_INDEXED_CHARS) in problems[0], problems


def test_the_longest_category_an_index_takes_is_read() -> None:
    assert problems_with("y" * MAX_INDEXED_CHARS) == []
