"""`rag bench models`: the generation models side by side on one question set."""

from __future__ import annotations

from typing import Annotated

import typer

from ..errors import handle_errors
from ..options import IndexOpt, JsonOpt, settings
from ..output import print_json, stdout_console
from .common import QuestionSetArg


@handle_errors
def models_command(
    questions: QuestionSetArg,
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

    from ...bench.models import models_bench
    from ...models import CATALOG

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
