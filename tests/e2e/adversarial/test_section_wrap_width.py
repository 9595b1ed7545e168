"""The width a letter is read at says nothing of what was stripped from it (red-team pass 18).

A role whose rule hides ``responds_to_filed`` or ``knowledge_refs`` (the demo's ``external``) reads
a letter without a reply's opening ``Re: § IV.`` and without the sentences that cite a hidden
reference, and each paragraph that lost one was wrapped again: at the widest line of the letter
left as written, or at 72 where none was 40 wide. The demo's authors wrap at 79 to 91 characters,
so 20 of the 39 letters external reads came out narrower than any letter as written (64 to 78),
and exactly those had lost something: a reply's opener (the letter answers another, a field
external may not read), a reference or a decision. A paragraph wrapped again beside others left
as written told it too. Now, for such a reader, every paragraph of prose is wrapped at one width
(cairn/schema/section_text.py ``WRAP``, ``reflow``), whatever it lost.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterator

import pytest
from neo4j import Driver
from starlette.testclient import TestClient

from cairn.ingest.correspondence.demo import DEMO_FILE, DEMO_SOURCE
from cairn.policy.profiles import PolicyRegistry
from cairn.runtime.embedder import Embedder
from cairn.schema.section_text import is_tag_line
from tests.e2e.adversarial.conftest import data_as, synced_letters

TAIL = "{ correspondenceTail(n: 500) { id title body } }"


@pytest.fixture(scope="module")
def letters(driver: Driver, embedder: Embedder, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Driver]:
    with synced_letters(driver, embedder, tmp_path_factory, DEMO_FILE.read_text(), DEMO_SOURCE) as synced:
        yield synced


def paragraphs(body: str) -> list[str]:
    """The body's paragraphs of prose (not its status and tag lines)."""
    return [
        p for p in body.split("\n\n") if p.strip() and not all(is_tag_line(line) for line in p.split("\n"))
    ]


@pytest.mark.usefixtures("letters")
def test_external_reads_every_paragraph_wrapped_at_one_width(
    client: TestClient, registry: PolicyRegistry
) -> None:
    read = data_as(client, registry, "external", TAIL)["correspondenceTail"]
    written = {s["id"]: s["body"] for s in data_as(client, registry, "exec", TAIL)["correspondenceTail"]}
    assert len(read) == 39
    assert sum(s["body"] != written[s["id"]] for s in read) >= 20  # the strip is at work
    for section in read:
        for paragraph in paragraphs(section["body"]):
            wrapped = textwrap.fill(
                " ".join(paragraph.split()), 72, break_long_words=False, break_on_hyphens=False
            )
            assert paragraph == wrapped, (section["title"], paragraph)
