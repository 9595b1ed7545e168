"""A writer that may not read a fact's text may not route facts by it (leak).

A fact packet joins the dossier whose stored facts its facts come closest to, among dossiers of
its own access, and a near-exact fact is skipped as a duplicate. The vote read the stored facts'
vectors and texts whatever the writer's field rules showed: a writer whose rules hide ``Fact``
``text`` in the packet's domain, sending the same packet beside a stored fact it may not read,
was answered ``appended`` to that fact's dossier (or told the fact was a duplicate) where the
stored fact said something else and ``created`` otherwise. Its answer told what the masked text
says, one guess at a time. Now such a packet is refused before anything is read or written,
in the words used for every field a write would need to read (``cairn.policy.writes``,
``unreadable_set_problems``), the same whatever is stored. And the answer's ``candidates``
(the dossiers the packet voted for) named each by its stored title, even where the writer's
rules hide a dossier's title: now null there (``governor._shown_to``).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from neo4j import Driver
from starlette.testclient import TestClient

from cairn.memory.dossiers.governor import process_fact_packet
from cairn.policy.profiles import PolicyRegistry
from cairn.runtime.settings import Settings
from cairn.schema.checksum import graph_checksum
from cairn.schema.nodes import DECLARED_FIELDS
from tests.e2e.adversarial.conftest import served_with
from tests.e2e.adversarial.test_crowded_routing_votes import OWN_ACCESS, PACKET, packet
from tests.e2e.conftest import demo_dossiers, gql, passport, wipe

GUESS = "The spring team offsite will take place in Lisbon"
STORED = {
    "near": "The spring team offsite takes place in Lisbon",
    "far": "The printer on floor two is broken",
}


@pytest.fixture(scope="module")
def app(
    driver: Driver, settings: Settings, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[TestClient, PolicyRegistry]]:
    """The writer sees every fact field but ``text``."""
    rules = {"Fact": [{"domains": ["*"], "fields": sorted(DECLARED_FIELDS["Fact"] - {"text"})}]}
    with served_with(settings, tmp_path_factory, "writer", rules) as served:
        yield served
    wipe(driver)


def test_a_masked_text_decides_no_route(app: tuple[TestClient, PolicyRegistry], driver: Driver) -> None:
    client, registry = app
    answers = {}
    for kind, text in STORED.items():
        wipe(driver)
        process_fact_packet(driver, packet("rt-masked-stored", OWN_ACCESS, text))  # the operator's
        before = graph_checksum(driver)
        guess = packet("rt-masked-guess", OWN_ACCESS, GUESS)
        body = gql(client, PACKET, passport(registry, "writer"), p=guess)
        answers[kind] = body
        if "errors" in body:
            assert graph_checksum(driver) == before, "a refused packet writes nothing"
    # Near or far, the stored text the writer may not read changes nothing it is told.
    assert answers["near"] == answers["far"], answers
    assert answers["near"]["errors"][0]["extensions"]["code"] == "FORBIDDEN_WRITE", answers
    assert "text" in str(answers["near"]["errors"][0]), answers


CANDIDATES = "mutation($p: JSON!) { ingestFactPacket(packet: $p) { action candidates } }"
TITLE = "ZQXSENTINELTITLE"


def test_a_masked_dossier_title_is_not_among_the_candidates(
    driver: Driver, settings: Settings, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The answer lists the dossiers the packet's facts voted for: their titles only where the
    writer's rules show a dossier's title (here they hide it; facts show whole)."""
    rules = {"Dossier": [{"domains": ["*"], "fields": sorted(DECLARED_FIELDS["Dossier"] - {"title"})}]}
    wipe(driver)
    stored = {**packet("rt-masked-title", OWN_ACCESS, STORED["near"]), "cluster_label": TITLE}
    process_fact_packet(driver, stored)
    with served_with(settings, tmp_path_factory, "writer", rules) as (client, registry):
        guess = packet("rt-masked-title-guess", OWN_ACCESS, GUESS)
        body = gql(client, CANDIDATES, passport(registry, "writer"), p=guess)
    wipe(driver)
    assert "errors" not in body, body
    candidates = body["data"]["ingestFactPacket"]["candidates"]
    assert [c["dossier_id"] for c in candidates] == ["dos-rt-masked-title"], body
    assert TITLE not in str(body) and candidates[0]["title"] is None, body


GARDEN = "mutation($b: String!) { gardenBlock(blockId: $b) { blockId dossiers } }"


def test_gardening_routes_no_facts_by_a_masked_text(
    app: tuple[TestClient, PolicyRegistry], driver: Driver
) -> None:
    """Gardening a block routes its facts as packets: refused the same way, before it writes."""
    client, registry = app
    demo_dossiers(driver)
    before = graph_checksum(driver)
    body = gql(client, GARDEN, passport(registry, "writer"), b="block_001")
    assert graph_checksum(driver) == before
    assert body["errors"][0]["extensions"]["code"] == "FORBIDDEN_WRITE", body
    assert "text" in str(body["errors"][0]), body
