"""`rag ask` and `rag cache` with the answer cache, as a script runs them (new processes)."""

from __future__ import annotations

import json
from pathlib import Path

from ragcli.config import Settings
from tests.conftest import rag

QUESTION = "Which enzyme fixes carbon dioxide during the Calvin cycle?"


def _ask(index: Path, env: dict, *flags: str) -> dict:
    out = rag("ask", "--json", "--index", str(index), *flags, QUESTION, env=env)
    assert out.returncode in (0, 1), out.stderr
    return json.loads(out.stdout)


def test_json_reports_the_answer_cache_and_no_cache_bypasses_it(corpus_index, tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "models").symlink_to(Settings().cache_dir / "models", target_is_directory=True)
    env = {"RAG_CACHE_DIR": str(cache)}
    first = _ask(corpus_index, env)
    assert first["timings"]["cache_source"] != "answer" and first["cache_similarity"] is None
    second = _ask(corpus_index, env)
    assert second["timings"]["cache_source"] == "answer"
    assert second["cache_similarity"] >= 0.9999 and second["cached_question"] == QUESTION
    assert (second["answer"], second["cited"]) == (first["answer"], first["cited"])
    for flag in ("--no-cache", "--no-answer-cache"):
        bypassed = _ask(corpus_index, env, flag)
        assert bypassed["timings"]["cache_source"] != "answer"
        assert bypassed["timings"]["prompt_tokens"] > 0
        assert bypassed["answer"] == first["answer"]
    plain = rag("ask", "--index", str(corpus_index), QUESTION, env=env)
    assert plain.stdout.startswith(first["answer"])  # printed, not lost while a model loads
    assert "answer cache" in plain.stderr
    stats = json.loads(rag("cache", "stats", "--json", env=env).stdout)
    assert stats["answers"]["entries"] == 1 and stats["answers"]["bytes"] > 0
    cleared = rag("cache", "clear", env=env)
    assert cleared.returncode == 0 and "1 answers" in cleared.stdout
    assert json.loads(rag("cache", "stats", "--json", env=env).stdout)["answers"]["entries"] == 0
