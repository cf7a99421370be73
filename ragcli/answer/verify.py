"""Two questions put to the model about an answer, each read as its probability of "Yes".

Copying keeps an answer inside the documents, not on the question: asked for a
third-party function, the model copies the standard-library one beside it; asked for a
pet a page never names, it copies a neighbour's. Two replies tell such answers apart
(docs/BENCHMARKS.md, "Answers on unseen documents"):

- :func:`answerable`: asked, over the same context, whether the context alone answers the
  question. It shares the answer prompt's prefix, so it costs the question's tokens.
- :func:`supported`: the sentences the answer was copied from, each under the title of
  its page, the question and the answer, shown on their own: does the passage state this
  answer to this question? Out of the crowd of other sentences, a neighbour's pet is
  seen as the neighbour's.

Asked instead in the same conversation, right after answering, whether the context
states that answer, the model said yes to its own answers, right or wrong.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..llm.base import Engine, Prompt
from ..llm.constrain import Choice
from .prompt import engine_prompt, one_line, render_chat

if TYPE_CHECKING:
    from .question import Question

ANSWERABLE = "Does the context alone answer the question? Reply Yes or No."
JUDGE = (
    "You check answers against the documents they were taken from. Reply Yes if the "
    "passage states the answer to exactly what the question asks (the same person, thing, "
    "version and detail), else No."
)


def _yes(engine: Engine, prompt: Prompt, use_cache: bool) -> float:
    choice = Choice(lambda: engine.vocabulary, ("Yes", "No"))
    engine.generate(prompt, 1, use_cache=use_cache, constraint=choice, follow_up=True)
    yes, no = choice.probs
    return yes / (yes + no) if yes + no else 0.5


def answerable(
    engine: Engine,
    question: Question,
    context: Sequence[str],
    use_cache: bool = True,
    leads: Sequence[Sequence[str]] = (),
    fresh: Sequence[int] = (),
) -> float:
    """The model's probability of "Yes" that ``context`` alone answers ``question``
    (``leads``, ``fresh``: as the answer's prompt has them, so that its sentences are
    reused)."""
    prompt = engine_prompt(
        f"{question.text} ({ANSWERABLE})", context, engine, leads, question.counts, fresh
    )
    return _yes(engine, prompt, use_cache)


def judge_prompt(
    engine: Engine, question: str, answer: str, evidence: Sequence[tuple[str, str]]
) -> Prompt:
    """The check :func:`supported` reads: the judge's instructions, the passage, the rest."""
    passage = " ".join(f'(from "{title}") {text}' if title else text for title, text in evidence)
    rest = (
        f"\nQuestion: {one_line(question)}\nAnswer: {answer}\n"
        "Does the passage state this answer to this question? Reply Yes or No."
    )
    head = "Passage: "
    if not engine.chat_template:
        return Prompt(segments=(f"{JUDGE}\n\n{head}", passage, f"{rest}\nReply:"), stop=())
    messages = [
        {"role": "system", "content": JUDGE},
        {"role": "user", "content": head + passage + rest},
    ]
    text = render_chat(engine.chat_template, messages, engine.bos, engine.eos)
    cut = text.index(head) + len(head)
    end = cut + len(passage)
    return Prompt(segments=(text[:cut], text[cut:end], text[end:]), stop=())


def supported(
    engine: Engine,
    question: str,
    answer: str,
    evidence: Sequence[tuple[str, str]],
    use_cache: bool = True,
) -> float:
    """The model's probability of "Yes" that ``evidence`` ((page title, sentence) pairs:
    the sentences the answer was copied from) states ``answer`` to ``question``."""
    return _yes(engine, judge_prompt(engine, question, answer, evidence), use_cache)
