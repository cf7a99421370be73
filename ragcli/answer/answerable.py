"""Whether the shown sentences answer the question: several measured signals, one rule.

The model's own "I don't know" misses on-topic questions the documents do not answer:
asked for a third-party function, it copies the standard-library one that sits nearby.
Copying makes such an answer a real span, so the support rule cannot catch it either.
What does separate them (docs/BENCHMARKS.md, "Answers grounded by construction") is measured here: how close
the best sentence is, whether the question's words occur in what was shown or anywhere in
the passages, how much probability the model gave "I don't know" at the first token, and
whether the copy constraint had to overrule the model's own choice.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from .grounding import content_words, found_in, vocabulary


def lexical(question: str, shown: Sequence[str], passages: Sequence[str]) -> dict[str, float]:
    """How much of the question the shown sentences and the whole passages contain.

    ``coverage``: share of the question's content words found in the shown sentences;
    ``missing``: how many of them occur in none of the passages (a library, a version,
    a name the documents never mention)."""
    words = list(dict.fromkeys(content_words(question)))
    if not words:
        return {"coverage": 1.0, "missing": 0.0}
    shown_vocab = vocabulary(list(shown))
    all_vocab = vocabulary(list(passages))
    covered = sum(found_in(w, shown_vocab) for w in words)
    missing = sum(not found_in(w, all_vocab) for w in words)
    return {"coverage": round(covered / len(words), 4), "missing": float(missing)}


# The signals the rule weighs, in order; see :func:`features`. The others that `signals`
# records (similarity, coverage, missing words, overruled steps) separated nothing on the
# fit halves of our sets (docs/BENCHMARKS.md, "Answers grounded by construction").
FEATURES = ("log_idk_prob", "logprob")
# Fitted by `python -m ragcli.bench.answerability` (docs/BENCHMARKS.md, "Answers grounded by construction").
WEIGHTS = (-0.8841, 0.9690)
BIAS = -1.2515


def features(signals: dict[str, float]) -> list[float]:
    """The rule's inputs from an answer's signals: the model's probability of "I don't
    know" at the first token (log10) and its mean log-probability of the copied tokens."""
    return [
        math.log10(signals.get("idk_prob", 0.0) + 1e-6),
        signals.get("logprob", 0.0),
    ]


def probability(signals: dict[str, float]) -> float:
    """How likely the documents answer the question, given what was measured."""
    z = BIAS + sum(w * v for w, v in zip(WEIGHTS, features(signals), strict=True))
    return 1 / (1 + math.exp(-max(-60.0, min(60.0, z))))
