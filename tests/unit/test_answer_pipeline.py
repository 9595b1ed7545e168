"""Selector → Budget Gate → Templater on hand-built CandidateSets (no Neo4j needed).

These are the guarantees the trace and the UI card rely on: one deterministic ranking that puts
causes first and never merges distinct ids, a gate that only ever cuts a tail, and an answer
that explains (every included cause with its relation, key, date and reason, "and N more" for
the rest), whose every line maps to cited ids, and that never shows a withheld id.
"""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cairn.memory.budget import TOKEN_BUDGET, Budget, clip
from cairn.memory.selector import RANKING_POLICY, select
from cairn.memory.templater import (
    MAX_REASON_CHARS,
    MAX_SENTENCE_CHARS,
    MORE_CAUSES_WHERE,
    PERMISSIONS_NOTE,
    REDACTED,
    Sentence,
    compose,
    permissions_note,
    relation_words,
    render_evidence_line,
    scrub_ids,
    validate_answer,
)
from cairn.policy.preselector import CandidateEdge, CandidateNode, CandidateSet
from cairn.runtime.tokens import count_tokens, count_tokens_each
from cairn.schema.catalog import CAUSAL_RELATIONS, relation_name, stated_on_cause

ANCHOR = "acme-corp-descope-onprem-2024"
PREV = "acme-corp-unify-cloud-platform-2022"
NEXT = "acme-prod-pivot-cloud-only-tiers-2024"
COST = "acme-e-onprem-support-cost-2023"
ALIAS = "acme-e-alias-descope-onprem-2024"
HIDDEN = "acme-corp-secret-board-memo-2024"


def decision(node_id: str, hop: int = 1, masked: tuple[str, ...] = (), **fields: Any) -> CandidateNode:
    return CandidateNode(
        node_id, "Decision", hop, {k: v for k, v in fields.items() if k not in masked}, masked
    )


def event(node_id: str, hop: int = 1, masked: tuple[str, ...] = (), **fields: Any) -> CandidateNode:
    return CandidateNode(node_id, "Event", hop, {k: v for k, v in fields.items() if k not in masked}, masked)


def causal(source: str, target: str, relation: str = "causal") -> CandidateEdge:
    return CandidateEdge(source, target, "CAUSAL_PRECEDES", relation)


def alias(source: str, target: str) -> CandidateEdge:
    return CandidateEdge(source, target, "ALIAS_OF", None)


def anchor_decision(**overrides: Any) -> CandidateNode:
    fields: dict[str, Any] = {
        "option": "De-scope the on-prem SKU by 2025",
        "rationale": "Two stacks cost more than the on-prem revenue they protect.",
        "timestamp": "2024-02-01T10:00:00Z",
        "decision_maker": "CEO",
        "tags": ["cloud_only", "onprem"],
        "importance": 0.9,
        "domain": "acme/corporate",
    }
    masked = tuple(sorted(k for k, v in overrides.items() if v is None))
    fields.update({k: v for k, v in overrides.items() if v is not None})
    return decision(ANCHOR, hop=0, masked=masked, **fields)


def descope_set(anchor: CandidateNode | None = None) -> CandidateSet:
    """The on-prem de-scope decision with a cause, an alias projection and both neighbours."""
    nodes = [
        decision(PREV, option="Unify on a single cloud platform", timestamp="2022-06-01T09:00:00Z"),
        decision(NEXT, option="Pivot to cloud-only product tiers", timestamp="2024-03-05T12:00:00Z"),
        event(
            COST,
            summary="On-prem support costs doubled year over year",
            timestamp="2023-09-01T08:00:00Z",
            tags=["onprem", "cost"],
            importance=0.7,
        ),
        event(
            ALIAS,
            summary="Corporate announces de-scoping of on-prem SKU by 2025",
            timestamp="2024-02-12T14:00:00+00:00",
            tags=["alias_event", "cloud_only"],
            importance=0.9,
        ),
    ]
    edges = [
        causal(PREV, ANCHOR, "based_on"),
        causal(COST, ANCHOR, "supported_by"),
        causal(ANCHOR, NEXT, "led_to"),
        alias(ANCHOR, ALIAS),
    ]
    return CandidateSet(anchor or anchor_decision(), nodes, edges)


