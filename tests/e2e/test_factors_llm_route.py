"""The optional LLM router behind GraphQL's ``question(useLlm: true)``, end to end (real server path,
real Neo4j, the stub model of tests/llm_server.py): the model's route is used when it names only
what the caller sees; prose, a hidden id or a dead model fall back to the learned router with the
reason; a role without ``can_use_llm`` never reaches the model; and the prompt lists only the
factors and options the caller's scope sees (docs/design.md §Factor journal).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from neo4j import Driver
from starlette.testclient import TestClient

from cairn.app import create_app
from cairn.policy.profiles import PolicyRegistry
from cairn.runtime.embedder import Embedder
from cairn.runtime.settings import Settings
from tests.e2e.conftest import gql, load_factors, passport
from tests.llm_server import StubLLMServer

QUESTION = """query($text: String!, $now: DateTime) { question(text: $text, now: $now, useLlm: true) {
  intent entities { id } router answer llmUsed fallbackReason route } }"""
TEXT = "Why can't we do predictive maintenance?"
NOW = "2024-10-30T12:00:00Z"
ROUTING = "You route questions"  # the router's system prompt (cairn/memory/factors/router.py)
# What a director narrowed to low sensitivity and the internal namespace may not see.
NARROWED = {"X-Sensitivity-Ceiling": "low", "X-User-Namespaces": "internal,public"}
USABLE = {"intent": "what_if", "entities": ["data_quality"], "value": 60}  # a route the model may give
HIDDEN = ("ai_budget", "ai budget headroom", "workforce_planning_ai", "ai workforce planning", "budget")


@contextmanager
def serving(
    driver: Driver,
    embedder: Embedder,
    settings: Settings,
    *,
    reply: Mapping[str, Any] | None = None,
    **stub: Any,
) -> Iterator[tuple[TestClient, StubLLMServer]]:
    """The service with the stub model as its LLM; ``reply`` is the stub's answer to routing requests."""
    load_factors(driver, embedder)
    server = StubLLMServer(replies={ROUTING: json.dumps(reply)} if reply else None, **stub)
    server.start()
    try:
        with TestClient(create_app(settings.model_copy(update={"llm_base_url": server.url}))) as client:
            yield client, server
    finally:
        server.stop()


def ask(client: TestClient, headers: dict[str, str]) -> dict[str, Any]:
    body = gql(client, QUESTION, headers, text=TEXT, now=NOW)
    assert "errors" not in body, body
    answer: dict[str, Any] = body["data"]["question"]
    return answer


def routing_prompts(server: StubLLMServer) -> list[str]:
    return [
        json.dumps(r["messages"])
        for r in server.requests
        if any(ROUTING in str(m.get("content")) for m in r["messages"] if m.get("role") == "system")
    ]


def test_the_llm_route_is_used(
    driver: Driver, embedder: Embedder, settings: Settings, registry: PolicyRegistry
) -> None:
    with serving(driver, embedder, settings, reply=USABLE) as (client, server):
        answer = ask(client, passport(registry, "director"))
    assert (answer["router"], answer["intent"], [e["id"] for e in answer["entities"]]) == (
        "llm",
        "what_if",
        ["data_quality"],
    )
    assert answer["route"]["value"] == 60.0 and answer["fallbackReason"] is None
    assert answer["llmUsed"] is True  # the prose answer is the model's too
    [prompt] = routing_prompts(server)
    assert "predictive_maintenance" in prompt and "ai_budget" in prompt  # the director sees both


def test_hidden_names_never_reach_the_prompt_and_a_hidden_id_is_refused(
    driver: Driver, embedder: Embedder, settings: Settings, registry: PolicyRegistry
) -> None:
    route = {"intent": "what_if", "entities": ["ai_budget"], "value": 60}
    with serving(driver, embedder, settings, reply=route) as (client, server):
        answer = ask(client, passport(registry, "director", **NARROWED))
    assert (answer["router"], answer["intent"], [e["id"] for e in answer["entities"]]) == (
        "learned",
        "why_blocker",
        ["predictive_maintenance"],
    )
    assert answer["fallbackReason"] == "the LLM answer was not a usable route"
    [prompt] = routing_prompts(server)
    assert "predictive_maintenance" in prompt and "data_quality" in prompt
    sent = json.dumps(server.requests).lower()
    assert [name for name in HIDDEN if name in sent] == []


def test_prose_from_the_llm_falls_back_to_the_learned_route(
    driver: Driver, embedder: Embedder, settings: Settings, registry: PolicyRegistry
) -> None:
    with serving(driver, embedder, settings) as (client, server):  # the stub answers prose
        answer = ask(client, passport(registry, "director"))
    assert (answer["router"], answer["intent"], [e["id"] for e in answer["entities"]]) == (
        "learned",
        "why_blocker",
        ["predictive_maintenance"],
    )
    assert answer["fallbackReason"] == answer["route"]["fallback_reason"]
    assert answer["fallbackReason"] == "the LLM answer was not a usable route"
    assert len(routing_prompts(server)) == 1


def test_a_dead_llm_falls_back_to_the_learned_route(
    driver: Driver, embedder: Embedder, settings: Settings, registry: PolicyRegistry
) -> None:
    with serving(driver, embedder, settings, fail_with=503) as (client, server):
        answer = ask(client, passport(registry, "director"))
    assert (answer["router"], answer["intent"], [e["id"] for e in answer["entities"]]) == (
        "learned",
        "why_blocker",
        ["predictive_maintenance"],
    )
    assert "503" in (answer["route"]["fallback_reason"] or "") and "503" in (answer["fallbackReason"] or "")
    assert answer["llmUsed"] is False and routing_prompts(server)  # asked (and retried once)
    # The model the router found down is not asked again for the prose: a question waits for
    # one failed call (with its retry), not two (the answer's own LLM call used to follow it).
    assert len(server.requests) == len(routing_prompts(server)) == 2, server.requests


def test_a_role_without_the_llm_never_calls_it(
    driver: Driver, embedder: Embedder, settings: Settings, registry: PolicyRegistry
) -> None:
    with serving(driver, embedder, settings, reply=USABLE) as (client, server):
        staff = ask(client, passport(registry, "staff"))
        assert server.requests == []
        director = ask(client, passport(registry, "director"))  # the same server answers a role that may
    assert (staff["router"], staff["intent"], staff["fallbackReason"], staff["llmUsed"]) == (
        "learned",
        "why_blocker",
        None,
        False,
    )
    assert director["router"] == "llm" and len(routing_prompts(server)) == 1
