"""`python -m benchmarks workload`: the workload runner, on the real model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.prefix_cache_workload import read_questions, run_workload
from ragcli.config import load_settings
from ragcli.errors import UsageError


def test_read_questions_text_and_jsonl(tmp_path: Path):
    txt = tmp_path / "q.txt"
    txt.write_text("Who?\n\n# comment\n  What?  \n")
    assert read_questions(txt) == ["Who?", "What?"]
    jl = tmp_path / "q.jsonl"
    jl.write_text('{"question": "Who?", "id": 1}\n\n{"question": "When?"}\n')
    assert read_questions(jl) == ["Who?", "When?"]
    jl.write_text('{"q": "Who?"}\n')
    with pytest.raises(UsageError, match=":1:"):
        read_questions(jl)
    (tmp_path / "empty.txt").write_text("\n# nothing\n")
    with pytest.raises(UsageError):
        read_questions(tmp_path / "empty.txt")


def test_workload_one_question(corpus_index: Path):
    questions = ["When did Apollo 11 land on the Moon?"]
    report = run_workload(questions, load_settings({"index_dir": corpus_index}))
    assert report.answers_differ == 0
    assert report.off.questions == report.on.questions == 1
    assert report.off.cached_tokens == 0  # --no-cache
    if report.on.model_questions:
        assert report.off.ttft_mean_ms > 0 and report.on.prompt_tokens > 0
    json.dumps(report.as_dict())