# --- tokens -------------------------------------------------------------------------------------


def test_count_tokens_is_small_positive_and_stable() -> None:
    first = count_tokens("hello world")
    assert isinstance(first, int)
    assert 0 < first <= 4
    assert count_tokens("hello world") == first
    assert count_tokens("") == 0


def test_count_tokens_is_not_capped_by_the_embedders_truncation() -> None:
    assert count_tokens("word " * 300) == 300


def test_count_tokens_each_agrees_with_count_tokens_and_lines_sum_to_the_joined_prompt() -> None:
    lines = ["hello world", "", "word " * 300, "cause (based on): Cloud first [d-base] (2021-06-01)."]
    assert count_tokens_each(lines) == [count_tokens(line) for line in lines]
    assert sum(count_tokens_each(lines)) == count_tokens("\n".join(lines))


# --- selector -----------------------------------------------------------------------------------


def test_selector_ranks_every_non_anchor_node_once_and_is_order_independent() -> None:
    cs = descope_set()
    selection = select(cs)
    ids = [s.id for s in selection.ranked] + selection.duplicates
    assert sorted(ids) == sorted(n.id for n in cs.nodes)
    assert ANCHOR not in ids
    for seed in range(5):
        shuffled = list(cs.nodes)
        random.Random(seed).shuffle(shuffled)
        assert select(CandidateSet(cs.anchor, shuffled, cs.edges)) == selection
    assert RANKING_POLICY == "tier_asc__score_desc__ts_iso_desc__id_asc"
    # Causes lead, then consequences, then alias projections (whatever their scores).
    assert [s.id for s in selection.ranked][:2] == [COST, PREV] or [s.id for s in selection.ranked][:2] == [
        PREV,
        COST,
    ]
    assert [s.id for s in selection.ranked][2:] == [NEXT, ALIAS]


def test_selector_signals_and_defaults() -> None:
    anchor = anchor_decision()
    bare = event("acme-e-bare", hop=2, summary="Quarterly all-hands held")
    close = event(
        "acme-e-close",
        summary="Support costs for on-prem SKU doubled",
        timestamp="2024-01-31T10:00:00Z",
        tags=["onprem"],
        importance=0.8,
    )
    ranked = {s.id: s for s in select(CandidateSet(anchor, [bare, close], [])).ranked}
    assert set(ranked["acme-e-bare"].signals) == {
        "sim",
        "recency_days",
        "importance",
        "adjacency",
        "completeness",
        "quality",
    }
    assert ranked["acme-e-bare"].signals["importance"] == 0.5
    assert ranked["acme-e-bare"].signals["recency_days"] == 3650
    assert ranked["acme-e-bare"].signals["adjacency"] == 0.5
    assert ranked["acme-e-close"].signals["recency_days"] == 1
    assert ranked["acme-e-close"].signals["adjacency"] == 1
    assert ranked["acme-e-close"].signals["sim"] > ranked["acme-e-bare"].signals["sim"]
    assert ranked["acme-e-close"].score > ranked["acme-e-bare"].score


def test_selector_ties_go_to_newer_timestamp_then_smaller_id() -> None:
    anchor = anchor_decision(timestamp="2024-01-10T00:00:00Z")

    def twin(node_id: str, words: str, ts: str) -> CandidateNode:
        return event(node_id, summary=words, timestamp=ts, importance=0.4)

    nodes = [
        twin("n-older", "alpha beta gamma", "2024-01-05T00:00:00Z"),  # 5 days before the anchor
        twin("n-newer", "delta epsilon zeta", "2024-01-15T00:00:00Z"),  # 5 days after it
        twin("n-b", "eta theta iota", "2024-01-15T00:00:00Z"),
        twin("n-a", "kappa lambda mu", "2024-01-15T00:00:00Z"),
    ]
    ranked = select(CandidateSet(anchor, nodes, [])).ranked
    assert len({s.score for s in ranked}) == 1
    assert [s.id for s in ranked] == ["n-a", "n-b", "n-newer", "n-older"]


