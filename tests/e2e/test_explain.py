"""Every Cypher constant in ``cairn/`` plans on the real Neo4j (issue 13: queries checked by EXPLAIN).

The strings are the ones ``test_read_predicates`` collects (module-level strings and the strings
in module-level dicts, tuples and lists), here over the whole ``cairn`` package. ``EXPLAIN``
parses, resolves and plans a query without running it, so a syntax error, an unknown function
or procedure, a variable used out of scope or a clause in the wrong place fails here, in
seconds, instead of on the first request that takes that path. Neo4j 5 plans with parameters
left unbound, so none are passed.

The query builders (hop limits, walk depths, dense variants) are evaluated at import into those
collections for every argument the code passes; a test below checks that each builder's output
for every such argument is among the explained texts, so a builder the code calls at run time with
a new argument cannot escape the check.
"""

from __future__ import annotations

import re
import zlib

import pytest
from neo4j import Driver

import cairn
from cairn.graph import dossiers as dossier_queries
from cairn.graph import factors as factor_queries
from cairn.graph import org
from cairn.policy import walk
from cairn.policy.acl import MAX_HOPS
from tests.unit.test_read_predicates import module_strings

# A Cypher statement or fragment: a clause keyword at the start, or one of the clauses every
# query has somewhere (prose strings in the code base are not upper-case Cypher).
CLAUSE = re.compile(r"^\s*(?:CYPHER|MATCH|OPTIONAL MATCH|MERGE|CREATE|UNWIND|CALL|WITH|RETURN|SHOW|DROP)\b")
ANYWHERE = re.compile(r"\b(?:MATCH|MERGE|RETURN)\b")

# Fragments: pieces spliced into whole queries (a subquery body, a shared tail, a WHERE clause
# reading variables bound by the query around it). They cannot plan alone; each must be inside
# at least one explained query (checked below).
FRAGMENTS: dict[tuple[str, str], str] = {
    ("cairn.graph.org", "_COUNTS"): "the RETURN tail of the vertex and causal upserts",
    ("cairn.graph.correspondence", "VISIBLE_NUMBERS"): "the leading subquery of TAIL/DIVERGENCE_QUERY",
    ("cairn.graph.correspondence", "STORE_STAMP"): "the leading subquery of SEARCH_INDEX/SEARCH_EXACT",
    ("cairn.graph.dossiers", "DOSSIER_RANK_VISIBLE"): "the WHERE/ORDER tail of the searches",
    ("cairn.graph.dossiers", "FACT_FEEDBACK"): "a FACT_SEARCH subquery body over `candidates`",
    ("cairn.graph.dossiers", "FACT_DENSE_FROM_INDEX"): "a FACT_SEARCH body over `qvec`, `candidates`",
    ("cairn.graph.dossiers", "FACT_DENSE_EXACT"): "a FACT_SEARCH_EXACT body over `qvec`, `candidates`",
    ("cairn.graph.dossiers", "FACT_FULLTEXT"): "a FACT_SEARCH body over `n`, `avgdl`, `candidates`",
    ("cairn.graph.dossiers", "FACT_FUSE"): "a FACT_SEARCH subquery body",
    ("cairn.graph.dossiers", "FACT_RANK_POOL"): "a FACT_SEARCH subquery body",
    ("cairn.graph.dossiers", "FACT_BLOCK_NEIGHBOURS"): "a FACT_SEARCH body over `fused`, `candidates`",
    ("cairn.graph.dossiers", "FACT_DOSSIER_MATES"): "a FACT_SEARCH body over `fused`, `candidates`",
    ("cairn.graph.dossiers", "FACT_DOSSIER_HEADERS"): "a FACT_SEARCH body over `top`, `groups`",
    ("cairn.graph.dossiers", "SUMMARY_POOL_RANKED"): "a subquery body over the dossier `d`",
    ("cairn.graph.dossiers", "_RESTATED_PROVENANCE"): "a unit subquery of WRITE_ROUTES over `$restated`",
    ("cairn.graph.dossiers", "_VISIBLE_FACTS_BODY"): "a dossier `d`'s visible facts",
    ("cairn.graph.dossiers", "_TOP_FACTS"): "the found dossiers' facts, a subquery of the dossier searches",
    ("cairn.graph.dossiers", "KEEP_PLAN"): "the planner option prefixed to the ingest statements",
    ("cairn.schema.keys", "HOLD_SECRET"): "the lock and the secret, leading TAKE_SECRET and CLAIM_PACKETS",
    ("cairn.graph.factors", "_ENTRY_INFLUENCES"): "the influence subquery over an entry `e`",
    ("cairn.graph.factors", "_ENTRY_COLUMNS"): "_ENTRY_INFLUENCES and the entry columns",
    ("cairn.graph.factors", "_NODE"): "the closure rows after a walk",
    ("cairn.graph.factors", "PLAN_WALKS"): "the planner option prefixed to the walks",
}


