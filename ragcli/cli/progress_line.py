"""The progress line: long work shown on the terminal, and only there.

One transient line on stderr, redrawn when the library reports a
:class:`~ragcli.progress.Step`: phase, bar, count, rate and time left once the
rate is known. It is never drawn when stderr is not a terminal, under ``--json``
or under ``--quiet``, so piped and JSON output carry none of it. rich is
imported only when a line is drawn: `rag --help` and `rag search` stay fast.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from ..progress import OnStep, Step

BAR_WIDTH = 24
RATE_AFTER_S = 1.0  # a rate measured over less than this is noise


def showing(json_out: bool = False, quiet: bool = False) -> bool:
    """Whether to draw progress: only for a person watching stderr."""
    if json_out or quiet or os.environ.get("TERM") == "dumb":
        return False
    return sys.stderr.isatty()


@contextmanager
def progress_line(enabled: bool) -> Iterator[OnStep | None]:
    """An ``OnStep`` that draws the line while the block runs, or None when disabled."""
    if not enabled:
        yield None
        return
    from rich.live import Live

    from .output import stderr_console

    line = _Line()
    # Output to stdout while the line is up goes above it when stdout is this
    # terminal too; else stdout is left alone (rich would copy it to stderr).
    with Live(
        line,
        console=stderr_console(),
        transient=True,
        refresh_per_second=8,
        redirect_stdout=sys.stdout.isatty(),
    ):
        yield line.show


@dataclass
class _Meter:
    """Rates per phase, from the first report of the phase that moved its count:
    a job that goes back and forth between phases (parse, embed, parse) keeps
    one rate for each, and a model load before the first count is not in it."""

    starts: dict[tuple[str, str], tuple[float, int]] = field(default_factory=dict)

    def rate(self, step: Step) -> float | None:
        """Units per second in this phase so far, once measured long enough."""
        if not step.unit:
            return None
        now, key = time.monotonic(), (step.phase, step.unit)
        if key not in self.starts:
            self.starts[key] = (-1.0, step.done)  # not started: waits for the count to move
        t0, done0 = self.starts[key]
        if t0 < 0:
            if step.done > done0:
                self.starts[key] = (now, step.done)
            return None
        if now - t0 < RATE_AFTER_S or step.done <= done0:
            return None
        return (step.done - done0) / (now - t0)


@dataclass
class _Line:
    """The latest step, drawn with the time since the job started: the clock
    moves even while one sub-batch or a model load takes its time."""

    meter: _Meter = field(default_factory=_Meter)
    started: float = field(default_factory=time.monotonic)
    step: Step | None = None
    rate: float | None = None

    def show(self, step: Step) -> None:
        """The ``OnStep`` callback: keep the step; the next refresh draws it."""
        self.step, self.rate = step, self.meter.rate(step)

    def __rich__(self):
        from rich.text import Text

        if self.step is None:
            return Text("")
        return render(self.step, self.rate, time.monotonic() - self.started)


def render(step: Step, rate: float | None = None, elapsed: float | None = None):
    """The line for one step, as rich Text."""
    from rich.text import Text

    line = Text(step.phase, style="bold")
    if step.total:
        filled = min(BAR_WIDTH, round(BAR_WIDTH * step.done / step.total))
        line.append(" ")
        line.append("━" * filled, style="magenta")
        line.append("━" * (BAR_WIDTH - filled), style="grey30")
    parts = [_count(step)] if step.unit else []
    if rate:
        parts.append(f"{_amount(rate, step.unit)}/s")
        if step.total and step.total > step.done:
            parts.append(f"ETA {_clock((step.total - step.done) / rate)}")
    if step.detail:
        parts.append(step.detail)
    if elapsed is not None:
        parts.append(_clock(elapsed))
    if parts:
        line.append(" " + " · ".join(parts))
    return line


def _count(step: Step) -> str:
    """ "384/1,100 passages", "~1,100" for an estimate, "384 passages" without a total."""
    if step.unit == "bytes":
        done = _amount(step.done, "bytes")
        return f"{done}/{_amount(step.total, 'bytes')}" if step.total else done
    if step.total is None:
        return f"{step.done:,} {step.unit}"
    return f"{step.done:,}/{'~' if step.approx else ''}{step.total:,} {step.unit}"


def _amount(n: float, unit: str) -> str:
    """Bytes in MB; other units as counts with the unit's name."""
    if unit == "bytes":
        return f"{n / 1e6:,.1f} MB"
    return f"{n:,.1f} {unit}" if n < 10 else f"{n:,.0f} {unit}"


def _clock(seconds: float) -> str:
    """m:ss, or h:mm:ss past an hour."""
    s = int(seconds + 0.5)
    h, rest = divmod(s, 3600)
    return f"{h}:{rest // 60:02d}:{rest % 60:02d}" if h else f"{rest // 60}:{rest % 60:02d}"
