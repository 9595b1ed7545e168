"""Search on the vector index answers what exact search answers, for every scope (issue 15).

A synthetic store where most sections are hidden from ``staff`` (clustered random unit vectors,
the hidden ones denser around the queried topics, so an index read without the scope would
be full of them): the search's top k, scores, the caller's numbers and the total must equal
exact search over the visible sections (numpy, and the exact Cypher scan), through every path
(one index read, a larger second read, the exact fallback), and deleting every hidden section
must not change any answer.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from neo4j import Driver

from cairn.graph.correspondence import SEARCH_EXACT
from cairn.memory.correspondence import Filters, Reader, semantic_search
from cairn.policy.profiles import PolicyRegistry
from cairn.policy.scope import Scope
from tests.e2e.conftest import wipe

SECTIONS = 600
TOPICS = 8
AUTHORS = ("Atlas", "Dana Okafor", "Priya Raman")
K = 10

LOAD = """
UNWIND $rows AS r
CREATE (s:Entity:Section {id: r.id, section_number: r.n, ordinal: r.n, source: 'test', embedding: r.e,
  embedding_model: 'synthetic', domain: 'acme/correspondence', sensitivity: r.sensitivity,
  namespaces: ['internal'], roles_allowed: ['staff', 'manager', 'director', 'exec'], author: r.author,
  title: 'Section ' + toString(r.n), body: 'Body', date: '2026-01-01',
  exec_tags: [], exec_decisions: [], status_tags: []})
