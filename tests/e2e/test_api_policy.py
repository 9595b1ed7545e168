"""The GraphQL API end to end (real Neo4j, demo org): passport, policy, ask flows, bundles."""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Iterator
from typing import Any

import pytest
from neo4j import Driver
from starlette.testclient import TestClient
from typer.testing import CliRunner

from cairn import app as app_module
from cairn.app import create_app
from cairn.cli import app as cli
from cairn.policy.passport import REQUIRED, headers_for
from cairn.policy.profiles import PolicyRegistry
from cairn.runtime.settings import Settings
from tests.e2e.conftest import gql, passport
from tests.llm_server import running_llm_server

ASK = """query($id: ID!, $mode: AskMode!, $budget: Int) {
  ask(anchorId: $id, mode: $mode, tokenBudget: $budget) {
    envelope { text permissionsNote citedIds }
    response meta evidence { id label fields masked }
  }
}"""
NODE = "query($id: ID!) { node(id: $id) { id label fields masked } }"
HOOD = (
    "query($id: ID!, $hops: Int!) { neighbourhood(id: $id, hops: $hops) "
    "{ anchor { id } nodes { id hop fields } edges { source target type } } }"
)

STAFF_ANCHOR = "acme-prod-sunset-onprem-connectors-2024"
ALIAS_EVENT = "acme-e-alias-unify-cloud-2022"
HIDDEN_DECISION = "acme-corp-unify-cloud-platform-2022"


@pytest.fixture(scope="module")
def client(acme: Driver, settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(settings)) as c:
        yield c


def decision_texts(acme: Driver, decision_id: str) -> list[str]:
    """Every identifying string of a decision: id, title, rationale, KPI names."""
    rec = acme.execute_query(
        "MATCH (d:Decision {id: $id}) RETURN d.option AS o, d.rationale AS r, d.x_extra AS x", id=decision_id
    )[0][0]
    kpis = [k["name"] for k in json.loads(rec["x"]).get("kpis", [])]
    return [decision_id, rec["o"], rec["r"], *kpis]


# --- passport: fail closed, narrow only -------------------------------------------------


@pytest.mark.parametrize("missing", REQUIRED)
def test_each_missing_required_header_is_refused(
    client: TestClient, registry: PolicyRegistry, missing: str
) -> None:
    headers = passport(registry, "director")
    del headers[missing]
    body = gql(client, NODE, headers, id=STAFF_ANCHOR)
    assert body["data"] is None or body["data"]["node"] is None
    err = body["errors"][0]
    assert err["extensions"] == {"code": "PASSPORT_MISSING_HEADER", "header": missing}
    assert "Sunset" not in json.dumps(body)


@pytest.mark.parametrize(
    ("header", "value", "code"),
    [
        ("X-Max-Hops", "lots", "PASSPORT_MALFORMED_HEADER"),
        ("X-Sensitivity-Ceiling", "secret", "PASSPORT_MALFORMED_HEADER"),
        ("X-Edge-Allow", "KNOWS", "PASSPORT_MALFORMED_HEADER"),
        ("X-User-Roles", "staff,director", "PASSPORT_MALFORMED_HEADER"),
        ("X-User-Roles", "root", "POLICY_UNKNOWN_ROLE"),
        ("X-Policy-Key", "sha256:" + "0" * 64, "POLICY_STALE"),
        ("X-Policy-Version", "1999-01-v0", "POLICY_STALE"),
        ("X-Request-Id", "../../etc", "PASSPORT_MALFORMED_HEADER"),
    ],
)
def test_bad_passports_are_refused_with_the_header_named(
    client: TestClient, registry: PolicyRegistry, header: str, value: str, code: str
) -> None:
    body = gql(client, NODE, passport(registry, "staff", **{header: value}), id=STAFF_ANCHOR)
    assert body["errors"][0]["extensions"]["code"] == code
    assert body["errors"][0]["extensions"]["header"] == header


