"""Threads that fit the machine: the core count, the sampler of other processes' CPU use,
the rule that turns it into a thread count, and the engine following it.

The machine these run on may be shared with other work, so nothing here compares
speeds: the sampler is checked against a busy process's own CPU time over the same
window, and the engine by the thread counts its Timings report.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from ragcli.config import Settings
from ragcli.cpus import CpuSampler, allowed_cpus, physical_cores
from ragcli.llm.threads import STALE_S, ThreadGovernor, fitting_threads

TICK_S = 1 / os.sysconf("SC_CLK_TCK")
WINDOW_S = 1.0
TOLERANCE = 0.15  # CPUs: a few ticks of rounding over the window, and scheduling jitter


@contextmanager
def spinning(n: int) -> Iterator[list[subprocess.Popen]]:
    """``n`` processes running a pure-Python busy loop until the block ends."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        time.sleep(0.2)  # started and spinning
        yield procs
    finally:
        for p in procs:
            p.kill()
            p.wait()


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process, from /proc/PID/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * TICK_S  # fields 14 and 15 of the line


# -- cores ------------------------------------------------------------------------
def test_physical_cores_counts_each_core_once():
    cores = physical_cores()
    assert 1 <= cores <= (os.cpu_count() or 1)
    # Independently: a core is a (package, die, core id) triple of sysfs.
    seen = set()
    for cpu in allowed_cpus():
        topology = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology")
        if not (topology / "core_id").is_file():
            pytest.skip("no CPU topology in sysfs here")
        die = topology / "die_id"
        seen.add(
            (
                (topology / "physical_package_id").read_text().strip(),
                die.read_text().strip() if die.is_file() else "",
                (topology / "core_id").read_text().strip(),
            )
        )
    assert cores == len(seen)


def test_settings_threads_default_to_physical_cores():
    assert Settings().threads == physical_cores()
    assert Settings(n_threads=3).threads == 3


# -- the rule ---------------------------------------------------------------------
@pytest.mark.parametrize(
    ("free", "most", "threads"),
    [
        (2.0, 2, 2),  # quiet
        (1.75, 2, 2),  # a little background work: the second core still counts
        (1.6, 2, 1),  # under 70 % of the second core left
        (1.0, 2, 1),  # one busy process, or a second `rag ask`
        (0.0, 2, 1),  # never fewer than one
        (8.0, 4, 4),  # never more than configured
        (2.6, 8, 2),
    ],
)
def test_fitting_threads(free: float, most: int, threads: int):
    assert fitting_threads(free, most) == threads


class FakeSampler:
    """A sampler whose windows are always due and whose answer the test sets."""

    def __init__(self, free: float | None) -> None:
        self.free = free
        self.looks = 0

    def due(self) -> bool:
        return True

    def sample(self) -> None:
        self.looks += 1

    def age(self) -> float:
        return 0.0

    def restart(self) -> None:
        self.restarts = getattr(self, "restarts", 0) + 1


def test_governor_keeps_the_setting_until_a_window_is_measured():
    sampler = FakeSampler(None)
    governor = ThreadGovernor(4, sampler)  # type: ignore[arg-type]
    assert governor.pick() == 4 and sampler.looks == 1
    sampler.free = 1.0
    assert governor.pick() == 1
    sampler.free = 3.9
    assert governor.pick() == 4


def test_what_runs_between_two_answers_is_not_judged():
    # Back to back, the window spans the next client's start-up: its burst is not the
    # load a prompt would share cores with. The count judged while the engine ran stays.
    sampler = FakeSampler(2.0)
    governor = ThreadGovernor(2, sampler)  # type: ignore[arg-type]
    assert governor.pick() == 2
    governor.pause()
    sampler.free = 1.0  # a client started while the engine sat idle
    assert governor.pick() == 2 and sampler.restarts == 1
    assert governor.pick() == 1  # once running, a busy machine is seen again
    sampler.free = 1.0
    governor.pause()
    assert governor.pick() == 1  # and a busy neighbour judged while running is kept


def test_after_a_pause_the_governor_starts_again_from_the_setting():
    # A busy process ran while the engine sat idle (a client starting up): that window is
    # stale by the time the engine runs again, and judges nothing.
    sampler = CpuSampler(min_window_s=0.1)
    governor = ThreadGovernor(2, sampler)
    with spinning(2):
        time.sleep(STALE_S + 0.3)
    assert governor.pick() == 2
    assert sampler.age() < 0.2  # a new window began at that look
    assert sampler.free is None


# -- the sampler ------------------------------------------------------------------
def test_a_look_inside_the_window_keeps_the_last_answer():
    sampler = CpuSampler(min_window_s=60)
    assert not sampler.due()
    assert sampler.sample() is None and sampler.free is None


