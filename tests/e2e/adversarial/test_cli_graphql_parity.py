"""The CLI shows a role no more than GraphQL shows it (red-team pass 12, 2026-11-27).

Found on the demo: ``cairn dossier ask --role staff --json`` printed each hit's fact as stored
(its governance fields ``roles_allowed``, ``namespaces``, ``sensitivity``, ``domain``) and the
fact's raw ``cosine`` to the query, a score ``memorySearch`` does not give; ``dossier search`` and
``dossier show --json`` printed a dossier's stored ``fields`` object where the ``Dossier`` type
answers six of them. Now ``--json`` prints the GraphQL type's own projection, so the CLI's answer
for a role is the API's, key for key (snake case). Each read command that takes ``--role`` is run
here beside the GraphQL query that answers it, for roles of each width, and the two must be equal
(a role that may not search is refused by both).
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from graphql import GraphQLNamedType, GraphQLObjectType, get_named_type
from neo4j import Driver
from starlette.testclient import TestClient
from typer.testing import CliRunner

from cairn.cli import app as cli
from cairn.policy.profiles import PolicyRegistry
from cairn.resolvers.schema import schema
from tests.e2e.conftest import codes, gql_as, whole_demo

ROLES = ["staff", "manager", "director", "exec"]
QUESTION = "billing reconciliation job"


@pytest.fixture(scope="module")
def demo(driver: Driver) -> Driver:
    return whole_demo(driver)


def selection(type_name: str) -> str:
    """Every field of a GraphQL object type, nested object types in full."""
    named: GraphQLNamedType = schema._schema.type_map[type_name]
    assert isinstance(named, GraphQLObjectType)
    parts = []
    for name, field in named.fields.items():
        inner = get_named_type(field.type)
        parts.append(
            f"{name} {{ {selection(inner.name)} }}" if isinstance(inner, GraphQLObjectType) else name
        )
    return " ".join(parts)


# Fields of the JSON scalar: their keys are data, spelt alike by both.
JSON_FIELDS = {"details"}


def camel(value: Any) -> Any:
    """The CLI's snake-case keys as GraphQL spells them (not inside a JSON scalar's value)."""
    if isinstance(value, dict):
        return {
            re.sub(r"_([a-z0-9])", lambda m: m[1].upper(), k): v if k in JSON_FIELDS else camel(v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [camel(v) for v in value]
    return value


def cli_json(*args: str) -> Any:
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def graphql(client: TestClient, registry: PolicyRegistry, role: str, query: str, **variables: Any) -> Any:
    body = gql_as(client, registry, role, query, **variables)
    assert not body.get("errors"), body
    return body["data"]


@pytest.mark.usefixtures("demo")
@pytest.mark.parametrize("role", ROLES)
def test_dossier_reads_match_graphql(role: str, client: TestClient, registry: PolicyRegistry) -> None:
    hits = graphql(
        client,
        registry,
        role,
        "query($q: String!) { memorySearch(query: $q, k: 10) "
        f"{{ count hits {{ {selection('MemoryHit')} }} }} }}",
        q=QUESTION,
    )["memorySearch"]
    assert camel(cli_json("dossier", "ask", QUESTION, "--role", role, "--json")) == {
        "count": hits["count"],
        "hits": hits["hits"],
    }
    found = graphql(
        client,
        registry,
        role,
        "query($q: String!) { dossierSearch(query: $q, topK: 3, threshold: 0.2) "
        f"{{ count dossiers {{ {selection('Dossier')} }} }} }}",
        q=QUESTION,
    )["dossierSearch"]
    shown = cli_json("dossier", "search", QUESTION, "--role", role, "--threshold", "0.2", "--json")
    assert camel(shown) == {"count": found["count"], "dossiers": found["dossiers"]}
    for dossier in found["dossiers"]:
        one = graphql(
            client,
            registry,
            role,
            f"query($i: ID!) {{ dossier(id: $i) {{ {selection('Dossier')} }} }}",
            i=dossier["id"],
        )
        assert camel(cli_json("dossier", "show", dossier["id"], "--role", role, "--json")) == one["dossier"]


@pytest.mark.usefixtures("demo")
@pytest.mark.parametrize("role", ROLES)
def test_factor_reads_match_graphql(role: str, client: TestClient, registry: PolicyRegistry) -> None:
    why = graphql(client, registry, role, 'query { whyValue(id: "data_quality") { evidence } }')
    assert (
        cli_json("factor", "show", "data_quality", "--role", role, "--json")
        == why["whyValue"]["evidence"]["factor"]
    )
    history = cli_json("factor", "history", "data_quality", "--role", role, "--json")
    assert history == why["whyValue"]["evidence"]["history"][: len(history)]
    asked = graphql(
        client,
        registry,
        role,
        'query { factorQuestion: question(text: "why is data quality low?") { route evidence } }',
    )["factorQuestion"]
    assert cli_json("factor", "ask", "why is data quality low?", "--role", role, "--json") == asked


@pytest.mark.usefixtures("demo")
def test_a_role_that_may_not_search_is_refused_by_both(client: TestClient, registry: PolicyRegistry) -> None:
    body = gql_as(client, registry, "external", 'query { memorySearch(query: "billing") { count } }')
    assert codes(body) == ["FORBIDDEN_SEARCH"] and not body.get("data"), body
    result = CliRunner().invoke(cli, ["dossier", "ask", "billing", "--role", "external", "--json"])
    assert result.exit_code != 0 and "may not search" in result.output
