"""bench.locomo_loo.leave_one_out: a setting is judged on a conversation it was not picked on."""

from __future__ import annotations

from typing import Any

from bench.locomo_loo import REFERENCE, grid, leave_one_out, pooled


def conv(name: str, questions: int, recall: dict[str, float]) -> dict[str, Any]:
    """A per-conversation record as bench/locomo.py writes it (recall@10 overall only)."""
    return {
        "sample_id": name,
        "questions_by_category": {"all": questions},
        "recall": {system: {"10": {"all": value}} for system, value in recall.items()},
    }


def test_pooled_weights_each_conversation_by_its_questions() -> None:
    per = [conv("a", 10, {REFERENCE: 0.5}), conv("b", 30, {REFERENCE: 0.9})]
    assert pooled(per, REFERENCE, "10", "all") == (0.5 * 10 + 0.9 * 30) / 40


def test_the_pick_is_made_without_the_held_out_conversation() -> None:
    up, down = "loo_text_weight=0.5", "loo_text_weight=1.5"
    per = [
        # "up" is better on a and b; on c only "down" is, and c is large: picked with c in,
        # it would be "down"; with c held out the pick is "up", which loses on c
        conv("a", 10, {REFERENCE: 0.60, up: 0.70, down: 0.50}),
        conv("b", 10, {REFERENCE: 0.60, up: 0.70, down: 0.50}),
        conv("c", 100, {REFERENCE: 0.60, up: 0.40, down: 0.90}),
    ]
    folds = {f.held_out: f for f in leave_one_out(per, [REFERENCE, up, down])}
    assert folds["c"].picked == up
    assert (folds["c"].picked_recall, folds["c"].default_recall) == (0.40, 0.60)
    assert folds["a"].picked == down  # b and c pooled: (0.5 * 10 + 0.9 * 100) / 110 beats the rest
    assert folds["a"].weights == {"text_weight": "1.5"}


def test_the_default_wins_ties() -> None:
    other = "loo_centre=0.5"
    per = [conv(n, 10, {REFERENCE: 0.6, other: 0.6}) for n in "abc"]
    folds = leave_one_out(per, [other, REFERENCE])
    assert {f.picked for f in folds} == {REFERENCE}
    assert all(f.weights == {"centre": 1.0} for f in folds)


def test_the_grid_moves_one_weight_at_a_time() -> None:
    variants = grid()
    assert variants["cairn"] == variants[REFERENCE]
    moved = {name: cfg for name, cfg in variants.items() if name.startswith("loo_") and name != REFERENCE}
    assert moved["loo_name_weight=0.5"].name_weight == 0.5
    assert moved["loo_name_weight=0.5"].centre == variants["cairn"].centre
    assert all(cfg != variants["cairn"] for cfg in moved.values())
