"""Whether, never how many: what a role learns about prerequisites and influences it cannot see.

Two graphs are loaded in turn that differ only in how many hidden factors stand behind the same
visible option, the same visible factor and the same journal entry (one, then three). A role that
cannot see them must get byte-identical responses from every surface — GraphQL ``whyBlocked``,
``assessment``, ``whyValue``, ``question``, ``whatIf``, ``journal``, the CLI (text and JSON) and
the LLM context — while a role that can see them gets different ones (so the comparison is not
vacuous), and the first role is still told *that* something is withheld.

The visible part is ingested first and identically in both graphs, and the visible journal entry
that names hidden influences is ingested on its own: embeddings of a batch depend (in the last
bits) on what else is in the batch, and the router's scores must not differ for that reason.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from neo4j import Driver
from starlette.testclient import TestClient
from typer.testing import CliRunner

from cairn.app import create_app
from cairn.cli import app as cli
from cairn.ingest.factors import ingest_factor_payload
from cairn.memory.factors.context import build_context
from cairn.memory.factors.journal import history
from cairn.memory.factors.models import HIDDEN_NOTICE, HIDDEN_PREREQUISITES
from cairn.policy.passport import headers_for
from cairn.policy.profiles import PolicyRegistry
from cairn.policy.scope import Scope
from cairn.runtime.embedder import Embedder
from cairn.runtime.settings import Settings
from tests.e2e.conftest import wipe

ACCESS = {
    "domain": "acme/assessment",
    "sensitivity": "low",
    "namespaces": ["internal"],
    "roles_allowed": ["staff", "manager", "director", "exec", "writer"],
}
HIDDEN_ACCESS = {**ACCESS, "sensitivity": "medium", "roles_allowed": ["manager", "writer"]}
COUNTS = (1, 3)
NOW = "2024-11-01T12:00:00Z"
SECRET = "secret"  # every hidden id and name contains it

VISIBLE = {
    "factors": [
        {"id": "data_readiness", "name": "Data readiness", "category": "data", **ACCESS},
        {"id": "team_skills", "name": "Team skills", "category": "people", **ACCESS},
    ],
    "options": [
        {"id": "smart_scheduling", "name": "Smart scheduling", **ACCESS},  # blocked, and needs hidden
        {"id": "vendor_pilot", "name": "Vendor pilot", **ACCESS},  # only hidden ones stand in the way
    ],
    "depends_on": [
        {"source": "smart_scheduling", "target": "data_readiness", "min_value": 50},
        {"source": "smart_scheduling", "target": "team_skills", "min_value": 40},
        {"source": "vendor_pilot", "target": "team_skills", "min_value": 40},
        {"source": "data_readiness", "target": "team_skills", "min_value": 10, "weight": 0.5},
    ],
    "sessions": [{"id": "s-kickoff", "title": "Kick-off", "started_at": "2024-10-01T09:00:00Z", **ACCESS}],
    "journal": [
        {
            "id": "je-skills",
            "factor": "team_skills",
            "timestamp": "2024-10-01T10:00:00Z",
            "value": 70,
            "confidence": 0.8,
            "rationale": "Two trained analysts on the team",
            "session": "s-kickoff",
        },
        {
            "id": "je-readiness-1",
            "factor": "data_readiness",
            "timestamp": "2024-10-02T10:00:00Z",
            "value": 40,
            "confidence": 0.6,
            "rationale": "Exports exist but are inconsistent",
            "session": "s-kickoff",
        },
    ],
}
# Visible, and about a visible factor, but naming the hidden factors as influences.
INFLUENCED_ENTRY = {
    "id": "je-readiness-2",
    "factor": "data_readiness",
    "timestamp": "2024-10-10T10:00:00Z",
    "value": 30,
    "confidence": 0.7,
    "rationale": "Cleansing stalled for lack of funding",
    "session": "s-kickoff",
}


def hidden_part(n: int) -> dict[str, Any]:
    """``n`` hidden factors behind both options and the visible factor, with later hidden entries."""
    secrets = [f"{SECRET}_{i}" for i in range(n)]
    return {
        "factors": [
            {"id": s, "name": f"Secret lever {i}", "category": "secret_finance", **HIDDEN_ACCESS}
            for i, s in enumerate(secrets)
        ],
        "depends_on": [
            {"source": source, "target": s, "min_value": 40 + i}
            for source in ("smart_scheduling", "vendor_pilot", "data_readiness")
            for i, s in enumerate(secrets)
        ],
        "journal": [
            {
                "id": f"je-{s}",
                "factor": s,
                "timestamp": "2024-10-25T10:00:00Z",  # newer than anything visible
                "value": 10 + i,
                "confidence": 0.5,
                "rationale": f"{SECRET} budget line {i}",
                "session": "s-kickoff",
            }
            for i, s in enumerate(secrets)
        ],
    }


def load(driver: Driver, embedder: Embedder, n: int) -> None:
    wipe(driver)
    ingest_factor_payload(driver, VISIBLE, embedder=embedder)
    ingest_factor_payload(driver, hidden_part(n), embedder=embedder)
    influences = ["team_skills", *(f"{SECRET}_{i}" for i in range(n))]
    ingest_factor_payload(driver, {"journal": [{**INFLUENCED_ENTRY, "influenced_by": influences}]}, embedder)


WHY_BLOCKED = """query($id: ID!) { whyBlocked(id: $id) {
  subject { id label name } status hasHiddenPrerequisites answer evidence
  blockers { factor { id label name } value threshold requiredBy { id } lastSet } } }"""
ASSESSMENT = """{ assessment { categories { category completeness avgConfidence factorCount totalFactors
  lastUpdated } totalFactorsAssessed totalFactors completeness avgConfidence decisionTier
  canEvaluate { id label name } answer continuity evidence } }"""
ENTRY_FIELDS = """id factorId op timestamp previousValue newValue rationale excerpt confidence sessionId
  inferenceStatus influencedBy hasHiddenInfluences"""
WHY_VALUE = f"""query($id: ID!) {{ whyValue(id: $id) {{
  factor {{ id name value confidence lastUpdated currentEntry {{ {ENTRY_FIELDS} }} }}
  history {{ {ENTRY_FIELDS} }} answer evidence }} }}"""
JOURNAL = f"""query($id: ID!) {{ journal(factorId: $id) {{ {ENTRY_FIELDS} }} }}"""
WHAT_IF = """query($id: ID!, $value: Float) { whatIf(factorId: $id, value: $value) {
  current value unblocked { id } blocked { id } answer evidence } }"""
QUESTION = """query($text: String!, $now: DateTime) { question(text: $text, now: $now) {
  intent entities { id label name } router answer llmUsed fallbackReason contextTokens evidence route } }"""

GRAPHQL: dict[str, tuple[str, dict[str, Any]]] = {
    "whyBlocked/smart_scheduling": (WHY_BLOCKED, {"id": "smart_scheduling"}),
    "whyBlocked/vendor_pilot": (WHY_BLOCKED, {"id": "vendor_pilot"}),
    "whyBlocked/data_readiness": (WHY_BLOCKED, {"id": "data_readiness"}),
    "assessment": (ASSESSMENT, {}),
    "whyValue/data_readiness": (WHY_VALUE, {"id": "data_readiness"}),
    "journal/data_readiness": (JOURNAL, {"id": "data_readiness"}),
    "whatIf/data_readiness": (WHAT_IF, {"id": "data_readiness", "value": 60}),
    "whatIf/team_skills": (WHAT_IF, {"id": "team_skills", "value": 20}),
    "question/why_blocker": (QUESTION, {"text": "Why can't we do smart scheduling?", "now": NOW}),
    "question/why_value": (QUESTION, {"text": "Why is our data readiness so low?", "now": NOW}),
    "question/status": (QUESTION, {"text": "Where are we overall?", "now": NOW}),
    "question/what_if": (QUESTION, {"text": "What if data readiness reached 60?", "now": NOW}),
}
CLI: dict[str, list[str]] = {
    "why-blocked": ["factor", "why-blocked", "smart_scheduling"],
    "why-blocked --json": ["factor", "why-blocked", "vendor_pilot", "--json"],
    "why-value": ["factor", "why-value", "data_readiness"],
    "why-value --json": ["factor", "why-value", "data_readiness", "--json"],
    "assessment": ["factor", "assessment"],
    "assessment --json": ["factor", "assessment", "--json"],
    "history --json": ["factor", "history", "data_readiness", "--json"],
    "ask --json": ["factor", "ask", "Why can't we do smart scheduling?", "--now", NOW, "--json"],
}
ROLES = ("staff", "manager")


@pytest.fixture(scope="module")
def client(driver: Driver, settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(settings)) as c:
        yield c


def collect(driver: Driver, client: TestClient, registry: PolicyRegistry) -> dict[str, dict[str, bytes]]:
    """Every surface's raw response, per role."""
    runner = CliRunner()
    out: dict[str, dict[str, bytes]] = {}
    for role in ROLES:
        got: dict[str, bytes] = {}
        for name, (query, variables) in GRAPHQL.items():
            resp = client.post(
                "/graphql",
                json={"query": query, "variables": variables},
                headers=headers_for(registry, role),
            )
            assert resp.status_code == 200 and "errors" not in resp.json(), (name, resp.text)
            got[name] = resp.content
        for name, args in CLI.items():
            result = runner.invoke(cli, [*args, "--role", role])
            assert result.exit_code == 0, (name, result.output)
            got[f"cli {name}"] = result.output.encode()
        context = build_context(
            driver, Scope.from_profile(registry.roles[role]), ["data_readiness", "team_skills"]
        )
        got["llm context"] = f"{context.tokens}\n{context.text}".encode()
        out[role] = got
    return out