def test_selector_never_merges_distinct_ids_however_alike_only_repeats_of_one_id() -> None:
    """A predecessor titled like the anchor, and two records sharing a title, all stay."""
    anchor = anchor_decision(tags=None)
    keep = event("e-keep", summary="Frankfurt region went live", timestamp="2024-01-20T00:00:00Z")
    again = event("e-again", summary="Frankfurt region went live!", timestamp="2023-01-20T00:00:00Z")
    echo = decision("d-echo", option="De-scope the on-prem SKU by 2025")
    selection = select(CandidateSet(anchor, [again, keep, echo, keep], [causal("d-echo", ANCHOR)]))
    assert selection.duplicates == ["e-keep"]
    assert selection.ranked[0].id == "d-echo"  # a cause, however alike its title
    assert sorted(s.id for s in selection.ranked) == ["d-echo", "e-again", "e-keep"]


# --- budget gate --------------------------------------------------------------------------------


def test_budget_arithmetic() -> None:
    assert Budget().max_prompt_tokens == 2048 - 256 - 64 - 128
    assert Budget(context_window=100).max_prompt_tokens == 0


def test_gate_keeps_everything_when_it_fits() -> None:
    items = [("a", "one two"), ("b", "three four five")]
    gate = clip("anchor line", items, Budget())
    assert gate.included == ["a", "b"]
    assert gate.excluded == []
    assert not gate.truncated
    assert gate.prompt_tokens == count_tokens("anchor line") + count_tokens("one two") + count_tokens(
        "three four five"
    )
    assert gate.passes == [{"prompt_tokens": gate.prompt_tokens, "max_prompt_tokens": 1600, "action": "stop"}]


def test_gate_cuts_the_tail_in_order_and_never_skips_ahead() -> None:
    words = " ".join(["word"] * 6)
    items = [("first", words), ("big", " ".join(["word"] * 50)), ("tiny", "ok"), ("last", words)]
    budget = Budget(context_window=20, desired_completion_tokens=0, guard_tokens=0, overhead_tokens=0)
    gate = clip("anchor", items, budget)
    assert gate.included == ["first"]
    assert gate.excluded == [
        {"id": "big", "reason": TOKEN_BUDGET},
        {"id": "tiny", "reason": TOKEN_BUDGET},
        {"id": "last", "reason": TOKEN_BUDGET},
    ]
    assert gate.truncated
    assert gate.prompt_tokens == 7 <= gate.max_prompt_tokens == 20
    assert [p["action"] for p in gate.passes] == ["rank_and_trim", "stop"]
    assert gate.passes[0]["prompt_tokens"] == 1 + 6 + 50 + 1 + 6


def test_gate_excludes_everything_when_only_the_anchor_fits_or_not_even_that() -> None:
    items = [("a", "one"), ("b", "two")]
    gate = clip("a long anchor line", items, Budget(context_window=0))
    assert gate.included == []
    assert [e["id"] for e in gate.excluded] == ["a", "b"]
    assert gate.prompt_tokens == count_tokens("a long anchor line")


texts = st.text(alphabet="abcdefgh ij.,", max_size=60)


@settings(max_examples=200, deadline=None, database=None)
@given(
    lines=st.lists(texts, max_size=12),
    anchor=texts,
    window=st.integers(min_value=0, max_value=120),
    reserve=st.integers(min_value=0, max_value=30),
)
def test_gate_property_included_is_a_prefix_and_nothing_is_lost(
    lines: list[str], anchor: str, window: int, reserve: int
) -> None:
    items = [(f"id-{i}", line) for i, line in enumerate(lines)]
    budget = Budget(
        context_window=window, desired_completion_tokens=reserve, guard_tokens=0, overhead_tokens=0
    )
    gate = clip(anchor, items, budget)
    ids = [i for i, _ in items]
    assert gate.included == ids[: len(gate.included)]
    assert gate.included + [e["id"] for e in gate.excluded] == ids
    assert all(e["reason"] == TOKEN_BUDGET for e in gate.excluded)
    assert gate.truncated == bool(gate.excluded)
    assert gate.passes[-1]["action"] == "stop"
    assert gate.passes[-1]["prompt_tokens"] == gate.prompt_tokens
    if gate.included:
        assert gate.prompt_tokens <= gate.max_prompt_tokens
    if gate.excluded:
        # Maximal: the first excluded item really did not fit.
        first_out = dict(items)[gate.excluded[0]["id"]]
        assert gate.prompt_tokens + count_tokens(first_out) > gate.max_prompt_tokens


