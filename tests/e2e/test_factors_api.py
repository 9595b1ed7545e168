"""Factor fields over GraphQL and the `cairn factor` CLI, end to end on the demo domain."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from neo4j import Driver
from starlette.testclient import TestClient
from typer.testing import CliRunner

from cairn.app import create_app
from cairn.cli import app as cli
from cairn.ingest.factors import DEMO_DIR, load_demo_factors
from cairn.policy.profiles import PolicyRegistry
from cairn.runtime.embedder import Embedder
from cairn.runtime.settings import Settings
from cairn.schema.checksum import graph_checksum
from tests.e2e.conftest import gql_as, load_factors, wipe

WHY_BLOCKED = """query($id: ID!) { whyBlocked(id: $id) {
  subject { id name } status hasHiddenPrerequisites answer evidence
  blockers { factor { id name } value threshold requiredBy { id } lastSet } } }"""
FACTOR = """query($id: ID!, $asOf: DateTime) { factor(id: $id, asOf: $asOf) {
  id name value confidence inferenceStatus lastUpdated asOf currentEntry { id rationale } } }"""
WHAT_IF = """query($id: ID!, $value: Float) { whatIf(factorId: $id, value: $value) {
  current value unblocked { id } blocked { id } answer } }"""
QUESTION = """query($text: String!, $now: DateTime) { question(text: $text, now: $now) {
  intent entities { id } router answer llmUsed evidence } }"""
ASSESSMENT = """{ assessment { decisionTier totalFactors totalFactorsAssessed avgConfidence
  canEvaluate { id } categories { category completeness } answer continuity } }"""
UPDATE = """mutation($input: FactorUpdateInput!) { updateFactor(input: $input) {
  id factorId previousValue newValue confidence influencedBy } }"""
CONFIRM = """mutation($id: ID!) { confirmFactor(factorId: $id) { op newValue confidence inferenceStatus } }"""


@pytest.fixture(scope="module")
def demo(driver: Driver, embedder: Embedder) -> Driver:
    return load_factors(driver, embedder)


@pytest.fixture(scope="module")
def client(demo: Driver, settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(settings)) as c:
        yield c


def test_fields_require_a_passport(client: TestClient) -> None:
    body = client.post("/graphql", json={"query": ASSESSMENT}).json()
    assert body["data"] is None and body["errors"][0]["extensions"]["code"] == "PASSPORT_MISSING_HEADER"


def test_why_blocked_for_staff_hides_the_budget(client: TestClient, registry: PolicyRegistry) -> None:
    data = gql_as(client, registry, "staff", WHY_BLOCKED, id="ml_automation")["data"]["whyBlocked"]
    assert data["status"] == "blocked" and data["hasHiddenPrerequisites"] is True
    assert data["evidence"]["has_hidden_prerequisites"] is True
    # ai_budget is hidden; data_infrastructure, behind ml_infrastructure, is past staff's one hop
    assert [n["id"] for n in data["evidence"]["hidden_required_by"]] == ["ml_automation", "ml_infrastructure"]
    notice = data["answer"].split("Some prerequisites are not visible to you (required by ", 1)[1]
    assert "ML-driven automation" in notice and "ML infrastructure" in notice
    assert [b["factor"]["id"] for b in data["blockers"]] == ["ml_expertise", "ml_infrastructure"]
    assert "budget" not in str(data).lower()
    manager = gql_as(client, registry, "manager", WHY_BLOCKED, id="ml_automation")["data"]["whyBlocked"]
    assert "ai_budget" in [b["factor"]["id"] for b in manager["blockers"]]
    # manager sees the budget; what it is still told it cannot reach is past its one hop
    assert [n["id"] for n in manager["evidence"]["hidden_required_by"]] == ["ml_infrastructure"]


def test_factor_as_of_and_unknown_factor(client: TestClient, registry: PolicyRegistry) -> None:
    past = gql_as(client, registry, "staff", FACTOR, id="data_quality", asOf="2024-10-16T00:00:00Z")
    assert past["data"]["factor"]["value"] == 30.0 and past["data"]["factor"]["asOf"].startswith("2024-10-16")
    now = gql_as(client, registry, "staff", FACTOR, id="data_quality")["data"]["factor"]
    assert (now["value"], now["confidence"], now["currentEntry"]["rationale"]) == (
        20.0,
        0.75,
        "User mentioned scattered data across 5 systems, no catalog",
    )
    assert (
        gql_as(client, registry, "staff", FACTOR, id="ai_budget")["data"]["factor"] is None
    )  # hidden = absent
    naive = gql_as(client, registry, "staff", FACTOR, id="data_quality", asOf="2024-10-16T00:00:00")
    assert naive["errors"][0]["extensions"]["code"] == "INVALID_INPUT"


def test_what_if_writes_nothing(client: TestClient, registry: PolicyRegistry, demo: Driver) -> None:
    before = graph_checksum(demo)
    data = gql_as(client, registry, "staff", WHAT_IF, id="data_infrastructure", value=50)["data"]["whatIf"]
    # staff walks one hop: the options two hops up (alerts, monitoring) are beyond it
    assert [n["id"] for n in data["unblocked"]] == ["sensor_data"]
    assert graph_checksum(demo) == before


def test_question_routes_and_answers(client: TestClient, registry: PolicyRegistry) -> None:
    data = gql_as(client, registry, "staff", QUESTION, text="Why is our AI readiness score so low?")["data"]
    answer = data["question"]
    assert (answer["intent"], [e["id"] for e in answer["entities"]], answer["router"]) == (
        "why_value",
        ["ai_readiness_score"],
        "learned",
    )
    assert answer["answer"].startswith("AI readiness score is 35") and not answer["llmUsed"]


def test_assessment_summary(client: TestClient, registry: PolicyRegistry) -> None:
    staff = gql_as(client, registry, "staff", ASSESSMENT)["data"]["assessment"]
    assert (staff["decisionTier"], staff["totalFactors"], staff["totalFactorsAssessed"]) == (
        "low_risk",
        13,
        10,
    )
    # options whose prerequisites have prerequisites of their own are past staff's one hop
    assert [o["id"] for o in staff["canEvaluate"]] == ["simple_automation"]
    assert gql_as(client, registry, "writer", ASSESSMENT)["data"]["assessment"]["totalFactors"] == 14


def test_mutations_are_for_writers_and_validate_input(
    client: TestClient, registry: PolicyRegistry, demo: Driver
) -> None:
    good = {
        "factorId": "data_quality",
        "value": 35,
        "rationale": "catalog pilot",
        "confidence": 0.7,
        "influencedBy": ["data_governance"],
    }
    before = graph_checksum(demo)
    refused = gql_as(client, registry, "staff", UPDATE, input=good)
    assert refused["errors"][0]["extensions"]["code"] == "FORBIDDEN_WRITE"
    for bad, code in (
        ({**good, "value": 120}, "INVALID_INPUT"),
        ({**good, "confidence": 2}, "INVALID_INPUT"),
        ({**good, "rationale": " "}, "INVALID_INPUT"),
        ({**good, "factorId": "nope"}, "NOT_FOUND"),
    ):
        assert (
            gql_as(client, registry, "writer", UPDATE, input=bad)["errors"][0]["extensions"]["code"] == code
        )
    assert graph_checksum(demo) == before
    entry = gql_as(client, registry, "writer", UPDATE, input=good)["data"]["updateFactor"]
    assert (entry["previousValue"], entry["newValue"], entry["influencedBy"]) == (
        20.0,
        35.0,
        ["data_governance"],
    )
    confirmed = gql_as(client, registry, "writer", CONFIRM, id="data_quality")["data"]["confirmFactor"]
    assert confirmed == {"op": "confirm", "newValue": 35.0, "confidence": 0.8, "inferenceStatus": "confirmed"}
    load_demo_factors(demo)  # the fixture journal is re-applied; the live entries stay newest


def test_cli_commands(demo: Driver) -> None:
    runner = CliRunner()
    wipe(demo)
    ingested = runner.invoke(cli, ["ingest", "factors", str(DEMO_DIR)])
    assert ingested.exit_code == 0, ingested.output
    assert "14 factors, 9 options, 26 DEPENDS_ON edges, 8 sessions and 18 journal entries" in ingested.output
    blocked = runner.invoke(cli, ["factor", "why-blocked", "predictive_maintenance", "--role", "staff"])
    assert blocked.exit_code == 0 and "blocked by 3 unmet prerequisite(s)" in blocked.output  # one hop
    asked = runner.invoke(
        cli,
        [
            "factor",
            "ask",
            "What changed in our data governance since last month?",
            "--now",
            "2024-10-30T12:00:00",
        ],
    )
    assert asked.exit_code == 0 and "Data governance: 30 → 15" in asked.output
    shown = runner.invoke(cli, ["factor", "show", "data_quality", "--as-of", "2024-10-21"])
    assert shown.exit_code == 0 and "Data quality as of 2024-10-21: 25" in shown.output
    bad = runner.invoke(
        cli, ["factor", "update", "data_quality", "150", "--rationale", "x", "--confidence", "0.5"]
    )
    assert bad.exit_code == 2 and "INVALID_INPUT: " in bad.output and "outside the scale" in bad.output
    evaluated = runner.invoke(cli, ["factor", "router-eval"])
    assert evaluated.exit_code == 0 and "development" in evaluated.output and "holdout" in evaluated.output
