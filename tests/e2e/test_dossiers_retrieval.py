"""Reading dossiers through the Scope, and curating them (merge, archive, link, export).

note 000 Phase 4 checkpoint (retrieval and format_for_context), then policy: results,
counts, scores and histories computed over what the role may see only, checked as a
property over generated access fields.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from neo4j import Driver
from starlette.testclient import TestClient
from typer.testing import CliRunner

from cairn.app import create_app
from cairn.cli import app as cli
from cairn.graph.dossiers import FACT_TEXT_INDEX
from cairn.memory.dossiers.curation import (
    CurationError,
    archive_dossier,
    export_dossier,
    link_dossiers,
    merge_dossiers,
    related_dossiers,
)
from cairn.memory.dossiers.demo import load_demo_dossiers
from cairn.memory.dossiers.facts import (
    FactRetriever,
    FusionConfig,
    asks_when,
    content_words,
    name_pattern,
    query_names,
    query_terms,
)
from cairn.memory.dossiers.facts import format_for_context as format_facts
from cairn.memory.dossiers.governor import process_fact_packet
from cairn.memory.dossiers.retriever import (
    DossierFilterRefused,
    format_for_context,
    get_dossier,
    get_dossier_history,
    retrieve_relevant_dossiers,
)
from cairn.memory.dossiers.summary import summary_of
from cairn.policy.passport import headers_for
from cairn.policy.profiles import SENSITIVITY_RANK, FieldRule, PolicyRegistry, RoleProfile, matches
from cairn.policy.scope import Scope
from cairn.runtime.embedder import Embedder, get_embedder
from cairn.runtime.settings import Settings
from cairn.runtime.tokens import count_tokens
from tests.e2e.conftest import demo_dossiers, wipe

ROLES = ("staff", "manager", "director", "exec", "writer")
RESTRICTED = {
    "domain": "acme/assistant",
    "sensitivity": "high",
    "namespaces": ["confidential"],
    "roles_allowed": ["director", "exec", "writer"],
}


def scope_of(registry: PolicyRegistry, role: str) -> Scope:
    return Scope.from_profile(registry.roles[role])


def packet(label: str, facts: list[str], block: str, **extra: Any) -> dict[str, Any]:
    return {"cluster_label": label, "facts": facts, "source_block_id": block, **extra}


@pytest.fixture
def diet_db(empty_db: Driver, embedder: Embedder) -> Driver:
    process_fact_packet(
        empty_db,
        packet("Vegetarian Diet", ["User is strictly vegetarian", "User avoids meat"], "b1"),
        embedder=embedder,
    )
    process_fact_packet(
        empty_db,
        packet("Running", ["User runs three times a week", "User trains for a marathon"], "b2"),
        embedder=embedder,
    )
    return empty_db


# --- note 000 Phase 4 checkpoint --------------------------------------------------------------


def test_retrieval_finds_the_diet_dossier_and_formats_it(diet_db: Driver, embedder: Embedder) -> None:
    result = retrieve_relevant_dossiers(
        diet_db, Scope.system(), "What are the user's dietary restrictions?", top_k=3, embedder=embedder
    )
    assert len(result.dossiers) > 0
    assert any("vegetarian" in d.title.lower() for d in result.dossiers)
    top = result.dossiers[0]
    assert {f["text"] for f in top.facts} == {"User is strictly vegetarian", "User avoids meat"}
    assert top.score is not None and top.score >= 0.4
    assert "centroid_sum" not in top.fields
    assert all("embedding" not in f for f in top.facts)
    context = format_for_context(result.dossiers)
    assert "=== FACT DOSSIERS ===" in context
    assert "Vegetarian Diet" in context
    assert "  - User avoids meat (added: " in context
    assert format_for_context([]) == ""


def _edges_walked(plan: dict[str, Any]) -> int:
    """Rows of every operator of a PROFILE that walks HAS_FACT edges, summed over the plan."""
    walked = plan.get("rows", 0) if "HAS_FACT" in str(plan.get("args", {}).get("Details", "")) else 0
    return int(walked) + sum(_edges_walked(c) for c in plan.get("children", []))


def _rows_access_checked(plan: dict[str, Any]) -> int:
    """Rows entering every operator of a PROFILE that tests an access rule (a node's
    ``sensitivity``, ``cairn/policy/acl.py``), summed over the plan: how many candidates had
    their visibility checked, whatever operator the planner merged the check into."""
    details = str(plan.get("args", {}).get("Details", ""))
    children = plan.get("children", [])
    entering = sum(int(c.get("rows", 0)) for c in children) if "sensitivity" in details else 0
    return entering + sum(_rows_access_checked(c) for c in children)


def test_visible_facts_walks_each_dossiers_facts_a_bounded_number_of_times(diet_db: Driver) -> None:
    """VISIBLE_FACTS counts a dossier's stored facts once, not once per visible fact (n² edges)."""
    from cairn.graph.dossiers import VISIBLE_FACTS

    ids = [r["id"] for r in diet_db.execute_query("MATCH (d:Dossier) RETURN d.id AS id")[0]]
    facts = diet_db.execute_query("MATCH (:Dossier)-[:HAS_FACT]->(f:Fact) RETURN count(f) AS n")[0][0]["n"]
    assert facts >= 4
    params = {**Scope.system().cypher_params(), "ids": ids, "limit": 10}
    with diet_db.session() as session:
        profile = session.run("PROFILE " + VISIBLE_FACTS, params).consume().profile
    assert profile is not None
    # each fact: once to collect the visible ones, once to count the stored ones
    assert _edges_walked(profile) <= 2 * facts


def test_the_full_text_list_checks_a_fact_once_however_many_words_find_it(diet_db: Driver) -> None:
    """A fact found by several query words is checked for visibility (and split into words) once,
    not once per word: every fact holds "user", so adding "meat" and "avoids" walks no more edges."""
    from cairn.graph.dossiers import FACT_FULLTEXT, FACT_VIEW
    from cairn.memory.dossiers.facts import BM25_B, BM25_K1, TEXT_SEPARATORS

    query = f"CALL () {{{FACT_VIEW}}} CALL (n, avgdl, candidates) {{{FACT_FULLTEXT}}} RETURN text"

    def walked(terms: list[str]) -> tuple[int, list[str]]:
        params = {
            **Scope.system().cypher_params(),
            "terms": terms,
            "statuses": ["active"],
            "text_index": FACT_TEXT_INDEX,
            "separators": TEXT_SEPARATORS,
            "k1": BM25_K1,
            "b": BM25_B,
            "depth": 10,
            "centre": 0.0,
            "vec": [],
        }
        with diet_db.session() as session:
            result = session.run("PROFILE " + query, params)
            found = [h["f"]["text"] for h in result.single(strict=True)["text"]]
            profile = result.consume().profile
        assert profile is not None
        return _edges_walked(profile), found

    one, found_by_one = walked(["user"])
    three, found_by_three = walked(["user", "meat", "avoids"])
    assert len(found_by_one) == 4 and found_by_three[0] == "User avoids meat"
    assert three == one


SESSION_TOPICS = [
    "adopted a grey kitten",
    "bought a red bicycle",
    "learned to bake sourdough",
    "visited Lisbon in May",
    "started a pottery class",
    "planted tomatoes on the balcony",
    "ran a half marathon",
    "read a novel by Tolstoy",
    "fixed the kitchen sink",
    "painted the fence blue",
    "joined a chess club",
    "sold an old piano",
    "booked a flight to Oslo",
    "wrote a poem about rain",
    "cooked a Thai curry",
    "repaired a vintage radio",
    "hiked up a volcano",
    "taught a niece to swim",
    "built a bookshelf",
    "watched a solar eclipse",
]


@pytest.fixture
def session_db(empty_db: Driver, embedder: Embedder) -> Driver:
    """One session of 20 facts about unrelated things, a turn each (turns 1 to 20)."""
    facts = [{"text": f"Caroline {topic}", "turn_index": n} for n, topic in enumerate(SESSION_TOPICS, 1)]
    process_fact_packet(empty_db, packet("Caroline", facts, "session-1"), embedder=embedder)
    assert empty_db.execute_query("MATCH (f:Fact) RETURN count(f) AS n")[0][0]["n"] == len(SESSION_TOPICS)
    return empty_db