# --- templater ----------------------------------------------------------------------------------


def test_envelope_explains_with_causes_in_causal_order_then_consequences_and_projections() -> None:
    cs = descope_set()
    envelope = compose(cs, [ALIAS, COST, NEXT, PREV], withheld_by_policy=False)
    assert envelope.text == (
        f"CEO on 2024-02-01: De-scope the on-prem SKU by 2025 [{ANCHOR}].\n"
        "Rationale: Two stacks cost more than the on-prem revenue they protect.\n"
        "Because:\n"
        f"- based on: Unify on a single cloud platform [{PREV}] (2022-06-01).\n"
        f"- supported by: On-prem support costs doubled year over year [{COST}] (2023-09-01).\n"
        f"Led to: Pivot to cloud-only product tiers [{NEXT}] (2024-03-05).\n"
        f"Projected as: Corporate announces de-scoping of on-prem SKU by 2025 [{ALIAS}] (2024-02-12)."
    )
    assert envelope.cited_ids == [ANCHOR, PREV, COST, NEXT, ALIAS]
    assert [(c.id, c.relation, c.words) for c in envelope.causes] == [
        (PREV, "based_on", "based on"),
        (COST, "supported_by", "supported by"),
    ]
    assert envelope.more_causes == 0 and envelope.permissions_note is None
    assert validate_answer(envelope, cs.by_id(), [HIDDEN]) == []


def test_each_cause_carries_its_relation_and_the_transition_reason_or_its_rationale() -> None:
    anchor = anchor_decision()
    old = decision(
        "d-old", option="Keep two stacks", timestamp="2021-01-01T00:00:00Z", rationale="Old reason."
    )
    base = decision(
        "d-base", option="Cloud first", timestamp="2021-06-01T00:00:00Z", rationale="Cheaper to run."
    )
    both = event("e-both", summary="Renewals declined", timestamp="2023-01-01T00:00:00Z")
    edges = [
        CandidateEdge(
            "d-old", ANCHOR, "CAUSAL_PRECEDES", "replaces", ("replaces",), "One stack replaces two."
        ),
        CandidateEdge("d-base", ANCHOR, "CAUSAL_PRECEDES", "requires", ("based_on", "requires"), None),
        CandidateEdge("e-both", ANCHOR, "CAUSAL_PRECEDES", "supported_by", ("led_to", "supported_by"), None),
    ]
    envelope = compose(CandidateSet(anchor, [both, base, old], edges), ["e-both", "d-base", "d-old"], False)
    lines = envelope.text.splitlines()[3:]
    assert lines == [
        "- replaces: Keep two stacks [d-old] (2021-01-01) — One stack replaces two.",
        "- based on and requires: Cloud first [d-base] (2021-06-01) — Cheaper to run.",
        "- supported by: Renewals declined [e-both] (2023-01-01).",
    ]
    assert relation_words(["causal"]) == "follows from"
    assert relation_words(["led_to"]) == "prompted by"
    assert relation_words(["causal", "requires"]) == "requires"
    assert relation_words(["enables"]) == "enabled by"
    assert relation_words(["depends_on", "obsoletes"]) == "depends on and obsoletes"
    assert relation_words(["partly_supersedes"]) == "partly supersedes"


@pytest.mark.parametrize(
    "written,name",
    [
        ("Depends-On", "depends_on"),
        ("  supported   by ", "supported_by"),
        ("REPLACES", "replaces"),
        ("Superseded-By", "supersedes"),
        ("Obsoleted by", "obsoletes"),
        ("Amended by", "amends"),
        ("Partly superseded by", "partly_supersedes"),
        ("Partly supersedes", "partly_supersedes"),
        ("vibes", "vibes"),
    ],
)
def test_relation_names_are_read_in_the_catalog_spelling(written: str, name: str) -> None:
    assert relation_name(written) == name
    assert all(relation_name(n) == n for n in CAUSAL_RELATIONS)


