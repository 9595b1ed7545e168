"""Token counts: the fast path for simple text must give exactly the tokenizer's own count.

The gate's arithmetic is recorded in every trace, so a count that drifted from the tokenizer
would change what an answer includes. Every text here is counted both ways: through
``count_tokens`` / ``count_tokens_each`` and through the packaged tokenizer's whole pipeline.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from cairn.runtime import tokens
from cairn.runtime.tokens import count_tokens, count_tokens_each


def pipeline(text: str) -> int:
    return len(tokens._tokenizer().encode(text, add_special_tokens=False).ids)


EXAMPLES = [
    "",
    " ",
    "hello world",
    "decision CTO on 2023-04-12: Decision 12 on platform item 443 [g12]. Rationale: because 12.",
    "cause (replaces and requires): Unify cloud platform [acme-corp-unify-cloud-platform-2022] (2022-03-01)",
    "context: Event 7 observed in segment 3 [g7] (2024-05-17)",
    "Don't re-platform: cost/benefit < 0.5 (~$1.2M); see #42 & @ops_team {q3} |x| `code` ^ \\ ;",
    "tabs\tand\nnew\rlines   many   spaces",
    "UPPER Case MiXeD Words",
    "x" * 99,
    "x" * 100,
    "y" * 101 + " after",
    "supercalifragilisticexpialidocious antidisestablishmentarianism",
    "[MASK] the [cls] token [SEP] and [unk] or [Pad]",
    "[g12] [not-special] [MASKED]",
    "Café résumé naïve",
    "東京 office 2024",
    "emoji 🚀 launch",
    "control \x00 char \x0b and \x0c form",
    "non-breaking\u00a0space and en–dash",
]


def test_simple_and_unusual_texts_count_as_the_tokenizer_counts() -> None:
    assert count_tokens_each(EXAMPLES) == [pipeline(t) for t in EXAMPLES]
    assert [count_tokens(t) for t in EXAMPLES] == [pipeline(t) for t in EXAMPLES]


def test_the_fast_path_is_taken_for_plain_lines_and_not_for_special_tokens() -> None:
    assert tokens._simple_count("context: Event 7 [g7] (2024-05-17)") is not None
    assert tokens._simple_count("the [MASK] token") is None
    assert tokens._simple_count("the [mask] token") is None
    assert tokens._simple_count("Café") is None


ASCII = st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=127), max_size=80)
PIECES = st.one_of(
    st.characters(min_codepoint=32, max_codepoint=126),
    st.sampled_from(["\t", "\n", "\r", "\x0b", "é", "ß", "İ", "東", "\u00a0", "\u200b", "🚀", "\ufffd"]),
    st.sampled_from(["[MASK]", "[SEP]", "[cls]", "[g1]", "##ing", "unaffable", " word "]),
)
MIXED = st.lists(PIECES, max_size=30).map("".join)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(ASCII, MIXED), max_size=6))
def test_any_text_counts_as_the_tokenizer_counts(texts: list[str]) -> None:
    assert count_tokens_each(texts) == [pipeline(t) for t in texts]
