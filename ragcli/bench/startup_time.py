"""`rag bench startup`: `rag --help`, `rag search`, `rag ask` and a served `rag ask` in
fresh processes; with ``against``, the same commands of another checkout (the old main)
run in turn with these, so both see the same machine at the same moments."""

from __future__ import annotations

import json
import os
import shutil
import statistics
import sys
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from .fresh_process import run_measured

HERE = Path(__file__).resolve().parents[2]  # the checkout this code runs from


@dataclass
class StartupRow:
    """One command in fresh processes of one checkout: medians over the runs."""

    command: str
    runs: int
    wall_ms: float
    max_rss_mb: float
    ttft_outside_prefill_ms: float | None = None
    process_ttft_ms: float | None = None
    prefill_ms: float | None = None
    code: str = "this"  # "this", or the path of the checkout compared with


def _commands(index: Path, question: str) -> list[tuple[str, list[str]]]:
    rag = [sys.executable, "-m", "ragcli"]
    return [
        ("rag --help", [*rag, "--help"]),
        ("rag search", [*rag, "search", "--no-server", "--index", str(index), question]),
        ("rag ask --no-cache", [*rag, "ask", "--json", "--profile", "--no-cache",
                                "--index", str(index), question]),
    ]  # fmt: skip


@contextmanager
def _served(code: Path, index: Path, question: str, workdir: Path) -> Iterator[dict[str, str]]:
    """A `rag serve` of this checkout on a copy of the index; the environment its
    clients find it by. The question is asked once, so clients meet the answer cache."""
    from ..config import load_settings
    from .served_vs_fresh import bench_server

    copy = workdir / "index"
    shutil.copytree(index, copy, ignore=shutil.ignore_patterns("serve.sock"))
    env = {**os.environ, "RAG_CACHE_DIR": str(workdir / "cache")}
    (workdir / "cache").mkdir()
    models = load_settings().cache_dir / "models"
    if models.is_dir():
        (workdir / "cache" / "models").symlink_to(models)
    with bench_server(load_settings({"index_dir": copy}), workdir, env, 4, cwd=code) as end:
        client_env = {**env, "RAG_SERVER": str(end.unix)}
        run_measured(_ask(copy, question), client_env, code)  # the answer is cached now
        yield {**client_env, "INDEX": str(copy)}


def _ask(index: Path, question: str) -> list[str]:
    return [sys.executable, "-m", "ragcli", "ask", "--json", "--index", str(index), question]


def startup_bench(
    index_dir: Path,
    question: str,
    runs: int = 5,
    against: Path | None = None,
    served: bool = True,
) -> list[StartupRow]:
    """Each command ``runs`` times per checkout, the checkouts in turn within each round."""
    index = index_dir.resolve()
    codes = [HERE] + ([against.resolve()] if against else [])
    samples: dict[tuple[str, Path], list[tuple[float, float, str]]] = {}
    with ExitStack() as stack:
        servers = {}
        if served:
            for code in codes:
                work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="rag-start-")))
                servers[code] = stack.enter_context(_served(code, index, question, work))
        for _ in range(runs):
            for code in codes:
                for name, args in _commands(index, question):
                    samples.setdefault((name, code), []).append(
                        run_measured(args, dict(os.environ), code)
                    )
                if served:
                    env = servers[code]
                    args = _ask(Path(env["INDEX"]), question)
                    samples.setdefault(("rag ask (served)", code), []).append(
                        run_measured(args, env, code)
                    )
    return [_row(name, code, got) for (name, code), got in samples.items()]


def _row(name: str, code: Path, got: list[tuple[float, float, str]]) -> StartupRow:
    med = statistics.median
    outside, ttft, prefill = [], [], []
    if name.startswith("rag ask --no-cache"):
        for _, _, out in got:
            prof = json.loads(out).get("profile", {})
            if "ttft_outside_prefill_ms" in prof:
                outside.append(prof["ttft_outside_prefill_ms"])
                ttft.append(prof["process_ttft_ms"])
                prefill.append(prof["prefill_ms"])
    return StartupRow(
        command=name,
        runs=len(got),
        wall_ms=round(med(w for w, _, _ in got), 1),
        max_rss_mb=round(med(r for _, r, _ in got), 1),
        ttft_outside_prefill_ms=round(med(outside), 1) if outside else None,
        process_ttft_ms=round(med(ttft), 1) if ttft else None,
        prefill_ms=round(med(prefill), 1) if prefill else None,
        code="this" if code == HERE else str(code),
    )
