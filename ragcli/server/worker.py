"""The resident side of `rag serve`, free of HTTP: one worker thread owns the open
:class:`~ragcli.rag.Rag` (index, query encoder, model), and requests wait their turn in
a bounded queue.

One thread because there is one model and one llama.cpp context: two questions at once
would only share the same cores. Every search reads the index's newest commit, so a
commit by `rag index` is seen by the next request.

With the reading cache on, the worker reads passages into it while no request waits (the
ones questions retrieved most first), a passage at a time, so a request that comes waits
for one passage at most.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from ..config import Settings
from ..embed.memo import MEMO_VECTORS
from ..errors import RagError
from ..log import LOGGER

if TYPE_CHECKING:
    from ..rag import Rag

T = TypeVar("T")

IDLE_S = 2.0  # no request for this long: the worker may read passages into the reading cache
RECHECK_S = 30.0  # every passage read: look this often for passages a commit added


class Busy(Exception):
    """The queue is full; the request is refused (HTTP 503) instead of waiting unbounded."""


class Gone(Exception):
    """The client went away before or while its request ran; nobody wants the result."""


@dataclass
class Job:
    """A request's place in the queue; ``cancelled`` is set when its client disconnects."""

    future: Future = field(default_factory=Future)
    cancelled: bool = False


@dataclass
class Stats:
    """What the server has done since it started (GET /stats)."""

    started: float = field(default_factory=time.time)
    questions: int = 0
    answered: int = 0
    searches: int = 0
    errors: int = 0
    rejected_busy: int = 0
    cancelled: int = 0
    # every answer's timings.cache_source: live, disk, none (no reuse or no model call), ...
    cache_sources: Counter = field(default_factory=Counter)
    warmed_passages: int = 0  # read into the reading cache while idle
    warmed_tokens: int = 0
    warm_complete: bool = False  # every passage of the index read, at the last look


