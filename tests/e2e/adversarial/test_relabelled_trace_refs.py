"""A trace read back a node by its id and masked it by the label it stored (red-team pass 16).

A stored trace keeps the fields of the nodes its answer was built from and only the id, label
and hop of the rest of the pool; reading the trace reads those back from the graph under the
reader's scope (cairn/policy/preselector.py ``refetch``). The read matched the id alone and
masked what it found by the label the trace had stored. So once the id was held by a node of
another label, staff's old bundle showed that node's fields by the old label's rule: an Event
(staff sees every field) whose id a Decision now holds showed the Decision's ``rationale``,
``sensitivity``, ``namespaces``, ``roles_allowed`` and ``x_extra``, every one of them masked by
``node`` for staff. Now a node read back must still carry the stored label; one that does not is
left out like a gone one (``unavailable_ids``).
"""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import pytest
from neo4j import Driver

from cairn.memory import trace
from cairn.policy.passport import headers_for
from cairn.policy.profiles import PolicyRegistry
from cairn.runtime.settings import Settings
from tests.e2e.adversarial.traces_common import bundle_answer, serve
from tests.e2e.conftest import gql

pytestmark = pytest.mark.usefixtures("acme")

ANCHOR = "acme-prod-sunset-onprem-connectors-2024"
# With no token budget this neighbour is neither cited nor in the prompt: stored by reference.
BY_REFERENCE = "acme-e-connectors-final-release-2025"
SECRET = "the rationale staff may not read"
ASK = "query($a: ID!) { ask(anchorId: $a, tokenBudget: 0) { envelope { citedIds } } }"
NODE = "query($i: ID!) { node(id: $i) { label masked } }"


def test_a_node_read_back_under_another_label_is_not_masked_by_the_stored_one(
    acme: Driver, settings: Settings, registry: PolicyRegistry, tmp_path: Path
) -> None:
    headers = headers_for(registry, "staff")
    with serve(settings, tmp_path) as client:
        cited = gql(client, ASK, headers, a=ANCHOR)["data"]["ask"]["envelope"]["citedIds"]
        assert BY_REFERENCE not in cited
        trace.flush()
        acme.execute_query(
            "MATCH (n:Event {id: $x}) REMOVE n:Event SET n:Decision, n.rationale = $r, n.option = n.summary",
            x=BY_REFERENCE,
            r=SECRET,
        )
        try:
            now = gql(client, NODE, headers_for(registry, "staff"), i=BY_REFERENCE)["data"]["node"]
            assert now["label"] == "Decision" and "rationale" in now["masked"]
            resp = bundle_answer(client, headers, headers["X-Request-Id"])
            assert resp.status_code == 200
            with zipfile.ZipFile(io.BytesIO(resp.content)) as zf:
                files = {name: zf.read(name).decode() for name in zf.namelist()}
        finally:
            acme.execute_query(
                "MATCH (n:Decision {id: $x}) REMOVE n:Decision, n.rationale, n.option SET n:Event",
                x=BY_REFERENCE,
            )
    assert not any(SECRET in text for text in files.values())
    check = json.loads(files["evidence_check.json"])
    assert check["by_reference"] >= 1 and check["unavailable_ids"] == [BY_REFERENCE]
