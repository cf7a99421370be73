"""Answers with the reading cache on, through the default model: an answer read apart that
won by too little is read again whole, and a passage edited by `rag index` is read anew."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragcli.answer.asker import Asker
from ragcli.cli.output import timing_line
from ragcli.config import Settings, load_settings
from ragcli.errors import ConfigError
from ragcli.index.pipeline import build_index

RIVER = """# The Danube

The Danube rises in the Black Forest of Germany. It flows east for about {length}
kilometres. It empties into the Black Sea through a wide delta.
"""


def _settings(index: Path, cache: Path, **over) -> Settings:
    if not cache.exists():
        cache.mkdir()
        (cache / "models").symlink_to(Settings().cache_dir / "models", target_is_directory=True)
    base = {"model": "qwen2.5-coder-1.5b", "answer_cache": False, "reading_cache": True}
    return load_settings({**base, "index_dir": index, "cache_dir": cache, **over})


def test_an_answer_read_apart_that_won_by_a_hair_is_read_again_whole(
    corpus_index, embedder, tmp_path
):
    # Read apart, the Koblenz sentence never saw the other rivers' sentences and the model
    # copied "Aare" from a neighbouring one (demo-08), winning by a few tenths of a logit.
    question = "Which tributary meets the Rhine at Koblenz?"
    answers = {}
    for name, over in {"whole": {"reading_cache": False}, "cold": {}}.items():
        with Asker(_settings(corpus_index, tmp_path / name, **over), preload=False) as a:
            a.retriever._embedder = embedder
            answers[name] = a.ask(question)
            if name == "cold":  # its sentences are kept now: without the whole reading's
                a.engine.cache.clear()  # state to restore, they are read apart
                answers["repaired"] = a.ask(question)
    whole, cold, repaired = answers["whole"], answers["cold"], answers["repaired"]
    assert "Moselle" in whole.answer
    assert whole.timings.reread_ms == 0  # read whole at once: nothing to give up
    # An empty reading cache: read whole, the same answer; the sentences kept after it.
    assert cold.answer == whole.answer and cold.timings.reading_tokens == 0
    assert cold.timings.reread_ms == 0 and cold.timings.keep_tokens > 0
    assert "kept in the reading cache" in timing_line(cold.as_dict()["timings"], cold.reason)
    assert repaired.timings.keep_tokens == 0  # nothing new to keep
    # Read apart, its margin was below the default: read again, the whole reading's answer.
    assert repaired.timings.reread_ms > 0
    assert repaired.answer == whole.answer
    assert repaired.timings.ttft_ms > repaired.timings.reread_ms  # the first try counts
    assert "then whole" in timing_line(repaired.as_dict()["timings"], repaired.reason)
    assert "then whole" not in timing_line(whole.as_dict()["timings"], whole.reason)


def test_a_passage_edited_between_two_questions_is_read_anew(tmp_path, embedder):
    docs, index, cache = tmp_path / "docs", tmp_path / "index", tmp_path / "cache"
    docs.mkdir()
    question = "How many kilometres does the Danube flow?"
    given = []
    for length in ("2,850", "2,860"):
        (docs / "danube.md").write_text(RIVER.format(length=length))
        settings = _settings(index, cache, reading_margin=0.0)
        build_index([docs], settings, embedder=embedder)
        with Asker(settings, preload=False) as a:
            a.retriever._embedder = embedder
            a.ask(question)  # new sentences: read whole, then kept apart
            a.engine.cache.clear()  # the whole reading's state: else it is restored
            answer = a.ask(question)
            assert answer.timings.reading_tokens > 0  # read apart, from the cache
            assert answer.timings.reread_ms == 0  # margin 0: kept as read apart
            given.append((answer.answer, a.engine.reading.stats().files))
    (first, stored), (second, stored_after) = given
    assert "2,850" in first and "2,860" in second, given
    # The edited sentence (and those read after it) were read and kept anew.
    assert stored > 0 and stored_after > stored


def test_a_negative_margin_is_refused():
    with pytest.raises(ConfigError, match="reading_margin"):
        load_settings({"reading_margin": -1.0})


def test_sentences_read_whole_before_are_restored_not_placed(corpus_index, embedder, tmp_path):
    question = "Which tributary meets the Rhine at Koblenz?"
    with Asker(_settings(corpus_index, tmp_path / "cache"), preload=False) as a:
        a.retriever._embedder = embedder
        first, again = a.ask(question), a.ask(question)
    # The prefix cache holds the context as read whole: that, not the reading cache.
    assert first.timings.keep_tokens > 0 and again.timings.reading_tokens == 0
    assert again.timings.cache_source == "disk" and again.timings.reread_ms == 0
    assert again.timings.cached_tokens > again.timings.prompt_tokens - 40
    assert again.answer == first.answer
