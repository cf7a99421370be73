"""`rag bench ...`: prefill cost, what the prompt and answer caches save, models, indexes."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer

from ..bench import prefill
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
    warn,
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


def _reps(value: str) -> int | None:
    """--reps: a count, or "auto" (None) to repeat a length until it settles."""
    if value.strip().lower() == "auto":
        return None
    try:
        n = int(value)
    except ValueError:
        raise typer.BadParameter("a positive count, or auto") from None
    if n < 1:
        raise typer.BadParameter("a positive count, or auto")
    return n


def read_json(path: Path) -> dict:
    import json

    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise UsageError(f"cannot read {path} as JSON: {exc}") from None


def _cell(s) -> str:
    return f"{s.ms:,.0f}\n{s.min_ms:,.0f}-{s.max_ms:,.0f}"


@app.command("prefill")
@handle_errors
def prefill_command(
    models: Annotated[
        list[str] | None,
        typer.Option(
            "--model",
            metavar="NAME|PATH",
            help="A model of `rag models` or a GGUF file; repeat to sweep several in one run "
            "(default: the configured model).",
            show_default=False,
        ),
    ] = None,
    max_len: Annotated[
        int,
        typer.Option(
            "--max-len", min=64, help="Longest prompt in tokens (the context is sized to it)."
        ),
    ] = 2048,
    reps: Annotated[
        str,
        typer.Option(
            "--reps",
            help=f"Repetitions per length, or auto: {prefill.MIN_AUTO_REPS} and more until the "
            f"spread is under {prefill.SPREAD_LIMIT:.0%} (at most {prefill.MAX_AUTO_REPS}).",
        ),
    ] = "3",
    plot: Annotated[
        Path | None,
        typer.Option(
            "--plot", help="Also draw the two-panel picture into this PNG.", show_default=False
        ),
    ] = None,
    markdown: Annotated[
        Path | None,
        typer.Option(
            "--markdown",
            help=f"Also write the table into the {prefill.MARK_START} section of this file.",
            show_default=False,
        ),
    ] = None,
    replot: Annotated[
        Path | None,
        typer.Option(
            "--replot",
            help="Measure nothing: redraw --plot and --markdown from the --json output of a "
            "run (fit and noise verdict worked out again from its repetitions).",
            show_default=False,
        ),
    ] = None,
    json_out: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Time prefill at 64, 128, 256, ... tokens: cold, bare llama_decode, cached prefix."""
    import shlex
    import sys

    n_reps = _reps(reps)
    if plot is not None:
        prefill.check_plotting()
    if markdown is not None:
        prefill.check_markdown(markdown)
    if replot is not None:
        run = prefill.PrefillRun.from_dict(read_json(replot))
    else:
        command = shlex.join(["rag", *sys.argv[1:]])
        with _status(json_out, quiet) as say:
            run = prefill.prefill_run(settings(), models or [], max_len, n_reps, say, command)
    if plot is not None:
        prefill.plot_prefill(run, plot)
    if markdown is not None:
        prefill.write_markdown(run, markdown, plot)
    for report in run.reports:
        if not report.verdict.ok:
            warn(f"{report.model}: {report.verdict.message}")
    if json_out:
        out = run.as_dict()
        if plot is not None:
            out["plot"] = str(plot)
        print_json(out)
        return
    from rich.table import Table

    console = stdout_console()
    for report in run.reports:
        table = Table(
            title=f"Prefill, {report.model} (n_ctx {report.n_ctx}, n_batch {report.n_batch}, "
            f"{report.n_threads} threads, reps {report.reps}; median, min-max)"
        )
        for col in ("L", "cold ms", "cold\ntok/s", "cold\nms/tok", "bare ms", "over-\nhead",
                    "cached ms", "largest term"):  # fmt: skip
            table.add_column(col, justify="left" if col == "largest term" else "right")
        for r in report.rows:
            table.add_row(
                str(r.tokens), _cell(r.cold), f"{r.cold.tok_s:,.0f}", f"{r.cold.ms_per_token:.2f}",
                _cell(r.bare), f"{r.overhead_pct:+.0f}%", _cell(r.cached), r.dominant,
            )  # fmt: skip
        console.print(table)
        f = report.fit
        console.print(
            f"fit (non-negative, cold medians, R² {f.r2:.3f}): t_ms = {f.a:.1f} + {f.b:.4g}·L "
            f"+ {f.c:.3g}·L²; {f.note}"
        )
        console.print(f"noise: {report.verdict.message}")
        console.print(
            f"load average {report.load_before:.2f} before, {report.load_max:.2f} at most"
        )
    console.print(
        f"cached = restore the saved state of all but the last {prefill.CACHED_SUFFIX} tokens, "
        "then prefill those"
    )
    for path, what in ((plot, "plot"), (markdown, "table")):
        if path is not None:
            console.print(f"{what} written to {display_path(path)}")


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
    SentenceTransformer.encode, re-run time, fresh `rag search` start-up, memory."""
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
    for q in ("int8", "fp32"):
        ms, rss = getattr(report, f"search_{q}_ms"), getattr(report, f"search_{q}_rss_mb")
        table.add_row(f"rag search, ONNX {q} (new process)", f"{ms / 1000:.2f}", "", "", "",
                      f"{rss:.0f}")  # fmt: skip
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


@app.command("semcache")
@handle_errors
def semcache_command(
    questions: Annotated[Path, typer.Argument(help="Question set (JSONL, as for rag eval).")],
    variants: Annotated[
        Path,
        typer.Argument(
            help="Paraphrases and near-misses of those questions (JSONL: ref, kind, question); "
            "ragcli ships ragcli/bench/data/pydocs-paraphrases.jsonl and demo-paraphrases.jsonl."
        ),
    ],
    index: IndexOpt = None,
    model: ModelOpt = None,
    with_model: Annotated[
        bool,
        typer.Option(
            "--with-model",
            help="Also ask everything with the model, without and with the answer cache.",
        ),
    ] = False,
    threshold: Annotated[
        float | None,
        typer.Option(
            "--threshold",
            min=0.0,
            max=1.0,
            help="Threshold of the model run (default: the setting answer_cache_threshold).",
            show_default=False,
        ),
    ] = None,
    limit: Annotated[
        int | None,
        typer.Option(
            "--limit",
            min=1,
            help="Only the first N questions (and their variants).",
            show_default=False,
        ),
    ] = None,
    json_out: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Hit rate on paraphrases and wrong-hit rate on near-misses by threshold; picks one."""
    from ..answer.evaluation import load_questions
    from ..bench.semcache import (
        MAX_WRONG_HIT_RATE,
        as_dict,
        load_variants,
        measure_pairs,
        run_workload,
        summarize_pairs,
    )

    items = load_questions(questions)
    vs = load_variants(variants, {i.id for i in items})
    if limit is not None:
        items = items[:limit]
        vs = [v for v in vs if v.ref in {i.id for i in items}]
    s = settings(index_dir=index, model=model)
    with _status(json_out, quiet) as say:
        pairs = summarize_pairs(measure_pairs(s, items, vs, progress=say), len(items))
        work = None
        if with_model:
            t = threshold if threshold is not None else s.answer_cache_threshold
            work = run_workload(s, items, vs, t, progress=say)
    bad = work is not None and not work.consistent  # the cache changed an answer: a bug
    if json_out:
        print_json(as_dict(pairs, work))
        _exit_on_mismatch(int(bad))
        return
    from rich.table import Table

    console = stdout_console()
    table = Table(
        "threshold",
        "paraphrase hits",
        "hit rate",
        "near-miss hits",
        "wrong-hit rate",
        title=f"{len(items)} questions, {pairs.paraphrases} paraphrases, "
        f"{pairs.near_misses} near-misses (hit: same passages and numbers, cosine >= threshold)",
    )
    for r in pairs.rows:
        mark = " <-" if r.threshold == pairs.threshold else ""
        table.add_row(
            f"{r.threshold:.2f}{mark}",
            f"{r.paraphrase_hits}/{r.paraphrases}",
            f"{r.hit_rate:.3f}",
            f"{r.wrong_hits}/{r.near_misses}",
            f"{r.wrong_hit_rate:.3f}",
        )
    console.print(table)
    console.print(
        f"same passages: {pairs.paraphrases_same_passages:.0%} of paraphrases, "
        f"{pairs.near_misses_same_passages:.0%} of near-misses; median cosine "
        f"{pairs.paraphrase_similarity_median:.3f} / {pairs.near_miss_similarity_median:.3f}; "
        f"closest near-miss with the same passages and numbers: {pairs.near_miss_eligible_max}"
    )
    console.print(
        f"picked threshold (lowest with wrong-hit rate < {MAX_WRONG_HIT_RATE}): {pairs.threshold}"
    )
    if work is not None:
        console.print(
            f"with {work.model} at threshold {work.threshold}: {work.asked} questions asked, "
            f"{work.identical} answers identical to the uncached run; model runs identical "
            f"{work.model_runs_identical}; repeats served {work.repeats_served} (identical "
            f"{work.repeats_identical}); paraphrases served {work.paraphrases_served} (identical "
            f"{work.paraphrases_identical}, right {work.paraphrase_correct_served} served vs "
            f"{work.paraphrase_correct_uncached} uncached); wrong hits {work.wrong_hits}"
        )
    _exit_on_mismatch(int(bad))


