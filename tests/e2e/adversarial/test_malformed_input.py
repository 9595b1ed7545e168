"""Malformed input, as an attacker sends it: every header byte, variable value, oversized string
and directive pile fails closed with a code — never a 5xx, never an uncoded error, never an
internal detail (traceback, exception name, file path, Cypher) in the answer.

Runs against the real app (starlette TestClient over create_app) and the real Neo4j. The
property tests take their example count from the hypothesis profile (≥ 200 in CI).
"""

from __future__ import annotations

import json
import logging
import math
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from neo4j import Driver
from starlette.testclient import TestClient

from cairn.policy.passport import OPTIONAL, REQUIRED, SIGNATURE, headers_for
from cairn.policy.profiles import PolicyRegistry
from cairn.resolvers.schema import MAX_ERRORS, MAX_TEXT_CHARS
from tests.e2e.commits import last_commit
from tests.e2e.conftest import codes

PASSPORT_HEADERS = (*REQUIRED, *OPTIONAL, SIGNATURE)
# At least 200 examples per property; more when the selected hypothesis profile asks for more.
EXAMPLES = max(200, settings.default.max_examples)
NODE = "query($id: ID!) { node(id: $id) { id } }"
BUNDLE = "/bundles/req-0123456789abcdef/bundle_view"
# Text that only an internal failure would put in an answer. Checked only where the caller did
# not send it: an error may quote the caller's own value back.
INTERNAL_MARKERS = (
    "Traceback",
    "Exception",
    "Error(",
    'File "',
    "site-packages",
    "/cairn/",
    ".py",
    "neo4j",
    "Cypher",
    "MATCH (",
    "RETURN ",
)
OPERATIONS = {
    "node": ("staff", "query($v: ID!) { node(id: $v) { id } }"),
    "search": ("manager", "query($v: String!, $k: Int!) { search(query: $v, k: $k) { total } }"),
    "search-k": ("manager", 'query($v: Int!) { search(query: "pricing", k: $v) { total } }'),
    "factor": ("staff", 'query($v: DateTime) { factor(id: "f-x", asOf: $v) { id } }'),
    "what-if": ("staff", 'query($v: Float) { whatIf(factorId: "f-x", value: $v) { value } }'),
    "labels": ("manager", 'query($v: [String!]) { search(query: "pricing", labels: $v) { total } }'),
    "ingest": ("writer", "mutation($v: JSON!) { ingestOrgMemory(payload: $v) { decisions } }"),
}


pytestmark = pytest.mark.usefixtures("acme")


@pytest.fixture(scope="module")
def client_options() -> dict[str, Any]:
    return {"raise_server_exceptions": False}


def assert_clean(resp: httpx.Response, sent: str = "") -> dict[str, Any]:
    """No 5xx; a JSON answer whose every error carries a code; nothing internal in it."""
    assert resp.status_code < 500, resp.text[:500]
    for marker in INTERNAL_MARKERS:
        assert marker not in resp.text or marker in sent, f"internal detail {marker!r}: {resp.text[:500]}"
    body: dict[str, Any] = resp.json()
    for error in body.get("errors") or []:
        assert (error.get("extensions") or {}).get("code"), f"error without a code: {error}"
        assert error["message"] != "Unexpected error.", error
    return body


def post(
    client: TestClient, registry: PolicyRegistry, role: str, query: str, **variables: Any
) -> httpx.Response:
    content = json.dumps({"query": query, "variables": variables}, allow_nan=True)
    return client.post(
        "/graphql",
        content=content,
        headers={**headers_for(registry, role), "Content-Type": "application/json"},
    )


# --- passport headers ----------------------------------------------------------------------------

header_bytes = st.one_of(
    st.binary(max_size=64),
    st.text(max_size=32).map(lambda t: t.encode("utf-8")),
    st.sampled_from(
        ["²", "٣", "³", "１", "0x3", "+3", "-1", "3 ", " 3", "99999999999999999999", "3\x00"]
    ).map(lambda t: t.encode("utf-8", "surrogatepass")),
    st.binary(min_size=1, max_size=4).map(lambda b: b * 20_000),
)


