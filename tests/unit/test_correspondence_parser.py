"""The correspondence parser on hand-written files: tolerant of what authors write, never silent.

No Neo4j needed: these pin the reading rules that the sync and the queries rely on.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cairn.ingest.correspondence.parser import (
    DEFAULT_ACCESS,
    CorrespondenceError,
    ParsedFile,
    number_value,
    parse_bytes,
)
from cairn.ingest.correspondence.sync import classify
from cairn.runtime.settings import REPO_ROOT
from cairn.schema.section_text import embeddable_text

FIXTURE = REPO_ROOT / "fixtures" / "correspondence" / "acme-letters.md"


def parse(text: str) -> ParsedFile:
    return parse_bytes(text.encode("utf-8"), "test.md")


def refused(data: bytes) -> CorrespondenceError:
    with pytest.raises(CorrespondenceError) as info:
        parse_bytes(data, "bad.md")
    return info.value


TWO = """# Letters

## I — First

*Ana Ortiz · 2026-01-02*

Hello.

## II — Second

*Ben Ngata · 2026-01-03*

Re: § I. Hi back.
"""


# --- headings ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("heading", "filed", "value", "title"),
    [
        ("## LXVI — Reservoirs", "LXVI", 66, "Reservoirs"),
        ("## LXVI – Reservoirs", "LXVI", 66, "Reservoirs"),
        ("## LXVI: Reservoirs", "LXVI", 66, "Reservoirs"),
        ("## LXVI. Reservoirs", "LXVI", 66, "Reservoirs"),
        ("## LXVI Reservoirs", "LXVI", 66, "Reservoirs"),
        ("## LXVI—Reservoirs", "LXVI", 66, "Reservoirs"),
        ("## 66 — Reservoirs", "66", 66, "Reservoirs"),
        ("## 66) Reservoirs", "66", 66, "Reservoirs"),
        ("## § 66 - Reservoirs", "66", 66, "Reservoirs"),
        ("## Section LXVI — Reservoirs", "LXVI", 66, "Reservoirs"),
        ("## XLIV — Title with — dashes", "XLIV", 44, "Title with — dashes"),
    ],
)
def test_heading_variants_are_read(heading: str, filed: str, value: int, title: str) -> None:
    text = f"## I — Start\n\n*Ana · 2026-01-01*\n\nBody.\n\n{heading}\n\n*Ben · 2026-01-02*\n\nMore.\n"
    second = parse(text).sections[1]
    assert (second.filed_id, second.filed_number, second.title) == (filed, value, title)


def test_words_that_start_with_numeral_letters_are_not_sections() -> None:
    pf = parse(TWO + "\n## Did we agree?\n\nYes.\n")
    assert len(pf.sections) == 2
    assert "Did we agree?" in pf.sections[1].body
    assert any("has no section number" in w.message and w.line == 15 for w in pf.warnings)


def test_deeper_numbered_headings_are_body_and_code_fences_are_ignored() -> None:
    text = TWO.replace(
        "Hello.", "Hello.\n\n### 1. Background\n\nDetails.\n\n```\n## III — not a section\n```\n"
    )
    pf = parse(text)
    assert [s.filed_id for s in pf.sections] == ["I", "II"]
    assert "### 1. Background" in pf.sections[0].body
    assert "## III — not a section" in pf.sections[0].body


def test_roman_heading_at_another_level_is_reported() -> None:
    pf = parse(TWO + "\n### III — Filed one level too deep\n\nText.\n")
    assert len(pf.sections) == 2
    assert any("level-3 heading" in w.message for w in pf.warnings)


def test_malformed_roman_number_is_read_and_reported() -> None:
    pf = parse(TWO + "\n## IIII — Four, badly\n\n*Cy · 2026-01-04*\n\nText.\n")
    assert pf.sections[2].filed_number == 4
    assert any("not a well-formed section number" in w.message for w in pf.warnings)


def test_number_values() -> None:
    assert number_value("MCMXCIV") == (1994, True)
    assert number_value("XLII") == (42, True)
    assert number_value("12") == (12, True)
    assert number_value("VX") == (5, False)


# --- attribution ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "author", "date", "external"),
    [
        ("*Dana Okafor, Founder & CEO · 2026-01-05*", "Dana Okafor", "2026-01-05", False),
        ("**Author:** Priya Raman (CTO) — 2026-01-06", "Priya Raman", "2026-01-06", False),
        ("*— Atlas (AI assistant), 6 January 2026*", "Atlas", "2026-01-06", False),
        ("*From: Marta Reyes (external advisor) · 2026-01-08*", "Marta Reyes", "2026-01-08", True),
        ("*By Jonas Weber, Head of EMEA, 12 January 2026*", "Jonas Weber", "2026-01-12", False),
        ("*From: Marta Reyes · March 10, 2026*", "Marta Reyes", "2026-03-10", False),
        ("Author: c_lawd", "c_lawd", None, False),
        ("*Author: Grok · Date: 2026-02-23*", "Grok", "2026-02-23", False),
    ],
)
def test_attribution_variants(line: str, author: str, date: str | None, external: bool) -> None:
    s = parse(f"## I — T\n\n{line}\n\nThe body.\n").sections[0]
    assert (s.author, s.date, s.is_external_caller) == (author, date, external)
    assert s.body == "The body."


def test_missing_attribution_and_missing_date_are_warnings_with_lines() -> None:
    pf = parse("## I — T\n\nJust a body, no author.\n\n## II — U\n\nAuthor: Kim\n\nText.\n")
    first, second = pf.sections
    assert first.author == "unknown"
    assert first.body == "Just a body, no author."
    assert second.author == "Kim" and second.date is None
    assert [(w.line, "no author" in w.message or "no date" in w.message) for w in pf.warnings] == [
        (1, True),
        (7, True),
    ]


def test_impossible_date_is_reported_not_guessed() -> None:
    pf = parse("## I — T\n\n*Ana · 2026-02-30*\n\nText.\n")
    assert pf.sections[0].date is None
    assert any("not a real calendar date" in w.message for w in pf.warnings)


def test_preamble_external_list_marks_external_callers() -> None:
    pf = parse("*External: Grok, Gemini*\n\n## I — T\n\n*Grok · 2026-01-01*\n\nText.\n")
    assert pf.sections[0].is_external_caller


# --- structured fields ----------------------------------------------------------------------

RICH = """## V — Sunsetting

