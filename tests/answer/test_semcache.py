"""The semantic answer cache, with the real embedding model, FAISS index and small LLM."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from ragcli.answer.answer_cache import FILE, AnswerCache
from ragcli.answer.asker import Asker
from ragcli.answer.question import Question
from ragcli.config import Settings, load_settings
from tests.conftest import CORPORA

QUESTION = "Which enzyme fixes carbon dioxide during the Calvin cycle?"
PARAPHRASE = "In the Calvin cycle, which enzyme fixes carbon dioxide?"  # cosine 0.99
NEAR_MISS_BASE = "Which tributary meets the Rhine at Koblenz?"
NEAR_MISS = "Which tributary joins the Rhine at Mainz?"  # 3 of 4 passages shared, cosine 0.77


@pytest.fixture
def cache_dir(tmp_path: Path) -> Path:
    """An empty cache folder that still sees the installed models."""
    d = tmp_path / "cache"
    d.mkdir()
    (d / "models").symlink_to(Settings().cache_dir / "models", target_is_directory=True)
    return d


def _settings(index: Path, cache_dir: Path, **more) -> Settings:
    return load_settings({"index_dir": index, "cache_dir": cache_dir, **more})


def _served(answer) -> bool:
    return answer.timings.cache_source == "answer"


def test_same_question_and_paraphrase_are_served_without_the_model(corpus_index, cache_dir):
    s = _settings(corpus_index, cache_dir)
    with Asker(s) as asker:
        first = asker.ask(QUESTION)
    assert (first.reason, first.answer) == ("answered", "RuBisCO")  # an answer to reuse
    assert first.timings.prompt_tokens > 0 and not _served(first)
    # A new asker (as a new process would be): the model is not even loaded for a hit.
    with Asker(s) as asker:
        again = asker.ask(QUESTION)
        reworded = asker.ask(PARAPHRASE)
        assert not asker.engine_loaded
    for served in (again, reworded):
        assert _served(served) and served.timings.prompt_tokens == 0
        assert (served.answer, served.raw_answer, served.reason) == (
            first.answer,
            first.raw_answer,
            first.reason,
        )
        assert served.cached_question == QUESTION
        assert {h.chunk.id for h in served.sources} == {h.chunk.id for h in first.sources}
        cited = {h.chunk.id for h in served.sources if h.rank in served.cited}
        assert cited == {h.chunk.id for h in first.sources if h.rank in first.cited}
    assert again.cache_similarity == pytest.approx(1.0, abs=1e-4)
    assert 0.9 <= reworded.cache_similarity < 1.0
    out = reworded.as_dict()
    assert out["timings"]["cache_source"] == "answer"
    assert out["cache_similarity"] == reworded.cache_similarity


def test_near_miss_with_the_same_passages_is_not_served(corpus_index, cache_dir):
    with Asker(_settings(corpus_index, cache_dir)) as asker:
        base = asker.ask(NEAR_MISS_BASE)
        near = asker.ask(NEAR_MISS)
    # Mostly the same passages: only the question tells them apart.
    assert len({h.chunk.id for h in base.sources} & {h.chunk.id for h in near.sources}) >= 3
    assert base.reason != "no_relevant_passages"
    assert not _served(near) and near.timings.prompt_tokens > 0
    # Only the threshold kept it out: a lax one would have served the wrong answer.
    with Asker(_settings(corpus_index, cache_dir, answer_cache_threshold=0.7)) as asker:
        lax = asker.ask(NEAR_MISS)
    assert _served(lax) and lax.cached_question in (NEAR_MISS_BASE, NEAR_MISS)


def test_a_new_index_generation_is_not_served(tmp_path, cache_dir, embedder):
    from ragcli.index.pipeline import build_index

    docs = tmp_path / "docs"
    shutil.copytree(CORPORA / "science", docs)
    index = tmp_path / "index"
    s = _settings(index, cache_dir)
    build_index([docs], s, embedder=embedder)
    with Asker(s) as asker:
        first = asker.ask(QUESTION)
        assert _served(asker.ask(QUESTION))
    (docs / "new.txt").write_text("Ferns reproduce with spores rather than seeds.\n")
    build_index([docs], s, embedder=embedder)  # a commit: the store's generation moves on
    with Asker(s) as asker:
        after = asker.ask(QUESTION)
        assert _served(asker.ask(QUESTION))  # and is cached anew under the new generation
    assert first.reason != "no_relevant_passages"
    assert not _served(after) and after.timings.prompt_tokens > 0


def test_each_switch_turns_off_its_own_cache(corpus_index, cache_dir):
    for switches in ({"answer_cache": False}, {"answer_cache": False, "use_cache": False}):
        with Asker(_settings(corpus_index, cache_dir, **switches)) as asker:
            asker.ask(QUESTION)
            assert not _served(asker.ask(QUESTION))
        assert not (cache_dir / FILE).exists()
    with Asker(_settings(corpus_index, cache_dir, use_cache=False)) as asker:  # KV off only
        first = asker.ask(QUESTION)
        assert _served(asker.ask(QUESTION))
    assert first.timings.cached_tokens == 0  # the prefix states on disk were not used


def test_a_corrupt_cache_file_is_ignored_and_rebuilt(corpus_index, cache_dir):
    path = cache_dir / FILE
    path.write_bytes(b"this is not a database" * 100)
    s = _settings(corpus_index, cache_dir)
    with Asker(s) as asker:
        first = asker.ask(QUESTION)
        assert not _served(first)
        assert _served(asker.ask(QUESTION))
    with sqlite3.connect(path) as db:  # a real database again, holding the answer
        assert db.execute("SELECT COUNT(*) FROM answers").fetchone()[0] == 1
        # A damaged row is never served and is deleted.
        db.execute("UPDATE answers SET payload = replace(payload, 'answer', 'answr')")
    with Asker(s) as asker:
        assert not _served(asker.ask(QUESTION))
        assert _served(asker.ask(QUESTION))


def _vector(seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal(384).astype(np.float32)
    return v / np.linalg.norm(v)


def _fields(text: str) -> dict:
    return {
        "answer": text,
        "raw_answer": text,
        "reason": "answered",
        "grounded": True,
        "support": 1.0,
        "cited": [7],
        "evidence": [{"rank": 7, "line": 3, "text": text}],
        "model": "m",
    }


def test_the_size_bound_evicts_the_least_recently_used(tmp_path):
    cache = AnswerCache(tmp_path / FILE, max_bytes=20_000, threshold=0.9)
    for i in range(40):
        cache.store("scope", f"key{i}", f"question {i}", _vector(i), _fields(f"answer {i}"))
        if i == 5:
            assert (
                cache.lookup("key0", Question.parse("question 0"), _vector(0)) is not None
            )  # key0 used
    st = cache.stats()
    assert 0 < st.entries < 40 and st.bytes <= 20_000
    assert cache.lookup("key39", Question.parse("question 39"), _vector(39)).answer == "answer 39"
    assert (
        cache.lookup("key1", Question.parse("question 1"), _vector(1)) is None
    )  # oldest unused: gone
    assert cache.clear() == st.entries and cache.stats().entries == 0


def test_lookup_needs_the_key_the_threshold_and_the_same_numbers(tmp_path):
    cache = AnswerCache(tmp_path / FILE, max_bytes=1 << 20, threshold=0.9)
    q = _vector(1)
    cache.store("scope", "k", "Who managed Python 3.11?", q, _fields("someone"))
    near = q + 0.2 * _vector(2)  # cosine about 0.98
    assert (
        cache.lookup("k", Question.parse("Who managed the Python 3.11 series?"), near).answer
        == "someone"
    )
    assert cache.lookup("other", Question.parse("Who managed Python 3.11?"), q) is None
    assert (
        cache.lookup("k", Question.parse("Who managed Python 3.12?"), q) is None
    )  # another number
    assert (
        cache.lookup("k", Question.parse("Who managed Python 3.11?"), _vector(3)) is None
    )  # far away
    assert cache.has_scope("scope") and not cache.has_scope("else")
    assert Question.parse("Python 3.11 in 2022, 8 of them?").numbers == {"3.11", "2022", "8"}
