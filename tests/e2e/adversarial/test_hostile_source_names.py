"""Hostile correspondence source names (red-team pass on writes, 2026-11-25).

Found against the running ``cairn serve --demo``: ``syncCorrespondence(source: "acme-letters\\n")``
passed the slug check, because ``check_source`` used ``re.match`` with a pattern ending in ``$``,
which also matches before a final newline; a writer could file sections under a source that
prints exactly like another one. Fixed: the whole name must match (``fullmatch``). Every other
hostile name (separators, traversal, upper case, unicode look-alikes, over-long) was refused
already, and still is, before anything is parsed or written.
"""

from __future__ import annotations

import pytest
from neo4j import Driver
from starlette.testclient import TestClient

from cairn.ingest.correspondence.sync import check_source
from cairn.policy.profiles import PolicyRegistry
from cairn.schema.checksum import graph_checksum
from tests.e2e.conftest import gql, passport

SYNC = "mutation($s: String!, $m: String!) { syncCorrespondence(source: $s, markdown: $m) { source } }"
LETTER = "# Letters\n\n## I — Hello\n\n*2024-01-02*\n\nA short letter.\n"
HOSTILE = [
    "acme-letters\n",
    "acme-letters\r\n",
    "\nacme-letters",
    "../acme-letters",
    "acme/letters",
    "acme-letters/..",
    "..",
    "ACME-letters",
    "acme-lеtters",  # Cyrillic e
    "acme letters",
    "acme-letters\x00",
    "-acme",
    "a" * 65,
    "",
]


pytestmark = pytest.mark.usefixtures("acme")


@pytest.mark.parametrize("name", HOSTILE)
def test_a_hostile_source_name_is_refused_before_anything_is_written(
    name: str, acme: Driver, client: TestClient, registry: PolicyRegistry
) -> None:
    with pytest.raises(ValueError):
        check_source(name)
    before = graph_checksum(acme)
    body = gql(client, SYNC, passport(registry, "writer"), s=name, m=LETTER)
    assert body["data"] is None, body
    assert body["errors"][0]["extensions"]["code"] == "INVALID_ARGUMENT", body
    assert graph_checksum(acme) == before


def test_a_slug_is_accepted(acme: Driver) -> None:
    assert check_source("acme-letters") == "acme-letters"
    assert check_source("a" * 64) == "a" * 64
