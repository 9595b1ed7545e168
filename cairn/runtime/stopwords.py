"""Stop-word lists: words that say nothing about what a question or fact is about.

One module for every such list, so the fact search (``cairn.memory.dossiers.facts``) and the
factor router (``cairn.memory.factors.router``) share the function words they have in common
and each keeps only its own additions here. Lower-case; matched against lower-cased words.
"""

from __future__ import annotations

# Function words: they carry no topic.
FUNCTION_WORDS = frozenset(
    [
        "a", "about", "an", "and", "any", "as", "at", "be", "been", "being", "by", "for", "from", "i",
        "in", "it", "its", "me", "my", "of", "on", "or", "our", "some", "than", "that", "the", "their",
        "them", "then", "there", "these", "they", "this", "to", "us", "we", "with", "you", "your",
    ]
)  # fmt: skip

# Words that make a question a question: they say what kind of answer is wanted, not what it
# is about (fact search leaves them out of its full-text query and its content words).
QUESTION_WORDS = frozenset(
    [
        "are", "can", "could", "did", "do", "does", "done", "ever", "had", "has", "have", "how", "is",
        "may", "might", "shall", "should", "was", "were", "what", "when", "where", "which", "who",
        "whom", "whose", "why", "will", "would",
    ]
)  # fmt: skip

# Fact search's function words (``facts.content_words``): pronouns and connectives as well.
FACT_STOP_WORDS = FUNCTION_WORDS | frozenset(
    ["also", "both", "but", "he", "her", "here", "his", "into", "other", "others", "she", "those"]
)

# The factor router's stop words (``router.residual``): also question, request and filler
# words, so what is left of a question names the entity it asks about.
ROUTER_STOP_WORDS = FUNCTION_WORDS | frozenset(
    [
        "anything", "are", "become", "becomes", "can", "can't", "cannot", "could", "did", "do", "does",
        "doing", "don't", "get", "go", "goes", "going", "had", "happen", "happened", "happens", "has",
        "have", "how", "if", "is", "isn't", "just", "let's", "more", "most", "now", "off", "only",
        "ours", "please", "possible", "really", "right", "show", "so", "something", "still", "table",
        "tell", "thing", "things", "think", "too", "very", "was", "were", "what", "what's", "when",
        "where", "which", "who", "why", "will", "would", "yet",
    ]
)  # fmt: skip

# Lucene's english analyzer's stop words: it drops them, so a full-text query of one alone finds nothing.
LUCENE_STOP_WORDS = frozenset(
    [
        "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it",
        "no", "not", "of", "on", "or", "such", "that", "the", "their", "then", "there", "these", "they",
        "this", "to", "was", "will", "with",
    ]
)  # fmt: skip
