"""Fact and dossier search answer as if the facts a view may not reach were never written
(red-team pass 20).

``test_differential_reads.py`` deletes what a view may not see from the demo and asks again; in
the demo every hidden fact sits in a dossier and a session of its own, so nothing hidden shares
a block, a dossier, the question's words or the vector index's first fetch with what the view
reads, and the parts of fact search that meet other facts (the full-text list's N, df and
average length, the centred query, the dense list's growing fetch and its exact fallback, the
named list, block neighbours, dossier mates, the pool's total, the dossiers' headers and
summaries, the token-budgeted context) were only ever checked one by one.

Here the facts are interleaved: sessions, turns, dossiers, names and words shared between facts
a view reads and facts it may not reach, in every way the policy hides one (the fact's access,
its dossier's access, a HAS_FACT edge the role may not walk, a visible fact also held by a
hidden dossier), with enough hidden facts near every question to crowd the vector index's first
fetch. Each dossier stores its ``centroid_sum`` (the sum of its facts' vectors) and its summary
as the governor keeps them, so the centred query's shortcut is taken wherever it may be. Then
every question is asked (fact search with the default and with every expansion on, at two
``top_k``, with the exact fallback forced too; its context under a token budget; dossier
search), the unreachable facts, dossiers and edges are deleted (the centroid sums and summaries
recomputed, as a store that never held them would keep them), and everything is asked again:
the answers must match to float noise.

No difference found. Each of three planted leaks fails it for both views: BM25's N counting every
stored fact, the centred query's shortcut (a dossier's stored ``centroid_sum``) taken for a dossier
holding facts the view may not see, and dossier mates admitted by the fact's own visibility
whatever the dossier (so a hidden dossier holding two visible facts lifts one through the other).
"""

from __future__ import annotations

import random
from dataclasses import asdict
from typing import Any

import pytest
from neo4j import Driver

from cairn.memory.dossiers import facts
from cairn.memory.dossiers.facts import FactRetriever, FusionConfig, format_for_context
from cairn.memory.dossiers.retriever import retrieve_relevant_dossiers
from cairn.memory.dossiers.summary import summary_of
from cairn.policy.acl import acl_visible, edge_allowed
from cairn.policy.profiles import PolicyRegistry
from cairn.policy.scope import Scope
from cairn.runtime.embedder import Embedder
from tests.e2e.adversarial.test_differential_reads import differences
from tests.e2e.conftest import wipe

ROLES = ["staff", "manager", "director", "exec", "writer"]
OPEN = {"domain": "acme/assistant", "sensitivity": "low", "namespaces": ["public"], "roles_allowed": ROLES}
# Staff may see the dossiers and facts of acme/product but walks HAS_FACT only inside acme/assistant.
UNWALKABLE = {**OPEN, "domain": "acme/product"}
SECRET = {
    "domain": "acme/assistant",
    "sensitivity": "high",
    "namespaces": ["confidential"],
    "roles_allowed": ["director", "exec", "writer"],
}
VIEWS = {"staff": ("staff", None), "director-low": ("director", "low")}

NAMES = ["Melanie", "Caroline", "Jon", "Gina"]
TOPICS = [
    ["clarinet", "band", "rehearsal", "concert"],
    ["pottery", "clay", "vase", "kiln"],
    ["marathon", "running", "race", "training"],
    ["sourdough", "bakery", "oven", "bread"],
    ["camping", "lake", "tent", "hike"],
    ["adoption", "agency", "paperwork", "interview"],
]
SECRET_WORDS = ["merger", "valuation", "falcon", "diligence"]  # only hidden facts hold these
VERBS = ["talked about", "planned", "finished", "worried about", "loved", "signed up for"]
SESSIONS = [f"sess-{i}" for i in range(6)]


def fact_text(rng: random.Random, words: list[str]) -> str:
    a, b = rng.sample(words, 2)
    return f"{rng.choice(NAMES)} {rng.choice(VERBS)} the {a} {rng.choice(['and', 'after', 'before'])} the {b}"


