"""Where hidden sections sit, read off what the store says about visible ones (red-team pass).

Callers are numbered 1..n over the sections they may see (test_numbering.py), but two answers
carried the store's canonical numbering, which counts every section:

- ``collision`` on a section (the tail, search, ``node``) was ``filed number != canonical
  number``: staff read § XVIII as its own number 17 with ``collision: false``, so its canonical
  number was 18 and one hidden section sat before it. Now ``collision`` is masked with the
  other positional fields and recomputed against the caller's own number
  (cairn/memory/correspondence.py ``_view``).
- ``syncCorrespondence`` answered a scoped writer with the canonical number it assigned (global
  max + 1): a writer narrowed to low sensitivity was told 44 for a section its own tail numbers
  41. Now the report is restated in the writer's numbering, and the stale-embedding count
  covers only sections it may read (cairn/ingest/correspondence/sync.py ``_in_own_numbers``).
- ``syncCorrespondence`` matched a scoped writer's file against stored sections by global
  ordinal (file position): a writer narrowed to low sensitivity that sent the letters' first 16
  sections and a 17th of its own saw the 17th silently not created (the store's 17th is a
  medium section) and got ``missing`` conflicts for every later ordinal but 29 and 37, the hidden
  ones. Now the file is compared with the sections the writer may read, numbered 1..n in the
  source, and new ones are appended after the source's end (cairn/ingest/correspondence/sync.py
  ``_store_ordinals``).

The property tested is the strongest one: a caller's answer is the answer it would get from a
store in which the hidden sections were never filed.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from neo4j import Driver
from starlette.testclient import TestClient

from cairn.ingest.correspondence.demo import DEMO_FILE, DEMO_SOURCE, load_demo_correspondence
from cairn.ingest.correspondence.sync import sync_bytes
from cairn.policy.profiles import PolicyRegistry
from cairn.runtime.embedder import Embedder
from cairn.runtime.settings import Settings
from tests.e2e.adversarial.conftest import NARROW
from tests.e2e.conftest import gql, passport, wipe

TAIL = "{ correspondenceTail(n: 500) { sectionNumber filedId collision title author date } }"
NODE = "query($id: ID!) { node(id: $id) { fields masked } }"
IDS = "{ correspondenceTail(n: 500) { id title } }"
SYNC = """mutation($m: String!) { syncCorrespondence(source: "rt-probe", markdown: $m) {
  created { id sectionNumber } } }"""
OWN_TAIL = "{ correspondenceTail(n: 500) { id sectionNumber } }"
PROBE = """# Probe letters

*Access: domain=acme/correspondence; sensitivity=low; namespaces=internal; roles=staff,writer*

---

## 1 — A probe letter

*Mallory · 2026-03-01*

Probe body text.

---
"""


pytestmark = pytest.mark.usefixtures("letters")


def without_hidden_sections(text: str) -> bytes:
    """The demo letters minus every section above low sensitivity (the ones staff may not read)."""
    chunks = text.split("\n---\n")
    kept = [c for c in chunks if not re.search(r"\*Access:[^*]*sensitivity=(medium|high)", c)]
    assert len(kept) == len(chunks) - 3, "the demo letters hide three sections from staff"
    return "\n---\n".join(kept).encode("utf-8")


def staff_view(client: TestClient, registry: PolicyRegistry) -> Any:
    """The staff tail and each section's node, without the opaque ids and creation times."""
    headers = passport(registry, "staff")
    tail = gql(client, TAIL, headers)["data"]["correspondenceTail"]
    nodes = []
    for row in gql(client, IDS, headers)["data"]["correspondenceTail"]:
        node = gql(client, NODE, headers, id=row["id"])["data"]["node"]
        fields = {k: v for k, v in node["fields"].items() if k not in ("id", "created_at")}
        nodes.append({"fields": fields, "masked": node["masked"]})
    return {"tail": tail, "nodes": nodes}


