"""`rag bench startup`: start-up time and memory of fresh `rag` processes."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ..failures import handle_errors
from ..options import IndexOpt, JsonOpt, settings
from ..output import print_json, stdout_console


@handle_errors
def startup_command(
    question: Annotated[str, typer.Argument(help="Question to search and ask.")] = (
        "Who won the 2023 Cricket World Cup?"
    ),
    index: IndexOpt = None,
    runs: Annotated[int, typer.Option("--runs", min=1, help="Fresh processes per command.")] = 5,
    against: Annotated[
        Path | None,
        typer.Option(
            "--against",
            help="A checkout of another version (e.g. `git worktree add ../old main`): its "
            "commands run in turn with these, for a side-by-side comparison.",
            show_default=False,
        ),
    ] = None,
    no_served: Annotated[
        bool, typer.Option("--no-served", help="Leave out the client of a running `rag serve`.")
    ] = False,
    json_out: JsonOpt = False,
) -> None:
    """Time `rag --help`, `rag search`, `rag ask` and a served `rag ask` in fresh processes
    (medians)."""
    from dataclasses import asdict

    from ...bench.startup_time import startup_bench

    rows = startup_bench(
        settings(index_dir=index).index_dir, question, runs, against, served=not no_served
    )
    if json_out:
        print_json([asdict(r) for r in rows])
        return
    from rich.table import Table

    table = Table("command", "code", "runs", "wall ms", "peak RSS MB", "TTFT - prefill ms", "TTFT ms",
                  "prefill ms", title="fresh processes, medians")  # fmt: skip
    for r in rows:
        cells = [r.ttft_outside_prefill_ms, r.process_ttft_ms, r.prefill_ms]
        table.add_row(r.command, r.code, str(r.runs), f"{r.wall_ms:.0f}", f"{r.max_rss_mb:.0f}",
                      *("-" if c is None else f"{c:.0f}" for c in cells))  # fmt: skip
    stdout_console().print(table)