def test_sampler_sees_a_busy_process_as_others_use():
    sampler = CpuSampler(min_window_s=0)
    with spinning(1) as (proc,):
        sampler.sample()  # the window starts now
        spun, t0 = cpu_seconds(proc.pid), time.monotonic()
        time.sleep(WINDOW_S)
        others = sampler.sample()
        spinner = (cpu_seconds(proc.pid) - spun) / (time.monotonic() - t0)
    assert others is not None and sampler.free is not None
    # Others are the spinner and whatever else the machine runs: never less than the spinner.
    assert spinner > 0.2, "the spinner hardly ran: the check would say nothing"
    assert others >= spinner - TOLERANCE
    assert sampler.free <= len(allowed_cpus()) - spinner + TOLERANCE


def busy_seconds() -> float:
    """Busy time of the allowed CPUs so far, read from /proc/stat here, not by the sampler."""
    names = {f"cpu{n}" for n in allowed_cpus()}
    ticks = 0
    for line in Path("/proc/stat").read_text().splitlines():
        name, *values = line.split()
        if name in names:
            user, nice, system, _idle, _iowait, irq, softirq, steal = map(int, values[:8])
            ticks += user + nice + system + irq + softirq + steal
    return ticks * TICK_S


def test_sampler_leaves_out_this_process_own_work():
    sampler = CpuSampler(min_window_s=0)
    stop = threading.Event()
    spent: list[float] = []

    def spin() -> None:
        start = time.thread_time()
        while not stop.is_set():
            pass
        spent.append(time.thread_time() - start)

    thread = threading.Thread(target=spin)
    sampler.sample()
    t0, busy0 = time.monotonic(), busy_seconds()
    thread.start()
    time.sleep(WINDOW_S)
    stop.set()
    thread.join()
    others = sampler.sample()
    window = time.monotonic() - t0
    busy = (busy_seconds() - busy0) / window
    assert others is not None and spent[0] / window > 0.2
    # Everything busy on our CPUs, less at least what our spinning thread took.
    assert others <= busy - spent[0] / window + TOLERANCE


# -- the engine -------------------------------------------------------------------
@pytest.fixture(scope="module")
def small_model():
    from ragcli.config import load_settings
    from ragcli.models import generation_model

    return generation_model("gemma-3-270m", load_settings().cache_dir)


def _generate(engine, max_tokens: int = 16):
    from ragcli.llm.base import Prompt

    prompt = Prompt(("The night ferry", " to Quillmoor leaves from pier 7", " at"), stop=())
    return engine.generate(prompt, max_tokens=max_tokens, use_cache=False).timings


def test_engine_sets_the_threads_its_governor_picks(small_model):
    import llama_cpp

    from ragcli.llm.llama import LlamaEngine

    engine = LlamaEngine(small_model, 1024, 512, n_threads=2)
    fixed = LlamaEngine(small_model, 1024, 512, n_threads=2, adaptive_threads=False)
    try:
        sampler = FakeSampler(1.0)
        engine._governor = ThreadGovernor(2, sampler)  # type: ignore[arg-type]
        t = _generate(engine)
        assert (t.prefill_threads, t.decode_threads) == (1, 1)
        assert llama_cpp.llama_n_threads(engine.ctx) == 1
        assert llama_cpp.llama_n_threads_batch(engine.ctx) == 1
        sampler.free = 2.0
        # The next prompt starts with the count judged while the engine last ran, then
        # follows the machine.
        t = _generate(engine, max_tokens=4)
        assert 1 <= t.prefill_threads < 2 and t.decode_threads == 2
        t = _generate(engine, max_tokens=4)
        assert (t.prefill_threads, t.decode_threads) == (2, 2)
        assert llama_cpp.llama_n_threads(engine.ctx) == 2
        t = _generate(fixed, max_tokens=4)  # adaptive_threads off: the setting, always
        assert fixed._governor is None and (t.prefill_threads, t.decode_threads) == (2, 2)
    finally:
        engine.close()
        fixed.close()


@pytest.mark.skipif(len(allowed_cpus()) < 2, reason="one CPU: nothing to give up")
def test_engine_uses_fewer_threads_beside_busy_processes(small_model):
    from ragcli.llm.llama import LlamaEngine

    # All CPUs but one spin: at most one is left, whatever else the machine runs.
    with spinning(len(allowed_cpus()) - 1):
        engine = LlamaEngine(small_model, 1024, 512, n_threads=2)
        try:
            time.sleep(0.5)  # a full sampling window with the spinners, after the load
            t = _generate(engine, max_tokens=32)
            assert t.prefill_threads < 2 and t.decode_threads < 2
        finally:
            engine.close()
