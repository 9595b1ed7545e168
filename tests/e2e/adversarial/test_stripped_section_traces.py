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
closed up). A reference inside a sentence (``see § III for``) left its sentence visibly short;
since pass 17 the sentence (or a parenthesis of references alone) goes with it and the paragraph is
wrapped again.

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
        # the colon's sentence holds the reference (pass 17: its twin is not a dangling colon)
        "One stack is cheaper.",
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
    # Red-team pass 17: a quoted decision that ended its quote left the quote's empty `>` line
    # before the next paragraph; a reference alone on a quoted line left two `>` lines.
    (
        "a decision that ends a block quote",
        "Dana wrote:\n\n> The tail costs two engineers.\n>\n> Decision: the connectors end.\n\n"
        "Jonas will own the calls.",
        "Dana wrote:\n\n> The tail costs two engineers.\n\nJonas will own the calls.",
    ),
    (
        "a reference alone inside a block quote",
        "Dana wrote:\n\n> One stack is cheaper.\n>\n> `knowledge/platform/retro.md`\n>\n> Two never are.",
        "Dana wrote:\n\n> One stack is cheaper.\n>\n> Two never are.",
    ),
    # A reference inside a sentence: cut out alone, it left `is in .`, `()` or `Comparison:\n.` (7
    # of the demo letters external reads); now the sentence or the parenthesis goes, and the
    # paragraph is wrapped again at the letter's width, as its twin was written.
    (
        "a knowledge reference inside a sentence",
        "One stack is cheaper than two, and the second never gets cheaper.\n\n"
        "The retrospective is in `knowledge/platform/retro.md`. The short\nversion: one stack is cheaper.",
        "One stack is cheaper than two, and the second never gets cheaper.\n\n"
        "The short version: one stack is cheaper.",
    ),
    (
        "references in parentheses",
        "We priced the assistant for a year and the numbers hold up in every region.\n\n"
        "Our capacity plan (`knowledge/platform/gpu-plan.md`) assumes list prices, and\n"
        "the questions raised (§ I, § II) stay open for the next quarter.",
        "We priced the assistant for a year and the numbers hold up in every region.\n\n"
        "Our capacity plan assumes list prices, and the questions raised stay open\n"
        "for the next quarter.",
    ),
    (
        "a paragraph that only points to a file",
        "Numbers from the beta are good.\n\nThe details are in `knowledge/assistant/beta.md`.",
        "Numbers from the beta are good.",
    ),
    # Review 35: a sentence that ran over a quoted paragraph's or a list item's lines left its
    # first part (`The details are in`) where the reference's line lost its sentence.
    (
        "a sentence that runs over two quoted lines",
        "Dana wrote:\n\n> One stack is cheaper. The details are in\n> `knowledge/platform/retro.md`. "
        "Two never are.\n\nJonas will own the calls.",
        "Dana wrote:\n\n> One stack is cheaper. Two never are.\n\nJonas will own the calls.",
    ),
    (
        "a sentence that runs over a list item's lines",
        "Steps:\n\n1. One stack is cheaper. The details are in\n   `knowledge/platform/retro.md`. "
        "Two never are.\n2. Jonas calls.",
        "Steps:\n\n1. One stack is cheaper. Two never are.\n2. Jonas calls.",
    ),
    (
        # wrapped again at one width: the opener's own line would tell its length
        "a hard-wrapped reply",
        "Re: § I. Marta is right and we have known it for two\n"
        "years, since the first bank asked. See § II.\n\n"
        "Jonas will own the calls with the eleven customers.",
        "Marta is right and we have known it for two years,\nsince the first bank asked.\n\n"
        "Jonas will own the calls with the eleven customers.",
    ),
    # Red-team pass 18: a paragraph that lost a reference was wrapped at the widest line left as
    # written, or at 72 where none was 40 wide: a reply of one paragraph read 72 wide (its twin, as
    # its author wrote it, 87), one with a status line read as wide as the status line, and a
    # one-line paragraph stayed one line where its author wraps narrower. 20 of the 39 demo letters
    # external reads were narrower than any letter as written (79-91): every one of them had lost a
    # reply's opener, a reference or a decision. Now every paragraph is wrapped at one width.
    (
        "a reply of one paragraph",
        "Re: § I. Two regions meet the latency criterion, one does not: the Sydney region's\n"
        "95th percentile is 2.7 seconds, because inference for APAC tenants still runs in the US\n"
        "region. Moving it to Sydney would also speed up the Japanese pilot tenants.",
        "Two regions meet the latency criterion, one does not: the Sydney region's 95th\n"
        "percentile is 2.7 seconds, because inference for APAC tenants still runs in the US\n"
        "region. Moving it to Sydney would also speed up the Japanese pilot tenants.",
    ),
    (
        "a reply with a status line",
        "Re: § VI. An exception that costs us nothing will never end, so it has to cost the\n"
        "customer something.\n\n*Status: EXPERIMENT PENDING — pilot with three banks, review in March*",
        "An exception that costs us nothing will never end, so it has to cost the customer\n"
        "something.\n\n*Status: EXPERIMENT PENDING — pilot with three banks, review in March*",
    ),
    (
        "a one-line reply in a narrow letter",
        "Re: § I. We agree with the date, and we will say so in the announcement next week.\n\n"
        "Jonas will own the calls with the eleven\ncustomers in the first quarter.",
        "We agree with the date, and we will say so in the\nannouncement next week.\n\n"
        "Jonas will own the calls with the eleven\ncustomers in the first quarter.",
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
