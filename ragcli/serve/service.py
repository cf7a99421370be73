"""The resident side of `rag serve`, free of HTTP: one worker thread owns the index, the
embedder and the model, and requests wait their turn in a bounded queue.

One thread because there is one model and one llama.cpp context: two questions at once
would only share the same cores. Every job first checks the index's generation, so a
commit by `rag index` is seen by the next request.
"""

from __future__ import annotations

import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from ..config import Settings

if TYPE_CHECKING:
    import numpy as np

    from ..answer.asker import Asker
    from ..embed.base import Embedder
    from ..progress import Progress

T = TypeVar("T")
MEMO_VECTORS = 20_000  # 384-d float32: about 31 MB


class MemoEmbedder:
    """The query encoder with the vectors of texts it has seen kept (least recently used
    out). A server meets the same passages' sentences question after question, and
    choosing them (:mod:`ragcli.answer.focus`) is most of a repeated question's time."""

    def __init__(self, inner: Embedder, capacity: int = MEMO_VECTORS) -> None:
        self.info = inner.info
        self._inner = inner
        self._capacity = capacity
        self._memo: OrderedDict[str, np.ndarray] = OrderedDict()

    def embed(self, texts: list[str], progress: Progress | None = None) -> np.ndarray:
        import numpy as np

        memo = self._memo
        missing = list(dict.fromkeys(t for t in texts if t not in memo))
        if missing:
            for text, vec in zip(missing, self._inner.embed(missing), strict=True):
                memo[text] = vec.copy()
        out = np.stack([memo[t] for t in texts])
        for t in texts:
            memo.move_to_end(t)
        while len(memo) > self._capacity:
            memo.popitem(last=False)
        if progress:
            progress(len(texts))
        return out


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
    index_reloads: int = 0
    # every answer's timings.cache_source: live, disk, none (no reuse or no model call), ...
    cache_sources: Counter = field(default_factory=Counter)


class Service:
    """The loaded :class:`Asker` behind a one-thread queue of at most ``queue_size`` waiting
    requests (the one running not counted)."""

    def __init__(self, settings: Settings, queue_size: int = 16) -> None:
        self.settings = settings
        self.queue_size = queue_size
        self.stats = Stats()
        self.generation = ""
        self.model = ""
        self._asker: Asker | None = None
        self._pending = 0  # accepted and not finished: running + waiting
        self._lock = threading.Lock()
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rag-serve")

    # -- life ------------------------------------------------------------
    def start(self) -> None:
        """Open the index and load both models now, so a broken model fails start-up."""
        self._worker.submit(self._open).result()

    def _open(self) -> None:
        from ..answer.asker import Asker
        from ..answer.retrieval import Retriever

        probe = Retriever(self.settings)
        try:
            encoder = MemoEmbedder(probe.embedder)  # checked against the index, loaded
        finally:
            probe.close()
        asker = Asker(self.settings, retriever=Retriever(self.settings, embedder=encoder))
        try:
            engine = asker.engine
            asker.retriever.embedder  # noqa: B018 (loads the query encoder)
            self.generation = asker.retriever.store.generation()
        except BaseException:
            asker.close()
            raise
        self.model = engine.model.name
        self._asker = asker

    def close(self) -> None:
        """Finish what is queued, then release the models and the index."""
        if self._asker is not None:
            self._worker.submit(self._asker.close).result()
            self._asker = None
        self._worker.shutdown(wait=True)

    # -- the queue -------------------------------------------------------
    @property
    def running(self) -> int:
        return min(self._pending, 1)

    @property
    def waiting(self) -> int:
        return max(self._pending - 1, 0)

    def submit(self, work: Callable[[Asker, Job], T]) -> Job:
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

    def _run(self, job: Job, work: Callable[[Asker, Job], T]) -> T:
        try:
            if job.cancelled:
                self.stats.cancelled += 1
                raise Gone
            assert self._asker is not None, "the service was not started"
            self._follow_index(self._asker)
            return work(self._asker, job)
        finally:
            with self._lock:
                self._pending -= 1

    def _follow_index(self, asker: Asker) -> None:
        """Reopen the index when a commit has moved it since the last request."""
        from ..answer.retrieval import Retriever

        now = asker.retriever.store.generation()
        if now == self.generation:
            return
        old = asker.retriever
        new = Retriever(self.settings, embedder=old.embedder)
        if new.store.info.embed_model != old.store.info.embed_model:  # rebuilt with another
            new.close()
            new = Retriever(self.settings)
        asker.retriever = new
        old.close()
        self.generation = new.store.generation()
        self.stats.index_reloads += 1

    # -- the work --------------------------------------------------------
    def ask(self, question: str) -> Callable[[Asker, Job], dict[str, Any]]:
        """The job of one question: what `rag ask --json` prints."""

        def work(asker: Asker, job: Job) -> dict[str, Any]:
            def on_text(_piece: str) -> None:
                if job.cancelled:  # the client left mid-answer: stop decoding
                    raise Gone

            try:
                out = asker.ask(question, on_text=on_text).as_dict()
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

    def search(self, query: str, top_k: int, retriever: str) -> Callable[[Asker, Job], dict]:
        """The job of one search: what `rag search --json` prints."""

        def work(asker: Asker, job: Job) -> dict[str, Any]:
            try:
                result = asker.retriever.search(query, top_k, retriever)
            except Exception:
                self.stats.errors += 1
                raise
            self.stats.searches += 1
            return {
                "query": query,
                "results": [h.as_dict() for h in result.hits],
                "timings": {
                    "embed_ms": round(result.embed_ms, 2),
                    "search_ms": round(result.search_ms, 2),
                },
            }

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
            "index_reloads": s.index_reloads,
            "uptime_s": round(time.time() - s.started, 1),
        }
