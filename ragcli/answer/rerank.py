"""The reader ranks what it reads: candidates re-ranked by where the model's attention goes.

No reranker ships in any package ragcli can install, and asking the 1.5B model about each
passage would cost several first tokens. In-context re-ranking (ICR; Chen, Jiménez Gutiérrez
and Su, ICLR 2025) reads the candidates once, then two short queries after them: the
question, and a content-free one ("N/A") in its place. A passage's score is the attention the
question's tokens pay it less what the content-free query's pay it (length and position
draw attention whatever is asked), summed over a band of middle layers: the first layers
look at position, not meaning, and the layers after the band add nothing, so they are not
computed (docs/BENCHMARKS.md, "The reader ranks what it reads").

The candidates are read together, each after those before it. Read apart (each after the
fixed text alone, so that its keys and values could be kept for the next question that
retrieves it), they ranked worse than retrieval on a set nothing was fitted on
(docs/BENCHMARKS.md): what a passage is, beside the others, is part of the signal.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, cast

from ..llm.base import Engine, Ranker
from ..records import Hit
from .prompt import one_line, render_chat
from .retrieval import SearchResult

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger(__name__)

CONTENT_FREE = "N/A"
SYSTEM = "You find the passages that answer a question."
ASK = "Which passage answers this question?\nQuestion: "
LABEL = "Passages:\n\n"
# The band of layers summed, as shares of the model's depth (layers 14-17 of 28), and the
# calibration: fit on dev and near-topic by answers in the top 4, then by the fewest layers
# computed, then by mean reciprocal rank; each of the first eight layers alone ranked worse
# than the retriever (docs/BENCHMARKS.md).
FIRST_LAYER_SHARE = 1 / 2
END_LAYER_SHARE = 9 / 14


@dataclass(frozen=True)
class Reranked:
    """The hits in the model's order, and what ranking them cost."""

    hits: list[Hit]
    rank_ms: float
    read_tokens: int


def layout(engine: Ranker, passages: Sequence[str]) -> tuple[str, list[str], str]:
    """The text before the passages, each passage as read, and the text between the last
    passage and the query: the model's chat template when it has one."""
    body = [f"[{i}] {one_line(p)}\n\n" for i, p in enumerate(passages, 1)]
    if not engine.chat_template:
        return LABEL, body, ASK
    mark = "\x00"  # where the passages go: a character no template writes
    messages = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": f"{LABEL}{mark}{ASK}{mark}"},
    ]
    text = render_chat(engine.chat_template, messages, engine.bos, engine.eos)
    head, between, _ = text.split(mark)
    return head, body, between


def scores(attention: np.ndarray) -> np.ndarray:
    """One score a passage from [query, layer, passage] attention (the question, then the
    content-free query), read to :data:`END_LAYER_SHARE` of the model's depth: calibrated,
    over the band of layers."""
    first = round(attention.shape[1] * FIRST_LAYER_SHARE / END_LAYER_SHARE)
    summed = attention[:, first:, :].sum(axis=1)
    return summed[0] - summed[1]


def by_attention(question: str, hits: Sequence[Hit], ranker: Ranker, keep: int) -> Reranked:
    """The ``keep`` hits the model looks at most when it reads ``question`` after all of
    ``hits``, best first, ranks renumbered; each keeps its retrieval score and gains
    ``rerank_score``. Ties keep the retriever's order."""
    t0 = time.perf_counter()
    head, body, between = layout(ranker, [h.chunk.text for h in hits])
    attention, read = ranker.passage_attention(
        head, body, between, [one_line(question), CONTENT_FREE], END_LAYER_SHARE
    )
    s: list[float | None] = [round(float(x), 4) for x in scores(attention)]
    s += [None] * (len(hits) - len(s))  # left out of the model's context: after the others
    order = sorted(range(len(hits)), key=lambda i: (s[i] is None, -(s[i] or 0.0), i))[:keep]
    out = [replace(hits[i], rank=n, rerank_score=s[i]) for n, i in enumerate(order, 1)]
    return Reranked(out, (time.perf_counter() - t0) * 1000, read)


def reranked(question: str, found: SearchResult, engine: Engine | None, k: int) -> SearchResult:
    """``found`` cut to ``k`` hits: those the model ranks best, or the first ``k`` with no
    engine (`rerank` off) or one that shows no attention (a server's)."""
    if engine is not None and engine.can_rank:
        ranked = by_attention(question, found.hits, cast(Ranker, engine), k)
        return replace(
            found, hits=ranked.hits, rerank_ms=ranked.rank_ms, rerank_tokens=ranked.read_tokens
        )
    if engine is not None:
        log.warning("the model at %s cannot re-rank: retrieval's order kept", engine.model.name)
    return replace(found, hits=found.hits[:k])
