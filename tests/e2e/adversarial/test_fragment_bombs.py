"""Fragments that spread fragments (red-team pass 10, 2026-11-26).

Found against the running ``cairn serve --demo``, without a passport: strawberry's depth and alias
limits walk the document with every fragment spread replaced by its fragment, recursively and
with no memory of a fragment already walked, in their validation rules' constructors.

- Two fragments per level, each spreading both of the next level: 19 levels (1.5 KB, far below
  the token limit) held the event loop for 15 s, during which ``/health`` waited too; the walk
  doubles with each level, so 30 levels would hold the server for hours.
- A chain of 240 fragments, each spreading the next: ``maximum recursion depth exceeded``,
  answered as an error without ``extensions.code``.
- A spread of a fragment that does not exist: the limit's ``KeyError`` text (``'Nope'``), again
  uncoded, where graphql-core's own rule would have said "Unknown fragment".

Now each fragment is measured once, with a stack (``cairn.resolvers.schema._expansion``): a
document whose expansion holds more than ``MAX_EXPANDED_SELECTIONS`` selections (fields, inline
fragments, spreads), or chains more than ``MAX_FRAGMENT_CHAIN`` fragments, is refused before the
limits walk it, and an unknown fragment or a cycle is left to graphql-core's rules, which name it.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from starlette.testclient import TestClient

from cairn.policy.profiles import PolicyRegistry
from cairn.resolvers.schema import MAX_FRAGMENT_CHAIN, MAX_SAME_NAME
from tests.e2e.adversarial.conftest import data_as
from tests.e2e.conftest import gql, passport


def doubling(levels: int) -> str:
    """F<i> and G<i> each spread F<i+1> and G<i+1>: 2**levels paths to the last two."""
    parts = ["query { ...F0 ...G0 }"]
    for i in range(levels):
        parts += [f"fragment {x}{i} on Query {{ ...F{i + 1} ...G{i + 1} }}" for x in "FG"]
    parts += [f"fragment {x}{levels} on Query {{ __typename }}" for x in "FG"]
    return "\n".join(parts)


def chain(length: int) -> str:
    links = [f"fragment F{i} on Query {{ ...F{i + 1} }}" for i in range(length)]
    return "\n".join(["query { ...F0 }", *links, f"fragment F{length} on Query {{ __typename }}"])


def refusal(client: TestClient, document: str, headers: dict[str, str]) -> dict[str, Any]:
    body = gql(client, document, headers)
    assert body.get("data") is None and len(body["errors"]) == 1, body
    error: dict[str, Any] = body["errors"][0]
    assert error["extensions"]["code"] == "GRAPHQL_VALIDATION_FAILED", error
    return error


@pytest.mark.parametrize("role", [None, "staff"])
def test_a_fragment_bomb_is_refused_at_once(
    client: TestClient, registry: PolicyRegistry, role: str | None
) -> None:
    headers = {} if role is None else passport(registry, role)
    # 16 levels answered {"__typename": "Query"} before, after about 0.7 s of walking
    assert "selections once its fragments are spread" in refusal(client, doubling(16), headers)["message"]
    started = time.monotonic()
    error = refusal(client, doubling(40), headers)  # 2**40 paths: would never have finished
    assert "selections once its fragments are spread" in error["message"]
    assert time.monotonic() - started < 10


def test_a_long_chain_of_fragments_is_refused_by_a_rule(client: TestClient, registry: PolicyRegistry) -> None:
    error = refusal(client, chain(240), passport(registry, "staff"))
    assert "chains more than" in error["message"] and "recursion" not in error["message"]
    assert data_as(client, registry, "staff", chain(MAX_FRAGMENT_CHAIN - 1)) == {"__typename": "Query"}


def inline_doubling(levels: int, depth: int = 90) -> str:
    """``doubling`` whose leaf is one field under ``depth`` nested inline fragments: each counts
    as a selection to the walkers (review of pass 10: counting fields alone let 2**13 leaves of
    91 selections each through, and the limits' walk took 5.9 s of CPU)."""
    leaf = "... on Query { " * depth + "__typename" + " }" * depth
    parts = ["query { ...D0 }"]
    parts += [f"fragment D{i} on Query {{ ...D{i + 1} ...D{i + 1} }}" for i in range(levels)]
    return "\n".join([*parts, f"fragment D{levels} on Query {{ {leaf} }}"])


def test_inline_fragments_count_toward_the_expansion(client: TestClient, registry: PolicyRegistry) -> None:
    started = time.monotonic()
    error = refusal(client, inline_doubling(13), {})
    assert "selections once its fragments are spread" in error["message"]
    assert time.monotonic() - started < 2
    assert data_as(client, registry, "staff", inline_doubling(2, depth=5)) == {"__typename": "Query"}


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ("query { ...Nope }", "Unknown fragment 'Nope'."),
        ("query { ...A } fragment A on Query { ...Nope }", "Unknown fragment 'Nope'."),
        (
            "query { ...A } fragment A on Query { ...B } fragment B on Query { ...A }",
            "Cannot spread fragment 'A' within itself via 'B'.",
        ),
    ],
)
def test_unknown_and_cyclic_fragments_are_named(
    client: TestClient, registry: PolicyRegistry, document: str, message: str
) -> None:
    assert refusal(client, document, passport(registry, "staff"))["message"] == message


