"""`rag bench reading`: new questions' first token, read whole or with the reading cache."""

from __future__ import annotations

from typing import Annotated

import typer

from ..failures import handle_errors
from ..options import IndexOpt, JsonOpt, ModelOpt, QuietOpt, settings
from ..output import print_json, stdout_console
from .common import QuestionSetArg, exit_on_mismatch, status_line


@handle_errors
def reading_command(
    questions: QuestionSetArg,
    index: IndexOpt = None,
    model: ModelOpt = None,
    limit: Annotated[
        int | None,
        typer.Option("--limit", min=2, help="Only the first N questions.", show_default=False),
    ] = None,
    served: Annotated[
        bool,
        typer.Option("--served", help="Then the same questions through a `rag serve`, warm."),
    ] = False,
    json_out: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Time to first token of new questions: whole prompt, reading cache cold, warm (and
    served)."""
    from ...answer.evaluation import load_questions
    from ...bench.first_token import measure

    items = load_questions(questions)[:limit]
    s = settings(index_dir=index, model=model)
    with status_line(json_out, quiet) as say:
        report = measure(s, items, progress=say, served=served)
    if json_out:
        print_json(report.as_dict())
    else:
        from rich.table import Table

        table = Table(title=f"{report.model}: {len(report.rows)} new questions (medians)")
        for col in ("prompt read as", "first token", "tokens read", "vs whole", "read again"):
            table.add_column(col, justify="left" if col == "prompt read as" else "right")
        whole = report.median_ttft("whole") or 1.0
        for m in report.modes:
            ms = report.median_ttft(m)
            again = str(report.rereads(m))
            read = f"{report.median_read(m):.0f}"
            table.add_row(m, f"{ms:.0f} ms", read, f"{ms / whole:.2f}", again)
        console = stdout_console()
        console.print(table)
        console.print(
            f"reading cache: {report.reading_files} sentences, {report.reading_bytes / 1e6:.0f} MB "
            f"at most; cold kept its sentences in {report.median_keep:.0f} ms after answering; "
            f"answers read apart differ from whole in {report.apart_differs} of "
            f"{len(report.rows)}; cold differs from whole in {report.cold_differs}"
        )
    exit_on_mismatch(report.cold_differs)
