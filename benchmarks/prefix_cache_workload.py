"""`python -m benchmarks workload`: a question file answered in fresh processes, as a user would,
with the prefix cache off and on, checking that the answers agree.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Annotated, Any

import typer

from ragcli.bench.prefill_cost import rounded
from ragcli.cli.bench.common import exit_on_mismatch, status_line
from ragcli.cli.failures import handle_errors
from ragcli.cli.options import IndexOpt, JsonOpt, QuietOpt, settings
from ragcli.cli.output import print_json, stdout_console
from ragcli.config import Settings
from ragcli.errors import RagError, UsageError


def read_questions(path: Path) -> list[str]:
    """Questions from a text file (one a line; # comments) or JSONL with a ``question`` field."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read questions from {path}: {exc}") from None
    lines = [(i, ln.strip()) for i, ln in enumerate(text.splitlines(), 1) if ln.strip()]
    jsonl = path.suffix.lower() in (".jsonl", ".ndjson") or (
        bool(lines) and lines[0][1].startswith("{")
    )
    out = []
    for i, line in lines:
        if jsonl:
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise UsageError(f"{path}:{i}: not JSON ({exc.msg})") from None
            q = obj.get("question") if isinstance(obj, dict) else None
            if not isinstance(q, str) or not q.strip():
                raise UsageError(f'{path}:{i}: no "question" string')
            out.append(q.strip())
        elif not line.startswith("#"):
            out.append(line)
    if not out:
        raise UsageError(f"no questions in {path}")
    return out


TIMING_KEYS = (
    "ttft_ms",
    "prompt_tokens",
    "cached_tokens",
    "prefill_ms",
    "cache_source",
    "total_ms",
)


@dataclass
class QuestionRun:
    """One `rag ask --json` process."""

    answer: str
    raw_answer: str
    reason: str
    wall_ms: float
    timings: dict[str, Any]

    @property
    def used_model(self) -> bool:
        return int(self.timings.get("prompt_tokens") or 0) > 0


@dataclass
class PassSummary:
    """One pass over the questions (cache off or on)."""

    name: str
    questions: int
    model_questions: int  # prompt_tokens > 0
    no_model_questions: int  # answered "I don't know" before the model
    ttft_mean_ms: float
    ttft_median_ms: float
    wall_mean_ms: float  # whole process, as the user waits for it
    total_mean_ms: float  # ask's own total_ms
    prompt_tokens: int
    cached_tokens: int
    cached_share: float


@dataclass
class WorkloadReport:
    index_dir: str
    questions: list[str]
    off: PassSummary
    on: PassSummary
    answers_differ: int
    per_question: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return rounded(asdict(self))


def summarize(name: str, runs: list[QuestionRun]) -> PassSummary:
    """Means and medians over one pass; TTFT and cache share only where the model ran."""
    model = [r for r in runs if r.used_model]
    ttft = [float(r.timings["ttft_ms"]) for r in model]
    prompt = sum(int(r.timings["prompt_tokens"]) for r in model)
    cached = sum(int(r.timings.get("cached_tokens") or 0) for r in model)
    return PassSummary(
        name=name,
        questions=len(runs),
        model_questions=len(model),
        no_model_questions=len(runs) - len(model),
        ttft_mean_ms=statistics.fmean(ttft) if ttft else 0.0,
        ttft_median_ms=statistics.median(ttft) if ttft else 0.0,
        wall_mean_ms=statistics.fmean(r.wall_ms for r in runs) if runs else 0.0,
        total_mean_ms=statistics.fmean(float(r.timings["total_ms"]) for r in runs) if runs else 0.0,
        prompt_tokens=prompt,
        cached_tokens=cached,
        cached_share=cached / prompt if prompt else 0.0,
    )


def cache_dir_for_pass(root: Path, name: str, shared: Path) -> Path:
    """A fresh cache folder that still sees the assembled model and file digests.

    Without them every pass would first rebuild the default GGUF, and the
    first question would pay for it.
    """
    d = root / name
    d.mkdir()
    for sub in ("models", "digests"):
        src = shared / sub
        if src.is_dir():
            (d / sub).symlink_to(src, target_is_directory=True)
    return d


def ask_in_process(question: str, index_dir: Path, cache_dir: Path, use_cache: bool) -> QuestionRun:
    """Run `python -m ragcli ask --json` as a new process, as a script would."""
    cmd = [sys.executable, "-m", "ragcli", "ask", "--json", "--index", str(index_dir)]
    # The KV cache is what is measured: the answer cache stays out of both passes.
    cmd.append("--no-cache" if not use_cache else "--no-answer-cache")
    cmd += ["--", question]
    env = {**os.environ, "RAG_CACHE_DIR": str(cache_dir)}
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    wall = (time.perf_counter() - t0) * 1000
    if proc.returncode not in (0, 1):  # 1 is "I don't know", still an answer
        last = (proc.stderr.strip().splitlines() or ["no message"])[-1]
        raise RagError(f"rag ask failed (exit {proc.returncode}) on {question!r}: {last}")
    try:
        data = json.loads(proc.stdout.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        raise RagError(f"rag ask printed no JSON for {question!r}") from None
    return QuestionRun(
        answer=data["answer"],
        raw_answer=data.get("raw_answer", ""),
        reason=data.get("reason", ""),
        wall_ms=wall,
        timings={k: data["timings"].get(k) for k in TIMING_KEYS},
    )


def run_workload(
    questions: list[str],
    settings: Settings,
    docs: Path | None = None,
    progress: Callable[[str], None] | None = None,
) -> WorkloadReport:
    """Answer each question in a fresh process with the prefix cache off, then on.

    The two runs of a question are back to back so background load hits both
    alike; the "on" pass starts from an empty cache folder, so it includes
    the cost of filling it.
    """
    from ragcli.models import generation_model
    from ragcli.stores.factory import open_store

    index_dir = settings.index_dir
    if docs is not None:
        from ragcli.index.pipeline import build_index

        if progress:
            progress(f"indexing {docs}")
        build_index([docs], settings)
    open_store(settings).close()  # a clear error now, not one per process
    generation_model(settings.model, settings.cache_dir)  # assembled once, outside the timing
    qs = [q for q in questions if q != "-"]
    off_runs, on_runs, per_q = [], [], []
    with tempfile.TemporaryDirectory(prefix="rag-bench-") as tmp:
        root = Path(tmp)
        off_dir = cache_dir_for_pass(root, "off", settings.cache_dir)
        on_dir = cache_dir_for_pass(root, "on", settings.cache_dir)
        for i, q in enumerate(qs, 1):
            if progress:
                progress(f"question {i}/{len(qs)}")
            off = ask_in_process(q, index_dir, off_dir, use_cache=False)
            on = ask_in_process(q, index_dir, on_dir, use_cache=True)
            off_runs.append(off)
            on_runs.append(on)
            per_q.append(
                {
                    "question": q,
                    "answer_off": off.answer,
                    "answer_on": on.answer,
                    "same": off.answer == on.answer,
                    "off": off.timings,
                    "on": on.timings,
                }
            )
    return WorkloadReport(
        index_dir=str(index_dir),
        questions=qs,
        off=summarize("off", off_runs),
        on=summarize("on", on_runs),
        answers_differ=sum(not p["same"] for p in per_q),
        per_question=per_q,
    )


@handle_errors
def workload_command(
    questions: Annotated[
        Path,
        typer.Argument(
            help="Questions: one a line, or JSONL with a 'question' field.", show_default=False
        ),
    ],
    docs: Annotated[
        Path | None,
        typer.Option("--docs", help="Index (or update) this folder first.", show_default=False),
    ] = None,
    index: IndexOpt = None,
    limit: Annotated[
        int | None,
        typer.Option("--limit", min=1, help="Only the first N questions.", show_default=False),
    ] = None,
    json_out: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Ask each question in a new process with the prompt cache off, then on; compare."""

    qs = read_questions(questions)[:limit]
    with status_line(json_out, quiet) as say:
        report = run_workload(qs, settings(index_dir=index), docs, progress=say)
    if json_out:
        print_json(report.as_dict())
        exit_on_mismatch(report.answers_differ)
        return
    from rich.table import Table

    table = Table(
        title=f"{len(report.questions)} questions over {report.index_dir}, "
        "one process each (times in ms)"
    )
    table.add_column("cache")
    for col in (
        "model runs\n(+ no model)",
        "TTFT\nmean",
        "TTFT\nmedian",
        "wall per\nprocess",
        "prompt\ntokens",
        "cached\ntokens",
        "from\ncache",
    ):
        table.add_column(col, justify="right")
    for p in (report.off, report.on):
        table.add_row(
            p.name,
            f"{p.model_questions} (+{p.no_model_questions})",
            f"{p.ttft_mean_ms:.0f}",
            f"{p.ttft_median_ms:.0f}",
            f"{p.wall_mean_ms:.0f}",
            str(p.prompt_tokens),
            str(p.cached_tokens),
            f"{p.cached_share:.0%}",
        )
    out = stdout_console()
    out.print(table)
    status = "[green]ok[/green]" if report.answers_differ == 0 else "[red]MISMATCH[/red]"
    out.print(f"answers that differ between off and on: {report.answers_differ} {status}")
    exit_on_mismatch(report.answers_differ)
