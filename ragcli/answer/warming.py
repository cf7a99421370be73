"""`rag index --warm`, and `rag serve` while it waits: read passages into the reading cache.

Each passage is cut into the sentences the model may be shown (answer/focus.py), and each
sentence the reading cache lacks is encoded apart and kept (llm/reading_cache.py). A
question about warmed passages then reads only itself. Pieces are written one by one, so
an interrupted warm keeps what it did and the next one goes on from there. A server warms
between requests: the passages its questions retrieved most first, and it stops at the
next passage's edge when a request comes.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import UsageError
from ..llm.base import ReadingEngine
from ..progress import OnStep, Step
from .focus import readable
from .prompt import engine_prompt

if TYPE_CHECKING:
    from ..config import Settings
    from .asker import Asker


@dataclass
class WarmReport:
    passages: int = 0
    sentences: int = 0
    tokens_encoded: int = 0  # 0 when the cache held every sentence already
    seconds: float = 0.0
    complete: bool = True  # False: stopped before the last passage

    @property
    def tokens_per_s(self) -> float:
        return self.tokens_encoded / self.seconds if self.seconds else 0.0


def check_on(settings: Settings) -> None:
    """A warm needs the reading cache on: say so before any work is done."""
    if not (settings.reading_cache and settings.use_cache):
        raise UsageError("the reading cache is off: set reading_cache = true to warm it")


def warm(
    asker: Asker,
    progress: OnStep | None = None,
    first: Iterable[int] = (),
    seen: set[int] | None = None,
    stop: Callable[[], bool] | None = None,
) -> WarmReport:
    """Encode the sentences of every passage of the index that the reading cache lacks.

    ``first``: passage ids to read before the rest, in that order. ``seen``: ids read
    before (skipped); the ids read now are added to it. ``stop``: asked before each
    passage; True ends the warm there (``complete`` False)."""
    check_on(asker.settings)
    engine = asker.engine
    if not isinstance(engine, ReadingEngine):
        raise UsageError("only a model loaded here has a reading cache (not --llm-url)")
    store = asker.retriever.store
    total = store.count_chunks()
    report = WarmReport()
    seen = set() if seen is None else seen
    first = [i for i in first if i not in seen]
    found_first = store.chunks(first)
    t0 = time.perf_counter()
    ordered = (found_first[i] for i in first if i in found_first)
    for chunk in itertools.chain(ordered, store.all_chunks()):
        if chunk.id in seen:
            continue
        if stop is not None and stop():
            report.complete = False
            break
        seen.add(chunk.id)
        found = readable(chunk)
        report.passages += 1
        report.sentences += len(found)
        if found:
            shown, leads = [s for _, s, _ in found], [lead for _, _, lead in found]
            report.tokens_encoded += engine.warm(engine_prompt("", shown, engine, leads))
        if progress:
            progress(Step("warming", report.passages, total, "passages"))
    report.seconds = time.perf_counter() - t0
    return report