def raw_headers(
    registry: PolicyRegistry, role: str, name: str, value: bytes, repeat: bool
) -> list[tuple[bytes, bytes]]:
    """The role's passport with ``name`` replaced by ``value`` (sent twice when ``repeat``)."""
    good = [
        (k.encode(), v.encode()) for k, v in headers_for(registry, role).items() if k.lower() != name.lower()
    ]
    extra = [(name.encode(), value)] * (2 if repeat else 1)
    return [*good, *extra, (b"content-type", b"application/json")]


@pytest.mark.parametrize("byte", [b"\xb2", "²".encode(), b"\xb3", "٣".encode()])
@pytest.mark.parametrize("target", ["graphql", "bundle"])
def test_a_non_ascii_digit_in_max_hops_is_refused_by_name(
    client: TestClient, registry: PolicyRegistry, byte: bytes, target: str
) -> None:
    """Finding 8: `X-Max-Hops: ²` was a 500 on both routes (str.isdigit accepts it, int() not)."""
    headers = raw_headers(registry, "staff", "X-Max-Hops", byte, repeat=False)
    resp = _send(client, target, headers)
    assert resp.status_code < 500, resp.text
    error = _passport_error(resp, target)
    assert error == ("PASSPORT_MALFORMED_HEADER", "X-Max-Hops")


@pytest.mark.parametrize("target", ["graphql", "bundle"])
def test_a_repeated_narrowing_header_is_refused_by_name(
    client: TestClient, registry: PolicyRegistry, target: str
) -> None:
    """Two `X-Max-Hops` values: which one narrows is ambiguous, so neither is taken."""
    headers = raw_headers(registry, "staff", "X-Max-Hops", b"1", repeat=True)
    assert _passport_error(_send(client, target, headers), target) == (
        "PASSPORT_MALFORMED_HEADER",
        "X-Max-Hops",
    )


def _send(client: TestClient, target: str, headers: list[tuple[bytes, bytes]]) -> httpx.Response:
    """Send the header bytes as they are. The TestClient re-encodes header values as UTF-8
    (b"\\xb2" would arrive as "Â²"), so this goes through httpx's ASGI transport on the
    client's own event loop, where the app's lifespan (and Neo4j driver) lives."""

    async def request() -> httpx.Response:
        transport = httpx.ASGITransport(app=client.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as raw:
            if target == "graphql":
                body = json.dumps({"query": NODE, "variables": {"id": "acme-x"}})
                return await raw.post("/graphql", content=body, headers=headers)
            return await raw.get(BUNDLE, headers=headers)

    assert client.portal is not None
    return client.portal.call(request)


def _passport_error(resp: httpx.Response, target: str) -> tuple[str, str] | None:
    body = assert_clean(resp)
    errors = body.get("errors") or []  # the bundle route refuses in this shape too (design.md §Errors)
    if not errors or (target == "bundle" and resp.status_code != 401):
        return None
    return errors[0]["extensions"]["code"], errors[0]["extensions"].get("header")


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(
    name=st.sampled_from(PASSPORT_HEADERS),
    value=header_bytes,
    repeat=st.booleans(),
    role=st.sampled_from(("staff", "manager", "external")),
    target=st.sampled_from(("graphql", "bundle")),
)
def test_any_header_bytes_fail_closed_with_a_code(
    client: TestClient,
    registry: PolicyRegistry,
    name: str,
    value: bytes,
    repeat: bool,
    role: str,
    target: str,
) -> None:
    resp = _send(client, target, raw_headers(registry, role, name, value, repeat))
    refusal = _passport_error(resp, target)
    if refusal is not None and refusal[0].startswith(("PASSPORT", "POLICY")):
        assert refusal[1] in PASSPORT_HEADERS, refusal
    elif target == "bundle":
        assert resp.status_code in (401, 403, 404), resp.text


# --- variables -----------------------------------------------------------------------------------

json_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.sampled_from([2**31, 2**40, -(2**63), 10**30, math.nan, math.inf, -math.inf]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=40),
    st.sampled_from(["2024-13-45T99:99:99", "yesterday", "", "0" * 64, "x" * (MAX_TEXT_CHARS + 1)]),
)
json_value = st.recursive(
    json_leaf,
    lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=8), c, max_size=4),
    max_leaves=12,
)
deep = st.integers(min_value=1, max_value=400).map(lambda n: json.loads("[" * n + "1" + "]" * n))


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(operation=st.sampled_from(sorted(OPERATIONS)), value=st.one_of(json_value, deep), k=json_value)
def test_any_variable_value_fails_closed_with_a_code(
    client: TestClient, registry: PolicyRegistry, acme: Driver, operation: str, value: Any, k: Any
) -> None:
    role, query = OPERATIONS[operation]
    before = last_commit(acme) if role == "writer" else None
    variables = {"v": value, "k": k} if "$k" in query else {"v": value}
    sent = json.dumps(variables, allow_nan=True)
    body = assert_clean(post(client, registry, role, query, **variables), sent)
    if before is not None and body.get("errors"):
        assert last_commit(acme) == before


