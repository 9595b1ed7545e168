"""A section's search vector must not be made of text its field mask strips (red-team pass 10).

The policy module's mask strips from a section's title and body the knowledge paths, ``§ 12``
references and exec tags the parser read into ``knowledge_refs``, ``responds_to_filed`` and
``exec_tags``, for a role whose field rules hide those fields (test_section_reads_by_id.py).
The section's vector was still embedded from its text with them in it: a role that may search
but not see those fields was ranked partly by them. Sent as a query, the hidden path's own
words (``knowledge/falcon/acquisition-terms.md``) moved one of two sections the role reads
word for word alike. Now every section is embedded without the text any mask strips
(``cairn.schema.section_text.embeddable_text``), so two sections a role reads alike score alike.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from neo4j import Driver
from starlette.testclient import TestClient

from cairn.app import create_app
from cairn.ingest.correspondence.sync import sync_bytes
from cairn.policy.profiles import PolicyRegistry
from cairn.runtime.settings import Settings
from tests.e2e.adversarial.conftest import data_as, demo_roles_with

ROLE = "staff"  # may search the letters; here it may not see these fields of them
HIDDEN = ["exec_tags", "exec_decisions", "knowledge_refs", "responds_to_filed"]
SHOWN = ["id", "section_number", "author", "date", "title", "body", "status_tags", "domain"]
LEAD = "Vendor onboarding review: the checklist needs one owner per region."
# Pairs of sections a role that may not see HIDDEN reads alike: the (title, body) it reads, and
# the (title, body) of each as filed. A title with an exec tag is a decision line: not read.
PAIRS = {
    "path": (
        ("Onboarding owners", LEAD),
        [
            ("Onboarding owners", f"{LEAD}\nThe terms are in knowledge/falcon/acquisition-terms.md"),
            ("Onboarding owners", LEAD),
        ],
    ),
    "reference": (
        ("Onboarding owners again", LEAD),
        [
            ("Onboarding owners again", f"{LEAD}\nAs the Falcon acquisition letter said in § 1"),
            ("Onboarding owners again", LEAD),
        ],
    ),
    "title tag": (
        ("", LEAD),
        [("[EXEC:FALCON] Falcon acquisition terms agreed", LEAD), ("[EXEC:GOV] Plant watering rota", LEAD)],
    ),
}
QUERIES = ["Falcon acquisition terms", "knowledge falcon acquisition-terms.md", "FALCON", LEAD]
SEARCH = """query($q: String!) { correspondenceSearch(query: $q, k: 100) {
  hits { id title body score masked } } }"""
Probe = tuple[TestClient, PolicyRegistry]


def letter_file() -> bytes:
    """The pairs as one correspondence file the role may read (a first section for ``§ 1``)."""
    sections = [("Falcon acquisition letter", "The Falcon acquisition closes in March.")]
    sections += [s for _, filed in PAIRS.values() for s in filed]
    parts = [
        "# Probe letters\n\n*Access: domain=acme/correspondence; sensitivity=low; "
        f"namespaces=internal; roles={ROLE},director*\n"
    ]
    for n, (title, body) in enumerate(sections, start=1):
        parts.append(f"---\n\n## {n} — {title}\n\n*Dana Okafor · 2026-04-{n:02d}*\n\n{body}\n")
    return "\n".join(parts).encode("utf-8")


@pytest.fixture(scope="module")
def probe_letters(letters: Driver, tmp_path_factory: pytest.TempPathFactory) -> Driver:
    log = tmp_path_factory.mktemp("probe") / "collisions.log"
    sync_bytes(letters, letter_file(), "rt-hidden-search", collision_log=log)
    return letters


@pytest.fixture(scope="module")
def probe(
    probe_letters: Driver, settings: Settings, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Probe]:
    path: Path = demo_roles_with(tmp_path_factory, ROLE, {"Section": [{"domains": ["*"], "fields": SHOWN}]})
    with TestClient(create_app(settings.model_copy(update={"policy_file": path}))) as client:
        yield client, PolicyRegistry.load(path)


def hits(probe: Probe, query: str) -> dict[tuple[str, str], list[float]]:
    """The probe sections' scores by the (title, body) the role reads."""
    client, registry = probe
    found: dict[tuple[str, str], list[float]] = {}
    for hit in data_as(client, registry, ROLE, SEARCH, q=query)["correspondenceSearch"]["hits"]:
        assert set(HIDDEN) <= set(hit["masked"]), hit
        found.setdefault((hit["title"], hit["body"]), []).append(hit["score"])
    return found


@pytest.mark.parametrize("pair", sorted(PAIRS))
def test_sections_read_alike_score_alike(probe: Probe, pair: str) -> None:
    read, _ = PAIRS[pair]
    for query in QUERIES:
        scores = hits(probe, query).get(read, [])
        assert len(scores) == 2, (pair, query, scores)
        assert scores[0] == pytest.approx(scores[1], abs=1e-6), (pair, query, scores)


def test_a_role_that_sees_the_fields_reads_them(probe: Probe, settings: Settings) -> None:
    client, registry = probe
    data: Any = data_as(client, registry, "director", SEARCH, q="Falcon acquisition terms")
    bodies = [h["body"] for h in data["correspondenceSearch"]["hits"]]
    assert any("knowledge/falcon/acquisition-terms.md" in b for b in bodies)
