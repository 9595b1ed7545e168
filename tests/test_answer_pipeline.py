"""Selector → Budget Gate → Templater on hand-built CandidateSets (no Neo4j needed).

These are the guarantees the trace and the UI card rely on: one deterministic ranking, a gate
that only ever cuts a tail, and an answer that never shows an id, whatever the summaries say.
"""

from __future__ import annotations

import random
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cairn.memory.budget import TOKEN_BUDGET, Budget, clip
from cairn.memory.selector import RANKING_POLICY, select
from cairn.memory.templater import (
    MAX_SENTENCE_CHARS,
    PERMISSIONS_NOTE,
    REDACTED,
    compose,
    render_evidence_line,
    scrub_ids,
)
from cairn.policy.preselector import CandidateEdge, CandidateNode, CandidateSet
from cairn.runtime.tokens import count_tokens

ANCHOR = "acme-corp-descope-onprem-2024"
PREV = "acme-corp-unify-cloud-platform-2022"
NEXT = "acme-prod-pivot-cloud-only-tiers-2024"
COST = "acme-e-onprem-support-cost-2023"
ALIAS = "acme-e-alias-descope-onprem-2024"
SURVEY = "acme-e-emea-onprem-customer-survey-2024"
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
    assert RANKING_POLICY == "score_desc__ts_iso_desc__id_asc"


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


def test_selector_drops_near_duplicates_of_better_items_and_of_the_anchor() -> None:
    anchor = anchor_decision(tags=None)
    keep = event("e-keep", summary="Frankfurt region went live", timestamp="2024-01-20T00:00:00Z")
    again = event("e-again", summary="Frankfurt region went live!", timestamp="2023-01-20T00:00:00Z")
    echo = event("e-echo", summary="De-scope the on-prem SKU by 2025")
    masked_a = event("e-masked-a", masked=("summary",), summary="x")
    masked_b = event("e-masked-b", masked=("summary",), summary="x")
    selection = select(CandidateSet(anchor, [again, keep, echo, masked_a, masked_b], []))
    assert sorted(selection.duplicates) == ["e-again", "e-echo"]
    assert selection.ranked[0].id == "e-keep"
    # Fully masked items share no words, so they are not duplicates of each other.
    assert {"e-masked-a", "e-masked-b"} <= {s.id for s in selection.ranked}


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


def test_envelope_has_the_note_004_shape() -> None:
    cs = descope_set()
    envelope = compose(cs, [ALIAS, COST, NEXT, PREV], withheld_by_policy=False)
    assert envelope.text == (
        "CEO on 2024-02-01: De-scope the on-prem SKU by 2025.\n"
        "Supporting Facts: Corporate announces de-scoping of on-prem SKU by 2025 (2024-02-12); "
        "On-prem support costs doubled year over year (2023-09-01)\n"
        "From: Unify on a single cloud platform. Next: Pivot to cloud-only product tiers."
    )
    assert envelope.cited_ids == [ANCHOR, ALIAS, COST, PREV, NEXT]
    assert envelope.permissions_note is None


@pytest.mark.parametrize("withheld", [True, False])
def test_permissions_note_appears_iff_withheld(withheld: bool) -> None:
    envelope = compose(descope_set(), [COST], withheld_by_policy=withheld, extra_ids=[HIDDEN])
    assert (PERMISSIONS_NOTE in envelope.text) is withheld
    assert envelope.text.endswith(PERMISSIONS_NOTE) is withheld
    assert envelope.permissions_note == (PERMISSIONS_NOTE if withheld else None)


def test_envelope_uses_only_included_items() -> None:
    envelope = compose(descope_set(), [COST], withheld_by_policy=False)
    assert envelope.text == (
        "CEO on 2024-02-01: De-scope the on-prem SKU by 2025.\n"
        "Supporting Facts: On-prem support costs doubled year over year (2023-09-01)"
    )
    assert envelope.cited_ids == [ANCHOR, COST]


def test_envelope_handles_masked_fields() -> None:
    anchor = anchor_decision(decision_maker=None, rationale=None)
    cs = descope_set(anchor)
    masked_alias = event(
        ALIAS, masked=("summary", "snippet", "description"), timestamp="2024-02-12T14:00:00Z"
    )
    cs = CandidateSet(anchor, [n for n in cs.nodes if n.id != ALIAS] + [masked_alias], cs.edges)
    envelope = compose(cs, [ALIAS, COST], withheld_by_policy=False)
    assert envelope.text.startswith("De-scope the on-prem SKU by 2025 (2024-02-01).\n")
    assert "CEO" not in envelope.text
    assert "From:" not in envelope.text and "Next:" not in envelope.text
    assert ALIAS not in envelope.cited_ids  # nothing visible to say about it

    undated = anchor_decision(decision_maker=None, timestamp=None)
    assert compose(CandidateSet(undated, [], []), [], False).text == "De-scope the on-prem SKU by 2025."
    untitled = anchor_decision(option=None)
    assert compose(CandidateSet(untitled, [], []), [], False).text == "CEO on 2024-02-01: Untitled decision."


