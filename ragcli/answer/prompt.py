"""The augmented prompt, laid out as segments for prefix reuse.

Order: fixed instructions and examples, then the passages, then the
question. The first segment never changes, so its KV state is shared by
every question; the second is shared by questions that retrieve the same
passages. A model whose GGUF has a chat template is prompted through it;
a base model gets a few-shot completion prompt.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from ..llm.base import Engine, Prompt
from .question import Question

# Asked "how many", a 1.5B model answers with a number it guesses; asked to list, it copies
# the items, and the tool counts them (answer/copying.py).
LIST_HINT = "List each one the context names, separated by commas."

IDK = "I don't know"
# Part of the answer cache's key: raise it when a change to the prompt or to the answer
# rules would change answers, so answers cached before are not served after.
PROMPT_VERSION = 10  # 3 was tried and not kept (docs/BENCHMARKS.md)

INSTRUCTIONS = (
    "Answer each question with a short phrase copied from its context. If the context does "
    f"not contain the answer, answer: {IDK}"
)

# Examples teach the format: a short span copied from the context, one identifier, and a
# refusal when the context is on topic but does not hold the answer.
EXAMPLES: tuple[tuple[str, str, str], ...] = (
    (
        "The Danube rises in the Black Forest of Germany and flows east for about 2,850 "
        "kilometres. It empties into the Black Sea through a wide delta in Romania and Ukraine.",
        "Into which sea does the Danube flow?",
        "the Black Sea",
    ),
    (
        "The telephone was patented by Alexander Graham Bell in 1876. His first successful "
        "call was made to his assistant, Thomas Watson.",
        "Who received the first telephone call?",
        "Thomas Watson",
    ),
    (
        "Mount Kilimanjaro in Tanzania is the highest mountain in Africa. Its summit stands "
        "5,895 metres above sea level.",
        "Who was the first person to reach the summit of Kilimanjaro?",
        IDK,
    ),
    (
        "The len() function returns the number of items in a list, string or other "
        "container. Calling len() on an empty list returns 0.",
        "Which built-in function gives the number of items in a container?",
        "len()",
    ),
)


def one_line(text: str) -> str:
    """``text`` with every run of whitespace, newlines included, one space."""
    return " ".join(text.split())


def question_line(question: str, counts: bool) -> str:
    """The question as the model reads it; a count question (``counts``) asks for the list."""
    line = f"Question: {one_line(question)}"
    return f"{line}\n{LIST_HINT}" if counts else line


def context_text(context: Sequence[str]) -> str:
    """The sentences as the model reads them, one line: what an answer may copy from."""
    return one_line(" ".join(context))


# The context segment is this label, the sentences joined by spaces, and a newline: read
# apart, each sentence is a piece that starts with its space (llm/reading_cache.py).
LABEL = "Context:"


def _written(sentences: Sequence[str]) -> tuple[str, ...]:
    return tuple(f" {line}" for line in map(one_line, sentences) if line)


def pieces(
    context: Sequence[str], leads: Sequence[Sequence[str]] = ()
) -> tuple[tuple[str, ...], tuple[tuple[str, ...], ...]]:
    """The context segment as sentences, each with the space before it (they join to
    ``" " + context_text(context)``), and the sentences of each one's lead, written the same
    way."""
    before = [*leads, *[()] * (len(context) - len(leads))]
    pairs = [
        (f" {line}", _written(lead))
        for line, lead in zip(map(one_line, context), before, strict=True)
        if line
    ]
    return tuple(p for p, _ in pairs), tuple(lead for _, lead in pairs)


def in_place(sentences: Sequence[str], best: Sequence[int], share: float) -> tuple[int, ...]:
    """The sentences read in place when the others come from the reading cache: the most
    likely to answer (``best`` first) until they make ``share`` of the context's characters,
    at least one when ``share`` > 0.

    Read apart, a sentence never saw the other passages, and the model then copies a
    neighbouring value; the sentence it copies from, read in place, sees them all."""
    if share <= 0:
        return ()
    budget, used, out = share * sum(len(s) for s in sentences), 0, []
    for i in best:
        if out and used + len(sentences[i]) > budget:
            break
        out.append(i)
        used += len(sentences[i])
    return tuple(sorted(out))


def _fresh(context: Sequence[str], fresh: Sequence[int]) -> tuple[int, ...]:
    """``fresh`` (indexes of ``context``) as indexes of :func:`pieces` (empty lines gone)."""
    kept, wanted = [i for i, line in enumerate(context) if one_line(line)], set(fresh)
    return tuple(k for k, i in enumerate(kept) if i in wanted)


def _cut(prompt: Prompt) -> Prompt:
    """``prompt`` with no pieces when every one is read in place: that is reading whole, in
    one pass, as with the reading cache off (the same tokens, the same batches)."""
    if prompt.pieces and len(prompt.fresh) == len(prompt.pieces):
        return replace(prompt, pieces=(), leads=(), frame=("", ""), fresh=())
    return prompt


def completion_prompt(
    question: str,
    context: Sequence[str],
    instructions: bool = True,
    leads: Sequence[Sequence[str]] = (),
    fresh: Sequence[int] = (),
) -> Prompt:
    """Few-shot "Context / Question / Answer" prompt for base models.

    Segments: instructions and examples (never change), the context sentences, the question.
    ``leads``, ``fresh`` (indexes of ``context``): see :class:`~ragcli.llm.base.Prompt`.
    """
    head = f"{INSTRUCTIONS}\n\n" if instructions else ""
    shots = "".join(f"Context: {c}\nQuestion: {q}\nAnswer: {a}\n\n" for c, q, a in EXAMPLES)
    parts, before = pieces(context, leads)
    return _cut(
        Prompt(
            segments=(
                head + shots,
                f"{LABEL} {context_text(context)}\n",
                f"Question: {one_line(question)}\nAnswer:",
            ),
            stop=("\n", "Question:", "Context:"),
            pieces=parts,
            leads=before,
            frame=(LABEL, "\n") if parts else ("", ""),
            fresh=_fresh(context, fresh),
        )
    )


# Instruction-tuned models follow a system message and learn the answer format from a few
# turns. The examples are made up and cover what documentation questions ask: a span to copy,
# a count of listed items, a yes/no, an identifier, and two refusals where the context is on
# topic but silent, the case such a model gets wrong most (it answers with a nearby token).
# The answer is the context's own words, whole: asked for "the shortest phrase", the model
# cut spans down to a fragment that no longer answered (docs/BENCHMARKS.md, "Answers on unseen documents").
CHAT_INSTRUCTIONS = (
    "You answer questions about the user's documents using only the context given with each "
    "question, never your own knowledge. Reply with the answer alone: the words of the context "
    "that answer it, copied exactly and in full (a name, number, value or a few words). When "
    "asked how many, list the items the context names, separated by commas. If the "
    f"context does not say, reply exactly: {IDK}"
)
CHAT_EXAMPLES: tuple[tuple[str, str, str], ...] = (
    (
        "The Danube rises in the Black Forest of Germany and flows east for about 2,850 "
        "kilometres. It empties into the Black Sea through a wide delta in Romania and Ukraine.",
        "Into which sea does the Danube flow?",
        "the Black Sea",
    ),
    (
        "The orchard grows apples, pears and quinces. Harvest starts in late August.",
        "How many kinds of fruit does the orchard grow?",
        "apples, pears, quinces",
    ),
    (
        "Mount Kilimanjaro in Tanzania is the highest mountain in Africa. Its summit stands "
        "5,895 metres above sea level.",
        "Who was the first person to reach the summit of Kilimanjaro?",
        IDK,
    ),
    (
        "Frozen sets cannot be changed once they are created; use a plain set when items must "
        "be added or removed.",
        "Can items be added to a frozen set?",
        "No",
    ),
    (
        "The fetch() helper retries a failed request three times. Pass timeout= to limit how "
        "long each attempt waits.",
        "Which exception does fetch() raise when every attempt fails?",
        IDK,
    ),
    (
        "The len() function returns the number of items in a list, string or other "
        "container. Calling len() on an empty list returns 0.",
        "Which built-in function gives the number of items in a container?",
        "len()",
    ),
)


# The examples' own question lines: "the number of items" makes one a count question.
_EXAMPLE_LINES = tuple(question_line(q, Question.parse(q).counts) for _, q, _ in CHAT_EXAMPLES)


def _chat_messages(question: str, ctx: str, counts: bool) -> list[dict[str, str]]:
    messages: list[dict[str, str]] = [{"role": "system", "content": CHAT_INSTRUCTIONS}]
    for (c, _, a), line in zip(CHAT_EXAMPLES, _EXAMPLE_LINES, strict=True):
        messages += [
            {"role": "user", "content": f"Context: {c}\n{line}"},
            {"role": "assistant", "content": a},
        ]
    messages.append({"role": "user", "content": f"{ctx}{question_line(question, counts)}"})
    return messages


def render_chat(template: str, messages: list[dict[str, str]], bos: str, eos: str) -> str:
    """``messages`` through a model's chat template, ending where the assistant replies."""
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    text = env.from_string(template).render(
        messages=messages, add_generation_prompt=True, bos_token=bos, eos_token=eos
    )
    return text.removeprefix(bos)  # the tokenizer adds BOS itself