def test_a_relation_s_words_say_which_record_states_them() -> None:
    """ "Superseded by" is written on the earlier record, "Supersedes" on the later one; a name
    with one form ("based_on", "causal") does not say."""
    assert [stated_on_cause(w) for w in ("Superseded by", "Partly superseded by", "Amended-By")] == [True] * 3
    assert [stated_on_cause(w) for w in ("Supersedes", "partly supersedes", "AMENDS")] == [False] * 3
    assert [stated_on_cause(w) for w in ("based_on", "causal", "vibes")] == [None] * 3


def test_a_consequence_that_supersedes_or_amends_the_anchor_says_so() -> None:
    """Asked why about a superseded record, the answer says what superseded it: the link
    between records is read from the later record's side ("which supersedes it"), both names
    when both records state it; a consequence that merely followed reads as before."""
    anchor = anchor_decision()
    nodes = [
        decision("d-new", option="DNS infrastructure", timestamp="2024-03-06T00:00:00Z"),
        decision("d-fix", option="Terraform Data Structure", timestamp="2024-02-14T00:00:00Z"),
        decision("d-next", option="Pivot to cloud-only product tiers", timestamp="2024-03-05T12:00:00Z"),
    ]
    edges = [
        CandidateEdge(ANCHOR, "d-new", "CAUSAL_PRECEDES", "replaces", ("replaces", "supersedes"), None),
        CandidateEdge(ANCHOR, "d-fix", "CAUSAL_PRECEDES", "partly_supersedes", ("partly_supersedes",), None),
        causal(ANCHOR, "d-next", "based_on"),
    ]
    envelope = compose(CandidateSet(anchor, nodes, edges), ["d-new", "d-fix", "d-next"], False)
    assert envelope.text.splitlines()[-1] == (
        "Led to: Terraform Data Structure [d-fix] (2024-02-14), which partly supersedes it; "
        "Pivot to cloud-only product tiers [d-next] (2024-03-05); "
        "DNS infrastructure [d-new] (2024-03-06), which replaces and supersedes it."
    )


def test_shared_titles_stay_two_records_and_the_anchor_is_never_its_own_cause() -> None:
    anchor = anchor_decision()
    twin = decision("d-twin", option="De-scope the on-prem SKU by 2025", timestamp="2023-01-01T00:00:00Z")
    cs = CandidateSet(anchor, [twin], [causal("d-twin", ANCHOR, "requires"), causal(ANCHOR, ANCHOR)])
    envelope = compose(cs, [s.id for s in select(cs).ranked], withheld_by_policy=False)
    assert [c.id for c in envelope.causes] == ["d-twin"]
    assert "- requires: De-scope the on-prem SKU by 2025 [d-twin] (2023-01-01)." in envelope.text
    assert envelope.text.count(f"[{ANCHOR}]") == 1


def test_clipped_causes_are_counted_with_where_to_see_them() -> None:
    anchor = anchor_decision()
    causes = [
        event(f"acme-e-cause-{i}", summary=f"Cause {i}", timestamp=f"2023-0{i + 1}-01T00:00:00Z")
        for i in range(5)
    ]
    cs = CandidateSet(anchor, causes, [causal(c.id, ANCHOR, "supported_by") for c in causes])
    envelope = compose(cs, ["acme-e-cause-4", "acme-e-cause-1"], withheld_by_policy=False)
    assert [c.id for c in envelope.causes] == ["acme-e-cause-1", "acme-e-cause-4"]
    assert envelope.more_causes == 3
    assert envelope.text.splitlines()[-1] == f"- … and 3 more causes ({MORE_CAUSES_WHERE})."
    assert "Cause 0" not in envelope.text and "Cause 2" not in envelope.text
    assert validate_answer(envelope, cs.by_id(), []) == []


@pytest.mark.parametrize("withheld", [True, False])
def test_permissions_note_appears_iff_withheld(withheld: bool) -> None:
    envelope = compose(descope_set(), [COST], withheld_by_policy=withheld, extra_ids=[HIDDEN])
    assert (PERMISSIONS_NOTE in envelope.text) is withheld
    assert envelope.text.endswith(PERMISSIONS_NOTE) is withheld
    assert envelope.permissions_note == (PERMISSIONS_NOTE if withheld else None)


