"""The CPUs this process may run on: how many cores they make, and how much of them other
processes keep busy.

Threads are sized to physical cores, as llama.cpp's own tools size them: two threads on
the two hyper-threads of one core share its arithmetic units and gain little. The
sampler tells how busy other processes keep those CPUs, for the engine to run no more
threads than the cores left to it (:mod:`ragcli.llm.threads` says why that matters).

Standard library only, and below every other module, since the settings size their
thread counts from here. Linux reads sysfs and procfs; elsewhere the core count falls
back to the CPU count and the sampler measures nothing.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable, Collection, Iterable, Sequence
from pathlib import Path

# /proc/stat counts in ticks of 1/CLK_TCK s (10 ms): a window must hold enough of them
# that one tick more or less is noise (25 ticks a CPU at 0.25 s, 4 % of a CPU).
MIN_WINDOW_S = 0.25
_TICK_S = 1 / (os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100)
_TOPOLOGY = "/sys/devices/system/cpu/cpu{}/topology"


def allowed_cpus() -> list[int]:
    """The CPUs the scheduler lets this process use (``taskset``, cgroup cpusets)."""
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return list(range(os.cpu_count() or 1))


@functools.cache
def physical_cores() -> int:
    """Cores among the allowed CPUs, each core once however many hyper-threads it has.

    Two CPUs are one core when sysfs lists the same siblings for both; where the
    topology cannot be read, every allowed CPU counts.
    """
    cpus = allowed_cpus()
    cores = set()
    for cpu in cpus:
        topology = Path(_TOPOLOGY.format(cpu))
        for name in ("core_cpus_list", "thread_siblings_list"):  # the new name, the old
            try:
                cores.add((topology / name).read_text().strip())
                break
            except OSError:
                continue
        else:
            return len(cpus)
    return max(1, len(cores))


class CpuSampler:
    """How many of our CPUs other processes kept busy since the last look.

    Busy time of the allowed CPUs comes from /proc/stat, less this process's own CPU
    time (all its threads), over the wall time between two looks. A look sooner than
    ``min_window_s`` after the last measured one keeps the previous answer and lets the
    window grow: over a few ticks the count is mostly rounding.
    """

    def __init__(
        self,
        cpus: Sequence[int] | None = None,
        min_window_s: float = MIN_WINDOW_S,
        stat: str | Path = "/proc/stat",
        clock: Callable[[], float] = time.monotonic,
        own_time: Callable[[], float] = time.process_time,
    ) -> None:
        """``stat``, ``clock`` and ``own_time`` are where the counts, the wall time and this
        process's CPU time come from: a test gives its own, so that what it checks does not
        depend on what else the machine runs."""
        self.cpus = list(cpus) if cpus is not None else allowed_cpus()
        self.min_window_s = min_window_s
        self._stat, self._clock, self._own_time = stat, clock, own_time
        self._names = {f"cpu{n}".encode() for n in self.cpus}
        self.others: float | None = None  # CPUs' worth others used in the last window
        self._start = self._read()

    @property
    def free(self) -> float | None:
        """CPUs others left to us over the last window; None before one was measured."""
        return None if self.others is None else len(self.cpus) - self.others

    def due(self) -> bool:
        """Whether a look now would measure a new window (a clock read, nothing more)."""
        return self._start is not None and self._clock() - self._start[0] >= self.min_window_s

    def age(self) -> float:
        """Seconds since the current window began (0 where /proc/stat cannot be read)."""
        return 0.0 if self._start is None else self._clock() - self._start[0]

    def restart(self) -> None:
        """Forget the current window and the last measure: begin a new window now."""
        self._start = self._read()
        self.others = None

    def sample(self) -> float | None:
        """Others' CPU use since the last measured window, in CPUs, within 0 and the number
        of allowed CPUs; the previous value while the window is still too short, and
        None where /proc/stat cannot be read."""
        if not self.due():
            return self.others
        now = self._read()
        if now is None or self._start is None:
            return self.others
        (t0, busy0, own0), (t1, busy1, own1) = self._start, now
        used = (busy1 - busy0) * _TICK_S - (own1 - own0)
        self.others = min(max(used / (t1 - t0), 0.0), float(len(self.cpus)))
        self._start = now
        return self.others

    def _read(self) -> tuple[float, int, float] | None:
        """(clock s, busy ticks of the allowed CPUs, this process's CPU s)."""
        try:
            with open(self._stat, "rb") as stat:
                busy = busy_ticks(stat, self._names)
        except (OSError, ValueError):
            return None
        return self._clock(), busy, self._own_time()


def busy_ticks(stat: Iterable[bytes], names: Collection[bytes]) -> int:
    """Busy ticks of the CPUs ``names`` (``b"cpu0"``...) in the lines of /proc/stat."""
    busy = 0
    for line in stat:
        if not line.startswith(b"cpu"):
            break  # the per-CPU lines come first
        name, *ticks = line.split()
        if name in names:
            # user nice system idle iowait irq softirq steal: idle and iowait are free
            # time; steal is a hypervisor giving the CPU to others
            busy += sum(int(ticks[i]) for i in (0, 1, 2, 5, 6, 7) if i < len(ticks))
    return busy


def cpu_name() -> str:
    """The CPU's model name as Linux reports it, for benchmark reports."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"
