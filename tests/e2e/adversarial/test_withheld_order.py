"""The order of an ask's withheld placeholders must not follow the hidden ids (red-team pass, 2026-11-26).

An ask's meta names what the walk met and could not show as ``withheld-1``, ``withheld-2``, …
with a reason each (disclosed by design, README "Threat model: reads"). The placeholders were
numbered in the order of the hidden ids themselves, so two hidden neighbours withheld for
different reasons told the caller which of their ids sorts first: renaming a hidden node, and
nothing else, changed the answer. Now they are numbered by reason, then id
(cairn/policy/preselector.py ``_assemble``), so only the reasons show, as designed.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from neo4j import Driver
from starlette.testclient import TestClient

from cairn.policy.profiles import PolicyRegistry
from tests.e2e.adversarial.scoped_write_support import decision, event, remove, seed, transition
from tests.e2e.conftest import gql, passport

ANCHOR = "rt-withheld-anchor"
FIRST, LAST = "rt-withheld-aaa", "rt-withheld-zzz"
ASK = "query($id: ID!) { ask(anchorId: $id) { meta } }"
VISIBLE = {"roles_allowed": ["staff", "writer", "director", "exec"]}
# Two ways to hide a neighbour from staff, each a different reason in the meta.
HIDDEN_BY = {
    "sensitivity": {"sensitivity": "high", **VISIBLE},
    "role": {"roles_allowed": ["director", "exec"]},
}

pytestmark = pytest.mark.usefixtures("acme")


@pytest.fixture
def store(acme: Driver) -> Iterator[Any]:
    def build(first: str, last: str) -> None:
        remove(acme, ANCHOR, FIRST, LAST, "rt-withheld-t1", "rt-withheld-t2")
        seed(
            acme,
            {
                "decisions": [decision(ANCHOR, **VISIBLE)],
                "events": [event(FIRST, **HIDDEN_BY[first]), event(LAST, **HIDDEN_BY[last])],
                "transitions": [
                    transition("rt-withheld-t1", FIRST, ANCHOR),
                    transition("rt-withheld-t2", LAST, ANCHOR),
                ],
            },
        )

    yield build
    remove(acme, ANCHOR, FIRST, LAST, "rt-withheld-t1", "rt-withheld-t2")


def withheld(client: TestClient, registry: PolicyRegistry) -> dict[str, Any]:
    body = gql(client, ASK, passport(registry, "staff"), id=ANCHOR)
    assert "errors" not in body, body
    meta = body["data"]["ask"]["meta"]
    return {"policy": meta["policy_trace"], "excluded": meta["evidence_sets"]["payload_excluded_ids"]}


def test_renaming_hidden_neighbours_does_not_reorder_the_placeholders(
    client: TestClient, registry: PolicyRegistry, store: Any
) -> None:
    store("sensitivity", "role")
    one = withheld(client, registry)
    assert one["policy"]["withheld_ids"] == ["withheld-1", "withheld-2"], one
    assert len(set(one["policy"]["reasons_by_id"].values())) == 2, one  # two reasons, told apart
    store("role", "sensitivity")  # the same store with the two hidden ids swapped
    assert withheld(client, registry) == one