def test_permissions_note_discloses_counts_by_reason_only_where_the_profile_allows() -> None:
    reasons = ["scope:domain", "acl:sensitivity_exceeded", "scope:domain"]
    assert permissions_note(reasons, disclose=False) == PERMISSIONS_NOTE
    assert permissions_note(reasons, disclose=True) == (
        "Note: 3 items were withheld due to your permissions "
        "(1 above your sensitivity ceiling, 2 outside your domains)."
    )
    assert permissions_note(["edge:not_allowed"], disclose=True) == (
        "Note: 1 item was withheld due to your permissions (1 behind a link your role may not follow)."
    )
    assert permissions_note([], disclose=True) is None
    note = permissions_note(reasons, disclose=True)
    envelope = compose(descope_set(), [COST], withheld_by_policy=True, extra_ids=[HIDDEN], note=note)
    assert envelope.text.endswith(str(note)) and envelope.permissions_note == note


def test_envelope_uses_only_included_items() -> None:
    envelope = compose(descope_set(), [COST], withheld_by_policy=False)
    assert envelope.text == (
        f"CEO on 2024-02-01: De-scope the on-prem SKU by 2025 [{ANCHOR}].\n"
        "Rationale: Two stacks cost more than the on-prem revenue they protect.\n"
        "Because:\n"
        f"- supported by: On-prem support costs doubled year over year [{COST}] (2023-09-01).\n"
        f"- … and 1 more cause ({MORE_CAUSES_WHERE})."
    )
    assert envelope.cited_ids == [ANCHOR, COST, PREV]
    assert "Unify" not in envelope.text and "Pivot" not in envelope.text


def test_envelope_handles_masked_fields() -> None:
    anchor = anchor_decision(decision_maker=None, rationale=None)
    cs = descope_set(anchor)
    masked_alias = event(
        ALIAS, masked=("summary", "snippet", "description"), timestamp="2024-02-12T14:00:00Z"
    )
    cs = CandidateSet(anchor, [n for n in cs.nodes if n.id != ALIAS] + [masked_alias], cs.edges)
    envelope = compose(cs, [ALIAS, COST], withheld_by_policy=False)
    assert envelope.text.startswith(f"De-scope the on-prem SKU by 2025 [{ANCHOR}] (2024-02-01).\n")
    assert "CEO" not in envelope.text and "Rationale" not in envelope.text
    assert "Led to:" not in envelope.text

    undated = anchor_decision(decision_maker=None, timestamp=None, rationale=None)
    assert (
        compose(CandidateSet(undated, [], []), [], False).text
        == f"De-scope the on-prem SKU by 2025 [{ANCHOR}]."
    )
    untitled = anchor_decision(option=None, rationale=None)
    assert compose(CandidateSet(untitled, [], []), [], False).text == (
        f"CEO on 2024-02-01: Untitled decision [{ANCHOR}]."
    )


def test_event_anchor_has_no_maker_and_names_the_decision_it_projects() -> None:
    anchor = event(
        ALIAS,
        hop=0,
        summary="Corporate announces de-scoping of on-prem SKU by 2025",
        timestamp="2024-02-12T14:00:00Z",
        decision_maker="ignored on events",
    )
    source = decision(
        ANCHOR,
        option="De-scope the on-prem SKU by 2025",
        timestamp="2024-02-01T10:00:00Z",
        rationale="Costs.",
    )
    nxt = decision(NEXT, option="Pivot to cloud-only product tiers", timestamp="2024-03-05T12:00:00Z")
    cs = CandidateSet(anchor, [source, nxt], [alias(ANCHOR, ALIAS), causal(ALIAS, NEXT, "led_to")])
    envelope = compose(cs, [NEXT, ANCHOR], withheld_by_policy=True, extra_ids=[HIDDEN])
    assert envelope.text == (
        f"Corporate announces de-scoping of on-prem SKU by 2025 [{ALIAS}] (2024-02-12).\n"
        "Because:\n"
        f"- projected from: De-scope the on-prem SKU by 2025 [{ANCHOR}] (2024-02-01) — Costs.\n"
        f"Led to: Pivot to cloud-only product tiers [{NEXT}] (2024-03-05).\n" + PERMISSIONS_NOTE
    )
    assert envelope.cited_ids == [ALIAS, ANCHOR, NEXT]