def chat_prompt(
    question: str,
    context: Sequence[str],
    template: str,
    bos: str,
    eos: str,
    leads: Sequence[Sequence[str]] = (),
    counts: bool = False,
    fresh: Sequence[int] = (),
) -> Prompt:
    """The same content through the model's own chat template (instruction-tuned models);
    ``counts``: a "how many" question, asked to list what it counts."""
    parts, before = pieces(context, leads)
    ctx = f"{LABEL} {context_text(context)}\n"
    text = render_chat(template, _chat_messages(question, ctx, counts), bos, eos)
    cut = text.rindex(ctx)
    end = cut + len(ctx)
    return _cut(
        Prompt(
            segments=(text[:cut], text[cut:end], text[end:]),
            stop=(eos, "\n\n"),
            pieces=parts,
            leads=before,
            frame=(LABEL, "\n") if parts else ("", ""),
            fresh=_fresh(context, fresh),
        )
    )


_IDK_RE = re.compile(r"^\W*(i\s+do(?:n'?t|n’t| not)\s+know|unknown|not (?:stated|mentioned))", re.I)
_CITE_RE = re.compile(r"\s*\[(\d+)\]")


def clean_answer(raw: str) -> str:
    """The answer as shown: first line, no citation markers, first sentence, no final period."""
    a = raw.strip().split("\n", 1)[0].strip()
    a = _CITE_RE.sub("", a).strip()
    a = re.split(r"(?<=[a-z0-9)])\.\s", a, maxsplit=1)[0]
    return a.rstrip(".").strip()


def is_refusal(answer: str) -> bool:
    return not answer.strip() or bool(_IDK_RE.match(answer))


def engine_prompt(
    question: str,
    context: Sequence[str],
    engine: Engine,
    leads: Sequence[Sequence[str]] = (),
    counts: bool = False,
    fresh: Sequence[int] = (),
) -> Prompt:
    """The prompt ``engine`` reads: its chat template when the model has one, else the
    few-shot completion prompt. ``leads``: the sentences before each one of ``context`` in
    its passage, and ``fresh``: those read in place (:func:`in_place`), see
    :class:`~ragcli.llm.base.Prompt`; ``counts``: a "how many" question
    (:attr:`ragcli.answer.question.Question.counts`)."""
    if engine.chat_template:
        t = engine.chat_template
        return chat_prompt(question, context, t, engine.bos, engine.eos, leads, counts, fresh)
    return completion_prompt(question, context, leads=leads, fresh=fresh)