def corpus(rng: random.Random) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(dossiers, facts): visible dossiers per topic, hidden facts interleaved with them in every
    way the policy hides one, all in the same sessions and turn range."""
    dossiers = [{"id": f"dos-open-{t}", "access": OPEN} for t in range(len(TOPICS))]
    dossiers += [{"id": f"dos-secret-{t}", "access": SECRET} for t in range(len(TOPICS))]
    dossiers += [{"id": f"dos-product-{t}", "access": UNWALKABLE} for t in range(2)]
    rows: list[dict[str, Any]] = []

    def add(dossier: str, access: dict[str, Any], words: list[str]) -> None:
        n = len(rows)
        session, turn = rng.choice(SESSIONS), rng.randrange(0, 24)
        rows.append(
            {
                "id": f"fact-{n:04d}",
                "dossier": dossier,
                "access": access,
                "text": fact_text(rng, words),
                "block": session,
                "turn": turn,
                "turn_id": f"{session}:{turn}",
            }
        )

    for t, words in enumerate(TOPICS):
        for _ in range(7):
            add(f"dos-open-{t}", OPEN, words)
        for _ in range(2):  # a secret fact inside a dossier the view reads
            add(f"dos-open-{t}", SECRET, words + SECRET_WORDS[:1])
        for _ in range(30):  # crowds the index near every question of the topic
            add(f"dos-secret-{t}", SECRET, words + SECRET_WORDS)
    for t in range(2):
        for _ in range(6):
            add(f"dos-product-{t}", UNWALKABLE, TOPICS[t] + SECRET_WORDS[2:])
    return dossiers, rows


WRITE_DOSSIERS = """
UNWIND $dossiers AS row
CREATE (d:Entity:Dossier {id: row.id, title: 'About ' + row.id, status: 'active'})
SET d += row.access
"""
WRITE_FACTS = """
UNWIND $rows AS row
MATCH (d:Dossier {id: row.dossier})
CREATE (d)-[:HAS_FACT]->(f:Entity:Fact {id: row.id, text: row.text, embedding: row.embedding,
    fact_type: 'event', confidence: 0.9, source_block_id: row.block, source_turn_id: row.turn_id,
    turn_index: row.turn, observed_at: datetime('2023-05-08T13:56:00Z'),
    added_at: datetime('2024-01-01T00:00:00Z') + duration({minutes: toInteger(substring(row.id, 5))})})
SET f += row.access
"""
# Visible facts of every topic also held by one dossier the view may not see (their pairs with it
# are hidden): through it, a seed among them would lift the others as its dossier mates.
ALSO_IN_SECRET = """
MATCH (d:Dossier {id: 'dos-secret-0'}), (f:Fact) WHERE f.id IN $facts
CREATE (d)-[:HAS_FACT]->(f)
"""
# Every dossier's centroid sum as the governor keeps it: the sum of the vectors of the facts it holds.
CENTROID_SUMS = """
MATCH (d:Dossier)
OPTIONAL MATCH (d)-[:HAS_FACT]->(f:Fact)
WITH d, collect(f.embedding) AS vectors
SET d.centroid_sum = CASE WHEN size(vectors) = 0 THEN null
    ELSE [i IN range(0, size(vectors[0]) - 1) | reduce(s = 0.0, v IN vectors | s + v[i])] END
