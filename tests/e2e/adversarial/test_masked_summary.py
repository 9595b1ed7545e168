"""A dossier's stored summary, read through ``node``, quoted masked fact texts (latent leak).

The summary is extractive: the stored one is its facts' own sentences. ``dossier(id)`` and the
searches rebuild it from the facts whose text the caller may read (``test_masked_text_search``),
but ``node(id)``, ``neighbourhood`` and ``ask`` mask a dossier by its label's field rule and its
derived fields only, and ``summary`` was not one: under a policy that shows facts without their
``text`` (the probe of ``test_masked_text_search``: staff, acme/assistant), ``node`` on the
dossier returned the stored summary, masked fact sentences included (found on a probe of the
demo's policy, red-team pass 2026-11-26). Likewise a routing journal entry's ``details`` list
the dossiers its packet voted for with their titles, which ``dossier(id) { history }`` and
``node`` returned while the title itself was masked, and ``node`` on a block not yet gardened
returned its facts' texts in ``pending_facts``. Now ``summary``, a journal entry's ``details``
and a block's ``pending_facts`` are derived fields of fact ``text``, like the title
(docs/design.md §Policy module, "Derived fields").
"""

from __future__ import annotations

from neo4j import Driver

from cairn.memory.dossiers.blocks import block_node_id, ingest_block, turn_node_id
from tests.e2e.adversarial.test_masked_text_search import (  # noqa: F401  (fixtures)
    FACT,
    Probe,
    ask,
    demo,
    dossier_of,
    masked_registry,
    probe,
)

NODE = "query($i: ID!) { node(id: $i) { id fields masked } }"
WALK = "query($i: ID!) { neighbourhood(id: $i, hops: 1) { anchor { id fields masked } nodes { id fields } } }"
ASK = "query($i: ID!) { ask(anchorId: $i) { envelope { text } evidence { id fields } } }"
DOSSIER = "query($i: ID!) { dossier(id: $i) { summary masked } }"


def test_no_read_of_a_dossier_quotes_its_masked_facts(probe: Probe) -> None:  # noqa: F811
    dossier_id = dossier_of(probe, FACT)
    stored = ask(probe, NODE, "director", i=dossier_id)["node"]
    assert FACT in stored["fields"]["summary"]  # the stored summary quotes the fact
    for query in (NODE, WALK, ASK, DOSSIER):
        shown = ask(probe, query, i=dossier_id)
        assert FACT not in str(shown), (query, shown)
    node = ask(probe, NODE, i=dossier_id)["node"]
    assert "summary" not in node["fields"] and "summary" in node["masked"], node
    assert node["fields"]["id"] == dossier_id and "status" in node["fields"]


def test_a_reader_of_the_texts_still_reads_the_summary(probe: Probe) -> None:  # noqa: F811
    dossier_id = dossier_of(probe, FACT)
    for role in ("director", "manager"):
        assert FACT in ask(probe, NODE, role, i=dossier_id)["node"]["fields"]["summary"]
        assert FACT in ask(probe, DOSSIER, role, i=dossier_id)["dossier"]["summary"]


HISTORY = "query($i: ID!) { dossier(id: $i) { title history { id op details } } }"


def test_no_journal_entry_quotes_a_masked_title_in_its_details(probe: Probe) -> None:  # noqa: F811
    """A routing entry's ``details`` lists the dossiers the packet voted for, with their titles
    (built from the facts' text): masked with ``new_value`` where fact text is."""
    dossier_id = dossier_of(probe, FACT)
    stored = ask(probe, HISTORY, "director", i=dossier_id)["dossier"]
    title = stored["title"]
    quoting = [e for e in stored["history"] if title in str(e["details"])]
    assert quoting, stored  # some entry's details quote the title
    shown = ask(probe, HISTORY, i=dossier_id)["dossier"]
    assert shown["title"] is None
    assert title not in str(shown), shown
    for e in quoting:
        node = ask(probe, NODE, i=e["id"])["node"]
        assert title not in str(node) and "details" in node["masked"], node


def test_a_block_not_yet_gardened_shows_no_pending_fact_text(probe: Probe, demo: Driver) -> None:  # noqa: F811
    secret = "The billing team plans a reorganisation in March"
    block_id = "block_masked_pending"
    turns = [{"turn_index": 1, "user": "hello"}]
    ingest_block(demo, {"block_id": block_id, "turns": turns, "facts": [secret]})
    try:
        stored = ask(probe, NODE, "director", i=block_node_id(block_id))["node"]
        assert secret in stored["fields"]["pending_facts"]  # what is at stake
        node = ask(probe, NODE, i=block_node_id(block_id))["node"]
        assert secret not in str(node) and "pending_facts" in node["masked"], node
        assert node["fields"]["block_id"] == block_id
    finally:
        ids = [block_node_id(block_id), turn_node_id(block_id, 1)]
        demo.execute_query("MATCH (n:Entity) WHERE n.id IN $ids DETACH DELETE n", ids=ids)