@pytest.mark.parametrize(
    ("operation", "value"),
    [
        ("node", {"id": "acme-x"}),
        ("node", ["acme-x"]),
        ("node", math.nan),
        ("search-k", 2**40),
        ("search-k", math.nan),
        ("search-k", math.inf),
        ("search-k", "10"),
        ("what-if", math.nan),
        ("what-if", {"a": 1}),
        ("factor", "2024-13-45T99:99:99"),
        ("factor", "not a date"),
        ("factor", 12),
        ("labels", [{"a": 1}]),
        ("labels", [["Decision"]]),
    ],
)
def test_wrong_typed_variables_are_bad_user_input_naming_the_variable(
    client: TestClient, registry: PolicyRegistry, operation: str, value: Any
) -> None:
    """Finding 8: these were "Unexpected error." with no code."""
    role, query = OPERATIONS[operation]
    body = assert_clean(post(client, registry, role, query, v=value))
    assert codes(body) == ["BAD_USER_INPUT"], body
    assert "$v" in body["errors"][0]["message"]
    assert body.get("data") is None


def test_a_missing_required_variable_is_bad_user_input(client: TestClient, registry: PolicyRegistry) -> None:
    body = assert_clean(post(client, registry, "staff", OPERATIONS["node"][1]))
    assert codes(body) == ["BAD_USER_INPUT"] and "$v" in body["errors"][0]["message"]


@pytest.mark.parametrize("depth", [300, 5_000, 100_000])
def test_variables_nested_too_deeply_are_refused(
    client: TestClient, registry: PolicyRegistry, depth: int
) -> None:
    """Deeper than graphql-core coerces, or deeper than Python's JSON parser can recurse."""
    variables = "[" * depth + '"x"' + "]" * depth
    query = json.dumps(OPERATIONS["labels"][1])
    content = f'{{"query": {query}, "variables": {{"v": {variables}}}}}'
    resp = client.post("/graphql", content=content, headers=headers_for(registry, "manager"))
    assert resp.status_code < 500, resp.text[:300]
    if resp.status_code == 200:
        assert codes(assert_clean(resp)) == ["BAD_USER_INPUT"]


# --- sizes and counts ----------------------------------------------------------------------------


@pytest.mark.parametrize("argument", ["search", "dossierSearch", "correspondenceSearch", "question"])
def test_an_oversized_string_is_refused_before_embedding(
    client: TestClient, registry: PolicyRegistry, argument: str
) -> None:
    """Finding 8: a 1 MB query string passed the token limit and was embedded (~2 s)."""
    field = {
        "search": "search(query: $v) { total }",
        "dossierSearch": "dossierSearch(query: $v) { count }",
        "correspondenceSearch": "correspondenceSearch(query: $v) { total }",
        "question": "question(text: $v) { answer }",
    }[argument]
    body = assert_clean(
        post(client, registry, "manager", f"query($v: String!) {{ {field} }}", v="x" * 1_000_000)
    )
    assert codes(body) == ["BAD_USER_INPUT"], body
    message = body["errors"][0]["message"]
    assert ("query" in message or "text" in message) and f"{MAX_TEXT_CHARS:,}" in message