@pytest.fixture(scope="module")
def responses(
    driver: Driver, client: TestClient, registry: PolicyRegistry, embedder: Embedder
) -> dict[int, dict[str, dict[str, bytes]]]:
    found = {}
    for n in COUNTS:
        load(driver, embedder, n)
        found[n] = collect(driver, client, registry)
    wipe(driver)
    return found


def graphql(responses: dict[int, dict[str, dict[str, bytes]]], role: str, name: str) -> Any:
    data = json.loads(responses[COUNTS[0]][role][name])["data"]
    return next(iter(data.values()))


def test_a_role_that_cannot_see_them_gets_byte_identical_responses(
    responses: dict[int, dict[str, dict[str, bytes]]],
) -> None:
    few, many = (responses[n]["staff"] for n in COUNTS)
    assert few.keys() == many.keys()
    different = [name for name in few if few[name] != many[name]]
    assert different == []


def test_the_graphs_really_differ_for_a_role_that_sees_them(
    responses: dict[int, dict[str, dict[str, bytes]]],
) -> None:
    few, many = (responses[n]["manager"] for n in COUNTS)
    for name in (
        "whyBlocked/smart_scheduling",
        "assessment",
        "whyValue/data_readiness",
        "question/why_blocker",
    ):
        assert few[name] != many[name], name
    blockers = json.loads(many["whyBlocked/vendor_pilot"])["data"]["whyBlocked"]["blockers"]
    assert sorted(b["factor"]["id"] for b in blockers) == [f"{SECRET}_{i}" for i in range(COUNTS[1])]


