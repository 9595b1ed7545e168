"""One caller's document never shapes another caller's answer (red-team pass 10, 2026-11-26).

Found against the running ``cairn serve --demo``: validation results were cached by the parsed
document, and graphql-core's AST nodes compare equal when their kinds, names and character
offsets are equal, whatever separates the tokens. ``{\\n\\n\\nbogus }``, ``{   bogus }`` and
``{,,,bogus }`` are one key, so whoever sent the first decided the error ``locations`` of all
three: the second caller, whose document is one line, was told line 4. Any caller could so learn
the layout of a refused document another caller had sent (a probe sent with spaces comes back
with the other caller's line breaks), and every client got wrong positions. The cache is now
keyed by the document's text (``cairn.resolvers.schema``, ``CachedValidation``).
"""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from cairn.policy.profiles import PolicyRegistry
from tests.e2e.conftest import gql, passport

# Equal length, equal token offsets: only what separates "{" from the field differs.
LAYOUTS = {
    "{\n\n\nnoSuchField }": {"line": 4, "column": 1},
    "{   noSuchField }": {"line": 1, "column": 5},
    "{,,,noSuchField }": {"line": 1, "column": 5},
}


@pytest.mark.parametrize("first", sorted(LAYOUTS))
def test_error_locations_are_the_callers_own(
    first: str, client: TestClient, registry: PolicyRegistry
) -> None:
    victim = gql(client, first, passport(registry, "manager"))
    assert victim["errors"][0]["locations"] == [LAYOUTS[first]]
    for document, where in LAYOUTS.items():
        probe = gql(client, document, passport(registry, "staff"))
        assert probe["errors"][0]["locations"] == [where], (first, document)
