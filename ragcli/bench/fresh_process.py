"""Commands run in fresh processes and measured: wall time and the command's own peak RSS.

The benchmarks that time a `rag` command as a user meets it (start-up, models, serve,
ingest) start it anew each time, through ``peak_rss.py`` so that the benchmark's own size
does not count as the command's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from ..errors import RagError


def run_measured(
    args: list[str], env: dict[str, str], cwd: Path | None = None
) -> tuple[float, float, str]:
    """Wall ms, peak RSS in MB and stdout of one fresh process, started through
    ``peak_rss.py`` so that this process's own size does not count as the command's.
    ``cwd``: where `python -m ragcli` finds the code to run (a checkout to compare with)."""
    read, write = os.pipe()
    wrapper = [sys.executable, str(Path(__file__).with_name("peak_rss.py")), str(write)]
    proc = subprocess.Popen(
        [*wrapper, *args], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
        pass_fds=(write,), cwd=cwd,
    )  # fmt: skip
    os.close(write)
    with os.fdopen(read) as report:
        out = proc.stdout.read() if proc.stdout else b""
        proc.wait()
        measured = json.loads(report.read() or "{}")  # nothing: the launcher itself failed
    if measured.get("code") not in (0, 1):
        raise RagError(f"{' '.join(args[:3])}... failed with exit code {proc.returncode}")
    return measured["wall_ms"], measured["peak_mb"], out.decode("utf-8", "replace")