def test_headers_cannot_widen_a_role(client: TestClient, registry: PolicyRegistry) -> None:
    widening = {
        "X-Sensitivity-Ceiling": "high",
        "X-Domain-Scopes": "acme/*,acme/corporate",
        "X-Edge-Allow": "ALIAS_OF,CAUSAL_PRECEDES,DEPENDS_ON",
        "X-Max-Hops": "6",
        "X-User-Namespaces": "public,internal,confidential",
    }
    headers = passport(registry, "staff", **widening)
    assert (
        gql(client, NODE, headers, id="acme-prod-pivot-cloud-only-tiers-2024")["data"]["node"] is None
    )  # medium
    assert gql(client, NODE, headers, id=HIDDEN_DECISION)["data"]["node"] is None  # corporate
    hood = gql(client, HOOD, headers, id=STAFF_ANCHOR, hops=6)["data"]["neighbourhood"]
    assert all(n["hop"] <= 1 for n in hood["nodes"])


def test_headers_narrow_a_role(client: TestClient, registry: PolicyRegistry) -> None:
    anchor = "acme-corp-descope-onprem-2024"
    full = gql(client, HOOD, passport(registry, "director"), id=anchor, hops=1)["data"]["neighbourhood"]
    assert {e["type"] for e in full["edges"]} == {"ALIAS_OF", "CAUSAL_PRECEDES"}
    causal = gql(
        client, HOOD, passport(registry, "director", **{"X-Edge-Allow": "CAUSAL_PRECEDES"}), id=anchor, hops=1
    )["data"]["neighbourhood"]
    assert {e["type"] for e in causal["edges"]} == {"CAUSAL_PRECEDES"}
    low = passport(registry, "director", **{"X-Sensitivity-Ceiling": "low"})
    assert gql(client, NODE, low, id=anchor)["data"]["node"] is None
    product_only = passport(registry, "director", **{"X-Domain-Scopes": "acme/product"})
    assert gql(client, NODE, product_only, id=anchor)["data"]["node"] is None
    assert gql(client, NODE, product_only, id=STAFF_ANCHOR)["data"]["node"]["id"] == STAFF_ANCHOR


def test_signed_passports_when_a_secret_is_configured(
    acme: Driver, settings: Settings, registry: PolicyRegistry
) -> None:
    signed = settings.model_copy(update={"passport_secret": "s3cret"})
    with TestClient(create_app(signed)) as c:
        unsigned = gql(c, NODE, passport(registry, "staff"), id=STAFF_ANCHOR)
        assert unsigned["errors"][0]["extensions"]["code"] == "PASSPORT_BAD_SIGNATURE"
        ok = gql(c, NODE, headers_for(registry, "staff", secret="s3cret"), id=STAFF_ANCHOR)
        assert ok["data"]["node"]["id"] == STAFF_ANCHOR
        assert c.get("/dev/passport?role=director").status_code == 404


def test_server_refuses_non_loopback_without_secret() -> None:
    result = CliRunner().invoke(cli, ["serve", "--host", "0.0.0.0"])
    assert result.exit_code == 1
    assert "CAIRN_PASSPORT_SECRET" in result.output


# --- masking and alias edges ----------------------------------------------------------


def test_manager_sees_corporate_decisions_as_headers_only(
    client: TestClient, registry: PolicyRegistry
) -> None:
    node = gql(client, NODE, passport(registry, "manager"), id="acme-corp-ai-data-governance-2023")["data"][
        "node"
    ]
    assert set(node["fields"]) <= {"id", "option", "timestamp", "domain"}
    assert {"option", "timestamp"} <= set(node["fields"])
    assert "rationale" in node["masked"]
    product = gql(client, NODE, passport(registry, "manager"), id="acme-prod-pivot-cloud-only-tiers-2024")
    assert "rationale" in product["data"]["node"]["fields"]


