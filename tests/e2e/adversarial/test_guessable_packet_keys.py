"""A fact packet's ids are not the hash of its content (red-team pass 15).

A packet sent without a ``packet_id`` (every packet the gardener routes) was keyed by an
unkeyed sha256 of its content: cluster label, facts, block, timestamp and access. That key names
its facts (``fact-<key>-000``), the dossier it creates (``dos-<key>``) and its journal entries,
so a reader whose rules hide one field of the packet, such as the facts' ``observed_at`` (the
packet's timestamp), read everything else, hashed guesses of the hidden field (a time is a few
million guesses) and recognised the right one by the fact ids. Now the content hash is keyed
with the database's secret (``lock.keyed``); a client's own ``packet_id`` is still its key.
"""

from __future__ import annotations

import json

import pytest
from neo4j import Driver

from cairn.memory.dossiers.governor import ingest_packets, process_fact_packet
from cairn.memory.dossiers.models import parse_packet
from cairn.policy.passport import headers_for
from cairn.runtime.embedder import Embedder
from cairn.runtime.settings import Settings
from cairn.schema.nodes import DECLARED_FIELDS
from tests.e2e.adversarial.conftest import served_with
from tests.e2e.conftest import gql
from tests.e2e.test_dossiers_routing import packet

SEARCH = """query($q: String!) { memorySearch(query: $q, k: 5) {
  hits { factId text observedAt dossierId } } }"""
TEXT = "User bakes sourdough bread every weekend"


def test_a_packets_ids_are_not_its_contents_hash(
    empty_db: Driver, embedder: Embedder, settings: Settings, tmp_path_factory: pytest.TempPathFactory
) -> None:
    sent = packet("Baking", [TEXT], "b1", timestamp="2024-05-01T09:30:00Z")
    unkeyed = parse_packet(sent).key  # what anyone computes from the packet's content
    result = process_fact_packet(empty_db, sent, embedder=embedder)
    rule = [{"domains": ["*"], "fields": sorted(DECLARED_FIELDS["Fact"] - {"observed_at"})}]
    with served_with(settings, tmp_path_factory, "staff", {"Fact": rule}) as (client, registry):
        body = gql(client, SEARCH, headers_for(registry, "staff"), q="Who bakes bread?")
    hits = body["data"]["memorySearch"]["hits"]
    assert [(h["text"], h["observedAt"]) for h in hits] == [(TEXT, None)], body  # the time is hidden
    assert unkeyed not in json.dumps(body) and unkeyed not in result.dossier_id, body
    # A client's own packet_id stays its key, and a packet sent again is recognised.
    again = process_fact_packet(empty_db, sent, embedder=embedder)
    assert (again.action, again.dossier_id, again.packet_key) == (
        "already_applied",
        result.dossier_id,
        result.packet_key,
    )
    own = process_fact_packet(
        empty_db, {**sent, "packet_id": "mine-1", "facts": ["User brews coffee at dawn"]}, embedder=embedder
    )
    assert own.packet_key == "mine-1" and own.added == ("fact-mine-1-000",)


def test_a_packet_applied_before_the_keyed_ids_is_still_recognised(
    empty_db: Driver, embedder: Embedder
) -> None:
    """A packet a version before schema 9 applied without a ``packet_id`` is stored under its
    unkeyed content hash (``cairn db migrate`` cannot tell that hash from a client's own id, so it
    keeps it): sent again, singly or in a batch (``cairn ingest packets`` of the same file, a
    gardening pass re-run), it is already applied, not a second copy of its facts (review 15)."""
    sent = [packet("Baking", [TEXT], "b1"), packet("Rowing", ["User rows on the lake at dawn"], "b2")]
    parsed = [parse_packet(p) for p in sent]
    # What the version before wrote: the same ids, named by the unkeyed content hash.
    before = [
        process_fact_packet(empty_db, {**p, "packet_id": q.key}, embedder=embedder)
        for p, q in zip(sent, parsed, strict=True)
    ]
    facts = "MATCH (f:Fact) RETURN count(f) AS n"
    count = empty_db.execute_query(facts).records[0]["n"]
    one = process_fact_packet(empty_db, sent[0], embedder=embedder)
    batch = ingest_packets(empty_db, parsed, embedder=embedder)
    assert [(r.action, r.dossier_id) for r in (one, *batch)] == [
        ("already_applied", before[0].dossier_id),
        *(("already_applied", b.dossier_id) for b in before),
    ]
    assert empty_db.execute_query(facts).records[0]["n"] == count
