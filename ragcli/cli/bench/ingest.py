"""`rag bench ingest`: indexing throughput of the encoders, re-runs and search start-up."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ...errors import UsageError
from ..failures import handle_errors
from ..options import JsonOpt, QuietOpt, settings
from ..output import print_json, stdout_console
from .common import status_line


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

    from ...bench.ingest_speed import big_file_bench, ingest_bench

    if not docs.is_dir():
        raise UsageError(f"{docs} is not a folder")
    with status_line(json_out, quiet) as say:
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
    table.add_row(
        "rag index, default (whole command, new process)",
        f"{report.command_s:.1f}",
        str(report.chunks),
        f"{report.chunks / report.command_s:.1f}",
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
        f"fp32 {report.ratio_fp32:.2f}x, the whole default command {report.command_ratio:.2f}x "
        f"({report.threads} threads)"
    )