def test_nothing_hidden_reaches_the_role_that_cannot_see_it(
    responses: dict[int, dict[str, dict[str, bytes]]],
) -> None:
    for n in COUNTS:
        for name, body in responses[n]["staff"].items():
            assert SECRET.encode() not in body.lower(), name


def test_the_role_is_told_whether_prerequisites_are_withheld(
    responses: dict[int, dict[str, dict[str, bytes]]],
) -> None:
    blocked = graphql(responses, "staff", "whyBlocked/smart_scheduling")
    assert (blocked["status"], blocked["hasHiddenPrerequisites"]) == ("blocked", True)
    assert [b["factor"]["id"] for b in blocked["blockers"]] == ["data_readiness"]
    assert blocked["evidence"]["has_hidden_prerequisites"] is True
    needers = [n["id"] for n in blocked["evidence"]["hidden_required_by"]]
    assert needers == ["smart_scheduling", "data_readiness"]  # one entry per visible node, not per hidden
    # visible edges within staff's one hop (data_readiness -> team_skills is a second hop)
    assert blocked["evidence"]["prerequisites_reached"] == 2
    assert f"{HIDDEN_NOTICE} (required by Data readiness and Smart scheduling)." in blocked["answer"]

    pending = graphql(responses, "staff", "whyBlocked/vendor_pilot")
    assert (pending["status"], pending["hasHiddenPrerequisites"], pending["blockers"]) == (
        "undetermined",
        True,
        [],
    )
    assert HIDDEN_NOTICE in pending["answer"]

    value = graphql(responses, "staff", "whyValue/data_readiness")
    assert value["evidence"]["has_hidden_dependencies"] is True
    assert f"{HIDDEN_NOTICE}." in value["answer"]
    latest = value["history"][0]
    assert (latest["id"], latest["influencedBy"], latest["hasHiddenInfluences"]) == (
        "je-readiness-2",
        ["team_skills"],
        True,
    )
    assert value["history"][1]["hasHiddenInfluences"] is False

    summary = graphql(responses, "staff", "assessment")
    unlocks = summary["evidence"]["capabilities"]["cannot_evaluate_yet"]
    assert [(u["id"], u["has_hidden_prerequisites"]) for u in unlocks] == [
        ("vendor_pilot", True),
        ("smart_scheduling", True),
    ]
    assert (
        "Next unlocks: Vendor pilot (needs prerequisites you cannot see); "
        "Smart scheduling (needs Data readiness ≥ 50, now 30; prerequisites you cannot see)."
    ) in summary["answer"]
    context = responses[COUNTS[0]]["staff"]["llm context"].decode()
    assert f"depends on: Team skills = 70 (needs 10), {HIDDEN_PREREQUISITES};" in context


