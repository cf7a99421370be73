"""What every engine promises, checked the same way on each: llama.cpp in this process and
an OpenAI-compatible server (llama-cpp-python's), both opened through `open_engine` and
used as an `Engine` only."""

from __future__ import annotations

from typing import cast

import pytest

from ragcli.answer import copying
from ragcli.answer.prompt import IDK, engine_prompt
from ragcli.answer.question import Question
from ragcli.answer.rerank import reranked
from ragcli.answer.retrieval import SearchResult
from ragcli.config import load_settings
from ragcli.errors import ModelError
from ragcli.llm.base import Engine, Ranker
from ragcli.llm.factory import open_engine
from ragcli.records import Hit, StoredChunk

CONTEXT = ["The night ferry to Quillmoor leaves from pier 7 at 21:40 on weekdays."]
QUESTION = "From which pier does the night ferry to Quillmoor leave?"


@pytest.fixture(params=["llama.cpp", "server"])
def engine(request, tmp_path):
    if request.param == "server":
        settings = load_settings({"llm_url": request.getfixturevalue("llm_url")})
    else:
        settings = load_settings({"model": "gemma-3-270m", "cache_dir": tmp_path / "cache"})
        (tmp_path / "cache").mkdir()
        (tmp_path / "cache" / "models").symlink_to(load_settings().cache_dir / "models")
    engine: Engine = open_engine(settings)
    yield engine
    engine.close()


def _prompt(engine: Engine):
    return engine_prompt(QUESTION, CONTEXT, engine)


def test_generates_streams_and_reports(engine: Engine):
    pieces: list[str] = []
    out = engine.generate(_prompt(engine), max_tokens=12, on_text=pieces.append, use_cache=False)
    assert isinstance(engine.model.name, str) and engine.model.name
    assert "".join(pieces) == out.text
    t = out.timings
    assert t.prompt_tokens > 20  # the instructions, the sentence and the question
    assert 1 <= t.completion_tokens <= 12
    assert t.ttft_ms > 0 and t.total_ms >= t.ttft_ms


def test_copies_a_span_when_it_can_constrain(engine: Engine):
    dec = copying.decoder(Question.parse(QUESTION), CONTEXT, lambda: engine.vocabulary)
    if not engine.can_constrain:
        assert engine.vocabulary is None
        with pytest.raises(ModelError, match="constrained"):
            engine.generate(_prompt(engine), max_tokens=8, constraint=dec)
        return
    engine.generate(_prompt(engine), max_tokens=12, use_cache=False, constraint=dec)
    copied = copying.read(dec, Question.parse(QUESTION), CONTEXT)
    assert copied.abstained or copied.text in CONTEXT[0]
    assert copied.abstained or copied.text.strip() not in ("", IDK)


def test_shows_where_its_attention_goes_when_it_can_rank(engine: Engine):
    passages = [f"{CONTEXT[0]}\n\n", "Bananas ripen faster beside apples in a paper bag.\n\n"]
    if not engine.can_rank:  # retrieval's order is kept, with a note
        assert not hasattr(engine, "passage_attention")
        hits = [
            Hit(StoredChunk(f"{i}.md", 0, 1, 1, text, 12, id=i), 1 / (i + 1), i + 1, 0.5)
            for i, text in enumerate(reversed(passages))
        ]
        kept = reranked(QUESTION, SearchResult(QUESTION, hits, 0.0, 0.0), engine, 1)
        assert kept.hits == hits[:1] and kept.rerank_ms == 0
        return
    ranker = cast(Ranker, engine)
    attention, read = ranker.passage_attention(
        "Passages:\n\n", passages, "Question: ", [QUESTION, "N/A"]
    )
    queries, layers, n = attention.shape
    assert (queries, n) == (2, 2) and layers > 1
    assert read > 30  # the passages and both queries
    assert (attention >= 0).all()
    # Past the first layers, the question looks at the passage about its ferry.
    deep = attention[0, layers // 3 :].sum(axis=0)
    assert deep[0] > deep[1]
    # Half the depth: the layers after it are not computed; those before are as they were.
    half, _ = ranker.passage_attention(
        "Passages:\n\n", passages, "Question: ", [QUESTION, "N/A"], depth=0.5
    )
    assert half.shape == (2, -(-layers // 2), 2)
    assert half == pytest.approx(attention[:, : half.shape[1]], rel=1e-3, abs=1e-4)
