"""Rules that keep answers inside the documents, whatever the model says.

A small model answers from its own memory when the passages do not hold the
answer, so "I don't know" is enforced by the tool: no model call when
retrieval found nothing close, and an answer whose content words and numbers
are not in the passages is withheld.
"""

from __future__ import annotations

import re
import unicodedata

_WORD = re.compile(r"[^\W_]+(?:[.,'’-][^\W_]+)*", re.UNICODE)
_STOP = frozenset(
    [
        "a",
        "an",
        "the",
        "of",
        "in",
        "on",
        "at",
        "to",
        "for",
        "from",
        "by",
        "with",
        "and",
        "or",
        "but",
        "not",
        "no",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "it",
        "its",
        "this",
        "that",
        "these",
        "those",
        "as",
        "into",
        "than",
        "then",
        "so",
        "if",
        "which",
        "who",
        "whom",
        "whose",
        "what",
        "when",
        "where",
        "why",
        "how",
        "he",
        "she",
        "they",
        "them",
        "his",
        "her",
        "their",
        "there",
        "here",
        "yes",
        "also",
        "about",
        "after",
        "before",
        "over",
        "under",
        "up",
        "down",
        "out",
        "one",
    ]
)


def _normalize(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).lower()
    return text.replace("’", "'")


def content_words(text: str) -> list[str]:
    """Words that carry the answer: no stop words, no citation numbers."""
    text = re.sub(r"\[\d+\]", " ", _normalize(text))
    return [w for w in _WORD.findall(text) if w not in _STOP]


def support(answer: str, passages: list[str]) -> float:
    """Share of the answer's content words found in the passages (1.0 if none)."""
    words = content_words(answer)
    if not words:
        return 1.0
    haystack = " ".join(_WORD.findall(_normalize(" ".join(passages))))
    vocab = set(haystack.split())
    found = 0
    for w in words:
        # Numbers must appear as they are; words may differ in inflection.
        if w in vocab or (
            not w[0].isdigit() and any(v.startswith(w[:5]) for v in vocab if len(w) > 5)
        ):
            found += 1
    numbers_ok = all(w in vocab or w in haystack for w in words if w[0].isdigit())
    return found / len(words) if numbers_ok else 0.0


# Sentences that speak to the model instead of about the subject: a document
# must not be able to change the rules ("ignore previous instructions ...").
_INSTRUCTION = re.compile(
    r"\b(ignore|disregard|forget|override)\b[^.!?\n]{0,40}\b(instructions?|rules?|prompts?|context)\b"
    r"|\b(system|assistant)\s*(prompt|message)?\s*:"
    r"|\byou\s+(are|must|should|will)\s+now\b"
    r"|\b(answer|reply|respond)\s+(every|all|any)\s+questions?\b",
    re.IGNORECASE,
)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def strip_instructions(text: str) -> str:
    """The passage without sentences that try to instruct the model."""
    if not _INSTRUCTION.search(text):
        return text
    kept = [s for s in _SENTENCE_END.split(text) if not _INSTRUCTION.search(s)]
    return " ".join(kept)