"""
DOSSIER_FACTS = """
MATCH (d:Dossier)
OPTIONAL MATCH (d)-[:HAS_FACT]->(f:Fact)
WITH d, f ORDER BY f.added_at, f.id
RETURN d.id AS id, [g IN collect(f) | g {.text, .embedding}] AS rows
"""
STORE_SUMMARY = "MATCH (d:Dossier {id: $id}) SET d.summary = $summary"


def store_derived(driver: Driver) -> None:
    """Each dossier's centroid sum and summary as a store holding exactly its facts keeps them
    (the governor's sum of their vectors, the extractive summary of their texts)."""
    driver.execute_query(CENTROID_SUMS)
    records, _, _ = driver.execute_query(DOSSIER_FACTS)
    for r in records:
        driver.execute_query(STORE_SUMMARY, id=r["id"], summary=summary_of(r["rows"]))


def questions(rng: random.Random, rows: list[dict[str, Any]]) -> list[str]:
    """Questions near visible facts, near hidden ones, by name, by hidden-only words, and mixed."""
    open_texts = [r["text"] for r in rows if r["access"] is OPEN]
    hidden_texts = [r["text"] for r in rows if r["access"] is not OPEN]
    out = rng.sample(open_texts, 2) + rng.sample(hidden_texts, 2)
    out += [f"What did {NAMES[0]} do about the {rng.choice(rng.choice(TOPICS))}?"]
    out += ["merger valuation falcon diligence", "Who signed up for the kiln and the marathon?"]
    return out


def scope_of(registry: PolicyRegistry, role: str, ceiling: str | None) -> Scope:
    profile = registry.get(role)
    assert profile is not None
    return Scope.from_profile(profile, ceiling=ceiling)


CONFIGS = {
    "default": FusionConfig(),
    "expanded": FusionConfig(
        feedback=3, seeds=20, neighbour_window=None, dossier_weight=0.5, dossier_seeds=10
    ),
}


def answers(driver: Driver, embedder: Embedder, scope: Scope, asked: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for q in asked:
        for name, cfg in CONFIGS.items():
            for k in (3, 40):
                result = FactRetriever(driver, embedder, cfg).search(scope, q, top_k=k)
                out[f"facts {name} k{k} {q}"] = {
                    "total": result.total,
                    "hits": [{**asdict(h), "dossier": asdict(h.dossier)} for h in result.hits],
                    "context": format_for_context(result.hits, max_tokens=90),
                }
        found = retrieve_relevant_dossiers(driver, scope, q, top_k=10, threshold=0.0, embedder=embedder)
        out[f"dossiers {q}"] = {"total": found.total, "dossiers": [asdict(d) for d in found.dossiers]}
    return out


def exact_answers(
    driver: Driver, embedder: Embedder, scope: Scope, asked: list[str], monkeypatch: pytest.MonkeyPatch
) -> dict[str, Any]:
    """The dense list from the exact scan: a crowded first fetch goes straight to it."""
    with monkeypatch.context() as m:
        m.setattr(facts, "MAX_FETCH", facts.FIRST_FETCH)
        return {
            q: [asdict(h) for h in FactRetriever(driver, embedder).search(scope, q, top_k=40).hits]
            for q in asked
        }


@pytest.mark.parametrize("view", sorted(VIEWS))
def test_fact_search_answers_as_if_the_unreachable_facts_were_never_written(
    view: str,
    driver: Driver,
    embedder: Embedder,
    registry: PolicyRegistry,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rng = random.Random(20)
    dossiers, rows = corpus(rng)
    vectors = embedder.embed([r["text"] for r in rows])
    for r, v in zip(rows, vectors, strict=True):
        r["embedding"] = [float(x) for x in v]
    wipe(driver)
    driver.execute_query(WRITE_DOSSIERS, dossiers=dossiers)
    driver.execute_query(WRITE_FACTS, rows=rows)
    driver.execute_query(ALSO_IN_SECRET, facts=[r["id"] for r in rows if r["access"] is OPEN][::4])
    store_derived(driver)
    asked = questions(rng, rows)
    scope = scope_of(registry, *VIEWS[view])
    params = scope.cypher_params()
    before = answers(driver, embedder, scope, asked)
    before_exact = exact_answers(driver, embedder, scope, asked, monkeypatch)

    # What the view may not reach: nodes it may not see, then HAS_FACT edges it may not walk.
    hidden, _, _ = driver.execute_query(
        f"MATCH (n:Entity) WHERE NOT {acl_visible('n')} DETACH DELETE n RETURN count(*) AS n", params
    )
    cut, _, _ = driver.execute_query(
        f"MATCH (d:Dossier)-[r:HAS_FACT]->(f:Fact) WHERE NOT {edge_allowed('HAS_FACT', 'd', 'f', 'out')}"
        " DELETE r RETURN count(*) AS n",
        params,
    )
    store_derived(driver)
    assert hidden[0]["n"] > 150  # secret facts and dossiers
    if view == "staff":
        assert cut[0]["n"] == 12  # the product dossiers' facts
    after = answers(driver, embedder, scope, asked)
    after_exact = exact_answers(driver, embedder, scope, asked, monkeypatch)

    assert any(h["hits"] for h in after.values() if "hits" in h)
    found = [f"{name}{d}" for name in before for d in differences(before[name], after[name])]
    found += [f"exact {q}{d}" for q in before_exact for d in differences(before_exact[q], after_exact[q])]
    assert found == [], "\n".join(found[:40])