def test_fragments_within_the_limits_still_run(client: TestClient, registry: PolicyRegistry) -> None:
    assert data_as(client, registry, "staff", doubling(8)) == {"__typename": "Query"}
    deep = "query { ...A } fragment A on Query { a: __typename ...B } fragment B on Query { b: __typename }"
    assert data_as(client, registry, "staff", deep) == {"a": "Query", "b": "Query"}


def repeated(name: str, times: int, per_fragment: int | None = None) -> str:
    """``times`` fields named ``name`` in one selection set, spelled out or spread from fragments
    of ``per_fragment`` fields each (graphql-core merges a set's fragments before comparing)."""
    if per_fragment is None:
        return "query { " + " ".join([name] * times) + " }"
    count = times // per_fragment
    spreads = " ".join(f"...F{i}" for i in range(count))
    fragments = [f"fragment F{i} on Query {{ {' '.join([name] * per_fragment)} }}" for i in range(count)]
    return "\n".join([f"query {{ {spreads} }}", *fragments])


@pytest.mark.parametrize("per_fragment", [None, 12])
def test_fields_sharing_a_name_are_counted_before_graphql_core_compares_every_pair(
    client: TestClient, registry: PolicyRegistry, per_fragment: int | None
) -> None:
    """Red-team pass 10: graphql-core's overlap rule compares every pair of fields that share a
    response name, on the event loop; 250 of them (4 KB, under the token limit, no passport)
    took 0.45 s of CPU and answered {"__typename": "Query"}. At most MAX_SAME_NAME may share one."""
    error = refusal(client, repeated("__typename", 240, per_fragment), {})
    assert (
        error["message"]
        == f"one selection set selects '__typename' 240 times; at most {MAX_SAME_NAME} may share a name"
    )
    fits = repeated("__typename", MAX_SAME_NAME, None if per_fragment is None else 4)
    assert data_as(client, registry, "staff", fits) == {"__typename": "Query"}


def test_an_unused_fragment_spreading_an_unknown_one_is_named(
    client: TestClient, registry: PolicyRegistry
) -> None:
    """Review of pass 10: the same-name count walked unused fragments too and raised KeyError
    ('Nope', uncoded) where graphql-core names the unknown and the unused fragment."""
    document = "query { __typename } fragment F on Query { ...Nope }"
    body = gql(client, document, passport(registry, "staff"))
    assert body.get("data") is None, body
    assert [e["message"] for e in body["errors"]] == [
        "Unknown fragment 'Nope'.",
        "Fragment 'F' is never used.",
    ]
    assert {e["extensions"]["code"] for e in body["errors"]} == {"GRAPHQL_VALIDATION_FAILED"}
