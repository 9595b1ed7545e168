"""A dossier journal entry's excerpt and rationale are masked with the fact text they come from (leak).

A packet fact that restates a stored fact is skipped and journalled (``fact_skipped``) with the
skipped text as the entry's ``excerpt``; a created or appended dossier's entries give the vote
in their ``rationale`` ("1 of 1 clustered facts voted for it; centroid cosine 0.29, coherence
after joining 0.73"), numbers read off the facts' text vectors, and a split its coherences. A
policy hiding fact ``text`` but showing journal entries read the text, and how near the texts
are, there. They are derived fields of fact ``text`` now (``scope.DERIVED_FIELDS``), like the
entry's values and details. The probe policy is ``test_masked_text_search``'s (staff: fact text
masked in acme/assistant).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from neo4j import Driver

from cairn.memory.dossiers.governor import process_fact_packet
from cairn.runtime.embedder import Embedder
from tests.e2e.adversarial.test_masked_text_search import (  # noqa: F401  (fixtures)
    FACT,
    Probe,
    ask,
    demo,
    dossier_of,
    masked_registry,
    probe,
)

HISTORY = """query($i: ID!) { dossier(id: $i) { history { id op excerpt rationale } } }"""
NODE = "query($i: ID!) { node(id: $i) { fields masked } }"


@pytest.fixture(scope="module")
def restated(probe: Probe, driver: Driver, embedder: Embedder) -> str:  # noqa: F811
    """The demo with a packet that restates ``FACT`` routed by the operator; the fact's dossier."""
    packet: dict[str, Any] = {
        "cluster_label": "Billing",
        "facts": [{"text": FACT, "turn_id": "turn_901"}],
        "source_block_id": "block_901",
    }
    result = process_fact_packet(driver, packet, embedder=embedder)
    assert [s.text for s in result.skipped] == [FACT], result
    return dossier_of(probe, FACT)


def test_a_dossier_journal_quotes_no_masked_fact_text(probe: Probe, restated: str) -> None:  # noqa: F811
    stored = ask(probe, HISTORY, "director", i=restated)["dossier"]["history"]
    assert any(e["op"] == "fact_skipped" and e["excerpt"] == FACT for e in stored), stored
    assert any("cosine" in (e["rationale"] or "") for e in stored), stored
    shown = ask(probe, HISTORY, i=restated)["dossier"]["history"]
    assert [e["id"] for e in shown] == [e["id"] for e in stored]
    assert all(e["excerpt"] is None and e["rationale"] is None for e in shown), shown
    skipped = next(e["id"] for e in stored if e["op"] == "fact_skipped")
    node = ask(probe, NODE, i=skipped)["node"]
    assert {"excerpt", "rationale"} <= set(node["masked"]), node
    assert FACT not in json.dumps(node) and "cosine" not in json.dumps(node), node
