"""The progress line of `rag index`, seen through a pseudo-terminal as a person sees it."""

from __future__ import annotations

import bisect
import fcntl
import itertools
import json
import os
import pty
import re
import select
import struct
import subprocess
import termios
import time
from dataclasses import dataclass

import pytest

from ..conftest import CORPORA, RAG, ROOT, rag

PYDOCS = ROOT / ".." / "shared" / "eval" / "pydocs"  # the dev corpus, next to the checkout
PHASES = ("finding files", "checking", "parsing", "loading the", "embedding", "committing")
TOKEN = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|[\r\n]")
CLOCK = re.compile(r" · \d+:\d\d(:\d\d)?$")  # the elapsed time ending a line
GAP_S = 2.0  # the bar: the line changes at least this often


@dataclass
class Screen:
    """What a pty showed: each line drawn, with the second it was complete."""

    lines: list[tuple[float, str]]
    launched: float
    returncode: int

    def states(self, clock: bool = True) -> list[tuple[float, str]]:
        """Progress lines, consecutive repeats dropped (``clock=False``: repeats
        but for the elapsed time too)."""
        out: list[tuple[float, str]] = []
        for t, line in self.lines:
            line = line if clock else CLOCK.sub("", line)
            if line.startswith(PHASES) and (not out or out[-1][1] != line):
                out.append((t, line))
        return out


def run_in_pty(args: list[str], cwd, stdout=None) -> Screen:
    """Run `rag` with its stderr (and stdout, unless given) on a 160-column pty."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 160, 0, 0))
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "160", "LINES": "40"}
    launched = time.monotonic()
    proc = subprocess.Popen(
        [str(RAG), *args],
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=slave if stdout is None else stdout,
        stderr=slave,
        env=env,
    )
    os.close(slave)
    chunks: list[tuple[float, bytes]] = []
    deadline = launched + 600
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.2)
        if not ready:
            if proc.poll() is not None:
                break
            continue
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: every writer has closed the pty
            break
        if not data:
            break
        chunks.append((time.monotonic() - launched, data))
    os.close(master)
    returncode = proc.wait(timeout=60)
    return Screen(_lines(chunks), launched, returncode)


def _lines(chunks: list[tuple[float, bytes]]) -> list[tuple[float, str]]:
    """Split the raw terminal stream into drawn lines: colours are dropped, cursor
    moves, erases and line ends close a line; each line gets the time of its end."""
    text = b"".join(data for _, data in chunks).decode("utf-8", "replace")
    ends, times, pos = [], [], 0
    for t, data in chunks:
        pos += len(data.decode("utf-8", "replace"))
        ends.append(pos)
        times.append(t)
    out: list[tuple[float, str]] = []
    current, last = "", 0
    for m in TOKEN.finditer(text):
        current += text[last : m.start()]
        last = m.end()
        if m.group().endswith("m"):
            continue  # a colour: part of the line
        if current.strip():
            at = times[min(bisect.bisect_left(ends, m.start()), len(times) - 1)]
            out.append((at, current.rstrip()))
        current = ""
    if (current := current + text[last:]).strip():
        out.append((times[-1], current.rstrip()))
    return out


def _gaps(states: list[tuple[float, str]], end: float) -> list[float]:
    times = [t for t, _ in states] + [end]
    return [b - a for a, b in itertools.pairwise(times)]


def _index_pydocs(tmp_path) -> tuple[Screen, float, str]:
    """`rag index` of the pydocs dev corpus on a pty: the screen, when its summary line came,
    and everything it showed."""
    if not PYDOCS.is_dir():
        pytest.skip(f"the pydocs dev corpus is not at {PYDOCS}")
    screen = run_in_pty(["index", "--index", str(tmp_path / "idx"), str(PYDOCS.resolve())], ROOT)
    text = "\n".join(line for _, line in screen.lines)
    assert screen.returncode == 0, text
    summary = next(t for t, line in screen.lines if "26 added" in line)
    return screen, summary, text


def test_index_progress_is_drawn_and_gone_before_the_summary(tmp_path):
    # What the line shows whatever the machine's speed: it is drawn while the job runs
    # (seconds: an embedding model loads, 26 files are read), and never after the summary.
    screen, summary, text = _index_pydocs(tmp_path)
    assert screen.states(), text
    assert not any(line.startswith(PHASES) for t, line in screen.lines if t > summary)


def _pace_problems(screen: Screen, summary: float) -> list[str]:
    """How the line fell short of moving every GAP_S seconds, with small steps."""
    states = screen.states()
    first_total = next(t for t, line in states if "/26 files" in line)
    gaps = _gaps(states, summary)
    # Counts alone (the clock masked): they move with each sub-batch of passages.
    counts = [line for _, line in states if line.startswith("embedding")]
    distinct_counts = {CLOCK.sub("", line).split(" passages")[0] for line in counts}
    unclocked = screen.states(clock=False)
    print(
        f"\nstates {len(states)}, max gap {max(gaps):.2f} s "
        f"({max(_gaps(unclocked, summary)):.2f} s without the clock), "
        f"file total at {first_total - states[0][0]:.2f} s after the first line "
        f"({first_total:.2f} s after launch), {len(distinct_counts)} passage counts"
    )
    problems = []
    if first_total - states[0][0] > GAP_S:
        problems.append(f"the file total came {first_total - states[0][0]:.2f} s after the line")
    if max(gaps) > GAP_S:
        problems.append(f"a gap of {max(gaps):.2f} s: {[(round(t, 1), ln) for t, ln in states]}")
    if len(distinct_counts) < 6:  # small steps as sub-batches finish, not one jump per 1,024
        problems.append(f"{len(distinct_counts)} passage counts drawn")
    if not any(line.startswith("committing") for _, line in states):
        problems.append("no committing line")
    return problems


@pytest.mark.slow
def test_index_progress_moves_every_two_seconds(tmp_path):
    """The issue's bar, in wall-clock seconds on the real machine.

    Retried: the line is redrawn eight times a second on a thread of `rag index`, so on a
    loaded machine (these tests share two cores with other work) a gap or a phase shorter
    than a redraw says more about the load than about the line. Three tries tell that from
    a line that does not move, which fails all three."""
    problems: list[str] = []
    for attempt in range(3):
        screen, summary, _ = _index_pydocs(tmp_path / str(attempt))
        problems = _pace_problems(screen, summary)
        if not problems:
            return
    pytest.fail("; ".join(problems))


def test_piped_and_json_output_carry_no_progress(tmp_path):
    piped = rag("index", "--index", str(tmp_path / "a"), str(CORPORA))
    assert piped.returncode == 0, piped.stderr
    assert piped.stderr == ""
    assert piped.stdout.startswith("6 added") and not re.search(r"[\x1b\r]", piped.stdout)

    # stderr on a terminal, stdout piped: --json keeps both clean.
    with open(tmp_path / "out.json", "wb") as out:
        screen = run_in_pty(
            ["index", "--json", "--index", str(tmp_path / "b"), str(CORPORA)], ROOT, out
        )
    assert screen.returncode == 0 and screen.lines == []
    raw = (tmp_path / "out.json").read_bytes()
    assert json.loads(raw)["added"] == 6 and raw.count(b"\n") == 1 and b"\x1b" not in raw


def test_quiet_draws_nothing_on_a_terminal(tmp_path):
    screen = run_in_pty(["index", "--quiet", "--index", str(tmp_path / "c"), str(CORPORA)], ROOT)
    assert screen.returncode == 0
    assert screen.states() == []
    assert screen.lines[0][1].startswith("6 added")
