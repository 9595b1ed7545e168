"""Search, linear tail and divergence over the sample correspondence, under each role's scope."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from neo4j import Driver

from cairn.errors import CairnError
from cairn.memory.correspondence import (
    CorrespondenceRefused,
    Filters,
    Reader,
    SectionView,
    being_divergence,
    linear_tail,
    semantic_search,
)
from cairn.policy.profiles import SENSITIVITY_RANK, FieldRule, PolicyRegistry
from cairn.policy.scope import Scope
from cairn.runtime.embedder import Embedder
from cairn.runtime.settings import Settings

ROLES = ("staff", "manager", "director", "exec", "writer", "external")
RESTRICTED_FOR_STAFF = {17, 29, 37}  # medium / high sensitivity
STORED = """
MATCH (s:Section)
RETURN s.section_number AS n, s.id AS id, s.author AS author, s.date AS date, s.exec_tags AS exec_tags,
       s.status_tags AS status_tags, s.domain AS domain, s.sensitivity AS sensitivity,
       s.namespaces AS namespaces, s.roles_allowed AS roles, s.embedding AS embedding, s.body AS body
ORDER BY n
"""


@pytest.fixture(scope="module")
def readers(settings: Settings) -> dict[str, Reader]:
    registry = PolicyRegistry.load(settings.policy_file)
    out = {}
    for role in ROLES:
        profile = registry.get(role)
        assert profile is not None
        out[role] = Reader(Scope.from_profile(profile), profile.can_search)
    return out


@pytest.fixture(scope="module")
def stored(letters: Driver) -> list[dict[str, Any]]:
    records, _, _ = letters.execute_query(STORED)
    return [r.data() for r in records]


def numbers(views: list[SectionView]) -> list[int]:
    return [int(v.fields["section_number"]) for v in views]


def dense(canonical: int, hidden: set[int] = RESTRICTED_FOR_STAFF) -> int:
    """A canonical number as a role that cannot see ``hidden`` numbers it (its own dense numbering)."""
    return canonical - sum(1 for h in hidden if h < canonical)


def visible(row: dict[str, Any], scope: Scope) -> bool:
    """The vertex ACL, restated in Python as the oracle for the Cypher filter."""
    return (
        scope.role in row["roles"]
        and any(ns in scope.namespaces for ns in row["namespaces"])
        and SENSITIVITY_RANK[row["sensitivity"]] <= scope.ceiling
        and row["domain"] == "acme/correspondence"
    )


# --- filters --------------------------------------------------------------------------------


def test_author_filter_is_case_insensitive_and_exclusive(letters: Driver, readers: dict[str, Reader]) -> None:
    result = semantic_search(
        letters, readers["staff"], "advice from outside", 50, Filters(authors=("marta reyes",))
    )
    assert result.total == 6 and len(result.hits) == 6
    assert {h.fields["author"] for h in result.hits} == {"Marta Reyes"}
    assert all(h.fields["is_external_caller"] for h in result.hits)


def test_tag_and_date_filters(
    letters: Driver, readers: dict[str, Reader], stored: list[dict[str, Any]]
) -> None:
    staff = readers["staff"]
    gov = semantic_search(letters, staff, "decisions", 50, Filters(exec_tags=("gov",)))
    assert {h.fields["section_number"] for h in gov.hits} == {
        dense(r["n"]) for r in stored if "EXEC:GOV" in r["exec_tags"] and r["n"] not in RESTRICTED_FOR_STAFF
    }
    pending = semantic_search(letters, staff, "experiments", 50, Filters(status_tags=("experiment pending",)))
    assert pending.total == 7 and all("EXPERIMENT PENDING" in h.fields["status_tags"] for h in pending.hits)
    february = semantic_search(
        letters, staff, "anything", 50, Filters(date_from="2026-02-01", date_to="2026-02-28")
    )
    dates = sorted(h.fields["date"] for h in february.hits)
    assert dates[0] >= "2026-02-01" and dates[-1] <= "2026-02-28"
    assert february.total == sum(
        1 for r in stored if r["date"] and "2026-02-01" <= r["date"] <= "2026-02-28" and r["n"] != 29
    )
    both = semantic_search(letters, staff, "x", 50, Filters(exec_tags=("MICRO",), authors=("Priya Raman",)))
    assert numbers(both.hits) and set(numbers(both.hits)) == {dense(7), dense(41)}


def test_filters_apply_before_ranking(letters: Driver, readers: dict[str, Reader]) -> None:
    query = "should the assistant run inside a customer's own data centre?"
    best = semantic_search(letters, readers["staff"], query, 1)
    assert best.hits[0].fields["author"] != "Jonas Weber"
    jonas = semantic_search(letters, readers["staff"], query, 1, Filters(authors=("Jonas Weber",)))
    assert len(jonas.hits) == 1 and jonas.hits[0].fields["author"] == "Jonas Weber"
    assert jonas.total == 4  # Jonas's visible letters (his headcount request is restricted)


def test_bad_arguments_are_refused(letters: Driver, readers: dict[str, Reader]) -> None:
    for call in (
        lambda: semantic_search(letters, readers["staff"], "x", 0),
        lambda: semantic_search(letters, readers["staff"], "x", 101),
        lambda: semantic_search(letters, readers["staff"], "   "),
        lambda: semantic_search(letters, readers["staff"], "x", 5, Filters(date_from="March 2026")),
        lambda: linear_tail(letters, readers["staff"], 0),
        lambda: linear_tail(letters, readers["staff"], 5, from_section=0),
        lambda: being_divergence(letters, readers["staff"], "x", []),
    ):
        with pytest.raises(CairnError) as info:
            call()
        assert info.value.code == "INVALID_ARGUMENT"


def test_a_filter_on_a_field_the_role_cannot_see_is_refused(
    letters: Driver, readers: dict[str, Reader]
) -> None:
    staff = readers["staff"].scope
    # Title and body show (what a section is searched by: docs/design.md §Policy module), the
    # author and the date do not.
    shown = ("id", "section_number", "title", "body")
    texts_only = Scope(
        role="staff",
        domains=staff.domains,
        ceiling=staff.ceiling,
        namespaces=staff.namespaces,
        max_hops=1,
        edges=(),
        fields={"Section": (FieldRule(domains=("*",), fields=shown),)},
    )
    reader = Reader(texts_only, True)
    hits = semantic_search(letters, reader, "pricing", 3).hits
    assert hits and all(set(h.fields) <= set(shown) for h in hits)
    for call in (
        lambda: semantic_search(letters, reader, "pricing", 3, Filters(authors=("Atlas",))),
        lambda: semantic_search(letters, reader, "pricing", 3, Filters(date_from="2026-01-01")),
        lambda: being_divergence(letters, reader, "pricing", ["Atlas"]),
    ):
        with pytest.raises(CorrespondenceRefused) as info:
            call()
        assert info.value.code == "FILTER_NOT_ALLOWED"


# --- ranking ---------------------------------------------------------------------------------


def test_ranking_is_exact_cosine_over_visible_sections(
    letters: Driver, readers: dict[str, Reader], stored: list[dict[str, Any]], embedder: Embedder
) -> None:
    query = "what does it cost to process prompts in Europe?"
    q = embedder.embed([query])[0]
    for role in ("staff", "director"):
        scope = readers[role].scope
        rows = [r for r in stored if visible(r, scope)]
        sims = np.asarray([r["embedding"] for r in rows], dtype=np.float32) @ q
        order = np.argsort(-sims, kind="stable")[:10]
        result = semantic_search(letters, readers[role], query, 10)
        assert [h.id for h in result.hits] == [rows[i]["id"] for i in order]
        assert [h.score for h in result.hits] == pytest.approx([(1 + sims[i]) / 2 for i in order], abs=1e-4)
        assert result.total == len(rows)


# --- tail --------------------------------------------------------------------------------------


def test_tail_is_in_order_and_skips_what_the_role_cannot_see(
    letters: Driver, readers: dict[str, Reader]
) -> None:
    # Numbers are each role's own (dense over what it sees): staff does not see 17, 29 and 37.
    assert numbers(linear_tail(letters, readers["staff"], 5)) == [36, 37, 38, 39, 40]
    staff_from_15 = linear_tail(letters, readers["staff"], 4, from_section=15)
    assert numbers(staff_from_15) == [15, 16, 17, 18]
    assert [v.fields["title"] for v in staff_from_15][1:3] == [
        "EU-only inference: the call",
        "Japanese localization: pilot feedback",
    ]
    assert numbers(linear_tail(letters, readers["manager"], 4, from_section=15)) == [15, 16, 17, 18]
    assert numbers(linear_tail(letters, readers["director"], 500)) == list(range(1, 44))
    assert numbers(linear_tail(letters, readers["staff"], 3, from_section=34)) == [34, 35, 36]
    assert numbers(linear_tail(letters, readers["staff"], 3, from_section=39)) == [39, 40]
    assert linear_tail(letters, readers["staff"], 3, from_section=41) == []


def test_external_reads_the_tail_only_masked_and_public(
    letters: Driver, readers: dict[str, Reader], stored: list[dict[str, Any]]
) -> None:
    external = readers["external"]
    views = linear_tail(letters, external, 500)
    hidden_ids = {r["id"] for r in stored if r["n"] in {24, *RESTRICTED_FOR_STAFF}}
    assert not hidden_ids & {v.id for v in views}
    assert numbers(views) == list(range(1, 40))
    for v in views:
        assert set(v.fields) <= {
            "id",
            "section_number",
            "filed_id",
            "author",
            "date",
            "title",
            "body",
            "status_tags",
        }
        assert {"exec_tags", "exec_decisions", "responds_to", "collision"} <= set(v.masked)
    for call in (
        lambda: semantic_search(letters, external, "pricing"),
        lambda: being_divergence(letters, external, "pricing", ["Atlas"]),
    ):
        with pytest.raises(CorrespondenceRefused) as info:
            call()
        assert info.value.code == "FORBIDDEN_SEARCH"


# --- divergence -----------------------------------------------------------------------------


def test_divergence_groups_by_author_in_the_order_asked(letters: Driver, readers: dict[str, Reader]) -> None:
    question = "should the assistant be offered on-prem?"
    grouped = being_divergence(
        letters, readers["staff"], question, ["Marta Reyes", "priya raman", "Nobody", "Jonas Weber"], k=2
    )
    assert list(grouped) == ["Marta Reyes", "priya raman", "Nobody", "Jonas Weber"]
    assert numbers(grouped["Marta Reyes"])[0] == dense(21)  # her question about the assistant on-prem
    assert numbers(grouped["priya raman"])[0] == dense(22)  # the answer: no
    assert grouped["Nobody"] == []
    for name, views in grouped.items():
        assert len(views) <= 2
        assert {v.fields["author"].lower() for v in views} <= {name.lower()}
        scores = [v.score for v in views]
        assert scores == sorted(scores, reverse=True)


# --- policy -----------------------------------------------------------------------------------


def test_staff_never_gets_a_restricted_section_anywhere(
    letters: Driver, readers: dict[str, Reader], stored: list[dict[str, Any]]
) -> None:
    staff = readers["staff"]
    secrets = [r["body"] for r in stored if r["n"] in RESTRICTED_FOR_STAFF]
    margin = "board pre-read: margin impact of EU-only inference"
    results: list[SectionView] = []
    search = semantic_search(letters, staff, margin, 100)
    results += search.hits
    assert search.total == 40 and len(search.hits) == 40
    results += linear_tail(letters, staff, 500)
    grouped = being_divergence(letters, staff, margin, ["Dana Okafor", "Jonas Weber"], k=50)
    results += [v for views in grouped.values() for v in views]
    restricted_ids = {r["id"] for r in stored if r["n"] in RESTRICTED_FOR_STAFF}
    assert not restricted_ids & {v.id for v in results}
    dump = json.dumps([v.fields for v in results])
    for body in secrets:
        assert body[40:120] not in dump
    sixteen = next(v for v in results if v.fields["section_number"] == 16)
    manager_sixteen = linear_tail(letters, readers["manager"], 1, from_section=16)[0]
    assert 17 in manager_sixteen.fields["responded_by"]
    assert sixteen.fields["responds_to"] == [15]
    assert sixteen.fields["responded_by"] == [
        dense(n) for n in manager_sixteen.fields["responded_by"] if n != 17
    ]
    assert semantic_search(letters, readers["manager"], margin, 1).hits[0].fields["section_number"] == 17


FILTERS = st.builds(
    Filters,
    authors=st.lists(
        st.sampled_from(["Dana Okafor", "Atlas", "marta reyes", "Jonas Weber", "x"]), max_size=2
    ).map(tuple),
    exec_tags=st.lists(st.sampled_from(["GOV", "EXEC:MICRO"]), max_size=1).map(tuple),
    status_tags=st.lists(st.sampled_from(["DECIDED", "OPEN", "EXPERIMENT PENDING"]), max_size=2).map(tuple),
    date_from=st.sampled_from([None, "2026-01-20", "2026-02-15"]),
    date_to=st.sampled_from([None, "2026-02-10", "2026-03-31"]),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(role=st.sampled_from([r for r in ROLES if r != "external"]), filters=FILTERS, k=st.integers(1, 60))
def test_search_returns_and_counts_only_visible_sections_passing_the_filters(
    letters: Driver,
    readers: dict[str, Reader],
    stored: list[dict[str, Any]],
    role: str,
    filters: Filters,
    k: int,
) -> None:
    scope = readers[role].scope
    p = filters.params()

    def passes(r: dict[str, Any]) -> bool:
        return (
            (p["authors"] is None or r["author"].lower() in p["authors"])
            and (p["exec_tags"] is None or any(t in p["exec_tags"] for t in r["exec_tags"]))
            and (p["status_tags"] is None or any(t in p["status_tags"] for t in r["status_tags"]))
            and (p["date_from"] is None or (r["date"] is not None and r["date"] >= p["date_from"]))
            and (p["date_to"] is None or (r["date"] is not None and r["date"] <= p["date_to"]))
        )

    expected = {r["id"] for r in stored if visible(r, scope) and passes(r)}
    vector = stored[0]["embedding"]
    result = semantic_search(letters, readers[role], vector, k, filters)
    assert result.total == len(expected)
    assert {h.id for h in result.hits} <= expected
    assert len(result.hits) == min(k, len(expected))
