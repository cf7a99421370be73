"""`rag eval`: answer quality measured on a question set, not on a handful of examples.

The question file is JSON Lines, one object a line::

    {"id": "q1", "question": "...", "answers": ["alias", ...], "answerable": true,
     "source": "tutorial/introduction.html"}

``answers`` are short aliases: an answer is correct when one of them occurs in it
(case-insensitive, as whole words: "1" does not match "1999") and it is at most 40 words,
so pasting a passage does not count.
``answerable: false`` questions are correct when the tool says "I don't know".
``source`` (optional) is the document holding the answer, relative to the indexed
folder, or a list of them; a retrieved passage from a path ending in one counts as a
retrieval hit.

With ``--retrieval-only`` the sentences the model would read are chosen too, and
``context_recall`` is the share of answerable questions with an alias in them: the
ceiling of answer accuracy that retrieval and the sentence choice leave the model.
"""

from __future__ import annotations

import json
import re
import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..errors import UsageError
from ..progress import OnStep, Step
from .asker import Answer, AnswerTimings, Asker
from .prompt import one_line
from .question import Question
from .retrieval import SearchResult

MAX_ANSWER_WORDS = 40


@dataclass(frozen=True)
class QAItem:
    id: str
    question: str
    answers: tuple[str, ...]
    answerable: bool
    sources: tuple[str, ...]  # any of these documents holds the answer (an answer may span two)


@dataclass
class EvalRow:
    id: str
    question: str
    answerable: bool
    answer: str
    raw_answer: str
    reason: str
    correct: bool
    hit_rank: int | None  # rank of the first passage from the source page
    ttft_ms: float | None
    prompt_tokens: int
    cached_tokens: int
    context_hit: bool | None = None  # an alias is in the sentences shown (retrieval-only)
    passage_hit: bool | None = None  # ... in the passages they are chosen from
    signals: dict[str, float] = field(default_factory=dict)  # what answerability was judged on


@dataclass
class EvalSummary:
    questions: int
    answerable: int
    unanswerable: int
    hit_at_k: float | None
    mrr: float | None
    context_recall: float | None
    passage_recall: float | None  # the ceiling context_recall has under sentence choice
    answer_accuracy: float | None
    abstention_accuracy: float | None
    false_abstention_rate: float | None
    mean_ttft_ms: float | None
    median_ttft_ms: float | None
    cached_share: float | None
    k: int


@dataclass
class EvalReport:
    summary: EvalSummary
    rows: list[EvalRow] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {"summary": asdict(self.summary), "rows": [asdict(r) for r in self.rows]}


def load_questions(path: Path) -> list[QAItem]:
    """Parse and check a question file; a bad line is a usage error naming it."""
    items = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise UsageError(f"{path}: cannot read ({exc.strerror})") from None
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
            question = obj["question"]
            answers = tuple(obj.get("answers") or ())
            answerable = bool(obj.get("answerable", bool(answers)))
            if not isinstance(question, str) or not all(isinstance(a, str) for a in answers):
                raise TypeError("question and answers must be strings")
            if answerable and not answers:
                raise ValueError("an answerable question needs answers")
            source = obj.get("source")
            sources = (source,) if isinstance(source, str) else tuple(source or ())
            if not all(isinstance(p, str) for p in sources):
                raise TypeError("source must be a path or a list of paths")
        except (ValueError, KeyError, TypeError) as exc:
            raise UsageError(f"{path}:{n}: not a question line ({exc})") from None
        items.append(QAItem(str(obj.get("id", n)), question, answers, answerable, sources))
    if not items:
        raise UsageError(f"{path}: no questions")
    return items


def _alias_pattern(alias: str) -> re.Pattern[str]:
    """The alias as a whole word where it begins or ends with one: "1" is not in "1999",
    nor "one" in "none", but "__new__" is in "__new__()"."""
    head = r"(?<!\w)" if alias[:1].isalnum() else ""
    tail = r"(?!\w)" if alias[-1:].isalnum() else ""
    return re.compile(head + re.escape(alias.lower()) + tail)


def names_an_alias(item: QAItem, text: str) -> bool:
    text = text.lower()
    return any(_alias_pattern(a).search(text) for a in item.answers if a)


def is_correct(item: QAItem, answer: Answer) -> bool:
    if not item.answerable:
        return not answer.answered
    return (
        answer.answered
        and len(answer.answer.split()) <= MAX_ANSWER_WORDS
        and names_an_alias(item, answer.answer)
    )


def _hit_rank(item: QAItem, answer: Answer) -> int | None:
    """The rank of the first passage from any of the question's source documents."""
    tails = [s.replace("\\", "/").lstrip("/") for s in item.sources]
    for h in answer.sources:
        path = h.chunk.path.replace("\\", "/")
        if any(path == t or path.endswith("/" + t) for t in tails):
            return h.rank
    return None