class Service:
    """The loaded :class:`~ragcli.rag.Rag` behind a one-thread queue of at most
    ``queue_size`` waiting requests (the one running not counted)."""

    def __init__(self, settings: Settings, queue_size: int = 16) -> None:
        self.settings = settings
        self.queue_size = queue_size
        self.stats = Stats()
        self.model = ""
        self._rag: Rag | None = None
        self._pending = 0  # accepted and not finished: running + waiting
        self._lock = threading.Lock()
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rag-serve")
        self._retrieved: Counter[int] = Counter()  # passage id -> questions that found it
        self._warmed: set[int] = set()
        self._warming = False
        self._last_busy = time.monotonic()  # when the last request ended (or warming did)
        self._closing = threading.Event()
        self._idle = threading.Thread(target=self._idle_loop, name="rag-idle", daemon=True)

    # -- life ------------------------------------------------------------
    def start(self) -> None:
        """Open the index and load both models now, so a broken model fails start-up."""
        self._worker.submit(self._open).result()
        if self.settings.reads_apart and self.settings.warm_idle:
            self._idle.start()

    def _open(self) -> None:
        from ..rag import Rag

        rag = Rag(self.settings, memo_queries=MEMO_VECTORS)
        try:
            rag.load()
        except BaseException:
            rag.close()
            raise
        self.model = rag.model
        self._rag = rag

    @property
    def generation(self) -> str:
        """The index commit the last request read."""
        return self._rag.generation if self._rag else ""

    def close(self) -> None:
        """Finish what is queued, then release the models and the index."""
        self._closing.set()
        if self._idle.is_alive():
            self._idle.join()
        if self._rag is not None:
            self._worker.submit(self._rag.close).result()
            self._rag = None
        self._worker.shutdown(wait=True)

    # -- the queue -------------------------------------------------------
    @property
    def running(self) -> int:
        return min(self._pending, 1)

    @property
    def waiting(self) -> int:
        return max(self._pending - 1, 0)

    def submit(self, work: Callable[[Rag, Job], T]) -> Job:
        """Queue ``work`` for the worker; :class:`Busy` when the queue is full."""
        with self._lock:
            if self._pending > self.queue_size:
                self.stats.rejected_busy += 1
                raise Busy(
                    f"the server is busy: {self.queue_size} requests already wait for the "
                    "model; retry later"
                )
            self._pending += 1
        job = Job()
        job.future = self._worker.submit(self._run, job, work)
        return job

    def cancel(self, job: Job) -> None:
        """The client left: a job that has not started gives its place back now; a running
        one stops at its next piece of text."""
        job.cancelled = True
        if job.future.cancel():
            with self._lock:
                self._pending -= 1
            self.stats.cancelled += 1

    def _run(self, job: Job, work: Callable[[Rag, Job], T]) -> T:
        try:
            if job.cancelled:
                self.stats.cancelled += 1
                raise Gone
            assert self._rag is not None, "the service was not started"
            return work(self._rag, job)
        finally:
            with self._lock:
                self._pending -= 1
                self._last_busy = time.monotonic()

    # -- idle time -------------------------------------------------------
    def _idle_loop(self) -> None:
        """Hand the worker a warm when nothing has waited for ``IDLE_S``."""
        last_look = 0.0
        while not self._closing.wait(IDLE_S / 4):
            now = time.monotonic()
            with self._lock:
                quiet = not self._pending and not self._warming
                quiet = quiet and now - self._last_busy >= IDLE_S
                due = not self.stats.warm_complete or now - last_look >= RECHECK_S
                if not (quiet and due):
                    continue
                self._warming = True
            last_look = now
            self._worker.submit(self._warm_idle)

    def _warm_idle(self) -> None:
        """On the worker: read passages until a request comes or none is left."""
        try:
            if self._rag is None or self._closing.is_set():
                return
            report = self._rag.warm(
                first=[i for i, _ in self._retrieved.most_common()],
                seen=self._warmed,
                stop=lambda: self._pending > 0 or self._closing.is_set(),
            )
            self.stats.warmed_passages += report.passages
            self.stats.warmed_tokens += report.tokens_encoded
            self.stats.warm_complete = report.complete
        except RagError as exc:  # e.g. no room left on the disk: answering goes on
            logging.getLogger(LOGGER).warning("reading cache not warmed: %s", exc)
            self.stats.warm_complete = True  # tried again after RECHECK_S
        finally:
            with self._lock:
                self._warming = False
                self._last_busy = time.monotonic()

    # -- the work --------------------------------------------------------
    def ask(self, question: str) -> Callable[[Rag, Job], dict[str, Any]]:
        """The job of one question: what `rag ask --json` prints."""

        def work(rag: Rag, job: Job) -> dict[str, Any]:
            def on_text(_piece: str) -> None:
                if job.cancelled:  # the client left mid-answer: stop decoding
                    raise Gone

            try:
                answer = rag.ask(question, on_text=on_text)
                out = answer.as_dict()
            except Gone:
                self.stats.cancelled += 1
                raise
            except Exception:
                self.stats.errors += 1
                raise
            self._retrieved.update(h.chunk.id for h in answer.sources)
            self.stats.questions += 1
            self.stats.answered += bool(out.get("answered"))
            self.stats.cache_sources[str(out.get("timings", {}).get("cache_source"))] += 1
            return out

        return work

    def search(self, query: str, top_k: int, retriever: str) -> Callable[[Rag, Job], dict]:
        """The job of one search: what `rag search --json` prints."""

        def work(rag: Rag, job: Job) -> dict[str, Any]:
            try:
                result = rag.search(query, top_k, retriever)
            except Exception:
                self.stats.errors += 1
                raise
            self._retrieved.update(h.chunk.id for h in result.hits)
            self.stats.searches += 1
            return result.as_dict()

        return work

    def snapshot(self) -> dict[str, Any]:
        """GET /stats."""
        s = self.stats
        hits = {k: v for k, v in s.cache_sources.items() if k not in ("none", "None")}
        return {
            "questions": s.questions,
            "answered": s.answered,
            "searches": s.searches,
            "errors": s.errors,
            "cache_hits": hits,
            "cache_sources": dict(s.cache_sources),
            "running": self.running,
            "queue_length": self.waiting,
            "queue_size": self.queue_size,
            "rejected_busy": s.rejected_busy,
            "cancelled": s.cancelled,
            "model": self.model,
            "index_generation": self.generation,
            "index_reloads": self._rag.commits_followed if self._rag else 0,
            "reading_cache_warmed": {
                "passages": s.warmed_passages,
                "tokens": s.warmed_tokens,
                "complete": s.warm_complete,
            },
            "uptime_s": round(time.time() - s.started, 1),
        }
