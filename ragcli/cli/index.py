"""`rag index PATH...`: add, update and remove documents in the index."""

from __future__ import annotations

import sys
from dataclasses import asdict
from pathlib import Path
from typing import Annotated

import typer

from .common import (
    EmbedModelOpt,
    IndexOpt,
    JsonOpt,
    display_path,
    handle_errors,
    print_json,
    settings,
    stderr_console,
    warn,
)


@handle_errors
def index_command(
    paths: Annotated[
        list[Path], typer.Argument(help="Files and folders to index.", show_default=False)
    ],
    index: IndexOpt = None,
    embed_model: EmbedModelOpt = None,
    chunk_tokens: Annotated[
        int | None,
        typer.Option(help="Passage size in embedding tokens (default: 200).", show_default=False),
    ] = None,
    chunk_overlap: Annotated[
        int | None,
        typer.Option(help="Overlap between passages in tokens (default: 40).", show_default=False),
    ] = None,
    rebuild: Annotated[bool, typer.Option("--rebuild", help="Start the index over.")] = False,
    include: Annotated[
        list[str] | None,
        typer.Option(
            "--include",
            metavar="GLOB",
            help="Only index files matching this glob (relative to the folder given; "
            "** crosses folders; without a slash it matches file names). Repeatable.",
            show_default=False,
        ),
    ] = None,
    exclude: Annotated[
        list[str] | None,
        typer.Option(
            "--exclude",
            metavar="GLOB",
            help="Skip files and folders matching this glob (as --include). Repeatable.",
            show_default=False,
        ),
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """Index .txt, .md, .rst, .html, .pdf and .docx files; unchanged files are skipped.

    In folders, .gitignore and .ragignore files are honoured.
    """
    from ..indexing import build_index

    s = settings(
        index_dir=index,
        embed_model=embed_model,
        chunk_tokens=chunk_tokens,
        chunk_overlap=chunk_overlap,
    )
    filters = {"include": include or (), "exclude": exclude or ()}
    if sys.stderr.isatty() and not json_out:
        report = _with_progress(
            lambda progress: build_index(paths, s, rebuild=rebuild, progress=progress, **filters)
        )
    else:
        report = build_index(paths, s, rebuild=rebuild, **filters)
    if json_out:
        print_json(asdict(report))
        return
    for item in report.skipped:
        warn(f"{display_path(item['path'])}: skipped: {item['reason']}")
    for item in report.warnings:
        warn(f"{display_path(item['path'])}: {item['warning']}")
    typer.echo(
        f"{report.added} added, {report.updated} updated, {report.removed} removed, "
        f"{report.unchanged} unchanged; {report.chunks_embedded} chunks embedded, "
        f"{report.chunks_total} in the index ({report.files_total} files); "
        f"{report.seconds:.1f} s -> {display_path(report.index_dir)}"
    )
    if report.chunks_embedded:
        typer.echo(f"{report.chunks_per_s:.1f} chunks/s, {report.files_per_s:.1f} files/s")


def _with_progress(run):
    """Run with a progress bar on stderr (only called when stderr is a terminal)."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
    )

    with Progress(
        TextColumn("embedding"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=stderr_console(),
        transient=True,
    ) as bar:
        task = bar.add_task("embed", total=None)

        def progress(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        return run(progress)
