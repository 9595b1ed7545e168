"""Issue 12 #5: validation errors must not be oracles. For every kind of message, an id the
writer cannot read gets the same error (modulo the id itself) as an id that never existed;
a cycle through hidden nodes is reported without naming them. Tried for the writer and a
writer narrowed by headers; every refusal leaves the graph unchanged. Red-team pass 21 added the
forms fixture ingest reads since the PEP record (listed ends, a decision's own transitions): no
difference found; each fails when the store check counts hidden ids as stored."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from neo4j import Driver
from starlette.testclient import TestClient

from cairn.policy.profiles import PolicyRegistry
from tests.e2e.adversarial.scoped_write_support import (
    HIDDEN_DECISION,
    HIDDEN_EVENT,
    NEVER,
    WRITERS,
    as_writer,
    decision,
    event,
    refused,
    remove,
    seed,
    transition,
)

# Readable by the plain writer, hidden from the narrowed one (its headers drop acme/corporate).
CORP_FOR_WRITER = "acme-t-corp-readable-by-writer"
# Cycle fixtures: V1 -> H -> V2 with H hidden from every writer; W1 -> W2 all visible.
V1, H, V2, W1, W2 = "acme-t-v1", "acme-t-h", "acme-t-v2", "acme-t-w1", "acme-t-w2"
NEW = "acme-t-new"


@pytest.fixture(scope="module", autouse=True)
def seeded(acme: Driver) -> Iterator[None]:
    hidden = {"roles_allowed": ["director", "exec"], "sensitivity": "high", "namespaces": ["confidential"]}
    seed(
        acme,
        {
            "decisions": [
                decision(CORP_FOR_WRITER, domain="acme/corporate"),
                decision(V1),
                decision(H, domain="acme/corporate", **hidden),
                decision(V2),
                decision(W1),
                decision(W2),
            ],
            "transitions": [
                transition("t-v1-h", V1, H),
                transition("t-h-v2", H, V2),
                transition("t-w1-w2", W1, W2),
            ],
        },
    )
    yield
    remove(acme, CORP_FOR_WRITER, V1, H, V2, W1, W2)


def hidden_ids(who: str) -> list[str]:
    return [HIDDEN_DECISION, HIDDEN_EVENT, H] + ([CORP_FOR_WRITER] if who != "writer" else [])


def alias(d: str, e: str) -> dict[str, Any]:
    where = {"domain_from": "acme/product", "domain_to": "acme/product"}
    return {"id": "al-x", "decision_id": d, "event_id": e, **where}


# One payload per message kind; each refers to `ref` in one place.
REFERENCES: dict[str, Callable[[str], dict[str, Any]]] = {
    "based_on": lambda ref: {"decisions": [decision(NEW, based_on=[ref])]},
    "supported_by": lambda ref: {"decisions": [decision(NEW, supported_by=[ref])]},
    "decision_led_to": lambda ref: {"decisions": [decision(NEW, led_to=[ref])]},
    "event_led_to": lambda ref: {"events": [event(NEW, led_to=[ref])]},
    "alias_of_decision": lambda ref: {"events": [event(NEW, **{"x-extra": {"alias_of_decision": ref}})]},
    "transition_from": lambda ref: {"decisions": [decision(NEW)], "transitions": [transition("t", ref, NEW)]},
    "transition_to": lambda ref: {"decisions": [decision(NEW)], "transitions": [transition("t", NEW, ref)]},
    "alias_decision": lambda ref: {"events": [event(NEW)], "aliases": [alias(ref, NEW)]},
    # V1 -> H is stored: an edge H -> V1 must not be told apart by a cycle it would close
    "transition_closing_a_stored_path": lambda ref: {"transitions": [transition("t", ref, V1)]},
    "alias_event": lambda ref: {"decisions": [decision(NEW)], "aliases": [alias(NEW, ref)]},
    # The forms fixture ingest reads since the PEP record (red-team pass 21): a transition naming
    # several records at one end (one edge per pair, ids "t:<end>"), a decision's own transitions
    # (inline from or to it, listed, stated on the cause, or by a transition's id), each also
    # closing a stored path through the hidden decision (V1 -> H is stored).
    "listed_from": lambda ref: {"decisions": [decision(NEW)], "transitions": [listed("t", [ref], NEW)]},
    "listed_from_with_a_visible_one": lambda ref: {
        "decisions": [decision(NEW)],
        "transitions": [listed("t", [W1, ref], NEW)],
    },
    "listed_to": lambda ref: {"decisions": [decision(NEW)], "transitions": [listed("t", NEW, [ref, W2])]},
    "listed_closing_a_stored_path": lambda ref: {"transitions": [listed("t", [ref], [V1])]},
    "own_transition_from": lambda ref: {"decisions": [decision(NEW, transitions=[{"from": ref}])]},
    "own_transition_to": lambda ref: {"decisions": [decision(NEW, transitions=[{"to": ref}])]},
    "own_transition_listed": lambda ref: {"decisions": [decision(NEW, transitions=[{"from": [W1, ref]}])]},
    "own_transition_stated_on_the_cause": lambda ref: {
        "decisions": [decision(NEW, transitions=[{"to": ref, "relation": "Superseded-By"}])]
    },
    "own_transition_by_id": lambda ref: {
        "decisions": [decision(NEW, transitions=["t"])],
        "transitions": [transition("t", ref, NEW)],
    },
    "own_transition_closing_a_stored_path": lambda ref: {
        "decisions": [decision(NEW, transitions=[{"from": ref}])],
        "transitions": [transition("t", NEW, V1)],
    },
}


def listed(rid: str, a: str | list[str], b: str | list[str]) -> dict[str, Any]:
    return {**transition(rid, "-", "-"), "from": a, "to": b}


def normalised(problems: list[str], rid: str) -> list[str]:
    return [p.replace(rid, "<ID>") for p in problems]


@pytest.mark.parametrize("who", sorted(WRITERS))
@pytest.mark.parametrize("kind", sorted(REFERENCES))
def test_a_hidden_reference_reads_exactly_like_a_missing_one(
    who: str, kind: str, client: TestClient, acme: Driver, registry: PolicyRegistry
) -> None:
    headers = as_writer(registry, who)
    never = NEVER.format(kind)
    expected = normalised(refused(client, acme, headers, REFERENCES[kind](never)), never)
    for rid in hidden_ids(who):
        assert normalised(refused(client, acme, headers, REFERENCES[kind](rid)), rid) == expected, rid


@pytest.mark.parametrize("who", sorted(WRITERS))
def test_reusing_a_hidden_id_says_only_that_it_is_taken(
    who: str, client: TestClient, acme: Driver, registry: PolicyRegistry
) -> None:
    """Creating under a hidden id must fail (it would overwrite), so existence is disclosed by
    design — but nothing else: not its label, not whether the new record's kind matches."""
    headers = as_writer(registry, who)
    answers = set()
    for rid in hidden_ids(who):
        for payload in ({"decisions": [decision(rid)]}, {"events": [event(rid)]}):
            problems = refused(client, acme, headers, payload)
            text = " ".join(problems)
            assert "Decision" not in text and "Event" not in text, text
            answers.add(tuple(normalised(problems, rid)))
    assert len(answers) == 2, answers  # one per payload shape (decisions[0] vs events[0])


@pytest.mark.parametrize("who", sorted(WRITERS))
def test_a_cycle_through_hidden_nodes_names_none_of_them(
    who: str, client: TestClient, acme: Driver, registry: PolicyRegistry
) -> None:
    headers = as_writer(registry, who)
    through_hidden = refused(client, acme, headers, {"transitions": [transition("t-back", V2, V1)]})
    all_visible = refused(client, acme, headers, {"transitions": [transition("t-back", W2, W1)]})
    assert H not in " ".join(through_hidden)
    assert [p.replace(V2, "<A>").replace(V1, "<B>") for p in through_hidden] == [
        p.replace(W2, "<A>").replace(W1, "<B>") for p in all_visible
    ]