def _collect() -> tuple[dict[str, list[tuple[str, str]]], dict[str, list[tuple[str, str]]]]:
    """Whole queries and fragments, each text once with every (module, name) that holds it."""
    by_text: dict[str, list[tuple[str, str]]] = {}
    for module, name, text in module_strings(cairn):
        if CLAUSE.search(text) or ANYWHERE.search(text):
            by_text.setdefault(text, []).append((module, name))
    whole = {t: w for t, w in by_text.items() if not any(pair in FRAGMENTS for pair in w)}
    pieces = {t: w for t, w in by_text.items() if any(pair in FRAGMENTS for pair in w)}
    return whole, pieces


QUERIES, PIECES = _collect()
CASES = sorted((min(where), text) for text, where in QUERIES.items())


def _id(where: tuple[str, str], text: str) -> str:
    return f"{where[0].removeprefix('cairn.')}.{where[1]}#{zlib.crc32(text.encode()) % 10_000:04d}"


def test_the_scan_finds_the_queries_and_every_fragment() -> None:
    names = {name for where in QUERIES.values() for _, name in where}
    # One from each layer, so a scan that finds nothing cannot pass silently.
    assert {"UPSERT_DECISIONS", "READ_VERSION", "EXPAND_QUERIES", "SEARCH_QUERY", "VISIBLE_FACTS"} <= names
    assert {"DOWNSTREAM_QUERIES", "WHY_VALUE_QUERIES", "FACT_SEARCH", "WRITE_ROUTES"} <= names
    assert len(QUERIES) >= 120
    assert {pair for where in PIECES.values() for pair in where} >= set(FRAGMENTS)


def test_every_fragment_is_inside_an_explained_query() -> None:
    orphans = [where for text, where in PIECES.items() if not any(text in q for q in QUERIES)]
    assert orphans == []


def test_the_builders_outputs_are_explained() -> None:
    """Every argument the code passes to a builder: each hop limit (0, 1..MAX_HOPS, unbounded),
    each expansion depth, both vertex labels, both dense stages."""
    walks = (
        factor_queries._downstream_query,
        factor_queries._why_blocked_query,
        factor_queries._what_if_query,
        factor_queries._why_value_query,
    )
    built = [
        *(build(hops) for hops in factor_queries.HOP_LIMITS for build in walks),
        *(walk.expand_query(depth) for depth in range(MAX_HOPS + 1)),
        *(org.upsert_vertex(label) for label in ("Decision", "Event")),
        *(
            dossier_queries.fact_search_query(dense)
            for dense in (dossier_queries.FACT_DENSE_FROM_INDEX, dossier_queries.FACT_DENSE_EXACT)
        ),
    ]
    assert len(built) == 4 * len(factor_queries.HOP_LIMITS) + MAX_HOPS + 1 + 2 + 2
    assert [q for q in built if q not in QUERIES] == []


@pytest.mark.parametrize(("where", "text"), CASES, ids=[_id(w, t) for w, t in CASES])
def test_every_query_plans(driver: Driver, where: tuple[str, str], text: str) -> None:
    with driver.session() as session:
        summary = session.run("EXPLAIN " + text).consume()
    assert summary.plan is not None, f"{where[0]}.{where[1]} produced no plan"
