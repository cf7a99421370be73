"""`rag bench prefill`: prefill time against prompt length, with a fit and a noise verdict."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ...bench import help_numbers
from ...errors import UsageError
from ..failures import handle_errors, warn
from ..options import JsonOpt, QuietOpt, settings
from ..output import display_path, print_json, stdout_console
from .common import status_line


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
            help=f"Repetitions per length, or auto: {help_numbers.MIN_AUTO_REPS} and more until the "
            f"spread is under {help_numbers.SPREAD_LIMIT:.0%} (at most {help_numbers.MAX_AUTO_REPS}).",
        ),
    ] = "3",
    plot: Annotated[
        Path | None,
        typer.Option(
            "--plot", help="Also draw the two-panel picture into this PNG.", show_default=False
        ),
    ] = None,
    replot: Annotated[
        Path | None,
        typer.Option(
            "--replot",
            help="Measure nothing: redraw --plot from the --json output of a "
            "run (fit and noise verdict worked out again from its repetitions).",
            show_default=False,
        ),
    ] = None,
    no_reading: Annotated[
        bool,
        typer.Option(
            "--no-reading",
            help="Leave out the reading-cache series (every sentence placed from the cache).",
        ),
    ] = False,
    json_out: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Time prefill at 64, 128, 256, ... tokens: cold, bare llama_decode, cached prefix, and
    the sentences placed from a warm reading cache."""
    import shlex
    import sys

    from ...bench import prefill_cost as prefill

    n_reps = _reps(reps)
    if plot is not None:
        prefill.check_plotting()
    if replot is not None:
        run = prefill.PrefillRun.from_dict(read_json(replot))
    else:
        command = shlex.join(["rag", *sys.argv[1:]])
        with status_line(json_out, quiet) as say:
            run = prefill.prefill_run(
                settings(), models or [], max_len, n_reps, say, command, not no_reading
            )
    if plot is not None:
        prefill.plot_prefill(run, plot)
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
                    "cached ms", "reading\ncache ms", "reused /\nread tok", "largest term"):  # fmt: skip
            table.add_column(col, justify="left" if col == "largest term" else "right")
        for r in report.rows:
            reading = (_cell(r.reading), f"{r.reading_reused_tokens} / {r.reading_read_tokens}")
            table.add_row(
                str(r.tokens), _cell(r.cold), f"{r.cold.tok_s:,.0f}", f"{r.cold.ms_per_token:.2f}",
                _cell(r.bare), f"{r.overhead_pct:+.0f}%", _cell(r.cached),
                *(reading if r.reading else ("-", "-")), r.dominant,
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
        f"cached = restore the saved state of all but the last {help_numbers.CACHED_SUFFIX} tokens, "
        "then prefill those; reading cache = place every sentence's saved state, then read "
        "the question"
    )
    if plot is not None:
        console.print(f"plot written to {display_path(plot)}")