"""
LINK = """
UNWIND $links AS l
MATCH (a:Section {section_number: l.from}), (b:Section {section_number: l.to})
CREATE (a)-[:RESPONDS_TO]->(b)
"""
DROP_HIDDEN = "MATCH (s:Section) WHERE s.sensitivity <> 'low' DETACH DELETE s"


def unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


@pytest.fixture(scope="module")
def centres() -> np.ndarray:
    return unit(np.random.default_rng(3).normal(0, 1, (TOPICS, 384)))


@pytest.fixture(scope="module")
def store(driver: Driver, centres: np.ndarray) -> dict[str, Any]:
    """600 sections; ``low`` (visible to staff): 5% overall, 2% in topic 0 where the queries
    aim; one section (number 600) is the only one of author 'Lone Voice'."""
    rng = np.random.default_rng(11)
    topic = rng.integers(0, TOPICS, SECTIONS)
    topic[: SECTIONS // 3] = 0  # a third of the store crowds the queried topic
    vectors = unit(centres[topic] + rng.normal(0, 0.06, (SECTIONS, 384)))
    low = rng.random(SECTIONS) < np.where(topic == 0, 0.02, 0.06)
    low[-1] = True
    authors = [AUTHORS[i % len(AUTHORS)] for i in range(SECTIONS - 1)] + ["Lone Voice"]
    wipe(driver)
    rows = [
        {
            "id": f"section:t{i:04d}",
            "n": i + 1,
            "e": vectors[i].tolist(),
            "sensitivity": "low" if low[i] else "high",
            "author": authors[i],
        }
        for i in range(SECTIONS)
    ]
    driver.execute_query(LOAD, rows=rows)
    links = [{"from": i + 1, "to": int(rng.integers(1, i + 1))} for i in range(1, SECTIONS) if i % 3 == 0]
    driver.execute_query(LINK, links=links)
    driver.execute_query("CALL db.awaitIndexes(300)")
    return {"vectors": vectors, "low": low, "authors": np.array(authors)}


@pytest.fixture(scope="module")
def staff(registry: PolicyRegistry) -> Reader:
    profile = registry.get("staff")
    assert profile is not None
    return Reader(Scope.from_profile(profile), True)


def queries(centres: np.ndarray, n: int = 12) -> list[list[float]]:
    rng = np.random.default_rng(5)
    aimed = unit(centres[[0] * (n - 2) + [1, 2]] + rng.normal(0, 0.06, (n, 384)))
    return [[float(x) for x in q] for q in aimed]


def oracle(store: dict[str, Any], mask: np.ndarray, q: list[float]) -> list[str]:
    """Exact top k by cosine among ``mask``, ties by section number (numpy)."""
    sims = np.where(mask, store["vectors"] @ np.asarray(q), -np.inf)
    order = sorted(np.flatnonzero(np.isfinite(sims)), key=lambda i: (-sims[i], i))[:K]
    return [f"section:t{i:04d}" for i in order]


def exact(driver: Driver, reader: Reader, q: list[float], filters: Filters | None = None) -> list[Any]:
    params = {**reader.scope.cypher_params(), **(filters or Filters()).params(), "k": K, "vector": q}
    return list(driver.execute_query(SEARCH_EXACT, params).records[0]["hits"])


def answer(driver: Driver, reader: Reader, q: list[float], filters: Filters | None = None) -> Any:
    result = semantic_search(driver, reader, q, K, filters)
    return (
        result.total,
        [
            (h.id, h.score, h.fields["section_number"], h.fields["responds_to"], h.fields["responded_by"])
            for h in result.hits
        ],
    )


def test_restricted_search_returns_the_exact_top_k(
    store: dict[str, Any], driver: Driver, staff: Reader, centres: np.ndarray
) -> None:
    visible = np.flatnonzero(store["low"]) + 1  # canonical numbers staff sees, ascending
    for q in queries(centres):
        result = semantic_search(driver, staff, q, K)
        expected = exact(driver, staff, q)
        assert (
            [h.id for h in result.hits]
            == [h["props"]["id"] for h in expected]
            == oracle(store, store["low"], q)
        )
        assert [h.score for h in result.hits] == [round(float(h["score"]), 6) for h in expected]
        assert result.total == len(visible)
        for hit, row in zip(result.hits, expected, strict=True):
            canonical = row["props"]["section_number"]
            assert hit.fields["section_number"] == int(np.searchsorted(visible, canonical)) + 1


def test_filtered_restricted_search_returns_the_exact_top_k(
    store: dict[str, Any], driver: Driver, staff: Reader, centres: np.ndarray
) -> None:
    by_author = Filters(authors=("Dana Okafor",))
    mask = store["low"] & (store["authors"] == "Dana Okafor")
    for q in queries(centres, 6):
        result = semantic_search(driver, staff, q, K, by_author)
        assert [h.id for h in result.hits] == oracle(store, mask, q)
        assert result.total == int(mask.sum())


def test_operator_search_keeps_recall_in_a_crowded_topic(
    store: dict[str, Any], driver: Driver, centres: np.ndarray
) -> None:
    """The operator reads the index with the least oversampling; in a topic of 200 sections whose
    similarities to the query differ by about 0.01 (far more crowded than real letters) it still
    finds nearly all of the exact top 10, scored exactly and in order."""
    everything = np.ones(SECTIONS, dtype=bool)
    recalls = []
    for q in queries(centres):
        hits = semantic_search(driver, Reader.system(), q, K).hits
        sims = store["vectors"] @ np.asarray(q)
        assert [h.score for h in hits] == [round((1 + float(sims[int(h.id[-4:])])) / 2, 6) for h in hits]
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
        recalls.append(len({h.id for h in hits} & set(oracle(store, everything, q))) / K)
    assert min(recalls) >= 0.8 and float(np.mean(recalls)) >= 0.9, recalls


def test_a_filter_keeping_one_section_falls_back_to_exact_search(
    store: dict[str, Any], driver: Driver, staff: Reader, centres: np.ndarray
) -> None:
    lone = Filters(authors=("Lone Voice",))
    for q in queries(centres, 3):
        result = semantic_search(driver, staff, q, K, lone)
        assert [h.id for h in result.hits] == ["section:t0599"] and result.total == 1
        assert result.hits[0].fields["section_number"] == int(store["low"].sum())
    nobody = semantic_search(driver, staff, queries(centres, 1)[0], K, Filters(authors=("Nobody",)))
    assert nobody.hits == [] and nobody.total == 0


def test_an_appended_section_is_counted_and_numbered_at_once(
    store: dict[str, Any], driver: Driver, staff: Reader, centres: np.ndarray
) -> None:
    """The counts kept per scope follow the store: a section appended after a search is found,
    numbered and counted by the next one."""
    q = queries(centres, 1)[0]
    before = semantic_search(driver, staff, q, K)
    row = {"id": "section:t9999", "n": SECTIONS + 1, "e": q, "sensitivity": "low", "author": "Atlas"}
    driver.execute_query(LOAD, rows=[row])
    try:
        after = semantic_search(driver, staff, q, K)
        assert after.total == before.total + 1
        assert after.hits[0].id == "section:t9999"
        assert after.hits[0].fields["section_number"] == after.total
        assert [h.fields["section_number"] for h in after.hits[1:]] == [
            h.fields["section_number"] for h in before.hits[: K - 1]
        ]
    finally:
        driver.execute_query("MATCH (s:Section {id: 'section:t9999'}) DETACH DELETE s")


def test_hidden_sections_do_not_change_any_answer(
    store: dict[str, Any], driver: Driver, staff: Reader, centres: np.ndarray
) -> None:
    """Everything staff gets (hits, scores, its numbers, links, total) is the same once every
    section it may not see is deleted: hidden sections influence nothing but the time taken."""
    asked = queries(centres, 8)
    filters = (None, Filters(authors=("Dana Okafor",)))
    before = [answer(driver, staff, q, f) for q in asked for f in filters]
    driver.execute_query(DROP_HIDDEN)
    after = [answer(driver, staff, q, f) for q in asked for f in filters]
    assert after == before
