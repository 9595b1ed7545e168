"""What the strip of a section's hidden lines left behind (red-team pass 16, 2026-11-27).

A role whose rule hides ``exec_decisions``, ``exec_tags``, ``responds_to_filed``, ``knowledge_refs``
or a section's access fields (the demo's ``external``) reads the body without the lines and
tokens the parser read into them (test_section_access_lines.py). But the strip left their place
visible: a decision paragraph between two others left two blank lines where the letter has one
(``…two years.\\n\\n\\nJonas will own…``, demo § V), a letter that opens with one began with a
blank line, and a reply that opens ``Re: § IV.`` began with ``. Marta is right``. So external
could tell which letters it reads hold an exec decision, an access line of their own or answer
an earlier letter: whether a field it may not see holds a value. Now a stripped line takes one of
the blank lines around it with it, a line the strip empties goes too, and a reply's opening
reference goes with its separator (cairn/schema/section_text.py ``without_governance``,
closed up). A reference inside a sentence (``see § III for``) still leaves its sentence
visibly short (README, what the mask strips of a section).

The property: a letter whose hidden parts are stripped reads exactly as its twin written without
them.

Review pass 16: a decision item of a numbered list left ``1.`` then ``3.`` (the twin reads ``1.``,
``2.``), and a decision between paragraphs two blank lines apart left three; now a list is
renumbered over its stripped items and a run takes as many blank lines after it as stood before.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from neo4j import Driver
from starlette.testclient import TestClient

from cairn.policy.profiles import PolicyRegistry
from cairn.runtime.embedder import Embedder
from tests.e2e.adversarial.conftest import data_as, synced_letters

ACCESS = "domain=acme/correspondence; sensitivity=low; namespaces=public; roles=external,exec"
# (title, body with governance lines, the same letter written without them)
TWINS = [
    (
        "a decision between two paragraphs",
        "Re: § I. Marta is right and we have known it.\n\n"
        "[EXEC:GOV] Decision: the connectors end in 2026; no new\non-prem contracts are signed.\n\n"
        "Jonas will own the customer conversations.",
        "Marta is right and we have known it.\n\nJonas will own the customer conversations.",
    ),
    (
        "a decision first, an access line last",
        f"Decision: the offsite moves to Porto.\n\nThe agenda follows next week.\n*Access: {ACCESS}*",
        "The agenda follows next week.",
    ),
    (
        "an access line and a reference alone on their lines",
        f"*Access: {ACCESS}*\n\nThe retrospective:\n`knowledge/platform/retro.md`\n\nOne stack is cheaper.",
        "The retrospective:\n\nOne stack is cheaper.",
    ),
    (
        "two decisions in a row",
        "Re: II — we agree.\n\nDecision: A.\n\n[EXEC:RISK] Decision: B.\n\nThe rest is detail.",
        "we agree.\n\nThe rest is detail.",
    ),
    (
        "a decision inside a numbered list",
        "Three steps:\n\n1. Decision: the connectors end.\n"
        "2. Jonas calls the customers.\n3. Marta writes the FAQ.",
        "Three steps:\n\n1. Jonas calls the customers.\n2. Marta writes the FAQ.",
    ),
    (
        "a decision between paragraphs two blank lines apart",
        "Marta is right.\n\n\nDecision: the connectors end.\n\n\nJonas will own the calls.",
        "Marta is right.\n\n\nJonas will own the calls.",
    ),
]


def letters_file() -> str:
    sections = ["## I — An opening letter\n\n*Dana Okafor · 2026-03-01*\n\nWe should end the on-prem tail.\n"]
    for n, (title, governed, plain) in enumerate(TWINS):
        for kind, body in (("governed", governed), ("plain", plain)):
            number = 2 * n + 2 + (kind == "plain")
            sections.append(f"## {number} — {title}, {kind}\n\n*Priya Raman · 2026-03-02*\n\n{body}\n")
    return f"# Twin letters\n\n*Access: {ACCESS}*\n\n---\n\n" + "\n---\n\n".join(sections)


@pytest.fixture(scope="module")
def twins(driver: Driver, embedder: Embedder, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Driver]:
    with synced_letters(driver, embedder, tmp_path_factory, letters_file(), "rt-twin-letters") as synced:
        yield synced


TAIL = "{ correspondenceTail(n: 50) { id title body } }"
NODE = "query($i: ID!) { node(id: $i) { fields } }"


@pytest.mark.usefixtures("twins")
@pytest.mark.parametrize("title", [t for t, _, _ in TWINS])
def test_a_stripped_letter_reads_as_its_twin_written_without_the_hidden_lines(
    client: TestClient, registry: PolicyRegistry, title: str
) -> None:
    seen = {s["title"]: s for s in data_as(client, registry, "external", TAIL)["correspondenceTail"]}
    governed, plain = seen[f"{title}, governed"], seen[f"{title}, plain"]
    assert governed["body"] == plain["body"], governed["body"]
    node = data_as(client, registry, "external", NODE, i=governed["id"])["node"]["fields"]
    assert node["body"] == plain["body"]


@pytest.mark.usefixtures("twins")
def test_a_role_that_sees_the_fields_reads_the_letter_as_written(
    client: TestClient, registry: PolicyRegistry
) -> None:
    seen = {s["title"]: s["body"] for s in data_as(client, registry, "exec", TAIL)["correspondenceTail"]}
    for title, governed, _ in TWINS:
        assert seen[f"{title}, governed"] == governed
