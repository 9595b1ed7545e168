"""Which facts are the same fact: close in meaning AND equal in every detail that can differ.

An embedding barely moves when a name, a date or a number changes: "Sam plans a painting
session with Evan" and "Evan plans a painting session with Sam" are at cosine 0.995, "went
camping last week" and "last year" not much lower. Cosine alone (>= 0.92) therefore dropped
real facts as duplicates. A fact is a duplicate of another only when the cosine is at least
``DEDUP_COSINE`` and both carry the same *details*, in the same order: the capitalised words
(names, places, months, days), the numbers (digits or number words) and the relative time
words. Order counts because it carries roles (who plans a session with whom). Same text is
always a duplicate.

The skipped fact is not lost: its turn and block ids are added to the surviving fact's
``source_turn_ids`` / ``source_block_ids`` (see governor), so every source is still reachable.
"""

from __future__ import annotations

import re

DEDUP_COSINE = 0.92  # at or above this (and with equal details) a fact restates another

_TOKEN = re.compile(r"[A-Za-z][A-Za-z'’-]*|\d+(?:[.,:/]\d+)*")
# Capitalised only because they open the sentence (or stand for the user / a pronoun).
_SENTENCE_WORDS = frozenset(
    [
        "a",
        "an",
        "the",
        "this",
        "that",
        "these",
        "those",
        "it",
        "its",
        "he",
        "she",
        "they",
        "we",
        "i",
        "you",
        "his",
        "her",
        "their",
        "our",
        "my",
        "your",
        "there",
        "here",
        "user",
        "users",
        "when",
        "after",
        "before",
        "while",
        "if",
    ]
)
_NUMBER_WORDS = frozenset(
    [
        "zero",
        "one",
        "two",
        "three",
        "four",
        "five",
        "six",
        "seven",
        "eight",
        "nine",
        "ten",
        "eleven",
        "twelve",
        "thirteen",
        "fourteen",
        "fifteen",
        "sixteen",
        "seventeen",
        "eighteen",
        "nineteen",
        "twenty",
        "thirty",
        "forty",
        "fifty",
        "sixty",
        "seventy",
        "eighty",
        "ninety",
        "hundred",
        "thousand",
        "million",
        "billion",
        "first",
        "second",
        "third",
        "fourth",
        "fifth",
        "sixth",
        "seventh",
        "eighth",
        "ninth",
        "tenth",
        "once",
        "twice",
        "half",
        "dozen",
    ]
)
_TIME_WORDS = frozenset(
    [
        "yesterday",
        "today",
        "tonight",
        "tomorrow",
        "last",
        "next",
        "ago",
        "recently",
        "soon",
        "earlier",
        "later",
        "week",
        "weeks",
        "weekend",
        "month",
        "months",
        "year",
        "years",
        "day",
        "days",
        "morning",
        "afternoon",
        "evening",
        "night",
        "spring",
        "summer",
        "autumn",
        "fall",
        "winter",
    ]
)


def details(text: str) -> tuple[str, ...]:
    """The names, numbers and dates of ``text``, in order, lower-cased."""
    out = []
    for n, token in enumerate(_TOKEN.findall(text)):
        word = token.lower()
        if (
            token[0].isdigit()
            or word in _NUMBER_WORDS
            or word in _TIME_WORDS
            or (token[0].isupper() and not (word in _SENTENCE_WORDS and (n == 0 or word in ("i", "user"))))
        ):
            out.append(word)
    return tuple(out)


def same_fact(a: str, b: str, cosine: float) -> bool:
    """Whether ``b`` restates ``a`` (see the module docstring)."""
    if " ".join(a.split()).casefold() == " ".join(b.split()).casefold():
        return True
    return cosine >= DEDUP_COSINE and details(a) == details(b)
