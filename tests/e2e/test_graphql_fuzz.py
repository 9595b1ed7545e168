"""Schema-driven fuzzing of the whole GraphQL API for non-privileged roles (schemathesis).

Every generated query and mutation is sent with a real passport. Whatever the input:
no 5xx, no internal exception text, and no id or text of a node the role may not see
anywhere in the response. Plus the OWASP GraphQL checks that are not per-field.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from graphql import introspection_from_schema
from graphql import language as ast
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from neo4j import Driver
from starlette.testclient import TestClient

from cairn.app import create_app
from cairn.policy.passport import headers_for
from cairn.policy.profiles import SENSITIVITY_RANK, PolicyRegistry, RoleProfile, matches
from cairn.resolvers.schema import schema
from cairn.runtime.settings import Settings
from tests.e2e.conftest import whole_demo

EXAMPLES_PER_OPERATION = 8
ROLES = ("staff", "manager", "external")
TEXT_FIELDS = ("option", "rationale", "summary", "description", "text", "body", "title", "name")
INTERNAL_MARKERS = ("Traceback", "neo4j.exceptions", "CypherSyntaxError", 'File "/', "site-packages")


def _json_values() -> st.SearchStrategy[ast.ValueNode]:
    """Arbitrary JSON as GraphQL literals, for the JSON scalar (payloads, packets, blocks)."""
    leaves: st.SearchStrategy[ast.ValueNode] = st.one_of(
        st.text(max_size=20).map(lambda v: ast.StringValueNode(value=v)),
        st.integers(-(2**31), 2**31 - 1).map(lambda v: ast.IntValueNode(value=str(v))),
        st.booleans().map(lambda v: ast.BooleanValueNode(value=v)),
        st.just(ast.NullValueNode()),
    )

    def extend(children: st.SearchStrategy[ast.ValueNode]) -> st.SearchStrategy[ast.ValueNode]:
        names = st.sampled_from(("id", "facts", "decisions", "events", "text", "block_id", "timestamp", "x"))
        objects = st.dictionaries(names, children, max_size=4).map(
            lambda d: ast.ObjectValueNode(
                fields=tuple(ast.ObjectFieldNode(name=ast.NameNode(value=k), value=v) for k, v in d.items())
            )
        )
        lists = st.lists(children, max_size=4).map(lambda vs: ast.ListValueNode(values=tuple(vs)))
        return st.one_of(objects, lists)

    return st.recursive(leaves, extend, max_leaves=12)


schemathesis.graphql.scalar("JSON", _json_values())
API = schemathesis.graphql.from_dict({"data": introspection_from_schema(schema._schema)})
OPERATIONS = [op.ok() for op in API.get_all_operations()]


@pytest.fixture(scope="module")
def demo(driver: Driver) -> Driver:
    return whole_demo(driver)


@pytest.fixture(scope="module")
def client(demo: Driver, settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(settings), raise_server_exceptions=False) as c:
        yield c


def _visible(node: dict[str, Any], p: RoleProfile) -> bool:
    return (
        matches(node.get("domain") or "", p.domains)
        and p.name in (node.get("roles_allowed") or [])
        and bool(set(node.get("namespaces") or []) & set(p.namespaces))
        and SENSITIVITY_RANK.get(node.get("sensitivity") or "", 99) <= SENSITIVITY_RANK[p.sensitivity_ceiling]
    )


@pytest.fixture(scope="module")
def secrets_by_role(demo: Driver, settings: Settings) -> dict[str, list[str]]:
    """For each role: the ids and long texts of every node it may not see."""
    registry = PolicyRegistry.load(settings.policy_file)
    records, _, _ = demo.execute_query("MATCH (n:Entity) RETURN properties(n) AS p")
    nodes = [{k: v for k, v in r["p"].items() if k != "embedding"} for r in records]
    out: dict[str, list[str]] = {}
    for role in ROLES:
        profile = registry.get(role)
        assert profile is not None
        hidden = [n for n in nodes if not _visible(n, profile)]
        out[role] = [str(n["id"]) for n in hidden] + [
            str(n[f]) for n in hidden for f in TEXT_FIELDS if isinstance(n.get(f), str) and len(n[f]) >= 24
        ]
    return out


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("operation", OPERATIONS, ids=[op.label for op in OPERATIONS])
def test_fuzzed_requests_never_fail_or_leak(
    client: TestClient, settings: Settings, secrets_by_role: dict[str, list[str]], role: str, operation: Any
) -> None:
    registry = PolicyRegistry.load(settings.policy_file)
    secrets = secrets_by_role[role]

    @settings_for_fuzz
    @given(case=operation.as_strategy())
    def run(case: Any) -> None:
        resp = client.post("/graphql", json={"query": case.body}, headers=headers_for(registry, role))
        assert resp.status_code < 500, resp.text
        text = resp.text
        for marker in INTERNAL_MARKERS:
            assert marker not in text, f"internal detail in response: {text[:500]}"
        for secret in secrets:
            assert secret not in text, f"{role} received hidden content {secret[:40]!r}"
        body = resp.json()
        for error in body.get("errors") or []:
            assert "Did you mean" not in error["message"]
            assert (error.get("extensions") or {}).get("code"), f"error without a code: {error}"

    run()


settings_for_fuzz = settings(
    max_examples=EXAMPLES_PER_OPERATION,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)


def test_batched_requests_are_refused(client: TestClient, settings: Settings) -> None:
    registry = PolicyRegistry.load(settings.policy_file)
    batch = [{"query": "{ __typename }"}, {"query": "{ __typename }"}]
    resp = client.post("/graphql", json=batch, headers=headers_for(registry, "staff"))
    assert resp.status_code == 400 or "errors" in json.dumps(resp.json())


def test_directive_overloading_is_refused(client: TestClient, settings: Settings) -> None:
    registry = PolicyRegistry.load(settings.policy_file)
    overloaded = "{ __typename " + "@include(if: true) " * 200 + "}"
    resp = client.post("/graphql", json={"query": overloaded}, headers=headers_for(registry, "staff"))
    assert resp.status_code in (200, 400)
    assert resp.json().get("errors"), "a 200-directive query must be refused"


@pytest.mark.parametrize(
    ("accept", "media_type"),
    [
        (None, "application/json"),
        ("application/json", "application/json"),
        ("application/graphql-response+json", "application/graphql-response+json"),
        ("application/graphql-response+json, application/json;q=0.9", "application/graphql-response+json"),
        ("application/graphql-response+json;q=0.5, application/json", "application/json"),
        ("application/graphql-response+json;q=0", "application/json"),
    ],
)
def test_graphql_over_http_media_types(
    client: TestClient, settings: Settings, accept: str | None, media_type: str
) -> None:
    """GraphQL over HTTP: application/graphql-response+json when preferred, with 400 (and no
    data entry) for a request refused before execution; application/json stays 200 throughout."""
    registry = PolicyRegistry.load(settings.policy_file)
    headers = headers_for(registry, "staff") | ({"Accept": accept} if accept else {})
    modern = media_type != "application/json"
    cases = [
        ("{ __typename }", {}, 200, "data"),
        ('{ neighbourhood(id: "acme-no-such-node") { anchor { id } } }', {}, 200, "NOT_FOUND"),
        ("{ node(id: ", {}, 400 if modern else 200, "GRAPHQL_PARSE_FAILED"),
        ("{ nope }", {}, 400 if modern else 200, "GRAPHQL_VALIDATION_FAILED"),
        ("query($v: ID!) { node(id: $v) { id } }", {"v": {"a": 1}}, 400 if modern else 200, "BAD_USER_INPUT"),
    ]
    for query, variables, status, expected in cases:
        resp = client.post("/graphql", json={"query": query, "variables": variables}, headers=headers)
        assert resp.status_code == status, (query, resp.text)
        assert resp.headers["content-type"].split(";")[0] == media_type
        body = resp.json()
        if expected == "data":
            assert body["data"] == {"__typename": "Query"} and "errors" not in body
            continue
        assert [e["extensions"]["code"] for e in body["errors"]] == [expected]
        assert ("data" in body) == (status == 200), body


def test_unreadable_requests_are_coded_errors(client: TestClient, settings: Settings) -> None:
    """Not JSON, a form, a GET, no query: a 4xx whose error carries a code, never plain text."""
    headers = headers_for(PolicyRegistry.load(settings.policy_file), "staff")
    replies = [
        client.post(
            "/graphql", content=b"{not json", headers={**headers, "Content-Type": "application/json"}
        ),
        client.post("/graphql", content=b"\xff\xfe", headers={**headers, "Content-Type": "application/json"}),
        client.post("/graphql", data={"query": "{ __typename }"}, headers=headers),
        client.get("/graphql", params={"query": "{ __typename }"}, headers=headers),
        client.post("/graphql", json={"variables": {}}, headers=headers),
        client.post("/graphql", json=[1, 2], headers=headers),
    ]
    for resp in replies:
        assert 400 <= resp.status_code < 500, resp.text
        assert [e["extensions"]["code"] for e in resp.json()["errors"]] == ["BAD_REQUEST"], resp.text
