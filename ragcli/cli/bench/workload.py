"""`rag bench workload`: a question set in fresh processes, prompt cache off and on."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ..errors import handle_errors
from ..options import IndexOpt, JsonOpt, QuietOpt, settings
from ..output import display_path, print_json, stdout_console
from .common import exit_on_mismatch, status_line


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
    from ...bench.workload import read_questions, run_workload

    qs = read_questions(questions)[:limit]
    with status_line(json_out, quiet) as say:
        report = run_workload(qs, settings(index_dir=index), docs, progress=say)
    if json_out:
        print_json(report.as_dict())
        exit_on_mismatch(report.answers_differ)
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
    exit_on_mismatch(report.answers_differ)