class Stores:
    """The store this module's tests switch between: the demo letters as filed, or as if the
    sections staff may not read had never been filed (the collision log in the test's folder)."""

    def __init__(self, driver: Driver, settings: Settings, embedder: Embedder, log: Path) -> None:
        self.driver, self.settings, self.embedder, self.log = driver, settings, embedder, log

    def without_hidden(self) -> None:
        wipe(self.driver)
        stripped = without_hidden_sections(DEMO_FILE.read_text(encoding="utf-8"))
        sync_bytes(self.driver, stripped, DEMO_SOURCE, collision_log=self.log, embedder=self.embedder)

    def demo(self) -> None:
        wipe(self.driver)
        load_demo_correspondence(self.driver, self.settings, self.embedder)


@pytest.fixture
def stores(letters: Driver, settings: Settings, embedder: Embedder, tmp_path: Path) -> Iterator[Stores]:
    """Switches the store; the demo letters are back afterwards, whatever the test did."""
    store = Stores(letters, settings, embedder, tmp_path / "collisions.log")
    yield store
    store.demo()


def test_staff_reads_the_letters_as_if_hidden_sections_were_never_filed(
    client: TestClient, registry: PolicyRegistry, stores: Stores
) -> None:
    full = staff_view(client, registry)
    stores.without_hidden()
    assert staff_view(client, registry) == full


def test_a_narrowed_writer_is_told_its_own_section_numbers(
    letters: Driver, client: TestClient, registry: PolicyRegistry
) -> None:
    headers = passport(registry, "writer", **NARROW)
    try:
        body = gql(client, SYNC, headers, m=PROBE)
        assert body.get("errors") is None, body
        created = body["data"]["syncCorrespondence"]["created"]
        assert len(created) == 1
        tail = gql(client, OWN_TAIL, headers)["data"]["correspondenceTail"]
        own = {s["id"]: s["sectionNumber"] for s in tail}
        assert created[0]["sectionNumber"] == own[created[0]["id"]]
    finally:
        letters.execute_query("MATCH (s:Section {source: 'rt-probe'}) DETACH DELETE s")


SYNC_REPORT = """mutation($m: String!) { syncCorrespondence(source: "acme-letters", markdown: $m) {
  sectionsInFile unchanged created { filedId } conflicts { ordinal kind } } }"""
PROBE_SECTION = "\n\n## XVII — A probe letter\n\n*Mallory · 2026-03-01*\n\nProbe body text.\n"


def writer_syncs_a_probe(client: TestClient, registry: PolicyRegistry) -> Any:
    """A writer narrowed to low sensitivity syncs the demo letters' first 16 sections and a 17th of
    its own, as if it were the next letter (the store's 17th section is medium)."""
    chunks = DEMO_FILE.read_text(encoding="utf-8").split("\n---\n")
    markdown = "\n---\n".join([*chunks[:17], PROBE_SECTION]) + "\n---\n"
    headers = passport(registry, "writer", **{"X-Sensitivity-Ceiling": "low"})
    body = gql(client, SYNC_REPORT, headers, m=markdown)
    assert body.get("errors") is None, body
    return body["data"]["syncCorrespondence"]


def test_a_narrowed_writers_sync_report_is_the_same_without_the_hidden_sections(
    client: TestClient, registry: PolicyRegistry, stores: Stores
) -> None:
    stores.without_hidden()
    expected = writer_syncs_a_probe(client, registry)
    stores.demo()
    assert writer_syncs_a_probe(client, registry) == expected


def test_external_reads_no_filed_numbers(client: TestClient, registry: PolicyRegistry) -> None:
    """The authors' filed numbers (XVI, then XVIII) would place the letters external may not read
    in their gaps (red-team pass 17): its rule, which hides their references, hides them too."""
    headers = passport(registry, "external")
    tail = gql(client, TAIL, headers)["data"]["correspondenceTail"]
    assert len(tail) == 39 and [row["sectionNumber"] for row in tail] == list(range(1, 40))
    assert all(row["filedId"] is None and row["collision"] is None for row in tail)
    for row in gql(client, IDS, headers)["data"]["correspondenceTail"]:
        node = gql(client, NODE, headers, id=row["id"])["data"]["node"]
        assert "filed_id" not in node["fields"] and "filed_id" in node["masked"], node
