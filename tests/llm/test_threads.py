"""Threads that fit the machine: the core count, the sampler of other processes' CPU use,
the rule that turns it into a thread count, the cores ragcli's engines claim from each
other, and the engine following it all.

Nothing here depends on what else the machine runs or how fast it is: the sampler reads
a /proc/stat the test writes, on a clock the test moves; the governor is judged against
samplers whose answers the test sets; the claims are files the test's own processes hold.
The one look at real load (a sampler beside real spinning processes) is marked slow.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

import ragcli
from ragcli.config import OTHER_ENV, Settings
from ragcli.cpus import CpuSampler, allowed_cpus, physical_cores
from ragcli.llm.cpu_claims import SUFFIX, CpuClaims
from ragcli.llm.loading import OPENMP_WAIT, SPIN_COUNT
from ragcli.llm.threads import STALE_S, ThreadGovernor, fitting_threads

TICKS_PER_S = os.sysconf("SC_CLK_TCK")


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
        self.aged = 0.0  # what age() answers

    def due(self) -> bool:
        return True

    def sample(self) -> None:
        self.looks += 1

    def age(self) -> float:
        return self.aged

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


def test_after_a_pause_the_governor_starts_again_from_the_setting(tmp_path: Path):
    # A busy process ran while the engine sat idle (a client starting up): that window is
    # stale by the time the engine runs again, and judges nothing.
    stat, clock = ProcStat(tmp_path, cpus=2), Clock()
    sampler = CpuSampler([0, 1], 0.1, stat.path, clock, lambda: 0.0)
    governor = ThreadGovernor(2, sampler)
    stat.advance(busy=2.0, seconds=STALE_S + 0.3)  # both CPUs busy all along
    clock.now += STALE_S + 0.3
    assert governor.pick() == 2
    assert sampler.age() == 0.0  # a new window began at that look
    assert sampler.free is None
    stat.advance(busy=2.0, seconds=0.2)
    clock.now += 0.2
    assert governor.pick() == 1  # a window measured while it runs counts


def test_a_stale_window_resets_a_count_judged_busy():
    sampler = FakeSampler(1.0)
    governor = ThreadGovernor(2, sampler)  # type: ignore[arg-type]
    assert governor.pick() == 1
    sampler.aged = STALE_S + 0.1
    assert governor.pick() == 2 and sampler.restarts == 1


# -- the sampler, on a /proc/stat the test writes ----------------------------------
class ProcStat:
    """A /proc/stat file: per-CPU lines whose busy and idle ticks the test moves on."""

    def __init__(self, folder: Path, cpus: int) -> None:
        self.path = folder / "stat"
        self.ticks = [[100, 5, 50, 1000, 20, 1, 2, 0, 0, 0] for _ in range(cpus)]
        self.write()

    def advance(self, busy: float, seconds: float, cpu: int | None = None) -> None:
        """``seconds`` pass with ``busy`` CPUs' worth of user time (on ``cpu``, else spread
        evenly), the rest idle; the idle and iowait ticks must not count as busy."""
        cpus = range(len(self.ticks)) if cpu is None else [cpu]
        for n in range(len(self.ticks)):
            share = busy / len(cpus) if n in cpus else 0.0
            user = round(share * seconds * TICKS_PER_S)
            self.ticks[n][0] += user
            self.ticks[n][3] += round(seconds * TICKS_PER_S) - user - 3
            self.ticks[n][4] += 3  # waiting on a disk is not work either
        self.write()

    def write(self) -> None:
        total = [sum(col) for col in zip(*self.ticks, strict=True)]
        lines = ["cpu  " + " ".join(map(str, total))]
        lines += [f"cpu{n} " + " ".join(map(str, t)) for n, t in enumerate(self.ticks)]
        lines += ["intr 12345 0 0", "ctxt 67890", "btime 1700000000", "processes 42"]
        self.path.write_text("\n".join(lines) + "\n")


class Clock:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_look_inside_the_window_keeps_the_last_answer(tmp_path: Path):
    stat, clock = ProcStat(tmp_path, cpus=2), Clock()
    sampler = CpuSampler([0, 1], 0.25, stat.path, clock, lambda: 0.0)
    clock.now += 0.1
    assert not sampler.due()
    assert sampler.sample() is None and sampler.free is None
    stat.advance(busy=1.0, seconds=0.3)
    clock.now += 0.2
    assert sampler.due() and sampler.sample() == pytest.approx(1.0, abs=0.05)
    stat.advance(busy=2.0, seconds=0.1)
    clock.now += 0.1  # too short a window: the last answer stands
    assert sampler.sample() == pytest.approx(1.0, abs=0.05)


def test_sampler_sees_a_busy_process_as_others_use(tmp_path: Path):
    stat, clock = ProcStat(tmp_path, cpus=4), Clock()
    # Of four CPUs, the process may run on 1 and 2: a spinner on CPU 0 is not its concern.
    sampler = CpuSampler([1, 2], 0.25, stat.path, clock, lambda: 5.0)
    stat.advance(busy=1.0, seconds=1.0, cpu=0)
    stat.advance(busy=0.75, seconds=1.0, cpu=2)  # same second, CPU 2 three quarters busy
    clock.now += 1.0
    assert sampler.sample() == pytest.approx(0.75, abs=0.02)
    assert sampler.free == pytest.approx(1.25, abs=0.02)


def test_sampler_leaves_out_this_process_own_work(tmp_path: Path):
    stat, clock = ProcStat(tmp_path, cpus=2), Clock()
    own = [3.0]
    sampler = CpuSampler([0, 1], 0.25, stat.path, clock, lambda: own[0])
    stat.advance(busy=2.0, seconds=2.0)  # both CPUs busy for two seconds...
    own[0] += 3.0  # ... three CPU seconds of it this process's own
    clock.now += 2.0
    assert sampler.sample() == pytest.approx(0.5, abs=0.02)  # others: a CPU second in two
    own[0] += 4.0  # more than the machine's busy time (ticks are coarse): never below 0
    stat.advance(busy=1.0, seconds=1.0)
    clock.now += 1.0
    assert sampler.sample() == 0.0 and sampler.free == 2.0


def test_sampler_without_proc_stat_measures_nothing(tmp_path: Path):
    sampler = CpuSampler([0, 1], 0.0, tmp_path / "missing", Clock(), lambda: 0.0)
    assert not sampler.due() and sampler.sample() is None and sampler.free is None
    assert sampler.age() == 0.0


@pytest.mark.slow
@pytest.mark.skipif(len(allowed_cpus()) < 2, reason="one CPU: nothing to give up")
def test_governor_sees_real_spinning_processes():
    """The sampler on the real /proc/stat, beside processes that spin on all CPUs but one.

    Retried: this reads the real machine, where one window can be tilted by what the test
    cannot control (the hypervisor taking a CPU from a spinner, this process's own start-up
    burst landing in the first window). Three tries tell that from a sampler that never
    sees the spinners, which fails all three."""
    picks: list[int] = []
    for _ in range(3):
        with spinning(len(allowed_cpus()) - 1):
            governor = ThreadGovernor(2, CpuSampler(min_window_s=0.25))
            deadline = time.monotonic() + 1.5  # several windows with the spinners
            while time.monotonic() < deadline:
                picks.append(governor.pick())
                time.sleep(0.05)
        if picks[-1] == 1:
            return
    pytest.fail(f"the governor kept two threads beside the spinners: {picks}")


# -- claims: ragcli's engines share the cores ---------------------------------------
def live_claims(folder: Path) -> int:
    return CpuClaims(folder, 0).others()


def test_a_second_governor_gets_only_what_the_first_leaves(tmp_path: Path):
    first_sampler, second_sampler = FakeSampler(4.0), FakeSampler(4.0)
    first = ThreadGovernor(3, first_sampler, CpuClaims(tmp_path, 4))  # type: ignore[arg-type]
    second = ThreadGovernor(4, second_sampler, CpuClaims(tmp_path, 4))  # type: ignore[arg-type]
    # Both judge the machine free at the same instant; the claims decide one after the other.
    assert first.pick() == 3
    assert second.pick() == 1
    assert live_claims(tmp_path) == 4
    first.pause()  # an answer done: the first holds nothing while it is idle
    assert live_claims(tmp_path) == 1
    assert second.pick() == 4  # its next window: what the first gave back
    assert first.pick() == 1  # the first starts again: nothing is left but its one thread
    assert second.pick() == 3  # and the second makes room for it at its next window
    second.release()
    assert first.pick() == 3
    first.release()
    assert live_claims(tmp_path) == 0 and not list(tmp_path.glob(f"*{SUFFIX}"))


def test_engines_that_hold_every_core_give_back_to_a_newcomer(tmp_path: Path):
    # Two cores, two engines asking for both: the newcomer runs one thread (an engine cannot
    # run on none), and the first comes down to one at its next look, so that between them
    # they never ask for more than the machine has for longer than one window.
    first = ThreadGovernor(2, FakeSampler(2.0), CpuClaims(tmp_path, 2))  # type: ignore[arg-type]
    second = ThreadGovernor(2, FakeSampler(2.0), CpuClaims(tmp_path, 2))  # type: ignore[arg-type]
    assert first.pick() == 2
    assert second.pick() == 1
    assert first.pick() == 1
    assert (first.pick(), second.pick()) == (1, 1)  # and neither climbs back while both run
    first.release()
    assert second.pick() == 2


def test_an_idle_engine_gives_its_cores_back_without_judging_anew(tmp_path: Path):
    # Between passages warmed into the reading cache, say: the engine holds nothing, and
    # its sampler's window goes on.
    sampler = FakeSampler(2.0)
    governor = ThreadGovernor(2, sampler, CpuClaims(tmp_path, 2))  # type: ignore[arg-type]
    assert governor.pick() == 2 and live_claims(tmp_path) == 2
    governor.release()
    assert live_claims(tmp_path) == 0
    sampler.due = lambda: False  # type: ignore[method-assign]  # mid-window
    assert governor.pick() == 2 and live_claims(tmp_path) == 2
    assert not hasattr(sampler, "restarts")
    governor.release()


def test_the_sampler_still_counts_for_the_machine_beside_the_claims(tmp_path: Path):
    sampler = FakeSampler(1.0)  # a process that is not ragcli takes a CPU
    governor = ThreadGovernor(2, sampler, CpuClaims(tmp_path, 2))  # type: ignore[arg-type]
    assert governor.pick() == 1 and live_claims(tmp_path) == 1
    sampler.free = 2.0
    assert governor.pick() == 2 and live_claims(tmp_path) == 2


HOLD_A_CLAIM = """
import sys
from pathlib import Path
from ragcli.llm.cpu_claims import CpuClaims