def test_a_role_that_sees_everything_is_told_nothing_is_withheld(
    responses: dict[int, dict[str, dict[str, bytes]]],
) -> None:
    # vendor_pilot's prerequisites all sit within manager's one hop (smart_scheduling's do not:
    # data_readiness's own are a second hop, which the walk no longer takes)
    blocked = graphql(responses, "manager", "whyBlocked/vendor_pilot")
    assert blocked["hasHiddenPrerequisites"] is False and blocked["evidence"]["hidden_required_by"] == []
    assert HIDDEN_NOTICE not in blocked["answer"]
    latest = graphql(responses, "manager", "whyValue/data_readiness")["history"][0]
    assert (latest["influencedBy"], latest["hasHiddenInfluences"]) == (["secret_0", "team_skills"], False)


def test_a_scope_that_walks_no_such_edge_is_told_nothing_is_withheld(
    driver: Driver, registry: PolicyRegistry, embedder: Embedder
) -> None:
    """Red-team pass 16 review: a scope without DEPENDS_ON (INFLUENCED_BY) in its edge rules met
    every prerequisite (influence) as hidden, so it was told which factors have one at all. Here
    staff narrowed to the causal and journal edges; as the walk does (test_unwalkable_edge_counts.py), an edge
    type outside the rules is not met."""
    load(driver, embedder, COUNTS[0])
    narrowed = Scope.from_profile(registry.roles["staff"], edge_types=("CAUSAL_PRECEDES", "ABOUT"))
    context = build_context(driver, narrowed, ["data_readiness", "team_skills"])
    entries = history(driver, narrowed, "data_readiness")
    full = Scope.from_profile(registry.roles["staff"])
    wipe(driver)
    assert HIDDEN_PREREQUISITES not in context.text
    assert [e.has_hidden_influences for e in entries] == [False, False]
    # staff itself walks both types and is still told (test_the_role_is_told_whether_...)
    assert full.edges and {r.type for r in full.edges} >= {"DEPENDS_ON", "INFLUENCED_BY"}
