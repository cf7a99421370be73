"""`rag bench prefill`: the fit and the noise verdicts on synthetic timings, then one
short sweep on the real model through the command."""

from __future__ import annotations

import importlib.util
import json
import random
from pathlib import Path

import pytest

from benchmarks import write_report
from ragcli.bench.prefill_cost import (
    SPREAD_LIMIT,
    PrefillRow,
    PrefillRun,
    Stat,
    fit_prefill,
    judge,
    nnls,
    spread,
    sweep_lengths,
)
from ragcli.errors import UsageError

from ..conftest import rag

LENGTHS = [64, 128, 256, 512, 1024, 2048, 4096]


def _row(n: int, cold: list[float], bare: list[float] | None = None) -> PrefillRow:
    bare = bare or [v * 0.98 for v in cold]
    return PrefillRow(n, Stat(cold, n), Stat(bare, n), Stat([5.0, 5.1, 5.2], n), 3.0, n - 32)


def test_sweep_lengths_double_and_stop_at_the_context():
    assert sweep_lengths(2048, 4096) == [64, 128, 256, 512, 1024, 2048]
    assert sweep_lengths(4096, 4096 + 16) == LENGTHS
    assert sweep_lengths(100_000, 4096)[-2:] == [2048, 4080]
    with pytest.raises(UsageError):
        sweep_lengths(32, 4096)


def test_pure_quadratic_is_recovered_with_its_crossover():
    ms = [20 + 0.5 * n + 0.0002 * n * n for n in LENGTHS]
    fit = fit_prefill(LENGTHS, ms)
    assert (fit.a, fit.b, fit.c) == pytest.approx((20, 0.5, 0.0002), rel=1e-6)
    assert fit.r2 == pytest.approx(1.0)
    assert fit.l_star == pytest.approx(2500)
    assert "overtakes" in fit.note and "2,500" in fit.note
    assert fit.dominant(64) == "weights" and fit.dominant(4096) == "attention"
    assert fit.dominant(1) == "fixed"


def test_pure_linear_has_no_attention_term_and_no_crossover():
    fit = fit_prefill(LENGTHS, [3 + 1.2 * n for n in LENGTHS])
    assert fit.c == pytest.approx(0, abs=1e-12) and fit.b == pytest.approx(1.2, rel=1e-6)
    assert fit.l_star is None and "no attention term" in fit.note


def test_coefficients_never_go_negative():
    # Unconstrained least squares fits this bending-down curve with c < 0 (and the old
    # report printed a negative fixed cost for such data); held at zero instead.
    ms = [40 + 1.0 * n - 0.00008 * n * n for n in LENGTHS]
    fit = fit_prefill(LENGTHS, ms)
    assert min(fit.a, fit.b, fit.c) >= 0
    assert fit.c == 0 and fit.l_star is None
    # A small negative intercept is clipped to zero, the slope stays.
    fit = fit_prefill(LENGTHS, [-25 + 2.3 * n for n in LENGTHS])
    assert fit.a == 0 and fit.b > 2.2


def test_nnls_agrees_with_scipy():
    optimize = pytest.importorskip("scipy.optimize")
    import numpy as np

    rng = random.Random(3)
    xs = [64.0, 128.0, 256.0, 512.0, 1024.0]
    cols = [[1.0] * 5, xs, [x * x for x in xs]]
    for _ in range(30):
        y = [rng.uniform(-50, 50) + rng.uniform(-2, 2) * x + rng.uniform(-1e-3, 1e-3) * x * x
             for x in xs]  # fmt: skip
        coef = nnls(cols, y)
        assert min(coef) >= 0
        ref, _ = optimize.nnls(np.asarray(cols).T, np.asarray(y))

        def err(c, y=y):
            return sum(
                (c[0] + c[1] * x + c[2] * x * x - t) ** 2 for x, t in zip(xs, y, strict=True)
            )

        assert err(coef) == pytest.approx(err(ref), rel=1e-6, abs=1e-6)


def test_a_line_beyond_the_range_says_so():
    fit = fit_prefill(LENGTHS, [10 + 2.0 * n + 0.00001 * n * n for n in LENGTHS])
    assert fit.l_star == pytest.approx(200_000, rel=1e-3)
    assert "beyond the longest prompt" in fit.note


def test_fit_needs_three_lengths():
    with pytest.raises(UsageError, match="three"):
        fit_prefill([64, 128], [10.0, 20.0])


def test_spread_is_robust_to_one_outlier_from_five_repetitions():
    assert spread([100, 100, 100]) == 0
    assert spread([90, 100, 110]) == pytest.approx(0.10)
    assert spread([100, 101, 99, 100, 400]) < 0.02  # a burst in one repetition of five
    assert spread([50]) == 0