@pytest.mark.parametrize(
    ("role", "query", "argument"),
    [
        (
            "manager",
            'query($v: String!) { correspondenceSearch(query: "x", filters: {authors: [$v]}) { total } }',
            "filters",
        ),
        (
            "writer",
            'mutation($v: String!) { updateFactor(input: {factorId: "f", value: 1, rationale: $v,'
            ' confidence: 1, excerpt: "e", influencedBy: [], inferenceStatus: "x"}) { op } }',
            "input",
        ),
        ("writer", "query($v: String!) { __type(name: $v) { name } }", "name"),
    ],
    ids=["filter-object", "input-object", "introspection"],
)
def test_an_oversized_string_inside_an_input_object_or_introspection_is_refused(
    client: TestClient, registry: PolicyRegistry, role: str, query: str, argument: str
) -> None:
    body = assert_clean(post(client, registry, role, query, v="x" * (MAX_TEXT_CHARS + 1)))
    assert codes(body) == ["BAD_USER_INPUT"], body
    assert f"argument '{argument}'" in body["errors"][0]["message"]


def test_an_oversized_string_literal_is_refused(client: TestClient, registry: PolicyRegistry) -> None:
    query = 'query { search(query: "' + "y" * (MAX_TEXT_CHARS + 1) + '") { total } }'
    body = assert_clean(post(client, registry, "manager", query))
    assert codes(body) == ["BAD_USER_INPUT"]


def test_a_string_at_the_cap_is_accepted(client: TestClient, registry: PolicyRegistry) -> None:
    body = assert_clean(post(client, registry, "manager", OPERATIONS["search"][1], v="pricing " * 100, k=3))
    assert "errors" not in body and body["data"]["search"]["total"] >= 0


def test_an_oversized_request_body_is_refused_unread(client: TestClient, registry: PolicyRegistry) -> None:
    resp = post(client, registry, "writer", OPERATIONS["ingest"][1], v={"decisions": ["z" * 8_000_000]})
    assert resp.status_code == 413


@pytest.mark.parametrize(
    "selection",
    [
        "__typename" + " @unknown" * 101,
        "__typename" + "".join(f" @d{i}" for i in range(101)),
        "__typename" + " @include(if: true)" * 200,
        " ".join(f"a{i}: __typename @skip(if: false) @include(if: true)" for i in range(15)),
    ],
    ids=["same-unknown", "distinct-unknown", "repeated-include", "aliased"],
)
def test_directive_piles_give_few_errors(
    client: TestClient, registry: PolicyRegistry, selection: str
) -> None:
    """Finding 8: 101 unknown directives gave 101 errors."""
    body = assert_clean(post(client, registry, "staff", "{ " + selection + " }"))
    assert body.get("errors"), "a directive pile must be refused"
    assert len(body["errors"]) <= MAX_ERRORS


def test_every_syntax_and_validation_error_carries_a_code(
    client: TestClient, registry: PolicyRegistry
) -> None:
    for query, code in [
        ("{ node(id: ", "GRAPHQL_PARSE_FAILED"),
        ("{ nope }", "GRAPHQL_VALIDATION_FAILED"),
        ("{ node(id: {a: 1}) { id } }", "GRAPHQL_VALIDATION_FAILED"),
        ("{ " + "a: " * 3000 + "__typename }", "GRAPHQL_PARSE_FAILED"),
    ]:
        body = assert_clean(post(client, registry, "staff", query))
        assert codes(body) and set(codes(body)) == {code}, (query[:40], body)


def test_an_ordinary_refusal_logs_no_traceback(
    client: TestClient, registry: PolicyRegistry, caplog: pytest.LogCaptureFixture
) -> None:
    """Finding 8: the server logged a full traceback for an ordinary NOT_FOUND denial."""
    query = 'query { neighbourhood(id: "acme-no-such-node") { anchor { id } } }'
    with caplog.at_level(logging.INFO, logger="strawberry.execution"):
        body = assert_clean(post(client, registry, "staff", query))
    assert codes(body) == ["NOT_FOUND"]
    assert not [r for r in caplog.records if r.name == "strawberry.execution"], caplog.text[:500]


