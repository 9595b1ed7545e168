"""Request bodies the JSON parser cannot read (red-team pass on HTTP, 2026-11-25).

Found against the running ``cairn serve --demo``: a POST to /graphql whose body was not UTF-8
(one 0xff byte in the query, or a gzip body sent with ``Content-Encoding: gzip``), or JSON
nested 100,000 arrays deep, was answered ``500 Internal Server Error`` in plain text, with no
``extensions.code``, and logged a traceback: strawberry turns only a ``JSONDecodeError`` into
a 400, while these raise ``UnicodeDecodeError`` and ``RecursionError``. Fixed in
``cairn.app.CairnGraphQL.decode_json``: every body that does not parse is a 400 ``BAD_REQUEST``,
like malformed JSON (docs/design.md §Errors).

Red-team pass 10 (2026-11-26): a body that parses but is not a JSON object or array (a string
such as ``"{ __typename }"``, a number, ``true``, ``null``, or ``1e999``, read as infinity) was
still a bare ``500 Internal Server Error`` with a traceback: strawberry calls ``.get`` on
whatever the body holds. Now it is the same coded 400, refused in ``decode_json``. And the same
query encoded in UTF-16 or UTF-32, or in UTF-8 behind a byte-order mark, ran: ``json.loads`` of
bytes guesses those encodings, where JSON between systems is UTF-8 (RFC 8259 §8.1) and a gateway
or WAF that reads UTF-8 cannot parse such a body, so it may pass it unchecked (the parser
differential of test_duplicate_json_keys.py). Now only UTF-8 is read. Likewise the media type:
strawberry read any body whose Content-Type merely contained ``application/json``
(``application/jsonx``, ``text/plain, application/json``), whatever charset it named; now it must
be application/json, with no charset but UTF-8.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from neo4j import Driver
from starlette.testclient import TestClient

from cairn.app import create_app
from cairn.policy.profiles import PolicyRegistry
from cairn.runtime.settings import Settings
from tests.e2e.conftest import passport

BODIES = {
    "not utf-8": b'{"query": "{ __typename \xff }"}',
    "gzip": b"\x1f\x8b\x08\x00" + bytes(60),
    "latin-1": '{"query": "{ __typename }", "x": "caf\xe9"}'.encode("latin-1"),
    "deeply nested": b'{"query": "{ __typename }", "variables": {"a": '
    + b"[" * 100_000
    + b"]" * 100_000
    + b"}}",
    "lone surrogate escape": b'{"query": "{ __typename }", "x": "\\udc80"}',
    "a JSON string": b'"{ __typename }"',
    "a JSON number": b"5",
    "a JSON number too large for a float": b"1e999",
    "a JSON boolean": b"true",
    "JSON null": b"null",
    **{
        f"in {encoding}": '{"query": "{ __typename }"}'.encode(encoding)
        for encoding in ("utf-16-le", "utf-16-be", "utf-32-le", "utf-8-sig")
    },
}


@pytest.fixture(scope="module")
def client(acme: Driver, settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(settings), raise_server_exceptions=False) as c:
        yield c


@pytest.mark.parametrize("name", sorted(BODIES))
def test_an_unparseable_body_is_a_coded_400(name: str, client: TestClient, registry: PolicyRegistry) -> None:
    headers = {**passport(registry, "staff"), "Content-Type": "application/json"}
    if name == "gzip":
        headers["Content-Encoding"] = "gzip"
    response = client.post("/graphql", content=BODIES[name], headers=headers)
    if name == "lone surrogate escape":  # valid JSON: parsed, and the query runs
        assert response.status_code == 200, response.text
        assert response.json()["data"] == {"__typename": "Query"}
        return
    assert response.status_code == 400, response.text
    body = response.json()
    assert [e["extensions"]["code"] for e in body["errors"]] == ["BAD_REQUEST"]
    assert "Traceback" not in response.text and "Error" not in body["errors"][0]["message"]


def test_a_readable_body_still_runs(client: TestClient, registry: PolicyRegistry) -> None:
    headers = {**passport(registry, "staff"), "Content-Type": "application/json"}
    response = client.post("/graphql", content=json.dumps({"query": "{ __typename }"}), headers=headers)
    assert response.json() == {"data": {"__typename": "Query"}}


@pytest.mark.parametrize(
    "content_type",
    [
        "application/jsonx",
        "application/json-seq",
        "x-application/json",
        "text/plain, application/json",
        "application/json, text/plain",
        "application/json; charset=utf-16",
        "application/json; charset=latin-1",
        "Application/JSONX",
        "TEXT/PLAIN",
        "Application/JSON; Charset=UTF-16",
        # One parser reads the first charset, another the last; an RFC 2231 charset*= was read
        # as a tuple and answered 500 (review of red-team pass 12).
        "application/json; charset=latin-1; charset=utf-8",
        "application/json; charset*=utf-8''utf-8",
    ],
)
def test_only_application_json_in_utf_8_is_read(
    content_type: str, client: TestClient, registry: PolicyRegistry
) -> None:
    headers = {**passport(registry, "staff"), "Content-Type": content_type}
    response = client.post("/graphql", content=json.dumps({"query": "{ __typename }"}), headers=headers)
    assert response.status_code == 400, (content_type, response.text)
    assert [e["extensions"]["code"] for e in response.json()["errors"]] == ["BAD_REQUEST"]


@pytest.mark.parametrize(
    "content_type",
    [
        "application/json",
        "application/json; charset=utf-8",
        'application/json;charset="UTF-8"',
        # Media types and charsets are case-insensitive (RFC 9110 §8.3.1; red-team pass 12).
        "Application/JSON",
        "APPLICATION/JSON; CHARSET=UTF-8",
        "application/Json ; Charset=Utf-8",
    ],
)
def test_application_json_is_read(content_type: str, client: TestClient, registry: PolicyRegistry) -> None:
    headers = {**passport(registry, "staff"), "Content-Type": content_type}
    response = client.post("/graphql", content=json.dumps({"query": "{ __typename }"}), headers=headers)
    assert response.json() == {"data": {"__typename": "Query"}}