def test_staff_cannot_walk_alias_up_to_the_corporate_decision(
    client: TestClient, registry: PolicyRegistry, acme: Driver
) -> None:
    secrets = decision_texts(acme, HIDDEN_DECISION)
    headers = passport(registry, "staff")
    responses = [
        gql(client, NODE, headers, id=ALIAS_EVENT),
        gql(client, HOOD, headers, id=ALIAS_EVENT, hops=3),
        gql(client, ASK, headers, id=ALIAS_EVENT, mode="ASK", budget=None),
        gql(client, ASK, headers, id=HIDDEN_DECISION, mode="ASK", budget=None),
        gql(client, NODE, headers, id=HIDDEN_DECISION),
    ]
    assert responses[0]["data"]["node"]["id"] == ALIAS_EVENT
    assert responses[3]["errors"][0]["extensions"]["code"] == "NOT_FOUND"
    dumped = json.dumps(responses)
    for secret in secrets:
        assert secret not in dumped, secret
    meta = responses[2]["data"]["ask"]["meta"]
    request_id = meta["request"]["request_id"]
    view = client.get(f"/bundles/{request_id}/bundle_view", headers=headers)
    assert view.status_code == 200
    with zipfile.ZipFile(io.BytesIO(view.content)) as zf:
        everything = "".join(zf.read(n).decode() for n in zf.namelist())
    for secret in secrets:
        assert secret not in everything


# --- ask flows (docs/design.md §Answer pipeline) ----------------------------------------------------------


def test_staff_ask_flow(client: TestClient, registry: PolicyRegistry) -> None:
    headers = passport(registry, "staff")
    ask = gql(client, ASK, headers, id=STAFF_ANCHOR, mode="ASK", budget=None)["data"]["ask"]
    meta = ask["meta"]
    assert ask["response"]["mode"] == "templater" and ask["response"]["short_answer"]
    assert ask["response"]["llm_completion"] is None
    assert meta["evidence_sets"]["payload_excluded_ids"], "staff should have withheld evidence here"
    assert all(e["id"].startswith("withheld-") for e in meta["evidence_sets"]["payload_excluded_ids"])
    assert ask["envelope"]["permissionsNote"] == "Note: Some evidence was withheld due to your permissions."
    assert ask["envelope"]["text"].endswith(ask["envelope"]["permissionsNote"])
    assert meta["validator"]["error_count"] == 0
    full = next(a for a in meta["downloads"]["artifacts"] if a["name"] == "bundle_full")
    assert full["allowed"] is False and full["reason"]
    rid = meta["request"]["request_id"]
    refused = client.get(f"/bundles/{rid}/bundle_full", headers=headers)
    assert refused.status_code == 403 and refused.json()["errors"][0] == {
        "message": "policy:bundle_full_not_permitted",
        "extensions": {"code": "BUNDLE_REFUSED"},
    }
    view = client.get(f"/bundles/{rid}/bundle_view", headers=headers)
    with zipfile.ZipFile(io.BytesIO(view.content)) as zf:
        assert {"_meta.json", "envelope.json", "evidence_canonical.json", "response.json"} <= set(
            zf.namelist()
        )
        assert "_meta_audit.json" not in zf.namelist()
    other_user = passport(registry, "staff", **{"X-User-Id": "u-someone-else"})
    assert client.get(f"/bundles/{rid}/bundle_view", headers=other_user).status_code == 404


def test_director_query_flow_uses_the_llm(acme: Driver, settings: Settings, registry: PolicyRegistry) -> None:
    with (
        running_llm_server() as url,
        TestClient(create_app(settings.model_copy(update={"llm_base_url": url}))) as c,
    ):
        headers = passport(registry, "director")
        ask = gql(c, ASK, headers, id=STAFF_ANCHOR, mode="QUERY", budget=None)["data"]["ask"]
        meta = ask["meta"]
        assert ask["response"]["mode"] == "llm"
        completion = ask["response"]["llm_completion"]
        assert completion["text"].startswith("Answer based on")
        assert completion["token_usage"]["prompt"] > 0 and completion["token_usage"]["completion"] > 0
        assert ask["envelope"]["permissionsNote"] is None
        assert meta["evidence_sets"]["payload_excluded_ids"] == []
        assert meta["runtime"]["fallback_used"] is False
        rid = meta["request"]["request_id"]
        full = c.get(f"/bundles/{rid}/bundle_full", headers=headers)
        assert full.status_code == 200
        with zipfile.ZipFile(io.BytesIO(full.content)) as zf:
            assert "llm_raw.json" in zf.namelist() and "_meta_audit.json" in zf.namelist()


