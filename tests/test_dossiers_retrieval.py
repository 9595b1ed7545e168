"""Reading dossiers through the Scope, and curating them (merge, archive, link, export).

note 000 Phase 4 checkpoint (retrieval and format_for_context), then policy: results,
counts, scores and histories computed over what the role may see only, checked as a
property over generated access fields.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from neo4j import Driver

from cairn.memory.dossiers.curation import (
    CurationError,
    archive_dossier,
    export_dossier,
    link_dossiers,
    merge_dossiers,
    related_dossiers,
)
from cairn.memory.dossiers.demo import load_demo_dossiers
from cairn.memory.dossiers.governor import process_fact_packet
from cairn.memory.dossiers.retriever import (
    format_for_context,
    get_dossier,
    get_dossier_history,
    retrieve_relevant_dossiers,
)
from cairn.policy.profiles import SENSITIVITY_RANK, PolicyRegistry, RoleProfile, matches
from cairn.policy.scope import Scope
from cairn.runtime.embedder import Embedder, get_embedder
from cairn.runtime.settings import Settings
from tests.conftest import wipe

ROLES = ("staff", "manager", "director", "exec", "writer")
RESTRICTED = {
    "domain": "acme/assistant",
    "sensitivity": "high",
    "namespaces": ["confidential"],
    "roles_allowed": ["director", "exec", "writer"],
}


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return get_embedder()


@pytest.fixture(scope="module")
def registry(settings: Settings) -> PolicyRegistry:
    return PolicyRegistry.load(settings.policy_file)


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
    assert "strictly" not in json.dumps([d.as_json() for d in after.dossiers])


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
