"""`rag bench`: the prefill sweep and the workload runner, on the real model."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from ragcli.bench.workload import (
    fit_quadratic,
    prefill_sweep,
    read_questions,
    run_workload,
    sweep_lengths,
)
from ragcli.config import load_settings
from ragcli.errors import UsageError


def test_sweep_lengths_double_and_stop_at_the_context():
    assert sweep_lengths(2048, 4096) == [64, 128, 256, 512, 1024, 2048]
    assert sweep_lengths(100_000, 4096)[-2:] == [2048, 4080]
    with pytest.raises(UsageError):
        sweep_lengths(32, 4096)


def test_fit_recovers_a_quadratic():
    xs = [64, 128, 256, 512, 1024]
    fit = fit_quadratic(xs, [5 + 0.5 * x + 0.001 * x * x for x in xs], 4096)
    assert fit.degree == 2
    assert fit.a == pytest.approx(5, abs=1e-6)
    assert fit.l_star == pytest.approx(500)
    flat = fit_quadratic(xs, [x - 1e-5 * x * x for x in xs], 4096)
    assert flat.l_star is None and "beyond n_ctx" in flat.note


def test_prefill_sweep_and_plot(tmp_path: Path):
    # One thread: the fastest and steadiest on a machine shared with other work.
    report = prefill_sweep(load_settings({"n_threads": 1}), max_len=128, reps=1)
    assert [r.tokens for r in report.rows] == [64, 128]
    for r in report.rows:
        assert r.cold.tok_s > 0 and r.bare.tok_s > 0 and r.cached.tok_s > 0
        assert r.cached_prefix_tokens == r.tokens - 32
    assert report.fit.degree == 1  # two lengths: a line
    data = report.as_dict()
    assert set(data["fit"]) >= {"a", "b", "c", "l_star"}
    json.dumps(data)
    if importlib.util.find_spec("matplotlib") is not None:
        from ragcli.bench.workload import plot_prefill

        out = plot_prefill(report, tmp_path / "prefill.png")
        assert out.read_bytes()[:4] == b"\x89PNG"


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
