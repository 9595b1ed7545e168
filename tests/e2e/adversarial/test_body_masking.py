"""Exec tags and decision lines are masked inside the body too (issue 12, finding 6).

``external`` may not see ``execTags`` or ``execDecisions``, yet the same tags and decision lines
stood word for word in ``body``. Now the body (and the title) loses exactly the lines and tokens
the parser read into those fields, for a role whose field mask hides them; staff and manager,
who may see the fields, read the body as written. Checked against the director's view of the
same sections, where the decisions are (so the check is not vacuous).
"""

from __future__ import annotations

from typing import Any

import pytest
from neo4j import Driver
from starlette.testclient import TestClient

from cairn.memory.correspondence import Reader, linear_tail
from cairn.policy.passport import headers_for
from cairn.policy.profiles import FieldRule, PolicyRegistry
from cairn.policy.scope import Scope
from cairn.schema.section_text import REFERENCE

TAIL = """{ correspondenceTail(n: 500) { id title body execTags execDecisions knowledgeRefs masked } }"""


pytestmark = pytest.mark.usefixtures("letters")


def sections(client: TestClient, registry: PolicyRegistry, role: str) -> dict[str, Any]:
    resp = client.post("/graphql", json={"query": TAIL}, headers=headers_for(registry, role))
    assert resp.status_code == 200, resp.text
    return {s["id"]: s for s in resp.json()["data"]["correspondenceTail"]}


def flat(text: str) -> str:
    return " ".join(text.split())


def paragraphs(body: str) -> list[str]:
    """The body's paragraphs, each on one line: its words, not where its lines break."""
    return [" ".join(p.split()) for p in body.split("\n\n")]


def test_external_reads_no_exec_tag_or_decision_line(client: TestClient, registry: PolicyRegistry) -> None:
    director = sections(client, registry, "director")
    external = sections(client, registry, "external")
    decided = [i for i in external if director[i]["execDecisions"]]
    assert len(decided) >= 5, "the demo letters carry decisions the external role can read around"
    for sid, view in external.items():
        assert view["execTags"] is None and view["execDecisions"] is None
        assert "[EXEC:" not in view["body"] and "[EXEC:" not in view["title"]
        body = flat(view["body"])
        for decision in director[sid]["execDecisions"] or []:
            assert flat(decision)[:40] not in body, (view["title"], decision)
        # Only governance lines (and knowledge and section references, test_section_reads_by_id.py
        # and test_section_access_lines.py) go: a letter without any reads as written.
        if not (
            director[sid]["execDecisions"]
            or director[sid]["execTags"]
            or director[sid]["knowledgeRefs"]
            or REFERENCE.search(director[sid]["body"])
        ):
            # (wrapped again, as every paragraph external reads is: test_section_wrap_width.py)
            assert paragraphs(view["body"]) == paragraphs(director[sid]["body"])


@pytest.mark.parametrize("role", ["staff", "manager"])
def test_roles_that_see_the_fields_read_the_body_as_written(
    client: TestClient, registry: PolicyRegistry, role: str
) -> None:
    director = sections(client, registry, "director")
    mine = sections(client, registry, role)
    assert any(s["execDecisions"] for s in mine.values())
    for sid, view in mine.items():
        assert view["body"] == director[sid]["body"]
        assert view["execDecisions"] == director[sid]["execDecisions"]


def test_the_field_mask_drives_it_tags_and_decisions_apart(letters: Driver, registry: PolicyRegistry) -> None:
    """A role that may see decisions but not tags keeps the decision lines without their tags."""
    staff = registry.get("staff")
    assert staff is not None
    fields = ("id", "title", "body", "exec_decisions")
    profile = staff.model_copy(update={"fields": {"Section": (FieldRule(domains=("*",), fields=fields),)}})
    views = linear_tail(letters, Reader(Scope.from_profile(profile), False), 500)
    with_decisions = [v for v in views if v.fields.get("exec_decisions")]
    assert with_decisions
    for v in views:
        assert "[EXEC:" not in v.fields["body"]
    for v in with_decisions:
        assert flat(v.fields["exec_decisions"][0])[:30] in flat(v.fields["body"])
