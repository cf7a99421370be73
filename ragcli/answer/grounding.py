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
STOP = frozenset(
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


# A capitalized word not at the start of the text: a name, as a question gives it.
NAME = re.compile(r"(?<!^)\b[A-Z][\w'’-]*")
_POSSESSIVE = re.compile(r"['’]s$")


def names(text: str) -> set[str]:
    """The capitalized words of ``text`` after its first, lower case, without a final 's."""
    return {_POSSESSIVE.sub("", m.group(0).casefold()) for m in NAME.finditer(text.strip())}


def bare_words(text: str) -> set[str]:
    """:func:`content_words` without a final 's: "Ann's" is about "Ann"."""
    return {_POSSESSIVE.sub("", w) for w in content_words(text)}


def content_words(text: str) -> list[str]:
    """Words that carry the answer: no stop words, no citation numbers."""
    text = re.sub(r"\[\d+\]", " ", _normalize(text))
    return [w for w in _WORD.findall(text) if w not in STOP]


_NUMBER_WORDS = {
    w: str(i)
    for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
        "fifteen sixteen seventeen eighteen nineteen twenty".split()
    )
}
_NUMBER_WORDS.update({"thirty": "30", "forty": "40", "fifty": "50", "hundred": "100"})
MAX_COUNT = 20  # a count the model may derive from a list in the passages
_PARTS = re.compile(r"[a-z]+|[0-9]+")


def _parts(word: str) -> list[str]:
    """An identifier's parts: ExceptionGroup -> exception, group; add_note -> add, note."""
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", word)
    return _PARTS.findall(spaced.lower())


def vocabulary(passages: list[str]) -> set[str]:
    """Every word of the passages, numbers also spelled as digits, identifiers also by part."""
    text = unicodedata.normalize("NFKC", " ".join(passages)).replace("’", "'")
    vocab: set[str] = set()
    for raw in _WORD.findall(text):
        word = raw.lower()
        vocab.add(word)
        if word in _NUMBER_WORDS:
            vocab.add(_NUMBER_WORDS[word])
        vocab.update(_parts(raw))
    return vocab


def found_in(word: str, vocab: set[str]) -> bool:
    if word in vocab or _NUMBER_WORDS.get(word, "") in vocab:
        return True
    if word[0].isdigit():  # numbers must appear as they are
        return False
    # Words may differ in inflection; identifiers may be written as their parts.
    if len(word) > 5 and any(v.startswith(word[:5]) for v in vocab):
        return True
    parts = _parts(word)
    return len(parts) > 1 and all(p in vocab for p in parts)


def as_digits(word: str) -> str:
    """A number word in digits ("zero" -> "0"); any other word as it is."""
    return _NUMBER_WORDS.get(word.lower(), word)


def _is_count(word: str) -> bool:
    value = _NUMBER_WORDS.get(word, word)
    return value.isdigit() and int(value) <= MAX_COUNT


def support(answer: str, passages: list[str], counts: bool = False) -> float:
    """Share of the answer's content words found in the passages (1.0 if none).

    Derived answers pass too: numbers written as words or digits either way, identifiers
    written as their parts, and, for a "how many" question (``counts``), a small count of what the
    passages list. Any other number that the passages do not hold makes the share 0.
    """
    words = content_words(answer)
    if not words:
        return 1.0
    vocab = vocabulary(passages)
    found = [found_in(w, vocab) or (counts and _is_count(w)) for w in words]
    numbers = [
        ok for w, ok in zip(words, found, strict=True) if w[0].isdigit() or w in _NUMBER_WORDS
    ]
    if not all(numbers):
        return 0.0
    return sum(found) / len(words)


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
