"""Fact search's block neighbours read no provenance field the caller's rules hide.

Found in red-team pass 14: ``memorySearch`` lifts the facts told within three turns of a top hit
in the same block (``matched: ["block"]``, a share of the hit's score), matching them by
``source_block_id`` and ``turn_index`` whatever the caller's field rules showed of either: a role
that may not read them learnt which facts shared a block with a hit, and how near they were told,
from the scores and ``matched``. Now a neighbour is matched only where the scope shows both
fields on both facts (``cairn.policy.acl.field_shown``), as the block decay already did.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from neo4j import Driver
from starlette.testclient import TestClient

from cairn.app import create_app
from cairn.policy.profiles import PolicyRegistry
from cairn.runtime.embedder import get_embedder
from cairn.runtime.settings import Settings
from cairn.schema.nodes import DECLARED_FIELDS
from tests.e2e.adversarial.conftest import demo_roles_with
from tests.e2e.adversarial.test_unwalkable_dossier_writes import ACCESS
from tests.e2e.conftest import gql, passport, wipe

QUERY = "Where do sea otters keep their favourite stone?"
FACTS = {
    "zz-hit": ("Sea otters keep a favourite stone in a pouch under their arm", 1),
    "zz-near": ("The kettle in the kitchen was replaced on Tuesday", 2),
}
CREATE = """
CREATE (d:Entity:Dossier {id: 'zz-dossier', status: 'active', title: 'Notes', summary: ''})
SET d += $access
WITH d
UNWIND $rows AS row
CREATE (f:Entity:Fact {id: row.id, text: row.text, embedding: row.vector, source_block_id: 'block_zz',
        source_block_ids: ['block_zz'], turn_index: row.turn, added_at: datetime('2024-01-01T00:00:00Z')})
SET f += $access
CREATE (d)-[:HAS_FACT]->(f)
"""
SEARCH = """query($q: String!) { memorySearch(query: $q, k: 5) { count
  hits { factId score matched } } }"""
MOVE = """MATCH (f:Fact {id: 'zz-near'})
SET f.source_block_id = $block, f.source_block_ids = [$block], f.turn_index = $turn"""


@pytest.fixture(scope="module")
def facts(driver: Driver) -> Iterator[Driver]:
    wipe(driver)
    vectors = get_embedder().embed([text for text, _ in FACTS.values()])
    rows = [
        {"id": fid, "text": text, "turn": turn, "vector": [float(x) for x in v]}
        for (fid, (text, turn)), v in zip(FACTS.items(), vectors, strict=True)
    ]
    driver.execute_query(CREATE, rows=rows, access=ACCESS)
    yield driver
    wipe(driver)


def search_where(
    facts: Driver, settings: Settings, tmp: pytest.TempPathFactory, hidden: set[str], **move: Any
) -> Any:
    """``memorySearch`` as a writer whose rules hide ``hidden`` on facts, with zz-near moved."""
    facts.execute_query(MOVE, **move)
    rule = [{"domains": ["*"], "fields": sorted(DECLARED_FIELDS["Fact"] - hidden)}]
    path = demo_roles_with(tmp, "writer", {"Fact": rule})
    with TestClient(create_app(settings.model_copy(update={"policy_file": path}))) as client:
        body = gql(client, SEARCH, passport(PolicyRegistry.load(path), "writer"), q=QUERY)
    assert not body.get("errors"), body
    return body["data"]


def test_the_premise_a_near_fact_of_the_hit_s_block_is_lifted(
    facts: Driver, settings: Settings, tmp_path_factory: pytest.TempPathFactory
) -> None:
    near = search_where(facts, settings, tmp_path_factory, set(), block="block_zz", turn=2)
    far = search_where(facts, settings, tmp_path_factory, set(), block="block_zz", turn=50)
    assert near != far and "block" in str(near), (near, far)


@pytest.mark.parametrize(
    ("hidden", "away"),
    [
        ({"source_block_id", "source_block_ids"}, {"block": "block_other", "turn": 2}),
        ({"turn_index"}, {"block": "block_zz", "turn": 50}),
    ],
)
def test_a_hidden_block_or_turn_moves_no_score(
    facts: Driver,
    settings: Settings,
    tmp_path_factory: pytest.TempPathFactory,
    hidden: set[str],
    away: dict[str, Any],
) -> None:
    near = search_where(facts, settings, tmp_path_factory, hidden, block="block_zz", turn=2)
    assert search_where(facts, settings, tmp_path_factory, hidden, **away) == near
    assert "block" not in str(near), near