def test_envelope_clamps_long_titles_and_reasons() -> None:
    anchor = anchor_decision()
    causes = [
        decision(
            f"acme-d-cause-{i}",
            option=f"Cause {i} " + "with a very long explanation " * 20,
            rationale="because " * 100,
            timestamp=f"2023-0{i + 1}-01T00:00:00Z",
        )
        for i in range(5)
    ]
    cs = CandidateSet(anchor, causes, [causal(c.id, ANCHOR) for c in causes])
    envelope = compose(cs, [c.id for c in reversed(causes)], withheld_by_policy=False)
    assert [c.id for c in envelope.causes] == [c.id for c in causes]
    for cause in envelope.causes:
        assert len(cause.title) <= MAX_SENTENCE_CHARS and cause.title.endswith("…")
        assert cause.why is not None and len(cause.why) <= MAX_REASON_CHARS


def test_envelope_never_contains_a_withheld_id_and_free_text_never_an_id() -> None:
    anchor = anchor_decision(
        option=f"Follow-up to {PREV} and {HIDDEN.upper()}",
        decision_maker=f"CEO ({HIDDEN})",
        rationale=f"As {HIDDEN} said.",
    )
    leaky = event(
        COST,
        summary=f"See {ANCHOR}, {COST}, {HIDDEN}_v2 and {NEXT}.",
        timestamp="2023-09-01T08:00:00Z",
    )
    nxt = decision(NEXT, option=f"Pivot (tracked as {NEXT})", timestamp="2024-03-05T12:00:00Z")
    prev = decision(PREV, option=f"{PREV}", timestamp="2022-03-05T12:00:00Z")
    edges = [
        CandidateEdge(COST, ANCHOR, "CAUSAL_PRECEDES", "causal", (), f"Per {HIDDEN}."),
        causal(ANCHOR, NEXT),
        causal(PREV, ANCHOR),
    ]
    cs = CandidateSet(anchor, [leaky, nxt, prev], edges)
    envelope = compose(cs, [COST, NEXT, PREV], withheld_by_policy=True, extra_ids=[HIDDEN])
    assert HIDDEN not in envelope.text.lower()
    # Visible ids appear only as keys, once per record that a line cites.
    for node_id in (ANCHOR, PREV, NEXT, COST):
        assert envelope.text.lower().count(node_id) == 1
    assert envelope.text.startswith(
        f"CEO ([redacted]) on 2024-02-01: Follow-up to {REDACTED} and {REDACTED} [{ANCHOR}]."
    )
    assert validate_answer(envelope, cs.by_id(), [HIDDEN]) == []
    for node in cs.nodes:
        line = render_evidence_line(node, known_ids=[HIDDEN, ANCHOR])
        assert not any(i in line.lower() for i in (ANCHOR, node.id, HIDDEN))
        structured = render_evidence_line(node, [HIDDEN, *cs.by_id()], cs)
        assert HIDDEN not in structured.lower() and structured.lower().count(node.id) == 1


def test_validator_catches_unsupported_lines_stray_keys_and_leaks() -> None:
    cs = descope_set()
    good = compose(cs, [COST, PREV], withheld_by_policy=False)
    visible = cs.by_id()
    assert validate_answer(good, visible, [HIDDEN]) == []
    invented = replace(good, text=good.text + "\nIt was also cheaper.")
    assert validate_answer(invented, visible, [HIDDEN]) == ["line 6 maps to no cited id"]
    stray = replace(good, text=good.text.replace(f"[{COST}]", f"[{NEXT}]"))
    assert any("maps to no cited id" in p for p in validate_answer(stray, visible, [HIDDEN]))
    keyed = replace(
        good, sentences=[*good.sentences[:-1], Sentence(good.sentences[-1].text + f" [{NEXT}]", (PREV,))]
    )
    keyed = replace(keyed, text="\n".join(s.text for s in keyed.sentences))
    assert "line 5 prints the key of a record it does not cite" in validate_answer(keyed, visible, [HIDDEN])
    uncited = replace(good, cited_ids=[ANCHOR])
    assert "line 4 rests on 1 id(s) not visible or not cited" in validate_answer(uncited, visible, [HIDDEN])
    leaked = replace(good, text=good.text + f"\n{PERMISSIONS_NOTE} {HIDDEN}")
    assert "a withheld id appears in the text" in validate_answer(leaked, visible, [HIDDEN])