def test_the_fact_search_checks_only_the_candidates_it_can_keep(
    session_db: Driver, embedder: Embedder
) -> None:
    """The dense list looks at the index's candidates only until its pool is full (the index
    answers best first), not at the whole fetch; a seed's block neighbours only within the turn
    window, not the whole session. Same answer, fewer facts met (issue #16: retrieval latency).
    Each list runs after the view (``FACT_VIEW``), whose pass over the visible facts is the same
    for every search and is subtracted here."""
    from cairn.graph.dossiers import (
        FACT_BLOCK_NEIGHBOURS,
        FACT_DENSE_FROM_INDEX,
        FACT_VECTOR_INDEX,
        FACT_VIEW,
    )

    vec = [float(x) for x in embedder.embed(["Which pets does Caroline have?"])[0]]
    params = {**Scope.system().cypher_params(), "statuses": ["active"], "vec": vec, "depth": 3, "centre": 0.0}
    view = f"CALL () {{{FACT_VIEW}}}"
    dense = f"{view} CALL (qvec, candidates) {{{FACT_DENSE_FROM_INDEX}}} RETURN dense"
    seeds = (
        f"{view} WITH $fused AS fused, candidates"
        f" CALL (fused, candidates) {{{FACT_BLOCK_NEIGHBOURS}}} RETURN neighbours"
    )
    with session_db.session() as session:
        view_profile = session.run("PROFILE " + view + " RETURN n", params).consume().profile or {}
        result = session.run(
            "PROFILE " + dense,
            {
                **params,
                "vector_index": FACT_VECTOR_INDEX,
                "dense_fetch": 100,
                "dense_pool": 3,
                "name_pattern": None,
            },
        )
        found = result.single(strict=True)["dense"]
        dense_profile = result.consume().profile or {}
        top = session_db.execute_query("MATCH (f:Fact {turn_index: 10}) RETURN f.id AS id")[0][0]["id"]
        result = session.run(
            "PROFILE " + seeds,
            {
                **params,
                "fused": [{"id": top, "score": 1.0}],
                "seeds": 1,
                "window": 2,
                "neighbour_weight": 0.3,
            },
        )
        near = sorted(n["f"]["turn_index"] for n in result.single(strict=True)["neighbours"])
        seeds_profile = result.consume().profile or {}
    assert found[0]["f"]["text"] == "Caroline adopted a grey kitten"
    scores = [h["score"] for h in found]
    assert len(found) == 3 and scores == sorted(scores, reverse=True)
    # rows of the operators naming HAS_FACT beyond the view's: one per fact met (its dossier)
    assert _edges_walked(dense_profile) - _edges_walked(view_profile) == 3  # was 20: every fetched fact
    assert near == [8, 9, 11, 12]
    assert _edges_walked(seeds_profile) - _edges_walked(view_profile) == 4  # was 19: the whole session
    # the access rules are tested in the view only, once per visible fact and dossier
    assert _rows_access_checked(dense_profile) == _rows_access_checked(view_profile)
    assert _rows_access_checked(seeds_profile) == _rows_access_checked(view_profile)


def _searched(
    driver: Driver, embedder: Embedder, monkeypatch: pytest.MonkeyPatch, question: str
) -> tuple[list[Any], str, dict[str, Any]]:
    """A system search's hits, and the one statement it sent with its parameters (to PROFILE)."""
    from cairn.memory.dossiers import facts as facts_module

    sent: list[tuple[str, dict[str, Any]]] = []
    real_read = facts_module.read

    def reading(driver: Driver, query: str, params: Any) -> Any:
        sent.append((query, dict(params)))
        return real_read(driver, query, params)

    monkeypatch.setattr(facts_module, "read", reading)
    hits = FactRetriever(driver, embedder).search(Scope.system(), question).hits
    [(query, params)] = sent
    return list(hits), query, params


def _scans(plan: dict[str, Any]) -> list[str]:
    """The details of every operator of a PROFILE that scans a label or a whole index."""
    kind = str(plan.get("operatorType", ""))
    own = [str(plan.get("args", {}).get("Details", ""))] if "Scan" in kind else []
    return own + [s for c in plan.get("children", []) for s in _scans(c)]