def _context_hits(
    item: QAItem, asker: Asker, found: SearchResult
) -> tuple[bool | None, bool | None]:
    """Whether an answer alias occurs in the sentences the model would be shown, and in
    the whole passages they are chosen from (what sentence choice can at best keep)."""
    if not item.answerable:
        return None, None
    _, _, chosen = asker.read(Question.parse(item.question), found)
    passages = found.hits[: asker.settings.context_passages]
    return (
        names_an_alias(item, one_line(" ".join(chosen.sentences))),
        names_an_alias(item, one_line(" ".join(h.chunk.text for h in passages))),
    )


def _mean(xs: list[float]) -> float | None:
    return round(statistics.fmean(xs), 4) if xs else None


def evaluate(
    asker: Asker,
    items: list[QAItem],
    progress: OnStep | None = None,
    retrieval_only: bool = False,
) -> EvalReport:
    """Ask every question and score retrieval, answers and abstentions.

    ``retrieval_only`` scores hit@k, MRR and context recall without running the
    model (seconds, not minutes), for tuning retrieval. ``progress`` hears of each question
    done, with the accuracy (or hit rate) so far.
    """
    rows: list[EvalRow] = []
    if progress:
        progress(Step("searching" if retrieval_only else "asking", 0, len(items), "questions"))
    for item in items:
        context_hit = passage_hit = None
        if retrieval_only:
            found = asker.search(item.question)
            answer = Answer(
                question=item.question,
                answer="",
                answered=False,
                raw_answer="",
                grounded=True,
                reason="not_asked",
                sources=found.hits,
                timings=AnswerTimings(),
                model="",
            )
            context_hit, passage_hit = _context_hits(item, asker, found)
        else:
            answer = asker.ask(item.question)
        t = answer.timings
        rows.append(
            EvalRow(
                id=item.id,
                question=item.question,
                answerable=item.answerable,
                answer=answer.answer,
                raw_answer=answer.raw_answer,
                reason=answer.reason,
                correct=is_correct(item, answer),
                hit_rank=_hit_rank(item, answer),
                ttft_ms=t.ttft_ms if t.prompt_tokens else None,
                prompt_tokens=t.prompt_tokens,
                cached_tokens=t.cached_tokens,
                context_hit=context_hit,
                passage_hit=passage_hit,
                signals=answer.signals,
            )
        )
        if progress:
            progress(_step(rows, len(items), retrieval_only))
    return EvalReport(summarize(rows, asker.settings.top_k, items), rows)


def _step(rows: list[EvalRow], total: int, retrieval_only: bool) -> Step:
    """Questions done of the set, and how well it goes so far."""
    if retrieval_only:
        pos = [r for r in rows if r.answerable]
        hits = sum(r.hit_rank is not None for r in pos)
        so_far = f"hit@k {hits / len(pos):.0%} so far" if pos else ""
        return Step("searching", len(rows), total, "questions", detail=so_far)
    so_far = f"accuracy {sum(r.correct for r in rows) / len(rows):.0%} so far"
    return Step("asking", len(rows), total, "questions", detail=so_far)


def summarize(rows: list[EvalRow], k: int, items: list[QAItem]) -> EvalSummary:
    pos = [r for r in rows if r.answerable]
    neg = [r for r in rows if not r.answerable]
    with_source = [r for r, i in zip(rows, items, strict=True) if i.answerable and i.sources]
    ttfts = [r.ttft_ms for r in rows if r.ttft_ms is not None]
    prompt = sum(r.prompt_tokens for r in rows)
    return EvalSummary(
        questions=len(rows),
        answerable=len(pos),
        unanswerable=len(neg),
        hit_at_k=_mean([r.hit_rank is not None for r in with_source]),
        mrr=_mean([1 / r.hit_rank if r.hit_rank else 0.0 for r in with_source]),
        context_recall=_mean([r.context_hit for r in pos if r.context_hit is not None]),
        passage_recall=_mean([r.passage_hit for r in pos if r.passage_hit is not None]),
        answer_accuracy=_mean([r.correct for r in pos if r.reason != "not_asked"]),
        abstention_accuracy=_mean([r.correct for r in neg if r.reason != "not_asked"]),
        false_abstention_rate=_mean(
            [r.reason != "answered" for r in pos if r.reason != "not_asked"]
        ),
        mean_ttft_ms=round(statistics.fmean(ttfts), 1) if ttfts else None,
        median_ttft_ms=round(statistics.median(ttfts), 1) if ttfts else None,
        cached_share=round(sum(r.cached_tokens for r in rows) / prompt, 4) if prompt else None,
        k=k,
    )
