"""Sentence choice on real documentation (the Python pages beside the checkout): an answer
whose sentence meaning alone ranks far down, in a passage retrieval found, is shown to the
model and copied, through the real model."""

from __future__ import annotations

import json

import pytest

from ragcli.answer.asker import Asker
from ragcli.answer.focus import PASSAGE_MARGIN, WINDOW, sentences
from ragcli.answer.grounding import strip_instructions
from ragcli.answer.question import Question
from ragcli.config import load_settings
from ragcli.index.pipeline import build_index

from ..conftest import ROOT

PYDOCS = ROOT / ".." / "shared" / "eval" / "pydocs"
NEAR_TOPIC = ROOT / "benchmarks" / "sets" / "pydocs-near-topic.jsonl"


def _question(qid: str) -> dict:
    for line in NEAR_TOPIC.read_text().splitlines():
        item = json.loads(line)
        if item["id"] == qid:
            return item
    raise LookupError(qid)


def _by_meaning_alone(asker: Asker, question: str, hits, keep: int = 8) -> list[str]:
    """The sentences the model read when sentences were ranked by meaning alone: the
    ``keep`` closest of the passages near the best, each with its neighbours."""
    top = hits[:4]
    near = max(h.similarity for h in top) - PASSAGE_MARGIN
    cands = [
        (h.rank, j, s)
        for h in top
        if h.similarity >= near
        for j, s in enumerate(sentences(strip_instructions(h.chunk.text)))
    ]
    vecs = asker.retriever.embedder.embed([question] + [c[2] for c in cands])
    sims = vecs[1:] @ vecs[0]
    best = [int(i) for i in (-sims).argsort()[:keep]]
    pick = {
        j
        for i in best
        for j in range(i - WINDOW, i + WINDOW + 1)
        if 0 <= j < len(cands) and cands[j][0] == cands[i][0]
    }
    return [cands[i][2] for i in sorted(pick)]


@pytest.fixture(scope="module")
def asker(tmp_path_factory, embedder):
    if not PYDOCS.is_dir():
        pytest.skip(f"the pydocs dev corpus is not at {PYDOCS}")
    index = tmp_path_factory.mktemp("index") / "index"
    settings = load_settings(
        {"index_dir": index, "model": "qwen2.5-coder-1.5b", "answer_cache": False}
    )
    build_index([PYDOCS.resolve()], settings, embedder=embedder)
    with Asker(settings) as a:
        a.retriever._embedder = embedder
        yield a


def test_an_answer_meaning_alone_ranks_low_is_shown_and_copied(asker):
    item = _question("nt-123")  # a C function named in a three-word sentence
    question, alias = item["question"], item["answers"][0]
    found = asker.retriever.search(question)
    assert alias in " ".join(h.chunk.text for h in found.hits[:4])  # retrieval found it
    assert alias not in " ".join(_by_meaning_alone(asker, question, found.hits))
    _, _, chosen = asker.read(Question.parse(question), found)
    assert any(alias in s for s in chosen.sentences)
    a = asker.ask(question)
    assert a.answered and alias in a.answer, (a.answer, a.raw_answer, a.reason)
