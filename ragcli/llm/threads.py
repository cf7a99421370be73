"""How many threads llama.cpp gets for its next evaluation: the cores other processes
leave free, at least one and at most the configured count.

llama.cpp's CPU threads meet at a barrier after every operation of the graph (hundreds
per token), and the installed build runs them as an OpenMP team whose waiting threads
spin before they sleep (libgomp's default is some 3 ms; ragcli loads it with a tenth of a
millisecond, :data:`ragcli.llm.loading.SPIN_COUNT`). When another process takes a core,
the thread that shares it runs in scheduler slices and every barrier waits for it: two
threads beside one busy process decode slower than one thread alone, and one thread
waits for no other. The thread count is therefore set before each evaluation
(``llama_set_n_threads`` takes effect at the next ``llama_decode``) from what
:class:`ragcli.cpus.CpuSampler` measured over the last quarter second or more.

The sampler sees other processes only after they ran: two engines that start together
each see a quiet machine. Between ragcli's own engines the count is therefore also held to
the cores the others' claims leave (:mod:`ragcli.llm.cpu_claims`): the second engine to
decide gets what the first left, and an engine that stops gives its cores back.

Standard library only; the engine calls :meth:`ThreadGovernor.pick` before every
evaluation, which reads /proc/stat and the claims at most once a window and is a clock
read otherwise. A prefill is several evaluations (:data:`ragcli.llm.llama.GOVERNED_BATCH`
tokens each), so its thread count follows the machine through a long prompt.
"""

from __future__ import annotations

import math
from pathlib import Path

from ..cpus import CpuSampler, physical_cores
from .cpu_claims import CpuClaims

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

    def __init__(
        self, most: int, sampler: CpuSampler | None = None, claims: CpuClaims | None = None
    ) -> None:
        """``claims``: the cores other ragcli engines run on, to leave to them."""
        self.most = most
        self.sampler = sampler if sampler is not None else CpuSampler()
        self.claims = claims
        self.fits = most  # what the sampler judged free; until a window is measured, the setting
        self.threads = most  # what runs: ``fits``, within what the other engines left
        self._paused = False
        self._claimed = False  # whether ``threads`` was claimed since the engine last stopped

    def pause(self) -> None:
        """The engine stops evaluating (an answer is done). What runs until it starts again
        is mostly the next client starting up, and whatever reads the last answer: bursts
        that share no cores with a prompt. Judged as load, they put a resident server's
        next prompt on one thread (docs/BENCHMARKS.md, "Reading cache"). Its cores are
        given back to other engines meanwhile: an idle server holds none."""
        self._paused = True
        self.release()

    def release(self) -> None:
        """Give the cores back to other engines, judging nothing anew: the engine is idle
        (or gone) until its next pick claims again."""
        self._claimed = False
        if self.claims is not None:
            self.claims.release()

    def pick(self) -> int:
        """Threads for the next evaluation; cheap enough to call before every token.

        After a long stop, the count goes back to ``most`` and a new window starts: what the
        machine does while the engine runs is what the next judgement should see. Each
        judgement, and the first pick after a stop, claims the count among the other
        engines' claims: what it gets is what runs."""
        if self.sampler.age() > STALE_S:
            self.sampler.restart()
            self.fits = self.most
            judged = True
        elif self._paused:
            # A new window from now; until it is measured, the count judged while the
            # engine last ran, when a busy neighbour showed as one.
            self.sampler.restart()
            judged = True
        elif self.sampler.due():
            self.sampler.sample()
            free = self.sampler.free
            if free is not None:
                self.fits = fitting_threads(free, self.most)
            judged = True
        else:
            judged = not self._claimed
        if judged:
            self.threads = self.fits if self.claims is None else self.claims.take(self.fits)
            self._claimed = True
        self._paused = False
        return self.threads


def engine_governor(threads: int, claims: Path | None) -> ThreadGovernor | None:
    """The governor of an engine configured for ``threads`` (None for one thread: nothing
    to adapt), claiming cores in the folder ``claims`` when one is given. Configured for
    more threads than the machine has cores, an engine alone may still take them all."""
    if threads < 2:
        return None
    shared = CpuClaims(claims, max(threads, physical_cores())) if claims is not None else None
    return ThreadGovernor(threads, claims=shared)
