"""`rag bench startup`: `rag --help`, `rag search` and `rag ask` in fresh processes."""

from __future__ import annotations

import json
import os
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

from .fresh import run_measured


@dataclass
class StartupRow:
    """One command in fresh processes: medians over the runs."""

    command: str
    runs: int
    wall_ms: float
    max_rss_mb: float
    ttft_outside_prefill_ms: float | None = None
    process_ttft_ms: float | None = None
    prefill_ms: float | None = None


def startup_bench(index_dir: Path, question: str, runs: int = 5) -> list[StartupRow]:
    """`rag --help`, `rag search` and `rag ask` (cache off) in fresh processes, as scripts run them."""
    rag = [sys.executable, "-m", "ragcli"]
    env = dict(os.environ)
    rows = []
    for name, args in (
        ("rag --help", [*rag, "--help"]),
        ("rag search", [*rag, "search", "--index", str(index_dir), question]),
        ("rag ask --no-cache", [*rag, "ask", "--json", "--profile", "--no-cache",
                                "--index", str(index_dir), question]),
    ):  # fmt: skip
        walls, rss, outside, ttft, prefill = [], [], [], [], []
        for _ in range(runs):
            wall, peak, out = run_measured(args, env)
            walls.append(wall)
            rss.append(peak)
            if name.startswith("rag ask"):
                prof = json.loads(out).get("profile", {})
                if "ttft_outside_prefill_ms" in prof:
                    outside.append(prof["ttft_outside_prefill_ms"])
                    ttft.append(prof["process_ttft_ms"])
                    prefill.append(prof["prefill_ms"])
        med = statistics.median
        rows.append(
            StartupRow(
                command=name,
                runs=runs,
                wall_ms=round(med(walls), 1),
                max_rss_mb=round(med(rss), 1),
                ttft_outside_prefill_ms=round(med(outside), 1) if outside else None,
                process_ttft_ms=round(med(ttft), 1) if ttft else None,
                prefill_ms=round(med(prefill), 1) if prefill else None,
            )
        )
    return rows
