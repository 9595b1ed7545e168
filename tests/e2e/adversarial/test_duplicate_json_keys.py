"""A request body whose JSON repeats a key is refused (red-team pass, 2026-11-26).

Python's parser keeps the last of two equal keys, others (a gateway's, a WAF's) may keep the
first: ``{"query": "<harmless>", "query": "<what runs>"}`` passed a check of the first and ran
the second. Now an object that repeats a key, at any depth (the request's own members,
``variables``, a ``JSON`` argument's map, ``extensions``), is refused before anything runs: 400
``BAD_REQUEST`` naming the key, in the one error contract (docs/design.md §Errors).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from neo4j import Driver
from starlette.testclient import TestClient

from cairn.ingest.fixtures import FixtureError
from cairn.ingest.org_memory import ingest_fixture_dir
from cairn.memory.dossiers import files
from cairn.memory.dossiers.models import InputError
from cairn.policy.profiles import PolicyRegistry
from cairn.schema.checksum import graph_checksum
from tests.e2e.adversarial.conftest import ORG_MEMORY
from tests.e2e.conftest import ACME, passport, wipe
from tests.e2e.test_hostile_input import VALID_BLOCK, VALID_PACKET

HARMLESS = '"{ __typename }"'
SMUGGLED = '"{ smuggled: __typename }"'
DECISION = '{"id": "zz-dup", "domain": "acme/product", "domain": "acme/exec"}'
BODIES = {
    "query": f'{{"query": {HARMLESS}, "query": {SMUGGLED}}}',
    "variables": '{"query": "query($id: ID!) { node(id: $id) { id } }", "variables": {"id": "a", "id": "b"}}',
    "deep": (
        f'{{"query": "{ORG_MEMORY.replace(chr(34), chr(92) + chr(34))}",'
        f' "variables": {{"p": {{"decisions": [{DECISION}]}}}}}}'
    ),
    "extensions": f'{{"query": {HARMLESS}, "extensions": {{"a": 1, "a": 2}}}}',
}


@pytest.fixture(scope="module")
def empty(driver: Driver) -> Driver:
    wipe(driver)
    return driver


@pytest.mark.parametrize("accept", ["application/json", "application/graphql-response+json"])
@pytest.mark.parametrize("where", sorted(BODIES))
def test_a_repeated_key_is_refused_unrun(
    where: str, accept: str, client: TestClient, registry: PolicyRegistry, empty: Driver
) -> None:
    before = graph_checksum(empty)
    headers = {**passport(registry, "writer"), "content-type": "application/json", "accept": accept}
    resp = client.post("/graphql", content=BODIES[where].encode(), headers=headers)
    assert resp.status_code == 400, resp.text
    body = resp.json()
    assert "data" not in body and "smuggled" not in resp.text, body
    (error,) = body["errors"]
    assert error["extensions"] == {"code": "BAD_REQUEST"}, error
    assert "repeats the key" in error["message"], error
    assert graph_checksum(empty) == before


def test_the_same_bodies_without_the_repeat_run(client: TestClient, registry: PolicyRegistry) -> None:
    """The check refuses the repeat, not the shapes: the last key alone runs as before."""
    headers = {**passport(registry, "writer"), "content-type": "application/json"}
    resp = client.post("/graphql", content=f'{{"query": {SMUGGLED}}}'.encode(), headers=headers)
    assert resp.json() == {"data": {"smuggled": "Query"}}, resp.text
    nested = '{"query": "{ __typename }", "variables": {"a": {"b": 1}, "b": {"a": 1}}}'
    resp = client.post("/graphql", content=nested.encode(), headers=headers)
    assert resp.json() == {"data": {"__typename": "Query"}}, resp.text


def test_a_repeated_field_in_a_graphql_literal_is_refused(
    client: TestClient, registry: PolicyRegistry
) -> None:
    """The same repeat written in the document, not the JSON: GraphQL's own validation refuses it."""
    query = 'mutation { ingestOrgMemory(payload: {decisions: [], decisions: [{id: "zz"}]}) { decisions } }'
    resp = client.post("/graphql", json={"query": query}, headers=passport(registry, "writer"))
    body = resp.json()
    assert body.get("data") is None and body["errors"][0]["extensions"]["code"] == "GRAPHQL_VALIDATION_FAILED"


# The operator's file loaders (``cairn ingest fixtures``, ``cairn ingest packets|blocks``) kept
# the last of two equal keys, as Python's parser does: a fixture that a reviewer's tool read as
# ``acme/region_apac`` was stored as ``acme/exec``. Now they refuse the file, naming it, the key
# and its line, and write nothing.
SMUGGLED_DOMAIN = '  "domain": "acme/exec",\n'


def test_a_fixture_file_that_repeats_a_key_is_refused(tmp_path: Path, empty: Driver) -> None:
    root = tmp_path / "acme"
    shutil.copytree(ACME, root)
    file = root / "decisions" / "acme-apac-connector-extended-support-2024.json"
    lines = file.read_text(encoding="utf-8").splitlines(keepends=True)
    at = next(n for n, line in enumerate(lines) if line.startswith('  "domain"'))
    file.write_text("".join([*lines[: at + 1], SMUGGLED_DOMAIN, *lines[at + 1 :]]), encoding="utf-8")
    before = graph_checksum(empty)
    with pytest.raises(FixtureError) as refused:
        ingest_fixture_dir(empty, root)
    (problem,) = refused.value.problems
    assert problem.file == f"decisions/{file.name}", problem
    assert f"line {at + 2} col 3" in problem.message and "repeats the key 'domain'" in problem.message
    assert graph_checksum(empty) == before


@pytest.mark.parametrize(
    ("valid", "read"),
    [(VALID_PACKET, files.read_packets), (VALID_BLOCK, files.read_blocks)],
    ids=["packets", "blocks"],
)
@pytest.mark.parametrize("shape", ["json-lines", "array"])
def test_a_packet_or_block_file_that_repeats_a_key_is_refused(
    valid: dict[str, Any], read: Callable[[Path], list[Any]], shape: str, tmp_path: Path
) -> None:
    """At any depth: here in a record's access map (packets) or a turn (blocks)."""
    inner = "access" if "access" in valid else "turns"
    text = json.dumps(valid)
    key = "domain" if inner == "access" else "user"
    twice = text.replace(f'"{key}": ', f'"{key}": "smuggled", "{key}": ', 1)
    if shape == "json-lines":
        path, body, line = tmp_path / "input.jsonl", f"{text}\n{twice}\n", 2
    else:
        path, body, line = tmp_path / "input.json", f"[\n{text},\n{twice}\n]", 3
    path.write_text(body, encoding="utf-8")
    with pytest.raises(InputError) as refused:
        read(path)
    (problem,) = refused.value.problems
    assert problem.where == f"{path.name}:{line}", problem
    column = twice.index(f'"{key}": "smuggled"') + len(f'"{key}": "smuggled", ') + 1
    assert problem.message == f"col {column}: an object repeats the key '{key}'", problem
