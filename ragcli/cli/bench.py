"""`rag bench prefill|workload`: measure prefill cost and what the prompt cache saves."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer

from ..errors import ExitCode, UsageError
from ..progress import Step
from .common import (
    IndexOpt,
    JsonOpt,
    ModelOpt,
    QuietOpt,
    display_path,
    handle_errors,
    print_json,
    settings,
    stdout_console,
)
from .progress import progress_line, showing

app = typer.Typer(
    help="Benchmark prefill and the prompt (KV) cache on this machine.", no_args_is_help=True
)


@contextmanager
def _status(json_out: bool, quiet: bool) -> Iterator[Callable[[str], None] | None]:
    """What the benchmark is at (which length, which step) as the progress line:
    on a terminal only, so stdout stays a table or one JSON object."""
    with progress_line(showing(json_out, quiet)) as progress:
        yield (lambda msg: progress(Step(msg))) if progress else None


@app.command("prefill")
@handle_errors
def prefill_command(
    model: ModelOpt = None,
    max_len: Annotated[
        int,
        typer.Option("--max-len", min=64, help="Longest prompt in tokens (capped at n_ctx-16)."),
    ] = 2048,
    reps: Annotated[
        int, typer.Option("--reps", min=1, help="Repetitions per length (median).")
    ] = 3,
    plot: Annotated[
        Path | None,
        typer.Option("--plot", help="Also draw ms vs length into this PNG.", show_default=False),
    ] = None,
    json_out: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Time prefill at 64, 128, 256, ... tokens: cold, bare llama_decode, cached prefix."""
    from ..bench.workload import check_plotting, plot_prefill, prefill_sweep

    if plot is not None:
        check_plotting()
    with _status(json_out, quiet) as say:
        report = prefill_sweep(settings(model=model), max_len, reps, progress=say)
    if plot is not None:
        plot_prefill(report, plot)
    if json_out:
        out = report.as_dict()
        if plot is not None:
            out["plot"] = str(plot)
        print_json(out)
        return
    from rich.table import Table

    table = Table(
        title=f"Prefill, {report.model} (n_ctx {report.n_ctx}, n_batch {report.n_batch}, "
        f"{report.n_threads} threads, median of {report.reps})"
    )
    for col in (
        "L",
        "cold\nms",
        "cold\ntok/s",
        "cold\nms/tok",
        "bare\nms",
        "bare\ntok/s",
        "over-\nhead",
        "load\nms",
        "cached\nms",
        "tok/s",
    ):
        table.add_column(col, justify="right")
    for r in report.rows:
        table.add_row(
            str(r.tokens),
            f"{r.cold.ms:.0f}",
            f"{r.cold.tok_s:.0f}",
            f"{r.cold.ms_per_token:.2f}",
            f"{r.bare.ms:.0f}",
            f"{r.bare.tok_s:.0f}",
            f"{r.overhead_pct:+.0f}%",
            f"{r.cached_load_ms:.1f}",
            f"{r.cached.ms:.0f}",
            f"{r.cached.tok_s:.0f}",
        )
    console = stdout_console()
    console.print(table)
    f = report.fit
    console.print(
        f"fit (cold, degree {f.degree}, R² {f.r2:.3f}): t_ms = {f.a:.2f} + {f.b:.4f}·L "
        f"+ {f.c:.3g}·L²"
    )
    l_star = f"{f.l_star:.0f} tokens" if f.l_star is not None else "n/a"
    console.print(f"L* = b/c = {l_star}: {f.note}")
    console.print(
        "cached = restore the saved state of all but the last 32 tokens, then prefill those 32"
    )
    if plot is not None:
        console.print(f"plot written to {display_path(plot)}")


