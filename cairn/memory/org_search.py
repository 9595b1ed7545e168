"""Semantic search over decisions and events, filtered by the caller's ACL before ranking.

Exact cosine over the ACL-prefiltered candidates, not the approximate vector index: the
index can only post-filter, so a top-k over it would rank (and could count) nodes the
caller may not see, and might return fewer than k visible hits. An organisation has
thousands of decisions, not millions, so the exact scan is cheap (see bench/).
Neo4j's ``vector.similarity.cosine`` returns (1 + cos) / 2; scores here are plain cosine.
"""

from __future__ import annotations

from dataclasses import dataclass

from neo4j import Driver

from cairn.graph.org import SEARCH_QUERY
from cairn.graph.org import SEARCHABLE_LABELS as SEARCHABLE_LABELS  # the labels it ranks
from cairn.policy.preselector import CandidateNode, drop_dangling_references, mask
from cairn.policy.scope import Scope
from cairn.runtime.database import read


@dataclass(frozen=True)
class SearchHit:
    node: CandidateNode
    score: float


@dataclass(frozen=True)
class SearchResult:
    hits: list[SearchHit]
    total: int  # visible matches above the threshold (never counts hidden nodes)


def search_org(
    driver: Driver,
    scope: Scope,
    vector: list[float],
    k: int = 10,
    threshold: float = 0.3,
    labels: tuple[str, ...] = SEARCHABLE_LABELS,
) -> SearchResult:
    params = {
        **scope.cypher_params(),
        **scope.search_vector_params(),
        "vector": vector,
        "k": max(0, k),
        "threshold": threshold,
        "labels": [lbl for lbl in labels if lbl in SEARCHABLE_LABELS],
    }
    records = read(driver, SEARCH_QUERY, params)
    hits = []
    for r in records:
        fields, masked = mask(r["label"], r["props"], scope)
        node = CandidateNode(r["id"], r["label"], 0, fields, masked)
        visible_refs = {r["ref"]} if r["ref"] else set()
        hits.append(SearchHit(drop_dangling_references(node, visible_refs), round(float(r["score"]), 6)))
    total = int(records[0]["total"]) if records else 0
    return SearchResult(hits, total)
