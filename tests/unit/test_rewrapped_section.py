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


def test_the_wrap_is_the_widest_line_shown_as_written() -> None:
    """Or ``WRAP`` where the lines shown as written are only a sign-off."""
    body = "Marta is right about the tail, and so is Dana.\n\n" + SHOWN.format(hidden=HIDDEN[0])
    assert stripped(body) == (
        "Marta is right about the tail, and so is Dana.\n\n"
        "Jonas will own the calls. One stack is cheaper\n"
        "than two, and the second never gets cheaper."
    )
    assert stripped("Ok.\n\n" + SHOWN.format(hidden=HIDDEN[0])) == (
        "Ok.\n\nJonas will own the calls. One stack is cheaper than two, and the second\nnever gets cheaper."
    )
