"""`rag bench contention`: prefill and decode quiet, beside busy processes, and two at once."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ...bench import help_numbers
from ..failures import handle_errors
from ..options import JsonOpt, ModelOpt, QuietOpt, settings
from ..output import print_json, stdout_console
from .common import status_line

if TYPE_CHECKING:
    from ...bench.busy_cpus import ContentionRun

PAIRS_HELP = ("Instead of the scenarios: this many pairs of fresh processes started together "
              "(adaptive threads), beside --reps quiet runs; reports the worst process.")  # fmt: skip
CODE_HELP = "Run the processes from another checkout (e.g. main, for a before and after)."


@handle_errors
def contention_command(
    model: ModelOpt = None,
    reps: Annotated[
        int, typer.Option("--reps", min=1, help="Fresh processes per scenario and mode (medians).")
    ] = 3,
    quick: Annotated[
        bool,
        typer.Option(
            "--quick",
            help=f"A functional check, not a measurement: a bare prompt of about "
            f"{help_numbers.QUICK_PROMPT_TOKENS} tokens, {help_numbers.QUICK_MAX_TOKENS} decoded, "
            "one repetition.",
        ),
    ] = False,
    pairs: Annotated[int, typer.Option("--pairs", min=0, help=PAIRS_HELP)] = 0,
    code: Annotated[Path | None, typer.Option("--code", help=CODE_HELP, show_default=False)] = None,
    json_out: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Prefill and decode quiet, beside busy processes, two at once; adaptive and fixed threads.

    One ~900-token prompt, 64 decoded tokens, each run in a fresh process.
    """
    import shlex
    import sys

    from ...bench import busy_cpus as contention

    command = shlex.join(["rag", *sys.argv[1:]])
    with status_line(json_out, quiet) as say:
        run = contention.contention_bench(
            settings(model=model), 1 if quick and not pairs else reps, quick, say, command,
            pairs=pairs, code=code,
        )  # fmt: skip
    if json_out:
        print_json(run.as_dict())
        return
    print_table(run)


def print_table(run: ContentionRun) -> None:
    """The cells, the pairs, then whether each goal of issues #29 and #47 is met."""
    from rich import box
    from rich.table import Table

    table = Table(
        title=f"{run.model}: {run.prompt_tokens} prompt tokens, {run.max_tokens} decoded, at "
        f"most {run.threads} threads ({run.cpus} CPUs, {run.physical_cores} cores); medians "
        f"of {run.reps} repetition(s); ratios to quiet in the same mode",
        box=box.SIMPLE_HEAD,
    )
    for col in ("scenario", "mode", "prefill\ntok/s", "ratio", "decode\ntok/s", "ratio",
                "threads\npref/dec", "others'\nCPUs"):  # fmt: skip
        table.add_column(col, justify="left" if col in ("scenario", "mode") else "right")
    for c in run.cells:
        table.add_row(
            c.scenario, c.mode, f"{c.prefill_tok_s:.1f}", f"{c.prefill_ratio:.2f}",
            f"{c.decode_tok_s:.1f}", f"{c.decode_ratio:.2f}",
            f"{c.prefill_threads:.1f}/{c.decode_threads:.1f}", f"{c.others_cpus:.2f}",
        )  # fmt: skip
    console = stdout_console()
    console.print(table)
    if (worst := run.worst_pair()) is not None:  # the goals below give the worst process
        shown = zip(worst.runs, worst.decode_ratios, worst.total_ratios, strict=True)
        console.print(f"{len(run.pairs)} pairs started together; the worst pair: " + "; ".join(
            f"decode {d:.2f} of quiet, {t:.2f} x its time, threads "
            f"{r['prefill_threads']:.1f}/{r['decode_threads']:.1f}" for r, d, t in shown))  # fmt: skip
    for g in run.goals:
        verdict = "met" if g.met else "NOT met"
        bound = "at most" if g.at_most else "at least"
        console.print(
            f"goal, {g.scenario}, {g.phase}: {g.ratio:.2f} of quiet (adaptive), "
            f"{bound} {g.target:.2f}: {verdict}"
        )
