"""KnownIds.scrub looks visible ids up by word instead of testing every id against every text;
the result must be what testing every id gives (the templater's answers must not change)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from cairn.memory.templater import KnownIds, scrub_ids

ID_CHARS = st.sampled_from([*"abcgXYZ0129-_.[] ", "ß", "É", "é", "İ"])
IDS = st.lists(st.lists(ID_CHARS, min_size=1, max_size=8).map("".join), max_size=8)


def every_id(hidden: list[str], visible: list[str], text: str) -> str:
    """The behaviour being kept: every visible id whose case-folded form occurs in the text."""
    shown = set(visible)
    folded = text.casefold()
    present = [i for i in sorted(shown) if i and i.casefold() in folded]
    return scrub_ids(text, [*(set(hidden) - shown), *present])


@settings(max_examples=400, deadline=None)
@given(IDS, IDS, st.data())
def test_lookup_by_word_scrubs_as_testing_every_id(
    hidden: list[str], visible: list[str], data: st.DataObject
) -> None:
    pieces = st.one_of(ID_CHARS, st.sampled_from([*visible, *hidden, " ", "-", "x"]))
    text = "".join(data.draw(st.lists(pieces, max_size=20)))
    assert KnownIds.of(hidden, visible).scrub(text) == every_id(hidden, visible, text)


def test_ids_in_words_and_glued_ids() -> None:
    known = KnownIds.of(["secret-1"], ["g208", "acme-x", "-odd-", "g2"])
    text = "G208 and g2089 and (acme-X) and acme-x-2 and x-odd-y and secret-1 and g2"
    assert known.scrub(text) == every_id(["secret-1"], ["g208", "acme-x", "-odd-", "g2"], text)
    assert "[redacted]" in known.scrub("see g208.")
