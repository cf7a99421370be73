"""Whether the shown sentences answer the question: several measured signals, one rule.

The model's own "I don't know" misses on-topic questions the documents do not answer:
asked for a third-party function, it copies the standard-library one that sits nearby.
Copying makes such an answer a real span, so the support rule cannot catch it either.
What the rule weighs is measured here and in answer/verify.py (docs/BENCHMARKS.md, "Answers
on unseen documents"): how much probability the model gave "I don't know" at the first
token and to the tokens it copied, whether the answer's sentence names what sets the
question apart, and the model's replies to two checks. Other signals are recorded for
study (similarity, the question's words in what was shown, overruled steps).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .grounding import found_in, vocabulary

if TYPE_CHECKING:
    from .question import Question


def lexical(question: Question, shown: Sequence[str], passages: Sequence[str]) -> dict[str, float]:
    """How much of the question the shown sentences and the whole passages contain.

    ``coverage``: share of the question's content words found in the shown sentences;
    ``missing``: how many of them occur in none of the passages (a library, a version,
    a name the documents never mention)."""
    words = list(question.content)
    if not words:
        return {"coverage": 1.0, "missing": 0.0}
    shown_vocab = vocabulary(list(shown))
    all_vocab = vocabulary(list(passages))
    covered = sum(found_in(w, shown_vocab) for w in words)
    missing = sum(not found_in(w, all_vocab) for w in words)
    return {"coverage": round(covered / len(words), 4), "missing": float(missing)}


def subject(
    question: Question, evidence: Sequence[tuple[str, str]], rare: Callable[[list[str]], list[str]]
) -> dict[str, float]:
    """How much of what singles the question out is in the sentences the answer came from.

    ``evidence``: (heading path, sentence) of each sentence the answer was copied from;
    a sentence that says "she" is about the page it sits under. ``rare`` picks the
    question's words that few passages of the index hold: what sets it apart (a person's
    name on look-alike pages, a library's name on pages about the standard one), not
    what the whole corpus is about. ``subject_words``: the share of those found in the
    evidence; ``subject_names``: the same for the capitalized ones. Asked for a pet the
    page never names, the model copies a neighbour's, whose sentence does not name the
    person asked about (docs/BENCHMARKS.md, "Answers on unseen documents").
    ``evidence_words``: the share of all the question's words found there: asked when
    someone was born, the model copies the year she settled somewhere."""
    words = list(question.content)
    if not evidence or not words:
        return {"subject_words": 1.0, "subject_names": 1.0, "evidence_words": 1.0}
    names = question.capitalized
    apart = rare(words)
    shown = vocabulary([f"{heading} {sentence}" for heading, sentence in evidence])

    def share(ws: list[str]) -> float:
        return round(sum(found_in(w, shown) for w in ws) / len(ws), 4) if ws else 1.0

    return {
        "subject_words": share(apart),
        "subject_names": share([w for w in apart if w in names]),
        "evidence_words": share(words),
    }


# Each input a rule may weigh, from an answer's signals (`evidence_words` is one the rules
# do not: it helped only on the halves it was fit on). The others `signals` records
# (similarity, coverage, missing words, overruled steps) separated nothing on the fit
# halves of our sets (docs/BENCHMARKS.md, "Answers on unseen documents").
INPUTS: dict[str, Callable[[dict[str, float]], float]] = {
    # the model's probability of "I don't know" at the first token, log10
    "log_idk_prob": lambda s: math.log10(s.get("idk_prob", 0.0) + 1e-6),
    # its mean log-probability of the copied tokens
    "logprob": lambda s: s.get("logprob", 0.0),
    "subject_names": lambda s: s.get("subject_names", 1.0),
    "subject_words": lambda s: s.get("subject_words", 1.0),
    "evidence_words": lambda s: s.get("evidence_words", 1.0),
    "asked": lambda s: s.get("asked", 0.5),
    "supported": lambda s: s.get("supported", 0.5),
}


@dataclass(frozen=True)
class Rule:
    """A logistic rule: weights over named inputs."""

    inputs: tuple[str, ...]
    weights: tuple[float, ...]
    bias: float

    def features(self, signals: dict[str, float]) -> list[float]:
        return [INPUTS[name](signals) for name in self.inputs]

    def probability(self, signals: dict[str, float]) -> float:
        z = self.bias + sum(
            w * v for w, v in zip(self.weights, self.features(signals), strict=True)
        )
        return 1 / (1 + math.exp(-max(-60.0, min(60.0, z))))


# Fitted by `python -m benchmarks.answerability_fit` on the fit halves of the near-topic and
# facts sets (docs/BENCHMARKS.md, "Answers on unseen documents"): one rule with the
# model's two checks (`check_answers`), one without. Each bias is moved so that the cut the
# fit chose falls at 0.5, the `min_answerable` default, for either rule.
CHECKED = Rule(
    ("log_idk_prob", "logprob", "subject_names", "subject_words", "asked", "supported"),
    (-0.9459, 0.2849, 0.3465, 0.1888, 3.633, 4.245),
    -5.3605,
)
UNCHECKED = Rule(
    ("log_idk_prob", "logprob", "subject_names", "subject_words"),
    (-0.9627, 1.076, 1.3532, 1.0653),
    -1.8444,
)


def rule_for(signals: dict[str, float]) -> Rule:
    """The rule for an answer: with the checks' inputs when they were asked."""
    return CHECKED if "supported" in signals else UNCHECKED


def probability(signals: dict[str, float]) -> float:
    """How likely the documents answer the question, given what was measured."""
    return rule_for(signals).probability(signals)
