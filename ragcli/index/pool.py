"""Parse files for `rag index` in worker processes: results in input order, a bounded
number waiting for the embedder, and workers that die with the indexing process.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Iterable, Iterator
from pathlib import Path

from .prepare import PreparedFile, prepare_file, token_counter

IN_FLIGHT_PER_WORKER = 8  # parsed files waiting for the embedder, per worker: bounds memory


def _worker_init(parent: int) -> None:
    """Die with the indexing process: a `kill -9` of `rag index` must not leave
    parsers running (they would also hold its stdout and stderr open)."""
    import ctypes
    import signal

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG (Linux)
    except (OSError, AttributeError):
        pass  # not Linux: workers end when they next find the pool gone
    if os.getppid() != parent:
        os._exit(1)  # the parent died before the line above


def _prepare_in_worker(
    path: Path, tokenizer_json: Path, chunk_tokens: int, chunk_overlap: int
) -> PreparedFile:
    return prepare_file(path, token_counter(tokenizer_json), chunk_tokens, chunk_overlap)


def prepare_in_pool(
    paths: list[Path], tokenizer: Path, size: tuple[int, int], n_workers: int
) -> Iterator[PreparedFile]:
    """Parse in worker processes, results in input order, few waiting at a time."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    # spawn, not fork: the parent may hold torch's threads by the time a pool starts.
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(
        n_workers, mp_context=context, initializer=_worker_init, initargs=(os.getpid(),)
    ) as pool:
        pending: deque = deque()
        queue: Iterable[Path] = iter(paths)
        for path in queue:
            pending.append(pool.submit(_prepare_in_worker, path, tokenizer, *size))
            if len(pending) >= n_workers * IN_FLIGHT_PER_WORKER:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
