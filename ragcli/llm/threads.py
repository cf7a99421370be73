"""How many threads llama.cpp gets for its next evaluation: the cores other processes
leave free, at least one and at most the configured count.

llama.cpp's CPU threads meet at a barrier after every operation of the graph (hundreds
per token), and the installed build runs them as an OpenMP team whose waiting threads
spin for about 3 ms before they sleep (libgomp's default). When another process takes a
core, the thread that shares it runs in scheduler slices and every barrier waits for
it while the others spin: two threads beside one busy process decode slower than one
thread alone. The thread count is therefore set before each evaluation
(``llama_set_n_threads`` takes effect at the next ``llama_decode``) from what
:class:`ragcli.cpus.CpuSampler` measured over the last quarter second or more.

Standard library only; the engine calls :meth:`ThreadGovernor.pick` before every
evaluation, which reads /proc/stat at most once a window and is a clock read otherwise.
A prefill is several evaluations (:data:`ragcli.llm.llama.GOVERNED_BATCH` tokens each),
so its thread count follows the machine through a long prompt.
"""

from __future__ import annotations

import math

from ..cpus import CpuSampler

# A core counts as ours when others leave us at least this share of it: a thread that
# gets less holds up every barrier of the ones that run.
FREE_SHARE = 0.7
# A window older than this when the engine starts again measured the time it sat idle, and
# what ran then: a resident server's window held the start-up of the very client whose
# question it is about to read (a second of one core), and judged a quiet machine busy.
STALE_S = 1.0


def fitting_threads(free: float, most: int) -> int:
    """Threads for ``free`` CPUs' worth of idle time: whole cores, the last one counted
    from FREE_SHARE of it; at least 1, at most ``most``."""
    return max(1, min(most, math.floor(free + 1 - FREE_SHARE)))


class ThreadGovernor:
    """The thread count that fits the machine now, re-judged once a sampling window."""

    def __init__(self, most: int, sampler: CpuSampler | None = None) -> None:
        self.most = most
        self.sampler = sampler if sampler is not None else CpuSampler()
        self.threads = most  # until a window is measured: what the settings ask for
        self._paused = False

    def pause(self) -> None:
        """The engine stops evaluating (an answer is done). What runs until it starts again
        is mostly the next client starting up, and whatever reads the last answer: bursts
        that share no cores with a prompt. Judged as load, they put a resident server's
        next prompt on one thread (docs/BENCHMARKS.md, "Reading cache")."""
        self._paused = True

    def pick(self) -> int:
        """Threads for the next evaluation; cheap enough to call before every token.

        After a pause, the count goes back to ``most`` and a new window starts: what the
        machine does while the engine runs is what the next judgement should see."""
        if self.sampler.age() > STALE_S:
            self.sampler.restart()
            self.threads = self.most
        elif self._paused:
            # A new window from now; until it is measured, the count judged while the
            # engine last ran, when a busy neighbour showed as one.
            self.sampler.restart()
        elif self.sampler.due():
            self.sampler.sample()
            free = self.sampler.free
            if free is not None:
                self.threads = fitting_threads(free, self.most)
        self._paused = False
        return self.threads