*Dana · 2026-01-10*

Re: § IV. We have known it for two years; see `knowledge/platform/retro.md`.

[EXEC:GOV] Decision: connectors reach end of support on 2026-12-31; no new
contracts are signed from today.

- [EXEC:MICRO] Jonas owns the EMEA conversations.

We still hold the reservoir question open. *Status: EXPERIMENT PENDING — two pilots*

*Status: DECIDED; GOVERNANCE RULE CANDIDATE — see below*
"""


def test_exec_tags_decisions_status_and_references_are_structured() -> None:
    pf = parse("## IV — Before\n\n*Marta · 2026-01-08*\n\nAdvice.\n\n" + RICH)
    s = pf.sections[1]
    assert s.exec_tags == ("EXEC:GOV", "EXEC:MICRO")
    assert s.exec_decisions == (
        "connectors reach end of support on 2026-12-31; no new contracts are signed from today.",
        "Jonas owns the EMEA conversations.",
    )
    assert s.status_tags == ("EXPERIMENT PENDING", "DECIDED", "GOVERNANCE RULE CANDIDATE")
    assert s.references == ("IV",)
    assert s.responds_to == (1,)
    assert s.knowledge_refs == ("knowledge/platform/retro.md",)


def test_embedded_text_leaves_out_tags_and_decisions_but_body_keeps_them() -> None:
    s = parse(RICH).sections[0]
    text = s.embed_text
    assert text.startswith("Sunsetting\n")
    # the sentence that holds the knowledge path goes with it, as the mask shows it (pass 17)
    assert "We have known it" not in text and "reservoir question" in text
    for absent in ("EXEC", "end of support", "Jonas owns", "Status", "DECIDED", "PENDING"):
        assert absent not in text
    assert "[EXEC:GOV] Decision:" in s.body and "*Status: DECIDED" in s.body
    assert embeddable_text(s.title, s.body) == text


def test_references_resolve_to_the_latest_earlier_section_with_that_number() -> None:
    text = (
        "## I — A\n\n*X · 2026-01-01*\n\nOne.\n\n"
        "## II — B\n\n*Y · 2026-01-02*\n\nTwo.\n\n"
        "## II — C\n\n*Z · 2026-01-03*\n\nAlso two.\n\n"
        "## IV — D\n\n*X · 2026-01-04*\n\nRe: § II, and § I, and § IX.\n"
    )
    pf = parse(text)
    assert pf.sections[3].responds_to == (3, 1)
    assert any("cites § IX" in w.message for w in pf.warnings)


def test_re_without_section_sign_needs_punctuation_after_the_number() -> None:
    pf = parse("## I — A\n\n*X · 2026-01-01*\n\nOne.\n\n## II — B\n\n*Y · 2026-01-02*\n\nRe: I think so.\n")
    assert pf.sections[1].references == ()
    pf = parse("## I — A\n\n*X · 2026-01-01*\n\nOne.\n\n## II — B\n\n*Y · 2026-01-02*\n\nRe: I — yes.\n")
    assert pf.sections[1].responds_to == (1,)


# --- access ---------------------------------------------------------------------------------


def test_access_defaults_preamble_and_section_override() -> None:
    assert parse(TWO).sections[0].access == DEFAULT_ACCESS
    text = (
        "*Access: namespaces=internal,public; roles=staff,external*\n\n"
        "## I — Open\n\n*A · 2026-01-01*\n\nText.\n\n"
        "## II — Closed\n\n*B · 2026-01-02*\n\n"
        "*Access: sensitivity=high; namespaces=confidential*\n\nSecret.\n"
    )
    parsed = parse(text)
    assert parsed.defaults.namespaces == ("internal", "public")
    first, second = parsed.sections
    assert first.access.namespaces == ("internal", "public")
    assert first.access.roles_allowed == ("staff", "external")
    assert (second.access.sensitivity, second.access.namespaces) == ("high", ("confidential",))
    assert second.access.roles_allowed == ("staff", "external")  # not overridden: file default
    assert "Access" not in second.embed_text


@pytest.mark.parametrize(
    "line",
    [
        "*Access: sensitivity=secret*",
        "*Access: colour=blue*",
        "*Access: namespaces=*",
        "*Access: roles=Staff Members*",
        "*Access: domain=ACME//x*",
    ],
)
def test_malformed_access_line_is_fatal(line: str) -> None:
    err = refused(f"## I — T\n\n*A · 2026-01-01*\n\n{line}\n\nText.\n".encode())
    assert err.problems[0].line == 5


# --- refusals -------------------------------------------------------------------------------


def test_binary_file_is_refused() -> None:
    err = refused(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    assert "binary" in str(err)


def test_non_utf8_file_is_refused() -> None:
    err = refused("## I - Café\n\n*A, 2026-01-01*\n\nThé.\n".encode("latin-1"))
    assert "not UTF-8" in str(err)


@pytest.mark.parametrize("text", ["", "# Just a title\n\nSome prose, no numbered sections.\n"])
def test_file_without_sections_is_refused(text: str) -> None:
    assert "no numbered sections" in str(refused(text.encode()))


def test_heading_without_body_is_refused_with_its_line() -> None:
    err = refused((TWO + "\n---\n\n## III — Empty\n\n*Cy · 2026-01-04*\n\n---\n").encode())
    assert [(p.line, "no body" in p.message) for p in err.problems] == [(17, True)]


# --- the fixture ----------------------------------------------------------------------------


def test_the_sample_correspondence() -> None:
    pf = parse_bytes(FIXTURE.read_bytes(), str(FIXTURE))
    sections = pf.sections
    assert len(sections) >= 40
    authors = {s.author for s in sections}
    assert {"Dana Okafor", "Priya Raman", "Marta Reyes", "Atlas", "Jonas Weber"} <= authors
    assert {s.author for s in sections if s.is_external_caller} == {"Marta Reyes"}
    filed = [s.filed_number for s in sections]
    assert len(filed) != len(set(filed))  # a duplicate filed number
    assert any(b - a > 1 for a, b in itertools.pairwise(filed))  # a skip
    assert sum(1 for i, s in enumerate(sections, 1) if s.filed_number != i) == 3
    assert sum(1 for s in sections if "EXEC:GOV" in s.exec_tags) >= 5
    assert sum(1 for s in sections if s.exec_decisions) >= 10
    assert sum(1 for s in sections if s.responds_to) >= 25
    restricted = [
        s for s in sections if s.access.sensitivity != "low" or "staff" not in s.access.roles_allowed
    ]
    assert len(restricted) >= 3
    assert [str(w) for w in pf.warnings] == ["line 426: section by Marta Reyes has no date"]


# --- classification (pure part of the sync) ------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 6), st.integers(0, 4), st.sets(st.integers(1, 6)))
def test_classify_unchanged_new_and_edited(stored_n: int, appended: int, edited: set[int]) -> None:
    body = "".join(
        f"## {i} — T{i}\n\n*A · 2026-01-01*\n\nText {i}.\n\n" for i in range(1, stored_n + appended + 1)
    )
    if stored_n + appended == 0:
        return
    pf = parse(body)
    stored = {
        s.ordinal: {
            "hash": s.content_hash if s.ordinal not in edited else "other",
            "filed_id": s.filed_id,
            "domain": s.access.domain,
            "sensitivity": s.access.sensitivity,
            "namespaces": list(s.access.namespaces),
            "roles_allowed": list(s.access.roles_allowed),
        }
        for s in pf.sections[:stored_n]
    }
    unchanged, fresh, conflicts = classify(pf.sections, stored)
    edited_stored = {e for e in edited if e <= stored_n}
    assert unchanged == stored_n - len(edited_stored)
    assert [s.ordinal for s in fresh] == list(range(stored_n + 1, stored_n + appended + 1))
    assert {c.ordinal for c in conflicts if c.kind == "edited"} == edited_stored
