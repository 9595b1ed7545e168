"""Section numbers reveal nothing about hidden sections (issue 12, finding 6).

Canonical numbers are dense over the whole store, so a role shown them learns from every gap
how many sections it may not read and where they sit. Each role is now shown its own numbers,
1..n over the sections it may see: the tail, search hits, ``respondsTo``/``respondedBy`` and
``fromSection`` all use them, consistently. Tried for staff, manager and external against the
demo letters, where sections only director and exec may read sit in the middle of the flow.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from starlette.testclient import TestClient

from cairn.policy.profiles import PolicyRegistry
from tests.e2e.conftest import gql_as

ROLES = ("staff", "manager", "external")
TAIL = """query($n: Int!, $from: Int) {
  correspondenceTail(n: $n, fromSection: $from) { id sectionNumber title respondsTo respondedBy }
}"""
SEARCH = """query($q: String!) {
  correspondenceSearch(query: $q, k: 100) { total hits { id sectionNumber } }
}"""


pytestmark = pytest.mark.usefixtures("letters")


def tail(
    client: TestClient, registry: PolicyRegistry, role: str, n: int = 500, start: int | None = None
) -> Any:
    return gql_as(client, registry, role, TAIL, n=n, **{"from": start})["data"]["correspondenceTail"]


@pytest.mark.parametrize("role", ROLES)
def test_numbers_are_dense_over_what_the_role_sees(
    client: TestClient, registry: PolicyRegistry, role: str
) -> None:
    everything = tail(client, registry, "director")
    mine = tail(client, registry, role)
    assert len(mine) < len(everything), "the role must be missing something, or the test proves nothing"
    # No gap: the highest number is the count, so nothing tells how many are hidden, or where.
    assert [s["sectionNumber"] for s in mine] == list(range(1, len(mine) + 1))
    visible = {s["id"] for s in mine}
    assert visible < {s["id"] for s in everything}


@pytest.mark.parametrize("role", ROLES)
def test_from_section_counts_in_the_roles_numbers(
    client: TestClient, registry: PolicyRegistry, role: str
) -> None:
    mine = tail(client, registry, role)
    for start in (1, 16, 17, len(mine) - 2):
        window = tail(client, registry, role, n=3, start=start)
        assert [s["id"] for s in window] == [s["id"] for s in mine[start - 1 : start + 2]]
    # Past the end, every number answers alike: there is no canonical number to probe for.
    empty = [tail(client, registry, role, n=3, start=s) for s in (len(mine) + 1, 43, 44, 10_000)]
    assert empty == [[], [], [], []]


@pytest.mark.parametrize("role", ["staff", "manager"])
def test_links_and_search_use_the_same_numbers(
    client: TestClient, registry: PolicyRegistry, role: str
) -> None:
    director = {s["id"]: s for s in tail(client, registry, "director")}
    mine = tail(client, registry, role)
    number_of = {s["id"]: s["sectionNumber"] for s in mine}
    id_of = {s["sectionNumber"]: s["id"] for s in mine}
    director_id_of = {s["sectionNumber"]: i for i, s in director.items()}
    for s in mine:
        for link in ("respondsTo", "respondedBy"):
            expected = {director_id_of[n] for n in director[s["id"]][link]} & set(number_of)
            assert {id_of[n] for n in s[link]} == expected, (s["title"], link)
    found = gql_as(client, registry, role, SEARCH, q="EU-only inference margin")
    hits = found["data"]["correspondenceSearch"]
    assert hits["total"] == len(mine)
    assert all(h["sectionNumber"] == number_of[h["id"]] for h in hits["hits"])


@pytest.mark.parametrize("role", ["staff", "manager"])
def test_links_read_in_ascending_order(client: TestClient, registry: PolicyRegistry, role: str) -> None:
    """Links came in the order their edges were stored (``[32, 30, 17]``), which differs between
    loads and would follow whatever else was written between them; they read ascending.
    (External's rule masks both links.)"""
    for s in tail(client, registry, role):
        for link in ("respondsTo", "respondedBy"):
            assert s[link] == sorted(s[link]), (s["title"], link, s[link])


NODE = "query($id: ID!) { node(id: $id) { id fields masked } }"


@pytest.mark.parametrize("role", ROLES)
def test_ids_and_node_fields_carry_no_position(
    client: TestClient, registry: PolicyRegistry, role: str
) -> None:
    """Ids followed the file order (``section:<source>:<ordinal>``); the node field showed the
    canonical number and the place in the file. Ids are opaque now and neither shows."""
    mine = tail(client, registry, role)
    for s in mine:
        assert re.fullmatch(r"section:[0-9a-f]{32}", s["id"]), s["id"]
    for s in mine[:: max(1, len(mine) // 8)]:
        node = gql_as(client, registry, role, NODE, id=s["id"])["data"]["node"]
        assert node["id"] == s["id"]
        assert not {"section_number", "ordinal", "source_line"} & set(node["fields"])