slugs = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=12)


@settings(max_examples=200, deadline=None, database=None)
@given(
    ids=st.lists(slugs.map(lambda s: f"acme-{s}"), min_size=1, max_size=5, unique=True),
    filler=st.lists(st.text(alphabet="abcde -_.,()ACME", max_size=10), max_size=6),
    data=st.data(),
)
def test_scrub_property_no_known_id_survives_as_a_token(
    ids: list[str], filler: list[str], data: st.DataObject
) -> None:
    pieces = [*filler, *ids, *(i.upper() for i in ids)]
    text = "".join(data.draw(st.permutations(pieces)))
    scrubbed = scrub_ids(text, ids)
    assert scrub_ids(scrubbed, ids) == scrubbed  # nothing id-like is left for a second pass
    # Anything not an id is left as it was.
    assert scrub_ids(text, []) == text


def test_scrub_covers_the_template_text_as_well_as_the_fields() -> None:
    envelope = compose(descope_set(), [COST], withheld_by_policy=False, extra_ids=["2024-02-01", "costs"])
    assert envelope.text.startswith(f"CEO on {REDACTED}: De-scope the on-prem SKU by 2025 [{ANCHOR}].")
    assert "costs" not in envelope.text


def test_scrub_catches_glued_ids_but_spares_words_containing_a_short_id() -> None:
    text = "exit plan: acme-e-x_v2, (ACME-E-X), acme-e-x-2; x marks the spot"
    assert scrub_ids(text, ["x", "acme-e-x"]) == (
        "exit plan: [redacted]_v2, ([redacted]), [redacted]-2; [redacted] marks the spot"
    )


def test_render_evidence_line_is_title_and_date() -> None:
    node = event(COST, summary="On-prem support costs doubled.", timestamp="2023-09-01T23:30:00-02:00")
    assert render_evidence_line(node) == "On-prem support costs doubled (2023-09-02)"
    undated = decision(PREV, option="Unify on a single cloud platform")
    assert render_evidence_line(undated) == "Unify on a single cloud platform"
    assert render_evidence_line(event("acme-e-masked", masked=("summary",), summary="x")) == "Untitled event"


# --- the three steps together -------------------------------------------------------------------


def test_pipeline_clips_the_tail_and_answers_from_what_is_left() -> None:
    cs = descope_set()
    selection = select(cs)
    nodes = cs.by_id()
    items = [(s.id, render_evidence_line(nodes[s.id])) for s in selection.ranked]
    anchor_line = render_evidence_line(cs.anchor)
    keep_two = count_tokens(anchor_line) + sum(count_tokens(line) for _, line in items[:2])
    budget = Budget(
        context_window=keep_two + count_tokens(items[2][1]) - 1,
        desired_completion_tokens=0,
        guard_tokens=0,
        overhead_tokens=0,
    )
    gate = clip(anchor_line, items, budget)
    assert gate.included == [s.id for s in selection.ranked[:2]]
    assert [e["id"] for e in gate.excluded] == [s.id for s in selection.ranked[2:]]
    envelope = compose(cs, gate.included, withheld_by_policy=False)
    clipped_causes = {e["id"] for e in gate.excluded} & {PREV, COST}
    assert set(envelope.cited_ids) <= {ANCHOR, *gate.included, *clipped_causes}
    assert envelope.more_causes == len(clipped_causes)
    for excluded in gate.excluded:
        text = nodes[excluded["id"]].fields.get("summary") or nodes[excluded["id"]].fields["option"]
        assert text not in envelope.text
