"""A gardening answer shows a block's tags only where a read of the block would (leak).

``gardenBlock`` answers with the tags and section rules it just wrote to the block. A writer
whose rules hide the ``Block`` fields ``global_tags`` and ``section_rules`` read them there all
the same, though ``block``/``node`` mask them: the answer now shows what a read would
(``gardener._tags_shown``; docs/design.md §Policy module, "Derived fields").
"""

from __future__ import annotations

import pytest
from neo4j import Driver

from cairn.runtime.settings import Settings
from cairn.schema.nodes import DECLARED_FIELDS
from tests.e2e.adversarial.conftest import served_with
from tests.e2e.conftest import gql, passport, wipe

ACCESS = {
    "domain": "acme/assistant",
    "sensitivity": "low",
    "namespaces": ["internal"],
    "roles_allowed": ["writer"],
}
BLOCK = {
    "block_id": "block_rt_garden_tags",
    "turns": [{"turn_id": "t1", "user": "Never use eval() in this code.", "assistant": "Understood."}],
    "facts": [
        {"value": "Never use eval() in this code", "turn_id": "t1", "fact_type": "constraint"},
        {"value": "I am using Python 3.9", "turn_id": "t1", "fact_type": "environment"},
    ],
    "access": ACCESS,
}
INGEST = "mutation($b: JSON!) { ingestBlock(block: $b) { blockId } }"
GARDEN = """mutation($b: String!) {
  gardenBlock(blockId: $b) { facts: factsProcessed globalTags sectionRules } }"""
READ = "query($b: String!) { block(blockId: $b) { globalTags sectionRules } }"


@pytest.mark.parametrize("hidden", [set(), {"global_tags", "section_rules"}])
def test_a_garden_answer_shows_the_tags_a_read_would(
    hidden: set[str], driver: Driver, settings: Settings, tmp_path_factory: pytest.TempPathFactory
) -> None:
    wipe(driver)
    rules = {"Block": [{"domains": ["*"], "fields": sorted(DECLARED_FIELDS["Block"] - hidden)}]}
    with served_with(settings, tmp_path_factory, "writer", rules) as (client, registry):
        headers = passport(registry, "writer")
        assert "errors" not in gql(client, INGEST, headers, b=BLOCK)
        garden = gql(client, GARDEN, headers, b=BLOCK["block_id"])["data"]["gardenBlock"]
        read = gql(client, READ, headers, b=BLOCK["block_id"])["data"]["block"]
    wipe(driver)
    assert garden["facts"] == 2, garden
    assert {k: garden[k] for k in read} == read, (garden, read)
    if hidden:
        assert not garden["globalTags"] and not garden["sectionRules"], garden
        assert "eval" not in str(garden) and "python" not in str(garden).lower(), garden
    else:  # the premise: the writer is told the tags where its rules show them
        assert "eval" in str(garden["sectionRules"]) and garden["globalTags"], garden
