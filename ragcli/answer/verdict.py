"""Whether an answer stands: every rule that decides it, in one place.

The model proposes; these rules dispose. A copied answer (answer/copying.py; a count over
the page the question names is the tool's, answer/counting.py) is withheld, in this order,
when the model abstained; when its own first token was not in the sentences (it wanted an
answer from memory: on our sets a rule that catches many answers to unanswerable questions
and almost no right ones), unless it was the answer's first word in another case or in
digits ("0" where the page says "zero"); when the span is not of the type the question
asks for (answer/answer_types.py: a date is never a place); when it says nothing the
question does not (asked what punctured the tyre, "tyre"); when it is a heading of its
passage; when a version or year the question gives is in neither the
answer's sentences nor the passage and headings before them; when a name from code the
question gives is not in the answer's passages ("Yes" and "No": in any passage shown);
and when the fitted rule over the measured signals (answer/answerable.py,
answer/verify.py) scores it below ``min_answerable``. A freely written answer
(``copy_answers = false``, a server) stands when enough of its words are in the sentences
shown and it passes the same rules of type, echo, numbers and names over the sentences
that hold it. What the user reads ("I don't know", "Yes") is in the question's language.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from . import answerable, copying, verify
from .answer_types import ALTERNATIVES, fits
from .focus import is_heading
from .grounding import as_digits, content_words, support
from .language import say
from .prompt import IDK, clean_answer, is_refusal

if TYPE_CHECKING:
    from ..config import Settings
    from ..llm.base import Engine
    from ..llm.constrain import SpanDecoder
    from ..records import Hit
    from .copying import Copied
    from .focus import Focus
    from .question import Question


@dataclass
class Verdict:
    """What the rules made of one generation."""

    answered: bool
    text: str  # what the user sees
    raw: str  # what the model said or copied
    reason: str  # answered | model_abstained | not_supported | not_answerable
    support: float | None = None
    cited: list[int] = field(default_factory=list)  # ranks of the sources the answer came from
    evidence: list[dict] = field(default_factory=list)
    signals: dict[str, float] = field(default_factory=dict)


def _withheld(question: Question, raw: str, reason: str, **kw) -> Verdict:
    return Verdict(False, say(IDK, question.language), raw, reason, **kw)


def numbers_named(question: Question, evidence: Sequence[str]) -> bool:
    """Whether every version or year the question gives ("3.11", "1999") is in the ``evidence``
    (the answer's sentences with their headings): asked when 3.12 came out, the model
    copies the date of 3.11, whose sentence does not say 3.12."""
    if not question.versions:
        return True
    shown = " ".join(evidence)
    return all(
        re.search(rf"(?<![\w.]){re.escape(n)}(?![\w]|\.\d)", shown) for n in question.versions
    )


def code_names_named(question: Question, evidence: Sequence[str]) -> bool:
    """Whether every name from code the question gives is in the ``evidence`` (the passages
    of the answer's sentences, with their headings): asked for the default of one
    parameter, the model copies another's from the next entry of the same reference. Of a
    dotted name the last part must be there (the method, in its class's section)."""
    if not question.code_names:
        return True
    shown = " ".join(evidence)
    return all(
        re.search(rf"(?<![\w.]){re.escape(n)}(?!\w)", shown, re.I) for n in question.code_names
    )


_ELISION = re.compile(r"^(?:[ldjmnst]|qu)['’]", re.I)


def _bare(words: Sequence[str]) -> set[str]:
    """Content words without an elided article or a plural ending: "l'ensilage" is
    "ensilage", "JSON" is "json"."""
    return {_ELISION.sub("", w).removesuffix("s") for w in words}


def adds_something(question: Question, answer: str) -> bool:
    """Whether the answer says more than the question: asked what punctured the tyre, the
    model copies "tyre"; asked what a format's name stands for, the format's name. A
    question that offers alternatives ("A or B?") is answered by one of its own words."""
    if question.shape != "span" or ALTERNATIVES.search(question.text):
        return True
    said = _bare(content_words(answer))
    return not said or not said <= _bare(question.content)


def _up_to(passage: str, sentence: str) -> str:
    """The passage's text up to the end of ``sentence`` (whole when it is not found)."""
    flat = " ".join(passage.split())
    at = flat.find(sentence[:40])
    return flat if at < 0 else flat[: at + len(sentence)]


def signals(
    question: Question,
    chosen: Focus,
    hits: Sequence[Hit],
    dec: SpanDecoder,
    copied: Copied,
    rare_words: Callable[[list[str]], list[str]],
    engine: Engine | None,
    use_cache: bool = True,
) -> dict[str, float]:
    """What the answerability rule judges a copied answer on: the decoder's figures, the
    words shown, and, for an answer, whether its sentences name what the question is about
    and (with an ``engine``) the model's replies to the two checks of answer/verify.py."""
    out = {
        "similarity": round(chosen.best_similarity, 4),
        "idk_prob": round(dec.first_fixed_prob[0], 4) if dec.first_fixed_prob else 0.0,
        "overruled": dec.overruled,
        "first_overruled": float(
            dec.first_overruled and not same_start(dec.first_wanted, copied.text)
        ),
        "logprob": round(dec.logprob / max(dec.steps, 1), 4),
        "margin": round(min(dec.margin, 99.0), 4),
        **answerable.lexical(question, chosen.sentences, [h.chunk.text for h in hits]),
    }
    if not copied.abstained:
        shown = _shown(chosen, hits, copied.sentences)
        out.update(answerable.subject(question, [(c.heading, s) for c, s in shown], rare_words))
        if engine is not None:
            asked = verify.answerable(
                engine, question, chosen.sentences, use_cache, chosen.leads, chosen.in_place
            )
            titled = [(c.title, s) for c, s in shown]
            judged = verify.supported(engine, question.text, copied.text, titled, use_cache)
            out.update(asked=round(asked, 4), supported=round(judged, 4))
    out["answerable"] = round(answerable.probability(out), 4)
    return out


def same_start(wanted: str, answer: str) -> bool:
    """Whether the token the model wanted first starts ``answer`` all the same: in another
    case, or as digits where the text spells the number out ("0" for "zero"). Such an
    answer is the model's own choice, not one the constraint forced on it."""
    words = answer.split()
    want = wanted.strip().casefold()
    if not want or not words:
        return False
    first = words[0].casefold()
    if want.isdigit():
        return as_digits(first.strip(".,;:")) == want or first.startswith(want)
    # One letter begins too many words to say which one the model meant ("a" of "Apple").
    return first == want or (len(want) > 1 and first.startswith(want))


def _shown(chosen: Focus, hits: Sequence[Hit], indexes: Sequence[int]) -> list:
    """(passage, sentence) of the sentences shown at ``indexes`` (those an answer was
    copied from)."""
    by_rank = {h.rank: h.chunk for h in hits}
    return [
        (by_rank[chosen.ranks[i]], chosen.sentences[i])
        for i in indexes
        if chosen.ranks[i] in by_rank
    ]


def judge_copied(
    question: Question,
    copied: Copied,
    chosen: Focus,
    hits: Sequence[Hit],
    measured: dict[str, float],
    settings: Settings,
    generated: str,
) -> Verdict:
    """The verdict on an answer the model copied (``generated``: its tokens as they came),
    given its ``measured`` signals."""
    if copied.abstained:
        return _withheld(question, generated.strip(), "model_abstained", signals=measured)
    text = copied.text
    # "Yes" or "No" is copied from no one sentence: the names and numbers the question
    # gives are looked for in all the sentences shown.
    shown = _shown(chosen, hits, copied.sentences or range(len(chosen.sentences)))
    # A passage may begin under one heading and run on into the next section: the
    # sentence's own section is named in the passage text before it.
    before = [f"{c.title} {c.heading} {_up_to(c.text, s)}" for c, s in shown]
    if (
        measured.get("first_overruled")
        or not fits(question.wants, text)
        or not adds_something(question, text)
        or is_heading(text, [c for c, _ in shown])
        or not numbers_named(question, before)
        or not code_names_named(question, [f"{c.title} {c.heading} {c.text}" for c, _ in shown])
        or measured["answerable"] < settings.min_answerable
    ):
        return _withheld(question, text, "not_answerable", signals=measured)
    evidence = copying.evidence(copied, chosen.sentences, chosen.ranks, hits)
    return Verdict(
        True,
        say(text, question.language),
        generated.strip(),
        "answered",
        1.0,
        cited=list(dict.fromkeys(e["rank"] for e in evidence)),
        evidence=evidence,
        signals=measured,
    )


def judge_written(question: Question, generated: str, chosen: Focus, min_support: float) -> Verdict:
    """The verdict on an answer the model wrote freely: it must come from what it was shown,
    and cites the sources of the sentences that hold every word of it."""
    raw = clean_answer(generated)
    if is_refusal(raw):
        return _withheld(question, raw, "model_abstained")
    share = support(raw, chosen.sentences, question.counts)
    if share < min_support:
        return _withheld(question, raw, "not_supported", support=share)
    held = [
        (sentence, rank)
        for sentence, rank in zip(chosen.sentences, chosen.ranks, strict=True)
        if support(raw, [sentence], question.counts) == 1.0
    ]
    # The rules of type, echo, numbers and names, over the sentences that hold it.
    said = [sentence for sentence, _ in held] or chosen.sentences
    if not (
        fits(question.wants, raw)
        and adds_something(question, raw)
        and numbers_named(question, said)
        and code_names_named(question, said)
    ):
        return _withheld(question, raw, "not_answerable", support=share)
    cited = list(dict.fromkeys(rank for _, rank in held))
    return Verdict(True, raw, raw, "answered", share, cited=cited)


def nothing_found(question: Question) -> Verdict:
    """No passage bears on the question: "I don't know" without asking the model."""
    return _withheld(question, "", "no_relevant_passages")