# Every Int argument of the read fields, at the ends of GraphQL's Int (32-bit) and around zero:
# out of range is a coded refusal or an empty answer, never an internal error (red-team pass
# 2026-11-26: `correspondenceTail(fromSection: 2147483647)` overflowed Neo4j's list index).
ANCHOR = "acme-prod-sunset-onprem-connectors-2024"
INT_ARGUMENTS = {
    "search.k": 'search(query: "pricing", k: $v) { total }',
    "neighbourhood.hops": f'neighbourhood(id: "{ANCHOR}", hops: $v) {{ nodes {{ id }} }}',
    "ask.tokenBudget": f'ask(anchorId: "{ANCHOR}", tokenBudget: $v) {{ response }}',
    "correspondenceSearch.k": 'correspondenceSearch(query: "pricing", k: $v) { total }',
    "correspondenceTail.n": "correspondenceTail(n: $v) { id }",
    "correspondenceTail.fromSection": "correspondenceTail(n: 500, fromSection: $v) { id }",
    "beingDivergence.k": 'beingDivergence(question: "pricing", beings: ["Dana Okafor"], k: $v) { author }',
    "dossierSearch.topK": 'dossierSearch(query: "pricing", topK: $v) { count }',
    "memorySearch.k": 'memorySearch(query: "pricing", k: $v) { count }',
    "memorySearch.maxTokens": 'memorySearch(query: "pricing", maxTokens: $v) { count }',
    "relatedDossiers.topK": 'relatedDossiers(id: "dos-x", topK: $v)',
    "journal.limit": 'journal(factorId: "f-x", limit: $v) { id }',
}


@pytest.mark.parametrize("value", [-(2**31), -1, 0, 1, 2**31 - 500, 2**31 - 1])
@pytest.mark.parametrize("argument", sorted(INT_ARGUMENTS))
def test_every_int_argument_at_its_extremes_fails_closed(
    client: TestClient, registry: PolicyRegistry, argument: str, value: int
) -> None:
    body = assert_clean(
        post(client, registry, "manager", f"query($v: Int!) {{ {INT_ARGUMENTS[argument]} }}", v=value)
    )
    assert body.get("data") is not None or codes(body), body


# Counts and bounds outside their range are refused naming the argument, as the CLI's options
# refuse them, not clamped: `journal(limit: -1)` answered an empty journal (red-team pass 13).
OUT_OF_RANGE = {
    "search.k": (0, 101),
    "correspondenceSearch.k": (0, 101),
    "correspondenceTail.n": (0, 501),
    "beingDivergence.k": (0, 101),
    "neighbourhood.hops": (-1, None),
    "ask.tokenBudget": (-1, None),
    "dossierSearch.topK": (0, 51),
    "memorySearch.k": (0, 51),
    "memorySearch.maxTokens": (0, None),
    "relatedDossiers.topK": (0, 51),
    "journal.limit": (0, 501),
}


@pytest.mark.parametrize("argument", sorted(OUT_OF_RANGE))
def test_an_int_argument_out_of_range_is_refused_by_name(
    client: TestClient, registry: PolicyRegistry, argument: str
) -> None:
    name = argument.split(".")[1]
    for value in (v for v in OUT_OF_RANGE[argument] if v is not None):
        body = assert_clean(
            post(client, registry, "manager", f"query($v: Int!) {{ {INT_ARGUMENTS[argument]} }}", v=value)
        )
        assert codes(body) == ["INVALID_ARGUMENT"], (value, body)
        assert body["errors"][0]["extensions"]["argument"] == name, body


