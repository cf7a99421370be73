"""`python -m benchmarks models`: the catalogue's models side by side, in one run, on one question set.

Each model answers the whole set in a fresh `rag eval` process (accuracy, abstention, peak
RSS), then one question in fresh `rag ask` processes: cold (no KV cache) and repeated (its
prefix states on disk), the way a script meets the tool.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

from ragcli.answer.evaluation import load_questions
from ragcli.bench.fresh_process import run_measured
from ragcli.cli.bench.common import QuestionSetArg
from ragcli.cli.failures import handle_errors
from ragcli.cli.options import IndexOpt, JsonOpt, settings
from ragcli.cli.output import print_json, stdout_console
from ragcli.config import Settings
from ragcli.models import generation_model


@dataclass
class ModelRow:
    model: str
    accuracy: float | None
    abstention: float | None
    false_abstention: float | None
    eval_median_ttft_ms: float | None
    cached_share: float | None  # of the set's prompt tokens, served from the KV cache
    ttft_cold_ms: float  # fresh process, no KV cache: from process start to the first token
    ttft_repeat_ms: float  # fresh process, the same question's prefix states on disk
    ttft_outside_prefill_ms: float  # of the cold run: what is not the model reading the prompt
    prefill_tok_s: float
    decode_tok_s: float
    peak_rss_mb: float  # the largest of the eval and ask processes
    disk_mb: float


def _process_ttft(out: str) -> tuple[float, dict]:
    data = json.loads(out)
    return float(data["profile"]["process_ttft_ms"]), data


def models_bench(
    settings: Settings, models: list[str], questions: Path, runs: int = 3
) -> list[ModelRow]:
    """Score and time each model (see module docstring); medians over ``runs`` fresh asks.

    The timed question is the set's first answerable one.
    """
    question = next(q.question for q in load_questions(questions) if q.answerable)
    rag = [sys.executable, "-m", "ragcli"]
    index = ["--index", str(settings.index_dir)]
    rows = []
    for name in models:
        model = generation_model(name, settings.cache_dir)  # assembled before any clock
        with tempfile.TemporaryDirectory() as tmp:
            env = {**os.environ, "RAG_CACHE_DIR": tmp}  # a cold KV cache for each model
            os.symlink(settings.cache_dir / "models", Path(tmp) / "models")
            _, eval_rss, out = run_measured(
                [*rag, "eval", str(questions), *index, "--model", name, "--json"], env
            )
            summary = json.loads(out)["summary"]
            # The repeated question measures the KV cache, so the answer cache stays out.
            ask = [*rag, "ask", "--json", "--profile", "--no-answer-cache", *index, "--model", name]
            ask.append(question)
            cold, repeat, outside, rss, prefill, decode = [], [], [], [eval_rss], [], []
            for _ in range(runs):
                _, peak, out = run_measured([*ask[:4], "--no-cache", *ask[4:]], env)
                ttft, data = _process_ttft(out)
                cold.append(ttft)
                outside.append(data["profile"]["ttft_outside_prefill_ms"])
                prefill.append(data["timings"]["prefill_tok_s"])
                decode.append(data["timings"]["decode_tok_s"])
                rss.append(peak)
                run_measured(ask, env)  # leaves the question's prefix states on disk
                _, peak, out = run_measured(ask, env)
                repeat.append(_process_ttft(out)[0])
                rss.append(peak)
        med = statistics.median
        rows.append(
            ModelRow(
                model=name,
                accuracy=summary["answer_accuracy"],
                abstention=summary["abstention_accuracy"],
                false_abstention=summary["false_abstention_rate"],
                eval_median_ttft_ms=summary["median_ttft_ms"],
                cached_share=summary["cached_share"],
                ttft_cold_ms=round(med(cold), 1),
                ttft_repeat_ms=round(med(repeat), 1),
                ttft_outside_prefill_ms=round(med(outside), 1),
                prefill_tok_s=round(med(prefill), 1),
                decode_tok_s=round(med(decode), 1),
                peak_rss_mb=round(max(rss), 1),
                disk_mb=round(model.path.stat().st_size / 1e6, 1),
            )
        )
    return rows


@handle_errors
def models_command(
    questions: QuestionSetArg,
    model: Annotated[
        list[str] | None,
        typer.Option("--model", help="A model name or GGUF; repeatable (default: the catalogue)."),
    ] = None,
    index: IndexOpt = None,
    runs: Annotated[int, typer.Option("--runs", min=1, help="Fresh `rag ask` runs per model.")] = 3,
    json_out: JsonOpt = False,
) -> None:
    """Answer quality, time to first token, speed, memory and disk of models side by side."""
    from dataclasses import asdict

    from ragcli.models import CATALOG

    rows = models_bench(settings(index_dir=index), model or list(CATALOG), questions, runs)
    if json_out:
        print_json([asdict(r) for r in rows])
        return
    from rich.table import Table

    table = Table("model", "accuracy", "abstention", "false abst.", "cached", "TTFT cold ms",
                  "TTFT repeat ms", "TTFT-prefill ms", "prefill tok/s", "decode tok/s",
                  "peak RSS MB", "disk MB", title="fresh processes, medians")  # fmt: skip
    for r in rows:
        rates = (r.accuracy, r.abstention, r.false_abstention, r.cached_share)
        table.add_row(r.model, *("-" if v is None else f"{v:.3f}" for v in rates),
                      *(f"{v:.0f}" for v in (r.ttft_cold_ms, r.ttft_repeat_ms,
                        r.ttft_outside_prefill_ms, r.prefill_tok_s)),
                      f"{r.decode_tok_s:.1f}", f"{r.peak_rss_mb:.0f}", f"{r.disk_mb:.0f}")  # fmt: skip
    stdout_console().print(table)