claims = CpuClaims(Path(sys.argv[1]), 2)
print(claims.take(2), flush=True)
sys.stdin.read()  # until the test kills it
"""


def test_a_claim_is_freed_when_its_process_is_killed(tmp_path: Path):
    env = {**os.environ, "PYTHONPATH": str(Path(ragcli.__file__).parents[1])}
    child = subprocess.Popen(
        [sys.executable, "-c", HOLD_A_CLAIM, str(tmp_path)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "2"
        governor = ThreadGovernor(2, FakeSampler(2.0), CpuClaims(tmp_path, 2))  # type: ignore[arg-type]
        assert governor.pick() == 1  # the child holds both cores
        governor.pause()
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    stale = list(tmp_path.glob(f"*{SUFFIX}"))
    assert len(stale) == 1  # its file is still there, but nobody holds its lock...
    assert governor.pick() == 2  # ... so it counts for nothing, and goes
    assert not stale[0].exists()
    governor.release()


def test_without_a_usable_folder_the_sampler_alone_decides(tmp_path: Path):
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    governor = ThreadGovernor(2, FakeSampler(2.0), CpuClaims(blocked / "cpus", 2))  # type: ignore[arg-type]
    assert governor.pick() == 2
    governor.release()


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


def test_engine_runs_on_the_cores_other_engines_leave(small_model, tmp_path: Path):
    import llama_cpp

    from ragcli.llm.llama import LlamaEngine

    neighbour = CpuClaims(tmp_path, 2)
    engine = LlamaEngine(small_model, 1024, 512, n_threads=2, claims=tmp_path)
    try:
        assert engine._governor is not None and engine._governor.claims is not None
        engine._governor.sampler = FakeSampler(2.0)  # type: ignore[assignment]
        assert neighbour.take(1) == 1  # another engine runs one thread
        t = _generate(engine, max_tokens=4)
        assert (t.prefill_threads, t.decode_threads) == (1, 1)
        assert llama_cpp.llama_n_threads(engine.ctx) == 1
        assert neighbour.others() == 0  # the answer done, the engine holds nothing
        neighbour.release()
        t = _generate(engine, max_tokens=4)
        assert (t.prefill_threads, t.decode_threads) == (2, 2)
        engine._fit_threads()  # running again: it holds both cores...
        assert neighbour.others() == 2
    finally:
        engine.close()
    assert neighbour.others() == 0  # ... until it is closed


def test_an_engine_that_warmed_the_reading_cache_holds_no_cores(small_model, tmp_path: Path):
    from ragcli.llm.base import Prompt
    from ragcli.llm.llama import LlamaEngine
    from ragcli.llm.reading_cache import ReadingCache

    reading = ReadingCache(tmp_path / "reading", 1 << 30)
    engine = LlamaEngine(small_model, 1024, 512, n_threads=2, reading=reading, claims=tmp_path)
    try:
        sentences = ("Pier 7 serves the night ferry.", " It leaves at nine.")
        prompt = Prompt(("Context: ", "".join(sentences), "\nQ: When?"), (), sentences)
        assert engine.warm(prompt) > 0  # it ran, so it claimed...
        assert live_claims(tmp_path) == 0  # ... and gave the cores back when done
    finally:
        engine.close()


SHOW_OPENMP = "from ragcli.llm.loading import import_llama_cpp; import_llama_cpp()"


@pytest.mark.parametrize(
    ("user", "spins"),
    [
        ({}, str(SPIN_COUNT)),
        ({"GOMP_SPINCOUNT": "123"}, "123"),
        ({"OMP_WAIT_POLICY": "active"}, None),
    ],
)
def test_llama_cpp_threads_spin_briefly_unless_the_user_said(
    user: dict[str, str], spins: str | None
):
    # libgomp reads its variables once, as llama_cpp loads it; OMP_DISPLAY_ENV makes it say
    # what it read. ragcli sets the spin count only where the user set neither variable.
    env = {k: v for k, v in os.environ.items() if k not in OPENMP_WAIT}
    env |= {"OMP_DISPLAY_ENV": "VERBOSE", "PYTHONPATH": str(Path(ragcli.__file__).parents[1])}
    shown = subprocess.run(
        [sys.executable, "-c", SHOW_OPENMP], env=env | user, capture_output=True, text=True
    )
    assert shown.returncode == 0, shown.stderr
    if "OPENMP DISPLAY ENVIRONMENT" not in shown.stderr:
        pytest.skip("llama.cpp is built without OpenMP here: its own threads wait otherwise")
    said = re.search(r"GOMP_SPINCOUNT = '(\d+)'", shown.stderr)
    assert said is not None, shown.stderr
    if spins is None:  # OMP_WAIT_POLICY=active: libgomp's own count, far above ragcli's
        assert int(said.group(1)) > SPIN_COUNT
    else:
        assert said.group(1) == spins
    assert str(SPIN_COUNT) in OTHER_ENV["GOMP_SPINCOUNT"]  # README says what is set