def test_query_falls_back_to_the_templater_when_no_llm_answers(
    acme: Driver, settings: Settings, registry: PolicyRegistry
) -> None:
    with (
        running_llm_server(fail_with=500) as url,
        TestClient(create_app(settings.model_copy(update={"llm_base_url": url}))) as c,
    ):
        ask = gql(c, ASK, passport(registry, "director"), id=STAFF_ANCHOR, mode="QUERY", budget=None)
    meta = ask["data"]["ask"]["meta"]
    assert meta["response"]["mode"] == "templater"
    assert meta["runtime"]["fallback_used"] is True and "500" in meta["runtime"]["fallback_reason"]


def test_staff_query_mode_stays_on_the_templater(client: TestClient, registry: PolicyRegistry) -> None:
    meta = gql(client, ASK, passport(registry, "staff"), id=STAFF_ANCHOR, mode="QUERY", budget=None)["data"][
        "ask"
    ]["meta"]
    assert meta["response"]["mode"] == "templater"
    assert meta["runtime"]["fallback_reason"] == "policy:llm_not_permitted"


def test_every_meta_field_is_present(client: TestClient, registry: PolicyRegistry) -> None:
    from cairn.memory.ask import META_SHAPE

    meta = gql(client, ASK, passport(registry, "manager"), id=STAFF_ANCHOR, mode="ASK", budget=None)["data"][
        "ask"
    ]["meta"]
    for section, names in META_SHAPE.items():
        for name in names:
            assert name in meta[section], f"{section}.{name}"


def test_budget_clipping_keeps_selector_order(client: TestClient, registry: PolicyRegistry) -> None:
    anchor = "acme-corp-unify-cloud-platform-2022"
    headers = passport(registry, "director")
    wide = gql(client, ASK, headers, id=anchor, mode="ASK", budget=None)["data"]["ask"]["meta"]
    narrow = gql(client, ASK, headers, id=anchor, mode="ASK", budget=40)["data"]["ask"]["meta"]
    ranked = list(wide["selection_metrics"]["scores"])
    included = narrow["evidence_sets"]["prompt_included_ids"][1:]
    excluded = [e for e in narrow["evidence_sets"]["prompt_excluded_ids"] if e["reason"] == "token_budget"]
    assert excluded, "a 40-token budget must clip something"
    assert included + [e["id"] for e in excluded] == [
        i for i in ranked if i in set(included) | {e["id"] for e in excluded}
    ]
    assert included == ranked[: len(included)]


# --- hardening ---------------------------------------------------------------------------


def test_introspection_only_for_roles_allowed(client: TestClient, registry: PolicyRegistry) -> None:
    q = "{ __schema { queryType { name } } }"
    assert "errors" in gql(client, q, passport(registry, "staff"))
    assert gql(client, q, passport(registry, "director"))["data"]["__schema"]["queryType"]["name"] == "Query"


def test_a_validated_document_is_not_reused_across_roles_or_limits(
    client: TestClient, registry: PolicyRegistry
) -> None:
    """Parsing and validation are cached per document (cairn.resolvers.schema): the same text
    allowed to one role is still refused to another, in either order, and a refused document is
    refused again (not remembered as valid)."""
    q = "{ __schema { mutationType { name } } }"
    for _ in range(2):
        assert gql(client, q, passport(registry, "director"))["data"]["__schema"]["mutationType"]
        staff = gql(client, q, passport(registry, "staff"))
        assert staff.get("data") is None and "introspection" in staff["errors"][0]["message"]
    shallow = '{ node(id: "x") { id } }'
    many = "{ " + " ".join(f'a{i}: node(id: "{STAFF_ANCHOR}") {{ id }}' for i in range(40)) + " }"
    for _ in range(2):
        body = gql(client, many, passport(registry, "director"))
        assert body.get("data") is None and body["errors"][0]["extensions"]["code"] == (
            "GRAPHQL_VALIDATION_FAILED"
        )
        assert "data" in gql(client, shallow, passport(registry, "director"))


def test_no_field_suggestions_no_get_no_form_posts(client: TestClient, registry: PolicyRegistry) -> None:
    body = gql(client, '{ nod(id: "x") { id } }', passport(registry, "director"))
    assert "Did you mean" not in json.dumps(body)
    assert client.get("/graphql", params={"query": "{ __typename }"}).status_code in (400, 405)
    form = client.post("/graphql", data={"query": "{ __typename }"}, headers=passport(registry, "director"))
    assert form.status_code in (400, 415)


