"""Fields written from a masked fact text are masked with it (latent leak).

A dossier's title is the gardener's label built from its facts' text, and its journal's
``new_value``/``previous_value`` quote such titles. Under a policy that shows a fact without its
``text``, the title and journal still said what the masked facts say. They are now derived
fields (``scope.DERIVED_FIELDS``): shown only where their source field shows in the node's domain,
and named in ``masked`` otherwise (docs/design.md §Policy module, "Derived fields"). The probe
policy is ``test_masked_text_search``'s (staff: fact text masked in acme/assistant).
"""

from __future__ import annotations

import json

import pytest
from neo4j import Driver

from cairn.runtime.settings import Settings
from cairn.schema.nodes import DECLARED_FIELDS
from tests.e2e.adversarial.conftest import served_with
from tests.e2e.adversarial.test_masked_text_search import (  # noqa: F401  (fixtures)
    FACT,
    Probe,
    ask,
    demo,
    dossier_of,
    masked_registry,
    probe,
)
from tests.e2e.conftest import gql, passport

DOSSIER = """query($i: ID!) { dossier(id: $i) { title factCount masked
  history { op newValue previousValue } } }"""


def test_a_dossier_title_and_journal_do_not_quote_masked_facts(probe: Probe) -> None:  # noqa: F811
    dossier_id = dossier_of(probe, FACT)
    stored = ask(probe, DOSSIER, "director", i=dossier_id)["dossier"]
    assert stored["title"] and any(e["newValue"] for e in stored["history"]), stored
    shown = ask(probe, DOSSIER, i=dossier_id)["dossier"]
    assert shown["factCount"] == stored["factCount"]
    assert shown["title"] is None and "title" in shown["masked"], shown
    assert all(e["newValue"] is None and e["previousValue"] is None for e in shown["history"]), shown


BLOCK = "query($b: String!) { block(blockId: $b) { globalTags sectionRules } }"
NODE = "query($i: ID!) { node(id: $i) { fields masked } }"
TAGGED = "block_003"  # "I am using Python 3.9", "Never use eval() in this code", "... call the server Box A"


def test_a_blocks_tags_do_not_quote_masked_facts(probe: Probe) -> None:  # noqa: F811
    """A block's tags and section rules, and a tag fact's ``tag``, are the gardener's reading of its
    facts' text (a rule's ``source_fact`` is the text itself): masked with it (red-team pass 15)."""
    stored = ask(probe, BLOCK, "director", b=TAGGED)["block"]
    assert stored["globalTags"] and "Never use eval()" in str(stored["sectionRules"]), stored
    shown = ask(probe, BLOCK, b=TAGGED)["block"]
    assert not shown["globalTags"] and not shown["sectionRules"], shown
    block = ask(probe, NODE, i=f"blk-{TAGGED}")["node"]
    assert {"global_tags", "section_rules", "pending_facts"} <= set(block["masked"]), block
    tag_fact = ask(probe, NODE, i=f"fact-{TAGGED}-tag-1")["node"]
    assert "tag" in tag_fact["masked"] and tag_fact["fields"].get("tag") is None, tag_fact
    for read in (shown, block, tag_fact):
        assert "eval" not in str(read) and "Box A" not in str(read) and "python" not in str(read).lower()


FACT_ADDED = """
MATCH (j:JournalEntry {op: 'fact_added'})-[:ABOUT]->(d:Dossier)
WHERE d.sensitivity = 'low' AND 'staff' IN d.roles_allowed AND j.confidence IS NOT NULL
RETURN j.id AS id, j.details AS details ORDER BY j.id LIMIT 1
"""


def test_a_dossier_entry_does_not_copy_masked_fact_fields(
    demo: Driver,  # noqa: F811
    settings: Settings,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """A fact's journal entry copies the fact's ``confidence``, and its ``details`` name the fact's
    block and turn: masked where those are (red-team pass 15)."""
    (entry,) = demo.execute_query(FACT_ADDED).records
    block = json.loads(entry["details"])["source_block_id"]
    assert block  # the premise: the entry names its fact's block
    hidden = {"confidence", "source_block_id", "source_turn_id"}
    rule = [{"domains": ["*"], "fields": sorted(DECLARED_FIELDS["Fact"] - hidden)}]
    with served_with(settings, tmp_path_factory, "staff", {"Fact": rule}) as (client, registry):
        body = gql(client, NODE, passport(registry, "staff"), i=entry["id"])
    node = body["data"]["node"]
    assert node["fields"].get("confidence") is None and "confidence" in node["masked"], body
    assert node["fields"].get("details") is None and "details" in node["masked"], body
    assert block not in json.dumps(body), body


GARDENED = """
MATCH (f:Fact {source_block_id: 'block_001'}), (b:Block {block_id: 'block_001'})
WHERE f.observed_at = b.observed_at AND 'staff' IN f.roles_allowed AND 'staff' IN b.roles_allowed
RETURN f.id AS fact, b.id AS block ORDER BY f.id LIMIT 1
"""


@pytest.mark.parametrize(("hidden_on", "copy_on"), [("Block", "fact"), ("Fact", "block")])
def test_a_gardened_facts_time_is_masked_with_its_blocks(
    demo: Driver,  # noqa: F811
    settings: Settings,
    tmp_path_factory: pytest.TempPathFactory,
    hidden_on: str,
    copy_on: str,
) -> None:
    """A gardened fact's ``observed_at`` is its block's, copied (the gardener's packet is timed at
    the block's ``observed_at``): each is hidden where the other is (review 15)."""
    (row,) = demo.execute_query(GARDENED).records  # the premise: the same time on both
    rule = [{"domains": ["*"], "fields": sorted(DECLARED_FIELDS[hidden_on] - {"observed_at"})}]
    with served_with(settings, tmp_path_factory, "staff", {hidden_on: rule}) as (client, registry):
        body = gql(client, NODE, passport(registry, "staff"), i=row[copy_on])
    node = body["data"]["node"]
    assert node["fields"].get("observed_at") is None and "observed_at" in node["masked"], body
    assert "2025-12-15" not in json.dumps(body), body
