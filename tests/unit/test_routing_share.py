"""The coherence floor rises for a dossier that outgrew its neighbourhood (docs/design.md §Routing,
"Share of the neighbourhood"): a large dossier whose facts stay coherent would otherwise take
every loosely fitting cluster, since one join moves its coherence by only 1/size."""

from __future__ import annotations

import numpy as np

from cairn.memory.dossiers.voting import (
    CROWD_RATIO,
    KAPPA_JOIN,
    DossierState,
    Hit,
    Vote,
    join_floor,
    plan_routes,
)

DIM = 8


def _unit(i: int) -> np.ndarray:
    v = np.zeros(DIM)
    v[i] = 1.0
    return v


# Two facts of one cluster, each at cosine 0.8 to the big dossier's centroid (axis 0).
PACKET = np.stack([0.8 * _unit(0) + 0.6 * _unit(1), 0.8 * _unit(0) + 0.6 * _unit(2)]).astype(np.float32)
# 40 facts of coherence 0.8 on axis 0: joining them keeps its coherence at 0.80 >= KAPPA_JOIN.
BIG = DossierState(40 * 0.8 * _unit(0), 40)


def _vote(neighbours: int) -> Vote:
    """Both packet facts vote for the big dossier only; ``neighbours`` small dossiers of 8 facts
    (on other axes) were reached by the same vote."""
    dossiers = {"big": BIG}
    for n in range(neighbours):
        dossiers[f"small{n}"] = DossierState(8 * 0.9 * _unit(3 + n), 8)
    hits = [Hit(i, "big", f"f{i}", 0.8) for i in range(len(PACKET))]
    return Vote(hits, {d: "" for d in dossiers}, dossiers)


def test_a_dossier_that_outgrew_its_neighbours_takes_no_loosely_fitting_cluster() -> None:
    routes = plan_routes(PACKET, _vote(4), [0, 1])
    assert [(r.indexes, r.decision.action) for r in routes] == [((0, 1), "create")]
    assert "neighbours' mean size" in routes[0].decision.reason


def test_a_memory_of_one_topic_routes_as_with_the_fixed_floor() -> None:
    routes = plan_routes(PACKET, _vote(0), [0, 1])
    assert [(r.indexes, r.decision.action, r.decision.target) for r in routes] == [((0, 1), "append", "big")]
    assert "outgrew" not in routes[0].decision.reason


def test_a_tight_cluster_still_joins_a_large_dossier_and_the_journal_says_why() -> None:
    tight = np.stack([0.97 * _unit(0) + np.sqrt(1 - 0.97**2) * _unit(1)] * 2).astype(np.float32)
    vote = _vote(4)
    vote = Vote(vote.hits, vote.titles, {**vote.dossiers, "big": DossierState(40 * 0.95 * _unit(0), 40)})
    routes = plan_routes(tight, vote, [0, 1])
    assert [(r.decision.action, r.decision.target) for r in routes] == [("append", "big")]
    assert "outgrew its neighbours" in routes[0].decision.reason


def test_the_floor_rises_past_the_ratio_only() -> None:
    assert join_floor(15, 10.0) == KAPPA_JOIN
    assert join_floor(int(CROWD_RATIO * 10) + 10, 10.0) > KAPPA_JOIN