@pytest.mark.parametrize(
    "variables",
    ['{"v": "\\ud800"}', '{"v": "acme-\\uDFFF"}', '{"v": "\\ud83d"}', '{"\\udc00": "x", "v": "x"}'],
)
def test_a_lone_surrogate_in_the_body_is_a_coded_refusal(
    client: TestClient, registry: PolicyRegistry, variables: str
) -> None:
    """JSON can escape a lone UTF-16 surrogate; it is not Unicode text (red-team pass 2026-11-26:
    as an id it reached Neo4j's driver and came back INTERNAL_SERVER_ERROR)."""
    content = '{"query": "query($v: ID!) { node(id: $v) { id } }", "variables": ' + variables + "}"
    headers = {**headers_for(registry, "staff"), "Content-Type": "application/json"}
    resp = client.post("/graphql", content=content.encode(), headers=headers)
    assert resp.status_code == 400, resp.text
    assert resp.json()["errors"][0]["extensions"]["code"] == "BAD_REQUEST"


def test_a_surrogate_pair_is_text(client: TestClient, registry: PolicyRegistry) -> None:
    content = (
        '{"query": "query($v: ID!) { node(id: $v) { id } }", "variables": {"v": "\\ud83d\\ude00 \\\\ud800"}}'
    )
    headers = {**headers_for(registry, "staff"), "Content-Type": "application/json"}
    assert assert_clean(client.post("/graphql", content=content.encode(), headers=headers)) == {
        "data": {"node": None}
    }


# Every DateTime argument at the ends of what it can hold, with the widest offsets (red-team pass
# 2026-11-26: `factor(asOf: "0001-01-01T00:00:00+14:00")` answered INTERNAL_SERVER_ERROR).
DATETIME_ARGUMENTS = {
    "factor.asOf": 'factor(id: "data_quality", asOf: $v) { value }',
    "journal.since": 'journal(factorId: "data_quality", since: $v) { id }',
    "whatChanged.since": "whatChanged(since: $v) { answer }",
    "whatChanged.until": 'whatChanged(since: "2024-01-01T00:00:00Z", until: $v) { answer }',
    "question.now": 'question(text: "what changed since September?", now: $v) { answer }',
}
MOMENTS = [
    "0001-01-01T00:00:00+14:00",
    "0001-01-01T00:00:00-14:00",
    "0001-01-01T00:00:00Z",
    "9999-12-31T23:59:59-14:00",
    "9999-12-31T23:59:59+14:00",
    "9999-12-31T23:59:59.999999Z",
]


@pytest.mark.parametrize("value", MOMENTS)
@pytest.mark.parametrize("argument", sorted(DATETIME_ARGUMENTS))
def test_every_datetime_argument_at_its_extremes_fails_closed(
    client: TestClient, registry: PolicyRegistry, argument: str, value: str
) -> None:
    query = f"query($v: DateTime!) {{ {DATETIME_ARGUMENTS[argument]} }}"
    body = assert_clean(post(client, registry, "staff", query, v=value))
    assert body.get("data") is not None or codes(body), body


@pytest.mark.parametrize(
    "text",
    [
        "What changed in the last 5000 years?",
        "What changed in the last 99999999999 days?",
        "What changed 3000 years ago?",
        "What changed since 2024-13-45?",
        "What changed recently?",
    ],
)
def test_a_window_past_the_year_one_is_answered(
    client: TestClient, registry: PolicyRegistry, text: str
) -> None:
    """Red-team pass 2026-11-26: these windows answered INTERNAL_SERVER_ERROR (year 0, or a
    timedelta overflow), for any role, with an ordinary ``now``; so did ``now`` near the year 1."""
    query = 'query($v: String!) { question(text: $v, now: "2024-10-30T12:00:00Z") { intent answer } }'
    body = assert_clean(post(client, registry, "staff", query, v=text))
    assert body["data"]["question"]["answer"], body


@pytest.mark.parametrize("intent", ["", "x" * 65, "why decision", "<script>", "WHY"])
def test_an_ask_intent_that_is_not_a_name_is_refused(
    client: TestClient, registry: PolicyRegistry, intent: str
) -> None:
    """Red-team pass 16: ``ask(intent:)`` took any text up to the 4,000-character cap and echoed
    it into the meta and every trace file of the request."""
    query = 'query($i: String!) { ask(anchorId: "dec-none", intent: $i) { meta } }'
    body = assert_clean(post(client, registry, "staff", query, i=intent))
    assert codes(body) == ["INVALID_ARGUMENT"], body
    assert body["errors"][0]["extensions"]["argument"] == "intent"
