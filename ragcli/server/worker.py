"""The resident side of `rag serve`, free of HTTP: one worker thread owns the open
:class:`~ragcli.rag.Rag` (index, query encoder, model), and requests wait their turn in
a bounded queue.

One thread because there is one model and one llama.cpp context: two questions at once
would only share the same cores. Every search reads the index's newest commit, so a
commit by `rag index` is seen by the next request.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from ..config import Settings
from ..embed.memo import MEMO_VECTORS

if TYPE_CHECKING:
    from ..rag import Rag

T = TypeVar("T")


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

    # -- life ------------------------------------------------------------
    def start(self) -> None:
        """Open the index and load both models now, so a broken model fails start-up."""
        self._worker.submit(self._open).result()

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

    # -- the work --------------------------------------------------------
    def ask(self, question: str) -> Callable[[Rag, Job], dict[str, Any]]:
        """The job of one question: what `rag ask --json` prints."""

        def work(rag: Rag, job: Job) -> dict[str, Any]:
            def on_text(_piece: str) -> None:
                if job.cancelled:  # the client left mid-answer: stop decoding
                    raise Gone

            try:
                out = rag.ask(question, on_text=on_text).as_dict()
            except Gone:
                self.stats.cancelled += 1
                raise
            except Exception:
                self.stats.errors += 1
                raise
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
            "uptime_s": round(time.time() - s.started, 1),
        }