def test_event_anchor_has_no_maker_and_names_the_decision_it_projects() -> None:
    anchor = event(
        ALIAS,
        hop=0,
        summary="Corporate announces de-scoping of on-prem SKU by 2025",
        timestamp="2024-02-12T14:00:00Z",
        decision_maker="ignored on events",
    )
    source = decision(ANCHOR, option="De-scope the on-prem SKU by 2025", timestamp="2024-02-01T10:00:00Z")
    nxt = decision(NEXT, option="Pivot to cloud-only product tiers", timestamp="2024-03-05T12:00:00Z")
    cs = CandidateSet(anchor, [source, nxt], [alias(ANCHOR, ALIAS), causal(ALIAS, NEXT, "led_to")])
    envelope = compose(cs, [NEXT, ANCHOR], withheld_by_policy=True, extra_ids=[HIDDEN])
    assert envelope.text == (
        "Corporate announces de-scoping of on-prem SKU by 2025 (2024-02-12).\n"
        "From: De-scope the on-prem SKU by 2025. Next: Pivot to cloud-only product tiers.\n"
        + PERMISSIONS_NOTE
    )
    assert envelope.cited_ids == [ALIAS, ANCHOR, NEXT]


def test_envelope_caps_supporting_facts_and_clamps_their_length() -> None:
    anchor = anchor_decision()
    causes = [
        event(
            f"acme-e-cause-{i}",
            summary=f"Cause {i} " + "with a very long explanation " * 20,
            timestamp=f"2023-0{i + 1}-01T00:00:00Z",
        )
        for i in range(5)
    ]
    cs = CandidateSet(anchor, causes, [causal(c.id, ANCHOR) for c in causes])
    envelope = compose(cs, [c.id for c in reversed(causes)], withheld_by_policy=False)
    facts = envelope.text.splitlines()[1].removeprefix("Supporting Facts: ").split("; ")
    assert len(facts) == 3
    assert envelope.cited_ids == [ANCHOR, "acme-e-cause-4", "acme-e-cause-3", "acme-e-cause-2"]
    for fact in facts:
        summary = re.sub(r" \(\d{4}-\d{2}-\d{2}\)$", "", fact)
        assert len(summary) <= MAX_SENTENCE_CHARS
        assert summary.endswith("…")


def test_envelope_never_contains_an_id_even_when_the_text_does() -> None:
    anchor = anchor_decision(
        option=f"Follow-up to {PREV} and {HIDDEN.upper()}",
        decision_maker=f"CEO ({HIDDEN})",
    )
    leaky = event(
        COST,
        summary=f"See {ANCHOR}, {COST}, {HIDDEN}_v2 and {NEXT}.",
        timestamp="2023-09-01T08:00:00Z",
    )
    nxt = decision(NEXT, option=f"Pivot (tracked as {NEXT})", timestamp="2024-03-05T12:00:00Z")
    prev = decision(PREV, option=f"{PREV}", timestamp="2022-03-05T12:00:00Z")
    cs = CandidateSet(
        anchor, [leaky, nxt, prev], [causal(COST, ANCHOR), causal(ANCHOR, NEXT), causal(PREV, ANCHOR)]
    )
    envelope = compose(cs, [COST, NEXT, PREV], withheld_by_policy=True, extra_ids=[HIDDEN])
    lowered = envelope.text.lower()
    for node_id in (ANCHOR, PREV, NEXT, COST, HIDDEN):
        assert node_id not in lowered
    assert REDACTED in envelope.text
    assert envelope.text.startswith(
        f"CEO ([redacted]) on 2024-02-01: Follow-up to {REDACTED} and {REDACTED}."
    )
    for node in cs.nodes:
        line = render_evidence_line(node, known_ids=[HIDDEN, ANCHOR])
        assert not any(i in line.lower() for i in (ANCHOR, node.id, HIDDEN))


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
    assert envelope.text.startswith(f"CEO on {REDACTED}: De-scope the on-prem SKU by 2025.")
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
    assert set(envelope.cited_ids) <= {ANCHOR, *gate.included}
    for excluded in gate.excluded:
        text = nodes[excluded["id"]].fields.get("summary") or nodes[excluded["id"]].fields["option"]
        assert text not in envelope.text