@app.command("serve")
@handle_errors
def serve_command(
    questions: Annotated[
        Path, typer.Argument(help="Question set (JSONL, as for rag eval).", show_default=False)
    ],
    index: IndexOpt = None,
    model: ModelOpt = None,
    runs: Annotated[int, typer.Option("--runs", min=1, help="Repetitions (medians).")] = 3,
    clients: Annotated[int, typer.Option("--clients", min=1, help="Clients at once.")] = 4,
    per_client: Annotated[
        int, typer.Option("--per-client", min=1, help="Questions each client asks.")
    ] = 25,
    json_out: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """A resident `rag serve` against fresh `rag ask` processes, and under concurrent clients."""
    from dataclasses import asdict

    from ..bench.serve import serve_bench

    with _status(json_out, quiet) as say:
        report = serve_bench(
            settings(index_dir=index, model=model), questions, runs, clients, per_client, say
        )
    if json_out:
        print_json(asdict(report))
        return
    from rich.table import Table

    r, load = report, report.load
    table = Table("measure", "value", title=f"rag serve, {r.model} (medians of {r.runs})")
    rows = [
        ("TTFT cold fresh process (ms)", f"{r.cold_process_ttft_ms:.0f}"),
        ("TTFT repeated question, server (ms)", f"{r.served_repeat_ttft_ms:.0f}"),
        ("  ratio (target <= 0.05)", f"{r.repeat_ratio:.3f}"),
        ("TTFT outside prefill, new question, fresh process (ms)",
         f"{r.fresh_new_ttft_outside_prefill_ms:.0f}"),
        ("TTFT outside prefill, new question, server (ms)",
         f"{r.served_new_ttft_outside_prefill_ms:.0f}"),
        ("  start-up saved (ms)", f"{r.startup_saved_ms:.0f}"),
        ("client process wall (ms)", f"{r.client_wall_ms:.0f}"),
        ("  of which the server's answer (ms)", f"{r.client_server_total_ms:.0f}"),
        ("client process peak RSS (MB)", f"{r.client_peak_rss_mb:.0f}"),
    ]  # fmt: skip
    if load:
        rows += [
            (f"load: {load.clients} x {load.per_client} requests", f"{load.requests}"),
            ("  lost / wrong", f"{load.lost} / {load.wrong}"),
            ("  another wording's answer, from the answer cache", f"{load.from_answer_cache}"),
            ("  p50 / p99 latency (ms)", f"{load.p50_ms:.0f} / {load.p99_ms:.0f}"),
            ("  throughput (answers/s)", f"{load.throughput_qps:.2f}"),
        ]
    for row in rows:
        table.add_row(*row)
    stdout_console().print(table)
    stdout_console().print(f"load average {r.loadavg_start} at start, {r.loadavg_end} at end")
    if load and (load.lost or load.wrong):
        raise typer.Exit(ExitCode.FAILURE)
