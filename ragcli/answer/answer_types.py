"""The shape of answer a question wants: a span of text, yes or no, or a count."""

from __future__ import annotations

import re

_COUNT = re.compile(r"\bhow\s+many\b|\bnumber\s+of\b", re.I)
_YES_NO = re.compile(
    r"^\s*(is|are|was|were|can|could|does|do|did|will|would|should|has|have|had|may|must)\b",
    re.I,
)


def kind(question: str) -> str:
    """``count``, ``yesno`` or ``span``."""
    if _COUNT.search(question):
        return "count"
    if _YES_NO.match(question) and not re.search(r"\bor\b", question, re.I):
        return "yesno"
    return "span"


_WANTS_NUMBER = re.compile(
    r"^\s*(?:when\s+(?:did|was|were|is|are|will|does|do|has|had)\b|"
    r"(?:in\s+)?(?:what|which)\s+(?:year|month|date|decade|century)\b|"
    r"how\s+(?:much|long|old|far|big|large|tall|high|often|many)\b)",
    re.I,
)
_NUMBER_LIKE = re.compile(
    r"\d|\b(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|hundred|"
    r"thousand|million|billion|dozen|january|february|march|april|may|june|july|august|"
    r"september|october|november|december|spring|summer|autumn|fall|winter)\b",
    re.I,
)


def fits(question: str, answer: str) -> bool:
    """Whether the answer has the shape the question asks for: a "when" or "how much"
    question is not answered by a name (the model copies a nearby place for a birth year
    the document never gives)."""
    return not _WANTS_NUMBER.match(question) or bool(_NUMBER_LIKE.search(answer))