def test_a_fact_search_scans_no_facts_beyond_its_view(
    session_db: Driver, embedder: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A whole search scans only for its view (the dossiers whose visible facts it walks); every
    other fact it meets is found from a list's candidate or seed. The seeds' dossier mates were
    planned as a join of two scans of every stored fact per seed (hidden ones and other dossiers'
    included: ~3,600 db hits on a 183-fact LoCoMo conversation, growing with the store), where
    each seed's dossier is one index seek and one walk away (issue #16)."""
    process_fact_packet(
        session_db,
        packet("Quarterly tax", [f"The quarterly tax filing item {n} is due" for n in range(30)], "tax"),
        embedder=embedder,
    )
    hits, query, params = _searched(session_db, embedder, monkeypatch, "What did Caroline adopt?")
    assert any("dossier" in h.matched for h in hits)  # the mates ran
    with session_db.session() as session:
        search = session.run("PROFILE " + query, params).consume().profile or {}
    # the view's own scan (its dossiers, or its HAS_FACT edges) and nothing that scans facts
    assert _scans(search) and not [s for s in _scans(search) if re.search(r"\w:Fact\b", s)]


def test_a_fact_search_checks_access_only_in_its_view(
    session_db: Driver, embedder: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hits' dossier headers (visible count, and the quotable facts when some are hidden)
    come from the view's pass, which already counted each dossier's visible facts: a whole
    search tests the access rules on no more rows than the view alone (the headers walked each
    returned dossier's facts through the rules again: ~1 ms of Neo4j CPU per LoCoMo search)."""
    from cairn.graph.dossiers import FACT_VIEW

    hits, query, params = _searched(session_db, embedder, monkeypatch, "Which pets does Caroline have?")
    stored = session_db.execute_query(
        "MATCH (d:Dossier)-[:HAS_FACT]->(f:Fact) RETURN d.id AS id, count(f) AS n"
    ).records
    assert hits and all(h.dossier.fact_count == dict(stored)[h.dossier.id] for h in hits)
    with session_db.session() as session:
        search = session.run("PROFILE " + query, params).consume().profile or {}
        view = session.run(f"PROFILE CALL () {{{FACT_VIEW}}} RETURN n", params).consume().profile or {}
    # the view's checks, and the one row of the hits' fields (they carry ``.sensitivity``)
    assert _rows_access_checked(search) == _rows_access_checked(view) + 1 > 1


def test_retrieval_returns_distinct_dossiers_ranked_by_best_fact(diet_db: Driver, embedder: Embedder) -> None:
    result = retrieve_relevant_dossiers(
        diet_db, Scope.system(), "user habits", top_k=5, threshold=-1.0, embedder=embedder
    )
    ids = [d.id for d in result.dossiers]
    assert len(ids) == len(set(ids)) == result.total == 2
    scores = [d.score or 0 for d in result.dossiers]
    assert scores == sorted(scores, reverse=True)
    assert (
        retrieve_relevant_dossiers(diet_db, Scope.system(), "user habits", top_k=1, threshold=-1.0).total == 2
    )


def test_threshold_filters_unrelated_dossiers(diet_db: Driver, embedder: Embedder) -> None:
    result = retrieve_relevant_dossiers(
        diet_db, Scope.system(), "quarterly tax filing deadlines", embedder=embedder
    )
    assert result.total == 0
    assert result.dossiers == []


def test_the_exact_fallback_agrees_with_the_index_path(
    diet_db: Driver, embedder: Embedder, registry: PolicyRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cairn.memory.dossiers import retriever

    process_fact_packet(
        diet_db,
        packet("Project Falcon", ["User avoids meat at board dinners"], "b3", access=RESTRICTED),
        embedder=embedder,
    )
    for role in ("staff", "director"):
        scope = scope_of(registry, role)
        indexed = retrieve_relevant_dossiers(diet_db, scope, "user habits", 5, -1.0, embedder=embedder)
        monkeypatch.setattr(retriever, "FIRST_FETCH", 1)  # one candidate never settles it: scan
        monkeypatch.setattr(retriever, "MAX_FETCH", 1)
        exact = retrieve_relevant_dossiers(diet_db, scope, "user habits", 5, -1.0, embedder=embedder)
        monkeypatch.undo()
        assert [(d.id, round(d.score or 0, 5)) for d in exact.dossiers] == [
            (d.id, round(d.score or 0, 5)) for d in indexed.dossiers
        ]
        assert exact.total == indexed.total == (2 if role == "staff" else 3)


# --- policy --------------------------------------------------------------------------------------


def test_staff_never_sees_a_restricted_dossier(
    diet_db: Driver, embedder: Embedder, registry: PolicyRegistry
) -> None:
    secret = process_fact_packet(
        diet_db,
        packet("Project Falcon", ["Acme is evaluating an acquisition of Initech"], "b3", access=RESTRICTED),
        embedder=embedder,
    )
    for role, visible in (("staff", False), ("manager", False), ("director", True)):
        scope = scope_of(registry, role)
        result = retrieve_relevant_dossiers(diet_db, scope, "acquisition of Initech", embedder=embedder)
        assert (result.total == 1) is visible
        assert (secret.dossier_id in {d.id for d in result.dossiers}) is visible
        assert (get_dossier(diet_db, scope, secret.dossier_id) is not None) is visible
        assert bool(get_dossier_history(diet_db, scope, secret.dossier_id)) is visible


def test_a_hidden_fact_neither_shows_nor_scores(
    diet_db: Driver, embedder: Embedder, registry: PolicyRegistry
) -> None:
    staff = scope_of(registry, "staff")
    veg = retrieve_relevant_dossiers(diet_db, staff, "vegetarian", embedder=embedder).dossiers[0]
    before = veg.score
    # hide the fact that matches best: the dossier's score falls to its best *visible* fact
    diet_db.execute_query(
        "MATCH (:Dossier {id: $id})-[:HAS_FACT]->(f:Fact {text: 'User is strictly vegetarian'}) "
        "SET f.roles_allowed = ['director']",
        id=veg.id,
    )
    after = retrieve_relevant_dossiers(diet_db, staff, "vegetarian", threshold=-1.0, embedder=embedder)
    view = next(d for d in after.dossiers if d.id == veg.id)
    assert [f["text"] for f in view.facts] == ["User avoids meat"]
    assert view.score is not None and before is not None and view.score < before
    assert "strictly" not in repr(after.dossiers)  # every field of every view


def _vertex_ok(profile: RoleProfile, access: dict[str, Any]) -> bool:
    """The oracle for the vertex ACL."""
    return (
        matches(access["domain"], profile.domains)
        and profile.name in access["roles_allowed"]
        and bool(set(access["namespaces"]) & set(profile.namespaces))
        and SENSITIVITY_RANK[access["sensitivity"]] <= SENSITIVITY_RANK[profile.sensitivity_ceiling]
    )


def _facts_ok(profile: RoleProfile, access: dict[str, Any]) -> bool:
    """Vertex ACL on dossier and fact (same access) and the HAS_FACT edge rule between them."""
    domain = access["domain"]
    return _vertex_ok(profile, access) and any(
        e.type == "HAS_FACT" and matches(domain, e.from_domains) and matches(domain, e.to_domains)
        for e in profile.edges
    )


access_fields = st.fixed_dictionaries(
    {
        "domain": st.sampled_from(["acme/assistant", "acme/corporate", "other/assistant"]),
        "sensitivity": st.sampled_from(["low", "medium", "high"]),
        "namespaces": st.lists(
            st.sampled_from(["public", "internal", "confidential"]), min_size=1, unique=True
        ),
        "roles_allowed": st.lists(st.sampled_from(ROLES), min_size=1, unique=True),
    }
)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(accesses=st.lists(access_fields, min_size=1, max_size=4))
def test_search_results_and_counts_never_exceed_the_role(
    driver: Driver, embedder: Embedder, registry: PolicyRegistry, accesses: list[dict[str, Any]]
) -> None:
    wipe(driver)
    vectors = embedder.embed(["User is strictly vegetarian"])
    made = []
    for i, access in enumerate(accesses):
        raw = packet(f"Diet {i}", ["User is strictly vegetarian"], f"b{i}", access=access)
        made.append((process_fact_packet(driver, raw, embedder=embedder, vectors=vectors).dossier_id, access))
    for role in ROLES:
        profile, scope = registry.roles[role], scope_of(registry, role)
        expected = {did for did, access in made if _facts_ok(profile, access)}
        result = retrieve_relevant_dossiers(driver, scope, "vegetarian", top_k=10, embedder=embedder)
        assert {d.id for d in result.dossiers} == expected
        assert result.total == len(expected)
        assert all(d.fact_count == len(d.facts) == 1 for d in result.dossiers)
        for did, access in made:
            view = get_dossier(driver, scope, did)
            assert (view is not None) is _vertex_ok(profile, access)
            if view is not None and not _facts_ok(profile, access):
                assert view.facts == [] and view.summary == "" and view.fact_count == 0


# --- curation ------------------------------------------------------------------------------------


def test_merge_keeps_facts_and_history_and_links_the_merged_one(diet_db: Driver, embedder: Embedder) -> None:
    # Changed with issue 16 (packets are routed per topic): the tofu fact joins the diet dossier
    # on its own and the stamps fact starts a dossier, which is then merged into the diet one
    facts = ["User eats tofu and tempeh for protein", "User collects vintage stamps"]
    routed = process_fact_packet(diet_db, packet("Stamps", facts, "b9"), embedder=embedder)
    (other,) = [p.dossier_id for p in routed.placements if p.action == "created"]
    veg = retrieve_relevant_dossiers(diet_db, Scope.system(), "vegetarian", embedder=embedder).dossiers[0].id
    assert other != veg
    result = merge_dossiers(diet_db, other, veg, "same topic")
    assert len(result.moved_facts) == 1
    merged = get_dossier(diet_db, Scope.system(), veg)
    source = get_dossier(diet_db, Scope.system(), other)
    assert merged is not None and source is not None
    assert "User eats tofu and tempeh for protein" in {f["text"] for f in merged.facts}
    assert source.facts == []
    assert (source.fields["status"], source.fields["merged_into"]) == ("merged", veg)
    ops = [e["op"] for e in merged.history]
    assert ops.count("created") == 2  # the merged dossier's history reads on in the target
    assert "merged" in ops
    assert "merged" in [e["op"] for e in source.history]
    # the target's centroid sum (computed in Python) and summary are those of all its facts now
    rows, _, _ = diet_db.execute_query(
        "MATCH (d:Dossier {id: $id})-[:HAS_FACT]->(f:Fact) WITH d, f ORDER BY f.added_at, f.id "
        "RETURN d.centroid_sum AS centroid, d.summary AS summary, "
        "collect(f {.text, .embedding}) AS facts",
        id=veg,
    )
    vectors = [f["embedding"] for f in rows[0]["facts"]]
    assert len(vectors) == 4  # the two diet facts, the tofu fact and the moved stamps fact
    assert rows[0]["centroid"] == pytest.approx(np.sum(vectors, axis=0).tolist(), abs=1e-9)
    assert rows[0]["summary"] == summary_of(rows[0]["facts"])
    assert merge_dossiers(diet_db, other, veg).already_done
    with pytest.raises(CurationError):
        merge_dossiers(diet_db, veg, veg)
    # the merged dossier no longer receives packets
    again = process_fact_packet(
        diet_db, packet("Tofu", ["User eats tofu and tempeh daily"], "b10"), embedder=embedder
    )
    assert again.dossier_id == veg


def test_merge_refuses_different_access(diet_db: Driver, embedder: Embedder) -> None:
    secret = process_fact_packet(
        diet_db, packet("Falcon", ["Acme may acquire Initech"], "b3", access=RESTRICTED), embedder=embedder
    ).dossier_id
    veg = retrieve_relevant_dossiers(diet_db, Scope.system(), "vegetarian", embedder=embedder).dossiers[0].id
    with pytest.raises(CurationError, match="different access"):
        merge_dossiers(diet_db, secret, veg)
    with pytest.raises(CurationError, match="different access"):
        link_dossiers(diet_db, secret, veg)


def test_archive_leaves_search_but_keeps_history(diet_db: Driver, embedder: Embedder) -> None:
    veg = retrieve_relevant_dossiers(diet_db, Scope.system(), "vegetarian", embedder=embedder).dossiers[0].id
    archive_dossier(diet_db, veg, "diet changed")
    assert veg not in {
        d.id for d in retrieve_relevant_dossiers(diet_db, Scope.system(), "vegetarian").dossiers
    }
    assert veg in {
        d.id
        for d in retrieve_relevant_dossiers(
            diet_db, Scope.system(), "vegetarian", include_archived=True
        ).dossiers
    }
    history = get_dossier_history(diet_db, Scope.system(), veg)
    assert history[-1]["op"] == "archived" and history[-1]["rationale"] == "diet changed"
    assert archive_dossier(diet_db, veg).already_done
    with pytest.raises(CurationError):
        archive_dossier(diet_db, "dos-missing")


def test_include_archived_needs_the_status_field_everywhere_the_role_reaches(
    diet_db: Driver, embedder: Embedder, registry: PolicyRegistry
) -> None:
    """Which dossiers ``include_archived`` adds tells their status: a role whose field rules hide
    ``status`` in a domain it reaches keeps the default view, and the refusal does not depend on
    whether an archived dossier exists (red-team pass, filters on masked fields)."""
    director = registry.roles["director"]
    hidden = (
        FieldRule(domains=("acme/assistant",), fields=("id", "label", "summary")),
        FieldRule(domains=("*",), fields=("*",)),
    )
    scope = Scope.from_profile(director.model_copy(update={"fields": {**director.fields, "Dossier": hidden}}))

    def refusal() -> tuple[str, str, dict[str, Any]]:
        with pytest.raises(DossierFilterRefused) as info:
            retrieve_relevant_dossiers(diet_db, scope, "vegetarian", include_archived=True, embedder=embedder)
        return info.value.code, info.value.message, info.value.extensions()

    none_archived = refusal()
    assert none_archived[0] == "FILTER_NOT_ALLOWED" and none_archived[2]["filter"] == "include_archived"
    veg = retrieve_relevant_dossiers(diet_db, scope, "vegetarian", embedder=embedder).dossiers[0]
    assert "status" in veg.masked
    archive_dossier(diet_db, veg.id, "diet changed")
    assert refusal() == none_archived
    # The default view (active only) reads no hidden status either: where the rules hide it, the
    # archived dossier ranks as before (tests/e2e/adversarial/test_hidden_dossier_status.py).
    assert veg.id in {d.id for d in retrieve_relevant_dossiers(diet_db, scope, "vegetarian").dossiers}
    # With the role's own rules (status shown everywhere), the filter is the caller's again.
    seen = Scope.from_profile(director)
    assert veg.id in {
        d.id for d in retrieve_relevant_dossiers(diet_db, seen, "vegetarian", include_archived=True).dossiers
    }


def test_links_related_dossiers_and_export(
    diet_db: Driver, embedder: Embedder, registry: PolicyRegistry
) -> None:
    ids = {
        d.title: d.id
        for d in retrieve_relevant_dossiers(diet_db, Scope.system(), "user", threshold=-1.0).dossiers
    }
    veg, run = ids["Vegetarian Diet"], ids["Running"]
    link_dossiers(diet_db, run, veg, "nutrition for training")
    related = related_dossiers(diet_db, Scope.system(), veg)
    assert related[0] == {
        "id": run,
        "title": "Running",
        "linked": True,
        "rationale": "nutrition for training",
    }
    doc = export_dossier(diet_db, scope_of(registry, "staff"), veg)
    assert doc is not None
    assert doc["format"] == "cairn.dossier/1"
    assert {f["text"] for f in doc["facts"]} == {"User is strictly vegetarian", "User avoids meat"}
    assert [e["op"] for e in doc["history"]] == ["created", "linked"]
    assert doc["related"][0]["id"] == run
    json.dumps(doc)  # plain JSON all the way down
    assert export_dossier(diet_db, scope_of(registry, "staff"), "dos-missing") is None


def test_demo_load_is_idempotent(empty_db: Driver, embedder: Embedder, registry: PolicyRegistry) -> None:
    first = load_demo_dossiers(empty_db, embedder)
    assert first.blocks_gardened == 6
    snapshot = empty_db.execute_query("MATCH (n:Entity) RETURN count(n) AS n")[0][0]["n"]
    second = load_demo_dossiers(empty_db, embedder)
    assert (second.blocks_gardened, second.packets_applied) == (0, 0)
    assert empty_db.execute_query("MATCH (n:Entity) RETURN count(n) AS n")[0][0]["n"] == snapshot
    staff = retrieve_relevant_dossiers(empty_db, scope_of(registry, "staff"), "Project Falcon acquisition")
    director = retrieve_relevant_dossiers(
        empty_db, scope_of(registry, "director"), "Project Falcon acquisition"
    )
    assert staff.total == 0 and director.total == 1


def test_writers_only_curate_dossiers_their_profile_covers(
    diet_db: Driver, embedder: Embedder, registry: PolicyRegistry
) -> None:
    elsewhere = {"domain": "globex/hr", "roles_allowed": ["writer"]}
    outside = process_fact_packet(
        diet_db, packet("Globex", ["Globex plans a merger"], "b7", access=elsewhere), embedder=embedder
    ).dossier_id
    writer = scope_of(registry, "writer")
    with pytest.raises(CurationError, match="no dossier"):
        archive_dossier(diet_db, outside, writer=writer)
    veg = retrieve_relevant_dossiers(diet_db, writer, "vegetarian", embedder=embedder).dossiers[0].id
    with pytest.raises(CurationError, match="no dossier"):
        link_dossiers(diet_db, veg, outside, writer=writer)
    assert archive_dossier(diet_db, outside).op == "archived"  # the operator (no writer scope) may


RUNNING_FACTS = [
    "User runs three times a week",
    "User trains for the Berlin marathon in September",
    "User's knee hurt after long runs last spring",
    "User prefers trail shoes with a wide toe box",
    "User does interval sessions on Tuesdays",
    "User tracks heart rate with a chest strap",
    "User's personal best for 10 km is 44 minutes",
    "User stretches for ten minutes after every run",
    "User joined a running club in March",
    "User eats oatmeal two hours before races",
    "User wants to try an ultramarathon someday",
    "User's coach recommends one rest day per week",
    "User runs early in the morning before work",
    "User logs every run in a spreadsheet",
]


def test_a_search_result_shows_the_newest_facts_and_counts_them_all(
    empty_db: Driver, embedder: Embedder, registry: PolicyRegistry
) -> None:
    result = process_fact_packet(empty_db, packet("Running", RUNNING_FACTS, "b-run"), embedder=embedder)
    assert len(result.added) == len(RUNNING_FACTS)
    staff = scope_of(registry, "staff")
    [hit] = retrieve_relevant_dossiers(
        empty_db, staff, "how often does the user run", embedder=embedder
    ).dossiers
    assert hit.fact_count == len(RUNNING_FACTS)
    assert [f["text"] for f in hit.facts] == RUNNING_FACTS[-10:]
    assert all("embedding" not in f for f in hit.facts)
    assert "Facts (newest 10 of 14):" in format_for_context([hit])
    whole = get_dossier(empty_db, staff, hit.id)
    assert whole is not None and [f["text"] for f in whole.facts] == RUNNING_FACTS
    assert whole.fact_count == len(RUNNING_FACTS)


# --- fact-level search (FactRetriever) -----------------------------------------------------------

FACT_TEXTS = (
    "User is strictly vegetarian",
    "User runs three times a week",
    "Caroline attended an LGBTQ support group",
    "Melanie painted a lake sunrise last year",
    "The quarterly budget review is on Friday",
    "User's sister lives in Lisbon",
)
SEED_FACTS = """
UNWIND $rows AS row
CREATE (d:Entity:Dossier {id: row.dossier_id, title: row.title, summary: row.text, status: 'active'})
SET d += row.dossier_access
CREATE (f:Entity:Fact {id: row.fact_id, text: row.text, embedding: row.embedding, source_block_id: row.block,
                       source_turn_id: row.turn, observed_at: datetime('2023-05-08T13:56:00Z'),
                       added_at: datetime()})
SET f += row.fact_access
CREATE (d)-[:HAS_FACT]->(f)
"""


@pytest.fixture(scope="module")
def fact_vectors(embedder: Embedder) -> list[list[float]]:
    return [[float(x) for x in v] for v in embedder.embed(list(FACT_TEXTS))]


def _fact_visible(profile: RoleProfile, dossier: dict[str, Any], fact: dict[str, Any]) -> bool:
    """The oracle: both vertices visible and the HAS_FACT edge rule allows dossier -> fact."""
    return (
        _vertex_ok(profile, dossier)
        and _vertex_ok(profile, fact)
        and any(
            e.type == "HAS_FACT"
            and matches(dossier["domain"], e.from_domains)
            and matches(fact["domain"], e.to_domains)
            for e in profile.edges
        )
    )


seeded_facts = st.lists(
    st.tuples(st.integers(0, len(FACT_TEXTS) - 1), access_fields, access_fields), min_size=1, max_size=8
)


# 60 examples (each: 8 facts at most, five roles' searches): ~3 s an example on the shared 2-core machine.
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(facts=seeded_facts)
def test_fact_search_returns_and_counts_only_visible_facts(
    driver: Driver,
    embedder: Embedder,
    registry: PolicyRegistry,
    fact_vectors: list[list[float]],
    facts: list[tuple[int, dict[str, Any], dict[str, Any]]],
) -> None:
    wipe(driver)
    rows = [
        {
            "dossier_id": f"dos_{i}",
            "fact_id": f"fact_{i}",
            "title": f"Topic {i}",
            "text": FACT_TEXTS[t],
            "embedding": fact_vectors[t],
            "block": f"b{i % 2}",
            "turn": f"D1:{i}",
            "dossier_access": d_access,
            "fact_access": f_access,
        }
        for i, (t, d_access, f_access) in enumerate(facts)
    ]
    driver.execute_query(SEED_FACTS, rows=rows)
    retriever = FactRetriever(driver, embedder)
    for role in ROLES:
        profile, scope = registry.roles[role], scope_of(registry, role)
        expected = {
            r["fact_id"] for r in rows if _fact_visible(profile, r["dossier_access"], r["fact_access"])
        }
        result = retriever.search(scope, "vegetarian sister in Lisbon", top_k=10)
        assert {h.fact["id"] for h in result.hits} == expected
        assert result.total == len(expected)
        assert {h.dossier.id for h in result.hits} <= {f"dos_{i}" for i, _ in enumerate(facts)}
        for h in result.hits:
            assert h.dossier.summary == h.fact["text"]  # its one fact is visible, so the summary stays


RARE_FACTS = [
    "Caroline went hiking with friends in the mountains",
    "Melanie likes pottery and painting on weekends",
    "Caroline is researching adoption agencies",
    "Melanie's kids love the beach in summer",
    "Caroline gave a talk at a school about her journey",
    "Melanie ran a charity race for mental health",
    "Caroline keeps a journal of her counseling sessions",
    "Melanie bought new running shoes last week",
    "Caroline's grandmother gave her a necklace from Sweden",
    "Melanie plays the clarinet in a community band",
    "Caroline named her new puppy Oscar",
]


def test_full_text_finds_a_rare_word_that_dense_misses(empty_db: Driver, embedder: Embedder) -> None:
    """Dense ranks the pottery facts first (the question is about pottery); the rare word brings
    the one fact that names the Zorvex up through the full-text list. Both searches leave the
    query uncentred: centring alone already lifts the Zorvex fact here
    (``test_the_centred_query_finds_what_sets_a_fact_apart``)."""
    target = "The warranty for the Zorvex expires in March"
    facts = [*RARE_FACTS, "Melanie signed pottery classes for her kids at the studio", target]
    process_fact_packet(
        empty_db,
        packet("Friends", facts, "conv-session-1", timestamp="2023-05-08T13:56:00Z"),
        embedder=embedder,
    )
    question = "Did Melanie take her kids to pottery with the Zorvex?"
    alone = {"neighbour_weight": 0.0, "dossier_weight": 0.0, "centre": 0.0}  # the lists only, no expansion
    dense = FactRetriever(empty_db, embedder, FusionConfig(text_weight=0.0, **alone))
    fused = FactRetriever(empty_db, embedder, FusionConfig(**alone))
    dense_order = [h.fact["text"] for h in dense.search(Scope.system(), question, top_k=20).hits]
    fused_hits = fused.search(Scope.system(), question, top_k=20).hits
    fused_order = [h.fact["text"] for h in fused_hits]
    assert fused_order.index(target) < 4 < 5 <= dense_order.index(target)  # in the top 4 only when fused
    hit = fused_hits[fused_order.index(target)]
    assert hit.matched == ("dense", "name", "text")  # it names the Zorvex, as the question does
    assert hit.fact["source_turn_ids"] == []
    assert hit.observed_at is not None and hit.observed_at.startswith("2023-05-08")


CENTRE_QUESTION = "Did Melanie take her kids to pottery with the Zorvex?"
ZORVEX = "The warranty for the Zorvex expires in March"
HIDDEN_POTTERY = [
    "Melanie teaches pottery to her kids at the studio every Sunday",
    "Melanie's kids made clay pots in pottery class",
    "Melanie and her kids glazed pottery bowls together",
]


def test_the_centred_query_finds_what_sets_a_fact_apart(
    empty_db: Driver, embedder: Embedder, registry: PolicyRegistry
) -> None:
    """Centring (``FusionConfig.centre``): the dense query minus the mean vector of the caller's
    visible facts. In a memory all about Melanie, her kids and pottery, what every fact shares
    (those words) ranks the pottery facts first; the one fact set apart, the Zorvex, rises in the
    dense list alone. Hidden facts never move the centre: staff's answer, scores included, is the
    same with them stored, also when one sits in a dossier whose stored centroid sum counts it
    (that dossier's visible facts are then summed one by one); the director, who sees them, gets
    another centre."""
    process_fact_packet(
        empty_db,
        packet(
            "Friends",
            [*RARE_FACTS, "Melanie signed pottery classes for her kids at the studio", ZORVEX],
            "s1",
        ),
        embedder=embedder,
    )
    staff, director = scope_of(registry, "staff"), scope_of(registry, "director")
    dense_only = {"text_weight": 0.0, "neighbour_weight": 0.0, "name_weight": 0.0}

    def answer(scope: Scope, **config: Any) -> list[tuple[str, float, float | None]]:
        retriever = FactRetriever(empty_db, embedder, FusionConfig(**dense_only, **config))
        hits = retriever.search(scope, CENTRE_QUESTION, top_k=20).hits
        return [
            (h.fact["text"], round(h.score, 6), None if h.cosine is None else round(h.cosine, 6))
            for h in hits
        ]

    centred, plain = answer(staff), answer(staff, centre=0.0)
    assert [t for t, _, _ in plain].index(ZORVEX) >= 5
    assert [t for t, _, _ in centred].index(ZORVEX) <= 3

    vectors = {
        t: [float(x) for x in v] for t, v in zip(HIDDEN_POTTERY, embedder.embed(HIDDEN_POTTERY), strict=True)
    }
    # one hidden fact in staff's dossier, counted in its stored sum as the governor would count it
    empty_db.execute_query(
        """MATCH (d:Dossier)-[:HAS_FACT]->(:Fact {text: $zorvex})
        CREATE (d)-[:HAS_FACT]->(f:Entity:Fact {id: 'fact_hidden_mate', text: $text, embedding: $vec,
                                                source_block_id: 's1', added_at: datetime()})
        SET f += $access, d.centroid_sum = [i IN range(0, size($vec) - 1) | d.centroid_sum[i] + $vec[i]]""",
        zorvex=ZORVEX,
        text=HIDDEN_POTTERY[0],
        vec=vectors[HIDDEN_POTTERY[0]],
        access=RESTRICTED,
    )
    _seed(empty_db, vectors, [(t, f"D9:{i}", RESTRICTED) for i, t in enumerate(HIDDEN_POTTERY[1:])])
    assert answer(staff) == centred
    seen = {t: c for t, _, c in answer(director)}
    assert set(seen) >= set(HIDDEN_POTTERY)
    assert all(seen[t] != c for t, _, c in centred)  # every cosine moved with the director's centre


def test_query_terms_pass_no_syntax_through() -> None:
    """Each term is a Lucene query of its own: letters and digits only, no english stop word."""
    terms = query_terms('Oscar AND (dog* OR "cat") -x ~2 \\ /re/ the Dog')
    assert terms == ["oscar", "dog", "cat", "x", "2", "re"]
    assert query_terms("?!") == []


def test_content_words_keep_the_topic_only() -> None:
    """Question words, function words and names (capitalised after the first word) are left out."""
    assert content_words("What books has Melanie read?") == "books read"
    assert content_words("What are Melanie's pets' names?") == "pets names"
    assert content_words("When did Caroline go to the LGBTQ support group?") == "go support group"
    assert content_words("Where did Caroline move from 4 years ago?") == "move 4 years ago"
    assert content_words("Caroline") == "Caroline"
    assert content_words("?!") == ""


def test_query_names_are_whom_the_question_asks_about() -> None:
    assert query_names("What books has Melanie read?") == ["Melanie"]
    assert query_names("What do Jon and Gina both have in common? Jon's?") == ["Jon", "Gina"]
    assert query_names("Caroline") == []  # the first word may be capitalised for grammar only
    assert query_names("what is cooking?") == []


def test_a_question_asks_when_by_its_first_word() -> None:
    assert asks_when("When did Caroline go to the LGBTQ support group?")
    assert asks_when("  when, roughly, did Jon open his studio")
    assert not asks_when("What did Caroline do when she moved?")
    assert not asks_when("Whenever Jon travels, what does he pack?")
    assert not asks_when("?!")


def test_the_name_pattern_holds_a_name_as_a_whole_word(driver: Driver) -> None:
    """One Java regular expression for all the question's names (``name_pattern``): a text matches
    when it holds one of them as a whole word, case-sensitive, on any line; no names, no match."""
    pattern = name_pattern(["Jo", "Ann-Marie", "O'Neil"])
    cases = {
        "Jo went home": True,
        "Later that day\nJo went home.": True,
        "Joan went home": False,
        "jo went home": False,
        "Ann-Marie's cat": True,
        "Ann met Marie": False,
        "The O'Neil family": True,
        "ÉJo and Joé": False,
        "Caroline met Jo": True,
    }
    records, _, _ = driver.execute_query(
        "UNWIND $texts AS t RETURN t AS text, t =~ $pattern AS named, t =~ $none AS unnamed",
        texts=list(cases),
        pattern=pattern,
        none=name_pattern([]),
    )
    assert {r["text"]: r["named"] for r in records} == cases
    assert [r["unnamed"] for r in records] == [None] * len(cases)


INSTRUMENT_FACTS = [
    ("Caroline plays the violin in a string quartet", "D1:1"),
    ("Caroline practises the cello every evening", "D1:2"),
    ("Caroline bought a new piano for her flat", "D1:3"),
    ("Melanie plays the clarinet in a community band", "D2:1"),
    ("Melanie is learning the violin with her daughter", "D2:2"),
    ("Melanie enjoys pottery classes on weekends", "D2:3"),
]


def _seed(
    driver: Driver, vectors: dict[str, list[float]], rows: list[tuple[str, str, dict[str, Any]]]
) -> None:
    """One dossier per fact (text, turn id, access for both), block ``b0``."""
    driver.execute_query(
        SEED_FACTS,
        rows=[
            {
                "dossier_id": f"dos_{i}",
                "fact_id": f"fact_{i}",
                "title": f"Topic {i}",
                "text": text,
                "embedding": vectors[text],
                "block": "b0",
                "turn": turn,
                "dossier_access": access,
                "fact_access": access,
            }
            for i, (text, turn, access) in enumerate(rows)
        ],
    )


def test_the_named_list_lifts_facts_about_whom_the_question_asks_and_sees_only_visible_facts(
    empty_db: Driver, embedder: Embedder, registry: PolicyRegistry
) -> None:
    """The dense candidates that name the question's person get a share of their own (``name``):
    Melanie's facts gain on Caroline's; a fact the role may not see that names her
    takes no named slot: staff's answer, scores included, is the same with it stored or not."""
    hidden = "Melanie secretly plays the violin and the clarinet"
    texts = [t for t, _ in INSTRUMENT_FACTS] + [hidden]
    vectors = {t: [float(x) for x in v] for t, v in zip(texts, embedder.embed(texts), strict=True)}
    public = {
        "domain": "acme/assistant",
        "sensitivity": "low",
        "namespaces": ["public"],
        "roles_allowed": list(ROLES),
    }
    _seed(empty_db, vectors, [(t, turn, public) for t, turn in INSTRUMENT_FACTS])
    question = "What instruments does Melanie play?"
    staff = scope_of(registry, "staff")

    def answer(config: FusionConfig | None = None) -> list[tuple[str, float, tuple[str, ...]]]:
        hits = FactRetriever(empty_db, embedder, config).search(staff, question, top_k=6).hits
        return [(h.fact["text"], round(h.score, 9), h.matched) for h in hits]

    named, plain = answer(), answer(FusionConfig(name_weight=0.0))
    # the named list is Melanie's three facts, rescaled like the dense list (best 1, last 0) at 0.25
    gain = {t: s for t, s, _ in named}
    for t, s, _ in plain:
        gain[t] -= s
    assert sorted(round(g, 6) for t, g in gain.items() if t.startswith("Melanie"))[::2] == [0.0, 0.25]
    assert all(g == 0 for t, g in gain.items() if not t.startswith("Melanie"))
    assert all(("name" in m) == t.startswith("Melanie") for t, _, m in named)
    assert [s for _, s, _ in named] == sorted((s for _, s, _ in named), reverse=True)

    empty_db.execute_query(
        SEED_FACTS,
        rows=[
            {
                "dossier_id": "dos_hidden",
                "fact_id": "fact_hidden",
                "title": "Hidden",
                "text": hidden,
                "embedding": vectors[hidden],
                "block": "b0",
                "turn": "D3:1",
                "dossier_access": RESTRICTED,
                "fact_access": RESTRICTED,
            }
        ],
    )
    assert answer() == named
    director = FactRetriever(empty_db, embedder).search(scope_of(registry, "director"), question, top_k=7)
    assert ["name" in h.matched for h in director.hits if h.fact["text"] == hidden] == [True]


def test_a_fact_restating_cited_turns_comes_after_facts_citing_new_ones(
    empty_db: Driver, embedder: Embedder
) -> None:
    """Distinct sources: the restatement of turn D1:1 is listed after the fact from D1:2, though it
    scores higher; a fact with no source turn always counts as new."""
    facts = [
        ("User's sister lives in Lisbon", "D1:1"),
        ("User's sister has lived in Lisbon for years", "D1:1"),
        ("User's sister works as a nurse in Portugal", "D1:2"),
    ]
    texts = [t for t, _ in facts]
    vectors = {t: [float(x) for x in v] for t, v in zip(texts, embedder.embed(texts), strict=True)}
    _seed(empty_db, vectors, [(t, turn, {}) for t, turn in facts])
    question = "Where does the user's sister live?"
    plain = FactRetriever(empty_db, embedder, FusionConfig(distinct_sources=False))
    fused = [h.fact["text"] for h in plain.search(Scope.system(), question, top_k=3).hits]
    nurse = texts[2]
    assert fused[2] == nurse  # both facts of turn D1:1 score above the fact from D1:2
    distinct = FactRetriever(empty_db, embedder).search(Scope.system(), question, top_k=3).hits
    assert [h.fact["text"] for h in distinct] == [fused[0], nurse, fused[1]]
    assert distinct[2].score > distinct[1].score  # moved by what it cites, not by its score
    # a shorter list stops once it is known, and still counts the whole pool
    for top_k, expected in ((1, [fused[0]]), (2, [fused[0], nurse])):
        cut = FactRetriever(empty_db, embedder).search(Scope.system(), question, top_k=top_k)
        assert ([h.fact["text"] for h in cut.hits], cut.total) == (expected, 3)
    empty_db.execute_query("MATCH (f:Fact {text: $t}) REMOVE f.source_turn_id", t=fused[1])
    unsourced = FactRetriever(empty_db, embedder).search(Scope.system(), question, top_k=3).hits
    assert [h.fact["text"] for h in unsourced] == fused


def test_fact_search_without_query_words_ranks_by_vector(diet_db: Driver, embedder: Embedder) -> None:
    hits = FactRetriever(diet_db, embedder).search(Scope.system(), "?!", top_k=4).hits
    assert len(hits) == 4 and all(h.matched[0] == "dense" for h in hits)


def test_fact_context_respects_the_budget_and_shows_observed_dates(
    empty_db: Driver, embedder: Embedder
) -> None:
    process_fact_packet(
        empty_db,
        packet("Friends", RARE_FACTS, "conv-session-1", timestamp="2023-05-08T13:56:00Z"),
        embedder=embedder,
    )
    hits = FactRetriever(empty_db, embedder).search(Scope.system(), "Caroline", top_k=11).hits
    full = format_facts(hits)
    assert full.startswith("=== MEMORY")
    assert "## Friends" in full
    assert f"  - [2023-05-08] {hits[0].fact['text']}" in full
    assert full.count("  - [2023-05-08] ") == 11
    for budget in (5, 40, 80, 150):
        text = format_facts(hits, max_tokens=budget)
        assert count_tokens(text) <= budget
        # A fact is shown by its own line (the summary may quote facts out of rank order).
        shown = [h.fact["text"] for h in hits if f"] {h.fact['text']}\n" in text]
        assert shown == [h.fact["text"] for h in hits[: len(shown)]]  # a prefix of the ranking
    assert format_facts(hits, max_tokens=5) == ""
    assert format_facts([]) == ""


def test_dossier_context_shows_the_observed_date(empty_db: Driver, embedder: Embedder) -> None:
    process_fact_packet(
        empty_db,
        packet("Friends", RARE_FACTS[:2], "conv-session-1", timestamp="2023-05-08T13:56:00Z"),
        embedder=embedder,
    )
    result = retrieve_relevant_dossiers(empty_db, Scope.system(), "hiking", embedder=embedder)
    assert "(observed: 2023-05-08, added: " in format_for_context(result.dossiers)


# --- memorySearch over GraphQL and `cairn dossier ask` ------------------------------------------

MEMORY_SEARCH = """query($q: String!, $k: Int!, $t: Int) {
  memorySearch(query: $q, k: $k, maxTokens: $t) {
    count context
    hits { factId text observedAt addedAt sourceBlockId sourceTurnIds dossierId dossierTitle dossierSummary
           score matched }
  }
}"""


@pytest.fixture
def demo_client(empty_db: Driver, embedder: Embedder, settings: Settings) -> Iterator[TestClient]:
    demo_dossiers(empty_db, embedder)
    with TestClient(create_app(settings)) as c:
        yield c


def _gql(client: TestClient, registry: PolicyRegistry, role: str, query: str, **variables: Any) -> Any:
    resp = client.post(
        "/graphql", json={"query": query, "variables": variables}, headers=headers_for(registry, role)
    )
    assert resp.status_code == 200, resp.text
    return resp.json()


def test_memory_search_over_graphql_for_two_roles(
    demo_client: TestClient, registry: PolicyRegistry, empty_db: Driver
) -> None:
    records, _, _ = empty_db.execute_query(
        "MATCH (d:Dossier)-[:HAS_FACT]->(f:Fact) WHERE 'confidential' IN d.namespaces "
        "RETURN d.id AS id, collect(f.id) AS facts"
    )
    secret, secret_facts = records[0]["id"], set(records[0]["facts"])
    staff = _gql(demo_client, registry, "staff", MEMORY_SEARCH, q="Initech acquisition", k=50)
    assert "errors" not in staff, staff
    result = staff["data"]["memorySearch"]
    text = json.dumps(staff)
    assert secret not in text and "Initech" not in text and "Falcon" not in text
    assert not secret_facts & {h["factId"] for h in result["hits"]}
    staff_count = result["count"]

    director = _gql(demo_client, registry, "director", MEMORY_SEARCH, q="Initech acquisition", k=50)
    found = director["data"]["memorySearch"]
    top = found["hits"][0]
    assert top["dossierId"] == secret and "Initech" in top["text"] and "text" in top["matched"]
    assert top["dossierTitle"] and top["sourceBlockId"]
    assert found["count"] == staff_count + len(secret_facts)
    assert found["context"].startswith("=== MEMORY") and "Initech" in found["context"]

    budgeted = _gql(demo_client, registry, "director", MEMORY_SEARCH, q="Initech acquisition", k=50, t=30)
    assert count_tokens(budgeted["data"]["memorySearch"]["context"]) <= 30
    refused = demo_client.post("/graphql", json={"query": MEMORY_SEARCH, "variables": {"q": "x", "k": 3}})
    assert "errors" in refused.json() and refused.json()["data"] is None


def test_cli_dossier_ask(empty_db: Driver, embedder: Embedder) -> None:
    process_fact_packet(
        empty_db,
        packet("Friends", RARE_FACTS, "conv-session-1", timestamp="2023-05-08T13:56:00Z"),
        embedder=embedder,
    )
    restricted = packet("Secret", ["Caroline's puppy Oscar is a secret agent"], "b9", access=RESTRICTED)
    process_fact_packet(empty_db, restricted, embedder=embedder)
    runner = CliRunner()
    as_staff = runner.invoke(cli, ["dossier", "ask", "Oscar the puppy", "--role", "staff", "--json"])
    assert as_staff.exit_code == 0, as_staff.output
    body = json.loads(as_staff.output)
    assert body["hits"][0]["text"] == "Caroline named her new puppy Oscar"
    assert body["hits"][0]["dossier_title"] == "Friends"
    assert "secret agent" not in as_staff.output and body["count"] == len(RARE_FACTS)
    as_operator = runner.invoke(cli, ["dossier", "ask", "Oscar the puppy", "--top-k", "2"])
    assert as_operator.exit_code == 0, as_operator.output
    assert "secret agent" in as_operator.output and "2023-05-08" in as_operator.output
    context = runner.invoke(cli, ["dossier", "ask", "Oscar", "--max-tokens", "150", "--role", "staff"])
    assert context.exit_code == 0 and context.output.startswith("=== MEMORY")
    assert count_tokens(context.output) <= 150 and "Oscar" in context.output
    unknown = runner.invoke(cli, ["dossier", "ask", "Oscar", "--role", "nobody"])
    assert unknown.exit_code != 0 and "no role 'nobody'" in unknown.output


def test_migrate_installs_the_fact_text_fulltext_index(driver: Driver) -> None:
    records, _, _ = driver.execute_query(
        "SHOW INDEXES YIELD name, type, labelsOrTypes, properties, state, options "
        "WHERE name = $name RETURN type, labelsOrTypes, properties, state, options",
        name=FACT_TEXT_INDEX,
    )
    assert len(records) == 1
    row = records[0]
    assert (row["type"], row["labelsOrTypes"], row["properties"]) == ("FULLTEXT", ["Fact"], ["text"])
    assert row["state"] == "ONLINE"
    assert row["options"]["indexConfig"]["fulltext.analyzer"] == "english"


def test_a_fact_search_embeds_the_question_once(diet_db: Driver, monkeypatch: pytest.MonkeyPatch) -> None:
    """The content words' vector is pooled from the question's own pass (``content_vector``
    "pooled"): a search runs one forward pass over the question alone, where embedding the
    content words as a second text cost a quarter more CPU (docs/design.md §Fact search scores)."""
    model = get_embedder()  # the process's model itself (no memory of texts): every pass is real
    encode, passes = model._encode, []

    def spy(texts: list[str], *tokens: bool) -> Any:
        passes.append(list(texts))
        return encode(texts, *tokens)

    monkeypatch.setattr(model, "_encode", spy)
    question = "Which kinds of food does the user avoid eating these days?"
    hits = FactRetriever(diet_db, model).search(Scope.system(), question, top_k=4).hits
    assert passes == [[question]]
    assert hits[0].dossier.title == "Vegetarian Diet"
    encoded = FactRetriever(diet_db, model, FusionConfig(content_vector="encoded"))
    encoded.search(Scope.system(), question + " ", top_k=4)  # another text: not remembered
    assert passes[1:] == [[question + " ", content_words(question)]]
    with pytest.raises(ValueError, match="content_vector"):
        FusionConfig(content_vector="mean")


SEED_DOSSIER_FACTS = """
UNWIND $rows AS row
MERGE (d:Entity:Dossier {id: row.dossier_id})
  ON CREATE SET d.title = row.dossier_id, d.summary = '', d.status = 'active'
SET d += row.dossier_access
CREATE (f:Entity:Fact {id: row.fact_id, text: row.text, embedding: row.embedding, source_block_id: row.block,
                       source_turn_id: row.turn, turn_index: row.turn_index,
                       observed_at: datetime('2023-05-08T13:56:00Z'), added_at: datetime()})
SET f += row.fact_access
CREATE (d)-[:HAS_FACT]->(f)
"""


PUBLIC = {
    "domain": "acme/assistant",
    "sensitivity": "low",
    "namespaces": ["public"],
    "roles_allowed": list(ROLES),
}
BAND_FACTS = [  # (dossier, text, session): each in its own session, so no block neighbour is lifted
    ("dos_band", "Melanie plays the clarinet in a community band", "s1"),
    ("dos_band", "The community band rehearses in the old town hall on Thursdays", "s2"),
    ("dos_sport", "Melanie plays tennis with her neighbour on weekends", "s3"),
]
BAND_HIDDEN = "The band gave Melanie a saxophone for her birthday"
BAND_QUESTION = "What instruments does Melanie play?"


def _band_rows(embedder: Embedder) -> Any:
    """The band facts' rows for ``SEED_DOSSIER_FACTS`` (and a builder for more, hidden ones)."""
    texts = [t for _, t, _ in BAND_FACTS] + [BAND_HIDDEN]
    vectors = {t: [float(x) for x in v] for t, v in zip(texts, embedder.embed(texts), strict=True)}

    def row(i: int, dossier: str, text: str, block: str, access: dict[str, Any]) -> dict[str, Any]:
        return {
            "dossier_id": dossier,
            "fact_id": f"fact_{i}",
            "text": text,
            "embedding": vectors[text],
            "block": block,
            "turn": f"D{i + 1}:1",
            "turn_index": 0,
            "dossier_access": PUBLIC,
            "fact_access": access,
        }

    return [row(i, *f, PUBLIC) for i, f in enumerate(BAND_FACTS)], row


def test_dossier_mates_lift_a_seeds_topic_and_only_visible_facts(
    empty_db: Driver, embedder: Embedder, registry: PolicyRegistry
) -> None:
    """``FusionConfig.dossier_weight``: the other facts of a top fused fact's dossier get a share of
    its score (``dossier``), so a fact of the seed's topic told in another session passes one that
    only shares the question's words; a mate the role may not see is never lifted: staff's answer,
    scores included, is the same with it stored or not."""
    rows, row = _band_rows(embedder)
    texts = [t for _, t, _ in BAND_FACTS] + [BAND_HIDDEN]
    hidden, question = BAND_HIDDEN, BAND_QUESTION
    empty_db.execute_query(SEED_DOSSIER_FACTS, rows=rows)
    staff = scope_of(registry, "staff")
    mates = FusionConfig(dossier_weight=1.0, dossier_seeds=1)  # a mate's score >= the seed's

    def answer(config: FusionConfig | None = None) -> list[tuple[str, float, tuple[str, ...]]]:
        hits = FactRetriever(empty_db, embedder, config).search(staff, question, top_k=3).hits
        return [(h.fact["text"], round(h.score, 9), h.matched) for h in hits]

    seed, rehearsal, tennis = texts[:3]
    plain, lifted = answer(FusionConfig(dossier_weight=0.0)), answer(mates)
    assert [t for t, _, _ in plain] == [seed, tennis, rehearsal]
    assert [t for t, _, _ in lifted] == [seed, rehearsal, tennis]
    before, after = dict((t, s) for t, s, _ in plain), dict((t, s) for t, s, _ in lifted)
    assert after[rehearsal] == pytest.approx(before[rehearsal] + before[seed])
    assert (after[seed], after[tennis]) == (before[seed], before[tennis])  # a seed is never its own mate
    assert [("dossier" in m) for _, _, m in lifted] == [False, True, False]

    # a restricted fact in the band's dossier: no share for staff, no slot, no score moved
    empty_db.execute_query(SEED_DOSSIER_FACTS, rows=[row(9, "dos_band", hidden, "s9", RESTRICTED)])
    assert answer(mates) == lifted
    director = FactRetriever(empty_db, embedder, mates).search(
        scope_of(registry, "director"), question, top_k=4
    )
    assert [("dossier" in h.matched) for h in director.hits if h.fact["text"] == hidden] in ([True], [])


HIDDEN_DOSSIER_OVER = """
MERGE (d:Entity:Dossier {id: $id})
  ON CREATE SET d.title = $id, d.summary = '', d.status = 'active'
SET d += $access
WITH d
MATCH (f:Fact) WHERE f.id IN $facts
CREATE (d)-[:HAS_FACT]->(f)
"""


def test_dossier_mates_go_through_the_seeds_visible_dossiers_only(
    empty_db: Driver, embedder: Embedder, registry: PolicyRegistry
) -> None:
    """The seed and another visible fact are also in a dossier staff may not see: its pair with
    each is outside the view, so that dossier lifts no mate and is never the one reported; staff's
    answer (order, scores, ``matched``, dossiers) is the same with it stored or not, while the
    director, who sees it, has the other fact lifted through it (so the hidden dossier would
    matter if it leaked)."""
    rows, _ = _band_rows(embedder)
    empty_db.execute_query(SEED_DOSSIER_FACTS, rows=rows)
    mates = FusionConfig(dossier_weight=1.0, dossier_seeds=1)

    def answer(role: str) -> list[tuple[str, float, tuple[str, ...], str]]:
        scope = scope_of(registry, role)
        result = FactRetriever(empty_db, embedder, mates).search(scope, BAND_QUESTION, top_k=3)
        return [(h.fact["text"], round(h.score, 9), h.matched, h.dossier.id) for h in result.hits]

    seed, tennis = BAND_FACTS[0][1], BAND_FACTS[2][1]
    before = answer("staff")
    assert before[0][0] == seed and not any("dossier" in m for t, _, m, _ in before if t == tennis)
    over = ["fact_0", "fact_2"]  # the seed and tennis
    empty_db.execute_query(HIDDEN_DOSSIER_OVER, id="dos_secret", access=RESTRICTED, facts=over)
    assert answer("staff") == before
    director = {t: m for t, _, m, _ in answer("director")}
    assert "dossier" in director[tennis]


def test_a_when_question_lifts_no_dossier_mates(
    empty_db: Driver, embedder: Embedder, registry: PolicyRegistry
) -> None:
    """``FusionConfig.when_mates``: a question that asks when ("When did Melanie join the band?")
    asks for the day of one event; a mate of its topic is another session of that topic, another
    day, so a when question gets no dossier mates: its answer is the one without them, scores
    included. The same memory asked what still lifts the seed's mate."""
    rows, _ = _band_rows(embedder)
    empty_db.execute_query(SEED_DOSSIER_FACTS, rows=rows)
    staff = scope_of(registry, "staff")

    def answer(question: str, **config: Any) -> list[tuple[str, float, tuple[str, ...]]]:
        retriever = FactRetriever(empty_db, embedder, FusionConfig(dossier_seeds=1, **config))
        return [
            (h.fact["text"], round(h.score, 9), h.matched) for h in retriever.search(staff, question, 3).hits
        ]

    when = "When did Melanie start playing the clarinet in the band?"
    assert answer(when, dossier_weight=1.0) == answer(when, dossier_weight=0.0)
    assert not any("dossier" in m for _, _, m in answer(when, dossier_weight=1.0))
    # the gate reads the question's first word only, whatever its case or punctuation
    assert answer(f"  {when.lower()}", dossier_weight=1.0) == answer(f"  {when.lower()}", dossier_weight=0.0)
    assert any("dossier" in m for _, _, m in answer(when, dossier_weight=1.0, when_mates=True))
    assert any("dossier" in m for _, _, m in answer(BAND_QUESTION, dossier_weight=1.0))
