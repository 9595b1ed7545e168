"""Huge documents are not remembered (red-team pass on the transport, 2026-11-26).

Found against the running ``cairn serve --demo``: parsed and validated documents are cached
by their text (256 of them), and a document may be as long as the body limit (4 MiB), because
a comment or a string literal costs no token under the token limit. Without any passport, 150
distinct documents of 4 MiB (a comment and ``{ __typename }``) grew the server from 1,498 MB to
2,751 MB resident (about 8.5 MB each, never freed); 256 of them would pin over 2 GB.

Fixed in cairn/resolvers/schema.py: only a document of at most MAX_CACHED_DOCUMENT_CHARS is
remembered; a longer one is parsed and validated every time, with the same answers (and one over
MAX_DOCUMENT_CHARS is not parsed at all: test_long_documents.py).
"""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from cairn.policy.profiles import PolicyRegistry
from cairn.resolvers.schema import MAX_CACHED_DOCUMENT_CHARS, MAX_DOCUMENT_CHARS, _parse, _validate_text
from tests.e2e.conftest import passport


def padded(n: int, size: int, comment: str = "x") -> str:
    """A distinct valid document of about ``size`` characters: one comment and two fields."""
    return "# " + comment * size + f"\n{{ __typename a{n}: __typename }}"


@pytest.mark.parametrize("role", [None, "staff"])
def test_a_huge_document_is_answered_but_not_remembered(
    role: str | None, client: TestClient, registry: PolicyRegistry
) -> None:
    headers = passport(registry, role) if role else {}
    parsed, validated = _parse.cache_info().currsize, _validate_text.cache_info().currsize
    for n in range(3):
        document = padded(n, MAX_DOCUMENT_CHARS - 100, comment="a" if role else "b")  # never sent before
        resp = client.post("/graphql", json={"query": document}, headers=headers)
        assert resp.json() == {"data": {"__typename": "Query", f"a{n}": "Query"}}, resp.text[:300]
    assert _parse.cache_info().currsize == parsed
    assert _validate_text.cache_info().currsize == validated


def test_a_huge_invalid_document_gets_the_same_refusal(client: TestClient, registry: PolicyRegistry) -> None:
    small = client.post("/graphql", json={"query": "{ nothing }"}, headers=passport(registry, "staff"))
    huge = client.post(
        "/graphql",
        json={"query": "# " + "x" * (MAX_DOCUMENT_CHARS - 100) + "\n{ nothing }"},
        headers=passport(registry, "staff"),
    )
    (small_error,), (huge_error,) = small.json()["errors"], huge.json()["errors"]
    assert small_error["message"] == huge_error["message"]
    assert small_error["extensions"] == huge_error["extensions"] == {"code": "GRAPHQL_VALIDATION_FAILED"}


def test_an_ordinary_document_is_still_cached(client: TestClient, registry: PolicyRegistry) -> None:
    document = padded(99, MAX_CACHED_DOCUMENT_CHARS - 100)
    assert len(document) <= MAX_CACHED_DOCUMENT_CHARS
    for _ in range(2):
        resp = client.post("/graphql", json={"query": document}, headers=passport(registry, "staff"))
        assert "errors" not in resp.json(), resp.text[:300]
    assert _parse.cache_info().hits >= 1
    hits = _parse.cache_info().hits
    client.post("/graphql", json={"query": document}, headers=passport(registry, "staff"))
    assert _parse.cache_info().hits == hits + 1
