"""Long document texts held the event loop (red-team pass on the transport, 2026-11-27).

Found against the running ``cairn serve --demo``, without a passport: a comment, whitespace or a
string literal costs no token under the token limit (2,000), so a document may be as long as the
body limit (4 MiB), and graphql-core's lexer reads it a character at a time on the event loop.
One 4 MiB ``{ __typename }`` with a comment took 0.5-0.6 s of CPU to parse on an idle machine; on
the shared one, two anonymous clients sending them kept ``/health`` waiting up to 2 s per request.
Documents over 32 KiB were parsed anew each time (``test_document_cache.py``), so nothing
amortised it.

Fixed in cairn/app.py: a ``query`` longer than ``MAX_DOCUMENT_CHARS`` (100,000) is refused, 400
``BAD_REQUEST`` naming the document and the limit, before it is parsed. Long values travel as
variables (a correspondence file's ``markdown``, a JSON payload), which the body limit bounds.
"""

from __future__ import annotations

import pytest
from graphql import language
from starlette.testclient import TestClient

from cairn.policy.profiles import PolicyRegistry
from cairn.resolvers.schema import MAX_DOCUMENT_CHARS
from tests.e2e.conftest import passport

# Each costs no token: a comment, whitespace, and a string literal of a text argument.
LONG = {
    "comment": "{ __typename }\n#" + "a" * 1_000_000,
    "whitespace": "{ __typename" + " " * 1_000_000 + "}",
    "string": '{ search(query: """' + "a" * 1_000_000 + '""") { total } }',
}


@pytest.mark.parametrize("role", [None, "staff"])
@pytest.mark.parametrize("kind", sorted(LONG))
def test_a_long_document_is_refused_unparsed(
    client: TestClient, registry: PolicyRegistry, monkeypatch: pytest.MonkeyPatch, role: str | None, kind: str
) -> None:
    lexed: list[str] = []
    real = language.Lexer.__init__

    def spy(self: language.Lexer, source: language.Source) -> None:
        lexed.append(source.body[:20])
        real(self, source)

    monkeypatch.setattr(language.Lexer, "__init__", spy)
    headers = {} if role is None else passport(registry, role)
    resp = client.post("/graphql", json={"query": LONG[kind]}, headers=headers)
    assert resp.status_code == 400, resp.text[:300]
    (error,) = resp.json()["errors"]
    assert error["extensions"] == {"code": "BAD_REQUEST"}
    assert "GraphQL document (query)" in error["message"] and f"{MAX_DOCUMENT_CHARS:,}" in error["message"]
    assert lexed == []


def test_a_document_up_to_the_limit_is_answered(client: TestClient, registry: PolicyRegistry) -> None:
    document = "{ __typename }\n#" + "a" * (MAX_DOCUMENT_CHARS - 16)
    assert len(document) == MAX_DOCUMENT_CHARS
    resp = client.post("/graphql", json={"query": document}, headers=passport(registry, "staff"))
    assert resp.json() == {"data": {"__typename": "Query"}}
    search = "query($q: String!) { search(query: $q) { total } }"
    long_value = {"query": search, "variables": {"q": "a" * 200_000}}
    (error,) = client.post("/graphql", json=long_value, headers=passport(registry, "staff")).json()["errors"]
    assert error["extensions"]["code"] == "BAD_USER_INPUT"  # the text argument's own limit, named
