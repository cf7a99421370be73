"""`rag bench reading`: the first token of new questions, their prompts read whole or with
the reading cache, cold and warm, side by side in one process.

Three engines load the same model (its weights mapped once) and answer each question in
turn, so the machine's noise falls on all three alike:

- ``whole``: the reading cache off, as by default; the prompt's fixed head is live from the
  question before, everything else is read;
- ``cold``: the reading cache on and emptied before the question: each sentence is read
  after its passage's earlier sentences and kept;
- ``warm``: a second reading-cache engine over the same folder, asked right after: every
  sentence comes from the cache, as on an index warmed by `rag index --warm`; only the
  question is read.

``warm`` must give ``cold``'s answer (same tokens, same states: a difference is a bug);
how often both differ from ``whole`` is what reading apart costs (docs/BENCHMARKS.md).
"""

from __future__ import annotations

import statistics
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from ..answer.evaluation import QAItem
from ..config import Settings

MODES = ("whole", "cold", "warm")


@dataclass
class ReadingRow:
    question: str
    ttft_ms: dict[str, float]
    read_tokens: dict[str, int]  # tokens the model read: not from any cache, leads too
    answers: dict[str, str]


@dataclass
class ReadingReport:
    model: str
    rows: list[ReadingRow] = field(default_factory=list)
    reading_bytes: int = 0  # the cache after every question's sentences were kept
    reading_files: int = 0

    def median_ttft(self, mode: str) -> float:
        return statistics.median(r.ttft_ms[mode] for r in self.rows) if self.rows else 0.0

    def median_read(self, mode: str) -> float:
        return statistics.median(r.read_tokens[mode] for r in self.rows) if self.rows else 0.0

    @property
    def warm_differs(self) -> int:
        """Answers the warm cache changed: a bug if any."""
        return sum(r.answers["warm"] != r.answers["cold"] for r in self.rows)

    @property
    def apart_differs(self) -> int:
        return sum(r.answers["cold"] != r.answers["whole"] for r in self.rows)

    def as_dict(self) -> dict:
        return {
            **asdict(self),
            "median_ttft_ms": {m: round(self.median_ttft(m), 1) for m in MODES},
            "median_read_tokens": {m: self.median_read(m) for m in MODES},
            "warm_differs": self.warm_differs,
            "apart_differs": self.apart_differs,
        }


def measure(
    settings: Settings, items: list[QAItem], progress: Callable[[str], None] | None = None
) -> ReadingReport:
    """Ask each question of ``items`` (the first only to start the engines) three ways;
    questions answered without the model (a name the index never holds) are not counted."""
    from ..llm.factory import open_engine
    from ..models import generation_model
    from ..rag import Rag

    model = generation_model(settings.model, settings.cache_dir)
    base = replace(settings, answer_cache=False, reading_cache=False)
    with tempfile.TemporaryDirectory(prefix="ragcli-reading-") as tmp:
        # The caches of this run only: the reading engines' prefix and reading folders; the
        # models (the embedder's too) are the user's.
        (Path(tmp) / "models").symlink_to((settings.cache_dir / "models").resolve())
        reading = replace(base, reading_cache=True, cache_dir=Path(tmp))
        engines = {
            "whole": open_engine(base, model),
            "cold": open_engine(reading, model),
            "warm": open_engine(reading, model),
        }
        rags = {
            m: Rag(s, engine=engines[m])
            for m, s in zip(MODES, (base, reading, reading), strict=True)
        }
        cache = engines["cold"].reading  # type: ignore[attr-defined]
        try:
            report = ReadingReport(model.name)
            for n, item in enumerate(items):
                if progress:
                    progress(f"question {n + 1}/{len(items)}")
                cache.clear()
                got = {m: rags[m].ask(item.question) for m in MODES}
                t = {m: got[m].timings for m in MODES}
                if n == 0 or not all(t[m].prompt_tokens for m in MODES):
                    continue  # loading and the heads' first reading; or no model call
                report.rows.append(
                    ReadingRow(
                        item.question,
                        {m: t[m].ttft_ms for m in MODES},
                        {m: t[m].prefill_tokens + t[m].lead_tokens for m in MODES},
                        {m: got[m].answer for m in MODES},
                    )
                )
                stats = cache.stats()
                report.reading_bytes = max(report.reading_bytes, stats.bytes)
                report.reading_files = max(report.reading_files, stats.files)
            return report
        finally:
            for rag in rags.values():
                rag.close()
            for engine in engines.values():
                engine.close()
