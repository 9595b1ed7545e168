"""A section read by id shows what its field mask hides in the body (red-team pass 9, 2026-11-26).

Found against the running ``cairn serve --demo``: ``external`` may not see a section's
``exec_tags``, ``exec_decisions`` or ``knowledge_refs``. Its tail (test_body_masking.py) stripped
the exec tags and decision lines from the body, but only there: the same section read through
``node(id:)``, ``neighbourhood`` or an ``ask`` on it (ids external reads off its own tail) came
back with ``[EXEC:GOV] Decision: on-prem connectors reach end of support on 2026-12-31`` word
for word. And every read, the tail included, quoted the knowledge references
(``knowledge/platform/cloud-unification-retro.md``) the parser reads into ``knowledge_refs``,
a field the same mask hides. Now the policy module's mask (``cairn.policy.preselector``)
strips the governance lines and the references from a section's title and body wherever the
rule hides the field they were read into, so every read path shows the same text.
"""

from __future__ import annotations

from typing import Any

import pytest
from starlette.testclient import TestClient

from cairn.policy.profiles import PolicyRegistry
from cairn.schema.section_text import KNOWLEDGE_REF
from tests.e2e.adversarial.conftest import data_as

pytestmark = pytest.mark.usefixtures("letters")

TAIL = "{ correspondenceTail(n: 500) { id title body execTags execDecisions knowledgeRefs masked } }"
READS = {
    "node": "query($i: ID!) { node(id: $i) { fields masked } }",
    "neighbourhood": "query($i: ID!) { neighbourhood(id: $i) { anchor { fields masked } } }",
    "ask": "query($i: ID!) { ask(anchorId: $i) { evidence { id fields masked } } }",
}


def tail(client: TestClient, registry: PolicyRegistry, role: str) -> dict[str, Any]:
    return {s["id"]: s for s in data_as(client, registry, role, TAIL)["correspondenceTail"]}


def fields_read_by(
    client: TestClient, registry: PolicyRegistry, read: str, section_id: str
) -> dict[str, Any]:
    data = data_as(client, registry, "external", READS[read], i=section_id)
    if read == "node":
        return dict(data["node"]["fields"])
    if read == "neighbourhood":
        return dict(data["neighbourhood"]["anchor"]["fields"])
    return dict(next(e["fields"] for e in data["ask"]["evidence"] if e["id"] == section_id))


@pytest.fixture(scope="module")
def director(client: TestClient, registry: PolicyRegistry) -> dict[str, Any]:
    return tail(client, registry, "director")


@pytest.fixture(scope="module")
def external(client: TestClient, registry: PolicyRegistry) -> dict[str, Any]:
    return tail(client, registry, "external")


def test_the_demo_has_what_external_may_not_read(director: dict[str, Any], external: dict[str, Any]) -> None:
    shared = [director[i] for i in external]
    assert sum(bool(s["execDecisions"]) for s in shared) >= 5
    assert sum(bool(s["knowledgeRefs"]) for s in shared) >= 5
    for view in external.values():
        assert {"exec_tags", "exec_decisions", "knowledge_refs"} <= set(view["masked"])


def test_the_tail_quotes_no_knowledge_reference(director: dict[str, Any], external: dict[str, Any]) -> None:
    for sid, view in external.items():
        for ref in director[sid]["knowledgeRefs"] or []:
            assert ref not in view["body"] and ref not in view["title"], (view["title"], ref)
        assert KNOWLEDGE_REF.search(view["body"]) is None, view["title"]


@pytest.mark.parametrize("read", sorted(READS))
def test_a_section_read_by_id_shows_the_body_the_tail_shows(
    client: TestClient,
    registry: PolicyRegistry,
    director: dict[str, Any],
    external: dict[str, Any],
    read: str,
) -> None:
    hidden = [i for i in external if director[i]["execDecisions"] or director[i]["knowledgeRefs"]]
    read_by_id = {sid: fields_read_by(client, registry, read, sid) for sid in hidden}
    for sid, fields in read_by_id.items():
        assert "[EXEC:" not in fields["body"] and "[EXEC:" not in fields["title"], (read, fields["title"])
        for decision in director[sid]["execDecisions"] or []:
            assert " ".join(decision.split())[:40] not in " ".join(fields["body"].split()), (read, decision)
    for sid, fields in read_by_id.items():
        for ref in director[sid]["knowledgeRefs"] or []:
            assert ref not in fields["body"], (read, ref)
        assert (fields["title"], fields["body"]) == (external[sid]["title"], external[sid]["body"]), read


@pytest.mark.parametrize("role", ["staff", "manager", "director"])
def test_roles_that_see_the_fields_read_every_body_as_written(
    client: TestClient, registry: PolicyRegistry, director: dict[str, Any], role: str
) -> None:
    mine = tail(client, registry, role)
    quoted = [s for s in mine.values() if s["knowledgeRefs"]]
    assert quoted and all(ref in s["body"] for s in quoted for ref in s["knowledgeRefs"])
    sid = quoted[0]["id"]
    data = data_as(client, registry, role, READS["node"], i=sid)
    assert data["node"]["fields"]["body"] == director[sid]["body"]
