"""A paragraph the section strip re-wraps is wrapped at a width its reader can see (review 35).

When a hidden knowledge or section reference takes its sentence with it, the paragraph is wrapped
again (cairn/schema/section_text.py ``_without_inline``). The width was the widest line of the
letter that held no reference, and at least the paragraph's own lines with the reference cut out:
both counted lines whose text was the hidden sentence's, so where the shown paragraph broke told
how long that sentence was. Two letters that differ only in what the mask strips must read alike.
"""

from __future__ import annotations

import pytest

from cairn.schema.section_text import without_governance

REF = "`knowledge/platform/retro.md`"
SHOWN = (
    "Jonas will own the calls. {hidden} One\nstack is cheaper than two, and the second never gets cheaper."
)
# The same hidden sentence at three lengths: on one line, on a line of its own text, and long.
HIDDEN = [
    f"The retro is in {REF}.",
    f"The retro is in {REF} and it\nexplains why the tail costs us two engineers every single year.",
    f"The retro is in {REF} and it explains why.",
]


def stripped(body: str) -> str:
    return without_governance(body, tags=True, decisions=True, refs=True, access=True, responses=True)


@pytest.mark.parametrize("opening", ["Marta is right about the tail, and so is Dana.\n\n", ""])
def test_the_wrap_does_not_tell_the_hidden_sentences_length(opening: str) -> None:
    shown = {stripped(opening + SHOWN.format(hidden=hidden)) for hidden in HIDDEN}
    assert len(shown) == 1, shown


def read(body: str) -> str:
    """The body as a reader whose rule hides every governed part reads it (the policy mask)."""
    return without_governance(
        body, tags=True, decisions=True, refs=True, access=True, responses=True, reflow=True
    )


def test_a_paragraph_that_lost_a_sentence_is_wrapped_at_one_width() -> None:
    """``WRAP``, whatever the letter's other lines are (red-team pass 18: the widest line left as
    written, else 72, told which letters had lost something, their authors wrapping wider)."""
    body = "Marta is right about the tail, and so is Dana.\n\n" + SHOWN.format(hidden=HIDDEN[0])
    assert stripped(body) == (
        "Marta is right about the tail, and so is Dana.\n\n"
        "Jonas will own the calls. One stack is cheaper than two, and the second\n"
        "never gets cheaper."
    )
    assert stripped("Ok.\n\n" + SHOWN.format(hidden=HIDDEN[0])) == (
        "Ok.\n\nJonas will own the calls. One stack is cheaper than two, and the second\nnever gets cheaper."
    )


@pytest.mark.parametrize(
    "plain",
    [
        # the shown paragraph as written at three widths, and on one line
        "Marta is right about the tail, and so is Dana. We have known it for two years, since the\n"
        "first bank asked.",
        "Marta is right about the tail, and so is Dana. We have\n"
        "known it for two years, since the first bank asked.",
        "Marta is right about the tail, and so is Dana. We have known it for two years, since the "
        "first bank asked.",
    ],
)
@pytest.mark.parametrize("hidden", ["", "Re: § IV. ", "See `knowledge/platform/retro.md`. "])
def test_a_reader_of_stripped_letters_reads_every_paragraph_at_one_width(plain: str, hidden: str) -> None:
    """Where a reference may be cut out, every paragraph is wrapped again (``reflow``): one that
    lost nothing, and a one-line one, too, so the authors' own line breaks, wider or narrower than
    the width a paragraph that lost one is wrapped at, do not tell it from the others."""
    body = hidden + plain + "\n\n*Status: OPEN*"
    assert read(body) == (
        "Marta is right about the tail, and so is Dana. We have known it for two\n"
        "years, since the first bank asked.\n\n*Status: OPEN*"
    )


def test_lists_quotes_and_code_are_wrapped_by_their_items() -> None:
    body = (
        "Dana wrote:\n\n> One stack is cheaper than two, and the second never gets cheaper, not in\n"
        "> any year we looked at.\n\n"
        "- Jonas calls the eleven customers before the announcement goes out to the press.\n"
        "\n```\nkeep   this    line as it is, however long it is, it is code and not prose at all\n```"
    )
    assert read(body) == (
        "Dana wrote:\n\n> One stack is cheaper than two, and the second never gets cheaper, not\n"
        "> in any year we looked at.\n\n"
        "- Jonas calls the eleven customers before the announcement goes out to\n"
        "  the press.\n"
        "\n```\nkeep   this    line as it is, however long it is, it is code and not prose at all\n```"
    )


CODE = "```python\nx = 1\n\ny = load({ref})  # the plan\nz = y\n```"


@pytest.mark.parametrize("lead", ["", "The loader reads it so:\n"])
def test_a_reference_in_fenced_code_takes_its_line_not_the_fence(lead: str) -> None:
    """Code is not prose (review 36): a hidden reference inside a fence took the paragraph it
    stood in, closing fence and all, as if it were a sentence, so the rest of the letter read as
    code, which only a letter that lost something did; and a line of prose touching a fence was
    wrapped only where the paragraph lost one. The code line that holds the reference goes (a
    code line is its sentence), the fences stay, and prose beside a fence is wrapped as any."""
    after = "\n\nThe second stack never gets cheaper, whichever year we look at it, and we looked."
    shown = read(lead + CODE.format(ref='"plan.txt"') + after)
    assert shown == read(lead + CODE.replace("y = load({ref})  # the plan\n", "") + after)
    assert shown == (
        lead
        + "```python\nx = 1\n\nz = y\n```\n\n"
        + "The second stack never gets cheaper, whichever year we look at it, and\nwe looked."
    )
    plain = read(lead + CODE.format(ref="'other'")).replace("y = load('other')  # the plan\n", "")
    assert read(lead + CODE.format(ref="`knowledge/x.md`")) == plain


def test_a_reference_in_a_table_takes_its_row() -> None:
    """A table row is not prose either (review 36): a hidden reference cut out of a cell's second
    sentence left the row as ``| Done.``, its later cells and closing pipe gone, which only a letter
    that lost something showed. The row goes whole, as the table written without it."""
    table = "| step | who |\n|---|---|\n{row}| Next | Jonas |\n\nAfter."
    assert read(table.format(row="| Done. See `plan.md` | Dana |\n")) == read(table.format(row=""))