@app.command("workload")
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
    from ..bench.workload import read_questions, run_workload

    qs = read_questions(questions)[:limit]
    with _status(json_out, quiet) as say:
        report = run_workload(qs, settings(index_dir=index), docs, progress=say)
    if json_out:
        print_json(report.as_dict())
        _exit_on_mismatch(report.answers_differ)
        return
    from rich.table import Table

    table = Table(
        title=f"{len(report.questions)} questions over {display_path(report.index_dir)}, "
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
    console = stdout_console()
    console.print(table)
    status = "[green]ok[/green]" if report.answers_differ == 0 else "[red]MISMATCH[/red]"
    console.print(f"answers that differ between off and on: {report.answers_differ} {status}")
    _exit_on_mismatch(report.answers_differ)


def _exit_on_mismatch(differ: int) -> None:
    """The cache must never change an answer: a difference is a bug (exit 4)."""
    if differ:
        raise typer.Exit(ExitCode.FAILURE)


@app.command("startup")
@handle_errors
def startup_command(
    question: Annotated[str, typer.Argument(help="Question to search and ask.")] = (
        "Who won the 2023 Cricket World Cup?"
    ),
    index: IndexOpt = None,
    runs: Annotated[int, typer.Option("--runs", min=1, help="Fresh processes per command.")] = 5,
    json_out: JsonOpt = False,
) -> None:
    """Time `rag --help`, `rag search` and `rag ask` in fresh processes (medians)."""
    from dataclasses import asdict

    from ..bench.workload import startup_bench

    rows = startup_bench(settings(index_dir=index).index_dir, question, runs)
    if json_out:
        print_json([asdict(r) for r in rows])
        return
    from rich.table import Table

    table = Table("command", "runs", "wall ms", "peak RSS MB", "TTFT - prefill ms", "TTFT ms",
                  "prefill ms", title="fresh processes, medians")  # fmt: skip
    for r in rows:
        cells = [r.ttft_outside_prefill_ms, r.process_ttft_ms, r.prefill_ms]
        table.add_row(r.command, str(r.runs), f"{r.wall_ms:.0f}", f"{r.max_rss_mb:.0f}",
                      *("-" if c is None else f"{c:.0f}" for c in cells))  # fmt: skip
    stdout_console().print(table)


@app.command("models")
@handle_errors
def models_command(
    questions: Annotated[Path, typer.Argument(help="Question set (JSONL, as for rag eval).")],
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

    from ..bench.models import models_bench
    from ..models import CATALOG

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


@app.command("index-types")
@handle_errors
def index_types_command(
    size: Annotated[
        list[int] | None,
        typer.Option("--size", min=1, help="Vectors in the index; repeatable (default: 100000)."),
    ] = None,
    index_type: Annotated[
        list[str] | None,
        typer.Option(
            "--type",
            metavar="TYPE",
            help='"auto" or a FAISS factory string; repeatable (default: Flat and auto).',
        ),
    ] = None,
    queries: Annotated[
        int, typer.Option("--queries", min=10, help="Queries, one at a time.")
    ] = 1000,
    nprobe: Annotated[
        list[int] | None,
        typer.Option("--nprobe", min=1, help="Also search IVF types at this nprobe; repeatable."),
    ] = None,
    centres: Annotated[
        int,
        typer.Option("--centres", min=0, help="Clusters of the vectors (0: uniform, no clusters)."),
    ] = 2000,
    from_index: Annotated[
        Path | None,
        typer.Option(
            "--from-index",
            help="Use this index's vectors (and --questions as queries) instead of synthetic ones.",
            show_default=False,
        ),
    ] = None,
    questions: Annotated[
        Path | None,
        typer.Option("--questions", help="`rag eval` JSONL file: the queries for --from-index."),
    ] = None,
    json_out: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Build time, size, latency and recall@10 of FAISS index types on clustered 384-d vectors."""
    from dataclasses import asdict

    from ..bench.workload import index_types_bench
    from ..stores.faiss_index import check_index_type

    types = index_type or ["Flat", "auto"]
    for t in types:
        check_index_type(t, 384)
    vectors = qs = None
    if from_index is not None:
        if questions is None:
            raise UsageError("--from-index needs --questions (a `rag eval` JSONL file)")
        from ..bench.workload import indexed_vectors

        vectors, qs = indexed_vectors(from_index, questions)
        size, queries = [len(vectors)], len(qs)
    with _status(json_out, quiet) as say:
        rows = index_types_bench(
            size or [100_000],
            types,
            queries,
            tuple(nprobe or ()),
            centres,
            vectors=vectors,
            queries=qs,
            progress=say,
        )
    if json_out:
        print_json([asdict(r) for r in rows])
        return
    from rich.table import Table

    source = f"vectors of {from_index}" if from_index else f"{centres or 'no'} clusters"
    table = Table("vectors", "index type", "search", "build s", "file MB", "reader RSS MB",
                  "load ms", "p50 ms", "p99 ms", "recall@10",
                  title=f"FAISS index types, {source}, {queries} single queries")  # fmt: skip
    for r in rows:
        table.add_row(f"{r.n:,}", r.index_type, r.search_params or "exact",
                      "-" if r.build_s is None else f"{r.build_s:.1f}", f"{r.index_mb:.0f}",
                      f"{r.reader_rss_mb:.0f}", f"{r.load_ms:.0f}", f"{r.p50_ms:.2f}",
                      f"{r.p99_ms:.2f}", f"{r.recall_at_10:.3f}")  # fmt: skip
    stdout_console().print(table)


@app.command("ingest")
@handle_errors
def ingest_command(
    docs: Annotated[Path, typer.Argument(help="Folder to index (e.g. the Python docs HTML).")],
    exclude: Annotated[
        list[str] | None,
        typer.Option("--exclude", metavar="GLOB", help="As for `rag index`.", show_default=False),
    ] = None,
    reps: Annotated[int, typer.Option("--reps", min=1, help="Runs of each (median).")] = 1,
    big_mb: Annotated[
        int,
        typer.Option("--big-mb", min=0, help="Also index one generated file of this size (MB)."),
    ] = 0,
    json_out: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Indexing throughput on ONNX Runtime (int8, fp32) against bare torch
    SentenceTransformer.encode, re-run time, memory."""
    from dataclasses import asdict

    from ..bench.workload import big_file_bench, ingest_bench

    if not docs.is_dir():
        raise UsageError(f"{docs} is not a folder")
    with _status(json_out, quiet) as say:
        report = ingest_bench(docs, settings(), exclude or [], reps, progress=say)
        big = big_file_bench(big_mb, progress=say) if big_mb else None
    if json_out:
        print_json({"ingest": asdict(report), "big_file": asdict(big) if big else None})
        return
    from rich.table import Table

    table = Table("what", "time s", "passages", "passages/s", "files/s", "peak RSS MB")
    table.add_row(
        "rag index, ONNX int8 (from scratch)",
        f"{report.index_s:.1f}",
        str(report.chunks),
        f"{report.index_chunks_per_s:.1f}",
        f"{report.index_files_per_s:.1f}",
        f"{report.peak_rss_mb:.0f}",
    )
    table.add_row(
        "rag index, ONNX fp32 (from scratch)",
        f"{report.index_fp32_s:.1f}",
        str(report.chunks),
        f"{report.index_fp32_chunks_per_s:.1f}",
        "",
        "",
    )
    table.add_row(
        "SentenceTransformer.encode, torch fp32",
        f"{report.encode_s:.1f}",
        str(report.chunks),
        f"{report.encode_chunks_per_s:.1f}",
        "",
        "",
    )
    table.add_row("rag index (unchanged, new process)", f"{report.rerun_s:.2f}", "", "", "", "")
    if big:
        table.add_row(
            f"rag index ({big.size_mb:.0f} MB text file)",
            f"{big.seconds:.1f}",
            str(big.chunks),
            "",
            "",
            f"{big.peak_rss_mb:.0f}",
        )
    stdout_console().print(table)
    stdout_console().print(
        f"indexing throughput against bare torch encode: int8 {report.ratio:.2f}x, "
        f"fp32 {report.ratio_fp32:.2f}x ({report.threads} threads)"
    )