def test_steady_growing_run_is_trusted():
    rows = [_row(n, [n * 1.0, n * 1.01, n * 0.99]) for n in LENGTHS]
    v = judge(rows)
    assert v.ok and v.problems == [] and "agree" in v.message


def test_noisy_repetitions_are_flagged():
    rows = [_row(n, [n * 1.0, n * 1.01, n * 0.99]) for n in LENGTHS]
    rows[3] = _row(512, [512.0, 900.0, 300.0])
    v = judge(rows)
    assert not v.ok and v.spread_limit == SPREAD_LIMIT
    assert any(p.startswith("cold at 512 tokens") for p in v.problems)
    assert "noisy" in v.message


def test_longer_prompt_measured_faster_is_flagged():
    # The picture that started this: 4096 tokens "faster" than 2048.
    cold = {n: float(n) for n in LENGTHS}
    cold[4096] = 1500.0
    rows = [_row(n, [cold[n]] * 3) for n in LENGTHS]
    v = judge(rows)
    assert not v.ok
    assert "cold: 4096 tokens measured no slower than 2048" in v.problems
    assert "bare: 4096 tokens measured no slower than 2048" in v.problems


def test_command_writes_json_and_picture_from_one_run(tmp_path: Path):
    """A short real sweep (small model, 1 thread, 3 lengths, 2 repetitions); the lab's
    report writer turns its JSON into the BENCHMARKS.md section."""
    png = tmp_path / "prefill.png"
    args = ["bench", "prefill", "--max-len", "256", "--reps", "2", "--json"]
    if importlib.util.find_spec("matplotlib") is not None:
        args += ["--plot", str(png)]
    config = tmp_path / "config.toml"
    config.write_text("n_threads = 1\n")  # the steadiest on a machine shared with other work
    out = rag(*args, env={"RAG_CONFIG": str(config)})
    assert out.returncode == 0, out.stderr
    run = json.loads(out.stdout)
    (report,) = run["reports"]
    assert [r["tokens"] for r in report["rows"]] == [64, 128, 256]
    for row in report["rows"]:
        for name in ("cold", "bare", "cached", "reading"):
            s = row[name]
            assert len(s["samples_ms"]) == 2
            assert 0 < s["min_ms"] <= s["ms"] <= s["max_ms"]
        assert row["dominant"]
        # Warm, every sentence is placed from the reading cache and only the question read.
        assert row["reading_reused_tokens"] > 0 and row["reading_read_tokens"] > 0
        assert row["reading_reused_tokens"] + row["reading_read_tokens"] <= row["tokens"] + 2
    longest = report["rows"][-1]
    assert longest["reading_reused_tokens"] >= longest["tokens"] / 2
    fit = report["fit"]
    assert min(fit["a"], fit["b"], fit["c"]) >= 0 and "r2" in fit and "l_star" in fit
    assert set(report["verdict"]) == {"ok", "spread_limit", "problems", "message"}
    if not report["verdict"]["ok"]:
        assert "rag: warning:" in out.stderr  # a noisy run says so
    if "--plot" in args:
        assert png.read_bytes()[:4] == b"\x89PNG"
    # The section and the picture again from the run's JSON, without measuring.
    saved = tmp_path / "run.json"
    saved.write_text(out.stdout)
    older = json.loads(out.stdout)  # a run from before the reading series still redraws
    for row in older["reports"][0]["rows"]:
        del row["reading"], row["reading_reused_tokens"], row["reading_read_tokens"]
    assert all(r.reading is None for r in PrefillRun.from_dict(older).reports[0].rows)
    write_report.main(["prefill", str(saved), str(_doc(tmp_path)), "--plot", str(png)])
    text = (tmp_path / "BENCH.md").read_text()
    assert text.startswith("# Bench\n\nbefore\n") and text.endswith("after\n")
    assert "old table" not in text and "| 256 |" in text and report["model"] in text
    if "--plot" in args:
        again = ["bench", "prefill", "--replot", str(saved), "--plot", str(tmp_path / "b.png")]
        redo = rag(*again)
        assert redo.returncode == 0, redo.stderr
        assert (tmp_path / "b.png").read_bytes()[:4] == b"\x89PNG"


def _doc(tmp_path: Path) -> Path:
    start, end = write_report.PREFILL_MARKS
    doc = tmp_path / "BENCH.md"
    doc.write_text(f"# Bench\n\nbefore\n\n{start}\nold table\n{end}\n\nafter\n")
    return doc


def test_replot_refuses_other_json(tmp_path: Path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"reports": [{"model": "x"}]}')
    out = rag("bench", "prefill", "--replot", str(bad))
    assert out.returncode == 2 and out.stderr.count("\n") == 1
    assert "rag bench prefill --json" in out.stderr


def test_reps_must_be_a_count_or_auto():
    out = rag("bench", "prefill", "--reps", "often")
    assert out.returncode == 2 and "auto" in out.stderr
