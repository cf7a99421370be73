"""Write a `rag bench` run into docs/BENCHMARKS.md: the run's ``--json`` output becomes the
Markdown between the markers of its section, the rest of the file kept as it was.

    python -m benchmarks.write_report prefill docs/prefill.json docs/BENCHMARKS.md \\
        [--plot docs/prefill.png]
    python -m benchmarks.write_report contention contention.json docs/BENCHMARKS.md

The table is made from the same JSON the plot is drawn from, so the two always show one
run. The file is replaced atomically: a reader never sees half of it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from ragcli.bench.busy_cpus import Cell, ContentionRun, Goal, Pair
from ragcli.bench.prefill_cost import PrefillRun
from ragcli.errors import RagError, UsageError

PREFILL_MARKS = ("<!-- prefill-report:start -->", "<!-- prefill-report:end -->")
CONTENTION_MARKS = ("<!-- contention-report:start -->", "<!-- contention-report:end -->")


def prefill_markdown(run: PrefillRun, plot: Path | None = None) -> str:
    """The run as a Markdown section: when, what load, the table per model, the fit."""
    out = [
        f"Measured {run.started} on {run.cores} cores ({run.cpu}) in {run.seconds / 60:.0f} "
        f"minutes, one process: `{run.command or 'rag bench prefill'}`. "
        f"Spread is the interquartile range of the repetitions over their median; above "
        f"{run.spread_limit:.0%} a length counts as noisy.",
        "",
    ]
    if plot is not None:
        out += [f"![prefill time against prompt length]({plot.name})", ""]
    for r in run.reports:
        f = r.fit
        out += [
            f"**{r.model}** (n_ctx {r.n_ctx}, n_batch {r.n_batch}, {r.n_threads} threads, "
            f"reps {r.reps}; 1-minute load average {r.load_before:.2f} before, "
            f"{r.load_max:.2f} at most, {r.load_after:.2f} after): {r.verdict.message}.",
            "",
            "| L | cold ms (min-max) | cold tok/s | cold ms/tok | bare ms (min-max) | "
            "overhead | cached ms (min-max) | reading cache ms (min-max) | reused / read "
            "tokens | reps | largest term |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
        ]
        for row in r.rows:
            c, b, k, g = row.cold, row.bare, row.cached, row.reading
            reading = "- | -"
            if g is not None:
                reading = (
                    f"{g.ms:,.0f} ({g.min_ms:,.0f}-{g.max_ms:,.0f}) | "
                    f"{row.reading_reused_tokens} / {row.reading_read_tokens}"
                )
            out.append(
                f"| {row.tokens} | {c.ms:,.0f} ({c.min_ms:,.0f}-{c.max_ms:,.0f}) | "
                f"{c.tok_s:,.0f} | {c.ms_per_token:.2f} | "
                f"{b.ms:,.0f} ({b.min_ms:,.0f}-{b.max_ms:,.0f}) | {row.overhead_pct:+.1f} % | "
                f"{k.ms:,.0f} ({k.min_ms:,.0f}-{k.max_ms:,.0f}) | {reading} | "
                f"{len(c.samples_ms)} | {row.dominant} |"
            )
        out += [
            "",
            f"Fit (non-negative least squares, cold medians): t = {f.a:.1f} ms + "
            f"{f.b:.4g} ms·L + {f.c:.3g} ms·L², R² {f.r2:.4f}; {f.note}.",
            "",
        ]
    return "\n".join(out).rstrip() + "\n"


def contention_run(d: dict[str, Any]) -> ContentionRun:
    """A run back from the ``--json`` output of `rag bench contention`."""
    try:
        cells = [Cell(**c) for c in d["cells"]]
        goals = [Goal(**g) for g in d["goals"]]
        pairs = [Pair(**p) for p in d.get("pairs", [])]
        return ContentionRun(**{**d, "cells": cells, "goals": goals, "pairs": pairs})
    except (KeyError, TypeError) as exc:
        raise UsageError(f"not the JSON of `rag bench contention --json` ({exc!r})") from None


def contention_markdown(run: ContentionRun) -> str:
    """The run as a Markdown section: when, on what, the table, the goals."""
    command = run.command or "rag bench contention"
    out = [
        f"Measured {run.started} on {run.cpus} CPUs, {run.physical_cores} physical cores "
        f"({run.cpu}), in {run.seconds / 60:.0f} minutes: `{command}`. "
        f"**{run.model}**, {run.prompt_tokens} prompt tokens, {run.max_tokens} decoded, "
        f"at most {run.threads} threads; medians of {run.reps} fresh processes per cell "
        "(both processes of each repetition for 2 at once). Ratios are to the quiet run of "
        "the same mode; threads are llama.cpp's per token.",
        "",
        "| scenario | mode | prefill tok/s | × quiet | decode tok/s | × quiet | "
        "threads prefill / decode | others' CPUs |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for c in run.cells:
        out.append(
            f"| {c.scenario} | {c.mode} | {c.prefill_tok_s:.1f} | {c.prefill_ratio:.2f} | "
            f"{c.decode_tok_s:.1f} | {c.decode_ratio:.2f} | "
            f"{c.prefill_threads:.2f} / {c.decode_threads:.2f} | {c.others_cpus:.2f} |"
        )
    if run.pairs:
        out += ["", *_pairs_markdown(run)]
    out += ["", "Goals (adaptive threads):", ""]
    out += [
        f"- {g.scenario}, {g.phase}: {g.ratio:.2f} of quiet, goal "
        f"{'at most' if g.at_most else 'at least'} {g.target:.2f}: "
        f"{'met' if g.met else 'not met'}"
        for g in run.goals
    ]
    return "\n".join(out) + "\n"


def _pairs_markdown(run: ContentionRun) -> list[str]:
    """One row per pair started together: each process's decode rate and time against the
    quiet median, and its threads; the worst process of all is in the goals."""
    out = [
        f"{len(run.pairs)} pairs of fresh processes started together"
        + (f" (processes of {run.code})" if run.code != "this" else "")
        + ": each process's decode rate and prefill-and-decode time as a share of quiet.",
        "",
        "| pair | decode × quiet | time × quiet | threads prefill / decode |",
        "|---:|---:|---:|---:|",
    ]
    for i, pair in enumerate(run.pairs, 1):
        cells = zip(pair.runs, pair.decode_ratios, pair.total_ratios, strict=True)
        parts = [(f"{d:.2f}", f"{t:.2f}", f"{r['prefill_threads']:.2f} / {r['decode_threads']:.2f}")
                 for r, d, t in cells]  # fmt: skip
        columns = (", ".join(col) for col in zip(*parts, strict=True))
        out.append(f"| {i} | " + " | ".join(columns) + " |")
    return out


def replace_section(path: Path, marks: tuple[str, str], body: str) -> None:
    """Put ``body`` between the two markers of ``path``, atomically."""
    start_mark, end_mark = marks
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from None
    start, end = text.find(start_mark), text.find(end_mark)
    if start < 0 or end < start:
        raise UsageError(f"{path} has no {start_mark} ... {end_mark} section to fill")
    new = f"{text[:start]}{start_mark}\n{body}{end_mark}{text[end + len(end_mark) :]}"
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(new, encoding="utf-8")
    os.replace(tmp, path)


def _read_json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"cannot read the run {path}: {exc}") from None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.write_report", description=__doc__)
    ap.add_argument("bench", choices=("prefill", "contention"))
    ap.add_argument("run", type=Path, help="the --json output of the run")
    ap.add_argument("doc", type=Path, help="the Markdown file with the section's markers")
    ap.add_argument("--plot", type=Path, help="the picture of the run, linked from the section")
    args = ap.parse_args(argv)
    try:
        d = _read_json(args.run)
        if args.bench == "prefill":
            replace_section(
                args.doc, PREFILL_MARKS, prefill_markdown(PrefillRun.from_dict(d), args.plot)
            )
        else:
            replace_section(args.doc, CONTENTION_MARKS, contention_markdown(contention_run(d)))
    except RagError as exc:
        sys.stderr.write(f"write_report: error: {exc}\n")
        return exc.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
