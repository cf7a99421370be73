"""`python -m benchmarks quiet-rate BEFORE AFTER`: the quiet decode and prefill rates of two
checkouts, fresh processes alternated before, after, after, before, ... so that the
machine's drift falls on both alike; the ratio of each round's pair, with its 95 % interval.

A change that only adds work between answers (issue #47's core claims) must leave the rate
of a lone process as it was; single runs here spread by 30 %, so one run each decides
nothing."""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path
from typing import Annotated

import typer

from ragcli.bench.busy_cpus import MAX_TOKENS, PROMPT_TOKENS, run_cell
from ragcli.config import load_settings
from ragcli.llm.cpu_claims import FOLDER
from ragcli.models import generation_model

T_975 = 2.2  # Student's t for 11 degrees of freedom, about right from 8 rounds on


def interval(ratios: list[float]) -> tuple[float, float, float]:
    """Mean of the ratios and its 95 % interval."""
    mean = statistics.mean(ratios)
    half = T_975 * statistics.stdev(ratios) / math.sqrt(len(ratios)) if len(ratios) > 1 else 0.0
    return mean, mean - half, mean + half


def quiet_rate_command(
    before: Annotated[Path, typer.Argument(help="Checkout run first in even rounds.")],
    after: Annotated[Path, typer.Argument(help="The checkout compared with it.")],
    rounds: Annotated[int, typer.Option(min=1, help="Pairs of quiet runs.")] = 12,
    out: Annotated[Path | None, typer.Option(help="Write every run here (JSON).")] = None,
) -> None:
    """Quiet runs of `rag bench contention`'s worker, two checkouts alternated."""
    s = load_settings()
    model = generation_model(s.model, s.cache_dir)
    spec = {"model": str(model.path), "digest": model.digest, "n_ctx": s.n_ctx,
            "n_batch": s.n_batch, "threads": s.threads, "prompt_tokens": PROMPT_TOKENS,
            "max_tokens": MAX_TOKENS, "quick": False, "claims": str(s.cache_dir / FOLDER),
            "adaptive": True}  # fmt: skip
    runs: list[dict] = []
    for r in range(rounds):
        for code in ("before", "after")[:: 1 if r % 2 == 0 else -1]:
            (res,) = run_cell(spec, 0, 1, before if code == "before" else after)
            runs.append({"code": code, "round": r, **res})
            typer.echo(
                f"round {r + 1}/{rounds} {code}: decode {res['decode_tok_s']:.2f} tok/s", err=True
            )
        if out:
            out.write_text(json.dumps(runs, indent=1))
    for rate in ("decode_tok_s", "prefill_tok_s"):
        by = {(x["round"], x["code"]): x[rate] for x in runs}
        mean, low, high = interval([by[r, "after"] / by[r, "before"] for r in range(rounds)])
        medians = [
            statistics.median(x[rate] for x in runs if x["code"] == c) for c in ("before", "after")
        ]
        typer.echo(f"{rate}: medians {medians[0]:.2f} -> {medians[1]:.2f}; after/before "
                   f"{mean:.3f} (95 % {low:.3f}-{high:.3f})")  # fmt: skip