def test_alias_overloading_is_refused(client: TestClient, registry: PolicyRegistry) -> None:
    many = " ".join(f'a{i}: node(id: "{STAFF_ANCHOR}") {{ id }}' for i in range(40))
    body = gql(client, "{ " + many + " }", passport(registry, "director"))
    assert body["errors"] and body.get("data") is None


def test_writes_only_for_the_writer_and_validated(
    client: TestClient, registry: PolicyRegistry, acme: Driver
) -> None:
    mutation = "mutation($p: JSON!) { ingestOrgMemory(payload: $p) { decisions events } }"
    bad = {
        "events": [
            {
                "id": "acme-e-new",
                "summary": "x",
                "timestamp": "2024-01-01T00:00:00Z",
                "domain": "acme/product",
                "importance": 2,
                "sensitivity": "low",
                "namespaces": ["internal"],
                "roles_allowed": ["staff"],
                "led_to": ["acme-nope"],
            }
        ]
    }
    staff = gql(client, mutation, passport(registry, "staff"), p=bad)
    assert staff["errors"][0]["extensions"]["code"] == "FORBIDDEN_WRITE"
    writer = gql(client, mutation, passport(registry, "writer"), p=bad)
    assert writer["errors"][0]["extensions"]["code"] == "INVALID_INPUT"
    assert any("importance" in p for p in writer["errors"][0]["extensions"]["problems"])
    assert acme.execute_query("MATCH (n {id: 'acme-e-new'}) RETURN count(n) AS c")[0][0]["c"] == 0


def test_trace_meta_is_private_to_its_user(client: TestClient, registry: PolicyRegistry) -> None:
    headers = passport(registry, "staff")
    meta = gql(client, ASK, headers, id=STAFF_ANCHOR, mode="ASK", budget=None)["data"]["ask"]["meta"]
    rid = meta["request"]["request_id"]
    q = "query($r: ID!) { trace(requestId: $r) }"
    assert gql(client, q, headers, r=rid)["data"]["trace"]["request"]["request_id"] == rid
    assert (
        gql(client, q, passport(registry, "staff", **{"X-User-Id": "u-other"}), r=rid)["data"]["trace"]
        is None
    )


def test_ask_costs_one_round_trip_whatever_the_hops(
    acme: Driver, settings: Settings, registry: PolicyRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []
    real = app_module.sync_driver

    def counting(s: Settings) -> Any:
        driver = real(s)
        original, opened = driver.execute_query, driver.session

        def execute_query(query: Any, *args: Any, **kwargs: Any) -> Any:
            calls.append(str(query)[:40])
            return original(query, *args, **kwargs)

        def session(**kwargs: Any) -> Any:  # an auto-commit read (``database.read``)
            calls.append("session")
            return opened(**kwargs)

        driver.execute_query = execute_query  # type: ignore[method-assign]
        driver.session = session  # type: ignore[method-assign]
        return driver

    monkeypatch.setattr(app_module, "sync_driver", counting)
    with TestClient(create_app(settings)) as c:
        for role in ("staff", "director"):  # one hop and two hops
            calls.clear()
            gql(c, ASK, passport(registry, role), id=STAFF_ANCHOR, mode="ASK", budget=None)
            assert len(calls) == 1, calls  # the anchor and every hop in one query, never per hop or node


def test_search_is_filtered_before_ranking(client: TestClient, registry: PolicyRegistry) -> None:
    q = (
        "query($q: String!) { search(query: $q, k: 50, threshold: -1) "
        "{ total hits { node { id domain } score } } }"
    )
    staff = gql(client, q, passport(registry, "staff"), q="GPU platform for AI inference")["data"]["search"]
    director = gql(client, q, passport(registry, "director"), q="GPU platform for AI inference")["data"][
        "search"
    ]
    assert director["total"] == 67
    assert staff["total"] == len(staff["hits"]) == 34  # exactly what staff may see, per the fixture ACL
    assert all(not h["node"]["domain"].startswith("acme/corporate") for h in staff["hits"])
    ext = gql(client, q, passport(registry, "external"), q="anything")
    assert ext["errors"][0]["extensions"]["code"] == "FORBIDDEN_SEARCH"
