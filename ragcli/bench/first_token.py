"""`rag bench reading`: the first token of new questions, their prompts read whole or with
the reading cache, cold and warm, side by side in one process.

Three engines load the same model (its weights mapped once) and answer each question in
turn, so the machine's noise falls on all three alike:

- ``whole``: ``reading_cache = false``; the prompt's fixed head is live from the question
  before, everything else is read;
- ``cold``: the reading cache on and emptied before the question: the prompt is read whole
  (the cache holds too little of it), then each sentence is read apart, after its passage's
  earlier sentences, and kept (``keep_ms``, after the answer);
- ``warm``: a second reading-cache engine over the same folder, asked right after: every
  sentence comes from the cache, as on an index warmed by `rag index --warm`; only the
  question is read.

``cold`` must give ``whole``'s answer (the same reading: a difference is a bug); how often
``warm`` differs from ``whole`` is what reading apart costs (docs/BENCHMARKS.md).
With ``served``, a `rag serve` over the warm folder then answers the same questions
through its socket, as `rag ask` meets it on a warmed index.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from ..answer.evaluation import QAItem
from ..config import ANSWER_SETTINGS, Settings

MODES = ("whole", "cold", "warm")
SERVED = "served"  # the warm folder, through `rag serve`


@dataclass
class ReadingRow:
    question: str
    ttft_ms: dict[str, float]
    read_tokens: dict[str, int]  # tokens the model read: not from any cache, leads too
    answers: dict[str, str]
    # The reading apart given up for a margin too narrow (``reading_margin``), in its ms.
    reread_ms: dict[str, float] = field(default_factory=dict)
    keep_ms: float = 0.0  # cold: the sentences read apart and kept after the answer


@dataclass
class ReadingReport:
    model: str
    rows: list[ReadingRow] = field(default_factory=list)
    reading_bytes: int = 0  # the cache after every question's sentences were kept
    reading_files: int = 0

    @property
    def modes(self) -> tuple[str, ...]:
        served = bool(self.rows) and SERVED in self.rows[0].ttft_ms
        return (*MODES, SERVED) if served else MODES

    def median_ttft(self, mode: str) -> float:
        return statistics.median(r.ttft_ms[mode] for r in self.rows) if self.rows else 0.0

    def median_read(self, mode: str) -> float:
        return statistics.median(r.read_tokens[mode] for r in self.rows) if self.rows else 0.0

    @property
    def median_keep(self) -> float:
        return statistics.median(r.keep_ms for r in self.rows) if self.rows else 0.0

    @property
    def cold_differs(self) -> int:
        """Answers a cold cache changed: a bug if any (it reads whole)."""
        return sum(r.answers["cold"] != r.answers["whole"] for r in self.rows)

    @property
    def apart_differs(self) -> int:
        """Answers read apart from a warm cache that reading whole does not give."""
        return sum(r.answers["warm"] != r.answers["whole"] for r in self.rows)

    def rereads(self, mode: str) -> int:
        """Questions read apart, then again whole (``reading_margin``)."""
        return sum(r.reread_ms.get(mode, 0.0) > 0 for r in self.rows)

    def as_dict(self) -> dict:
        return {
            **asdict(self),
            "median_ttft_ms": {m: round(self.median_ttft(m), 1) for m in self.modes},
            "median_read_tokens": {m: self.median_read(m) for m in self.modes},
            "median_keep_ms": round(self.median_keep, 1),
            "cold_differs": self.cold_differs,
            "apart_differs": self.apart_differs,
            "rereads": {m: self.rereads(m) for m in self.modes},
        }


def measure(
    settings: Settings,
    items: list[QAItem],
    progress: Callable[[str], None] | None = None,
    served: bool = False,
) -> ReadingReport:
    """Ask each question of ``items`` (the first only to start the engines) three ways, and
    with ``served`` through a server too; questions answered without the model (a name the
    index never holds) are not counted."""
    from ..llm.factory import open_engine
    from ..models import generation_model
    from ..rag import Rag

    model = generation_model(settings.model, settings.cache_dir)
    with tempfile.TemporaryDirectory(prefix="ragcli-reading-") as tmp:
        # The caches of this run only: a question asked before must not come from the
        # user's prefix cache. Each engine has its own prefix folder, so that a prompt read
        # again whole (``reading_margin``) finds no state another engine kept for it; cold
        # and warm share the reading folder. The models (the embedder's too) are the user's.
        models = (settings.cache_dir / "models").resolve()
        folders = {m: Path(tmp) / m for m in (*MODES, "served")}
        for folder in folders.values():
            folder.mkdir()
            (folder / "models").symlink_to(models)
        (folders["cold"] / "reading").mkdir()
        (folders["warm"] / "reading").symlink_to(folders["cold"] / "reading")
        base = replace(settings, answer_cache=False, reading_cache=False)
        each = {
            "whole": replace(base, cache_dir=folders["whole"]),
            **{m: replace(base, reading_cache=True, cache_dir=folders[m]) for m in MODES[1:]},
        }
        # Every question's sentences, kept for the server: the cold engine's folder is
        # emptied before each question.
        kept = folders["served"]
        if served:
            (kept / "reading").mkdir()
        engines = {m: open_engine(each[m], model) for m in MODES}
        rags = {m: Rag(each[m], engine=engines[m]) for m in MODES}
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
                        {m: t[m].reread_ms for m in MODES},
                        t["cold"].keep_ms,
                    )
                )
                stats = cache.stats()
                report.reading_bytes = max(report.reading_bytes, stats.bytes)
                report.reading_files = max(report.reading_files, stats.files)
                if served:
                    for f in cache.root.glob("*.kv"):
                        if not (kept / "reading" / f.name).exists():
                            os.link(f, kept / "reading" / f.name)
            if served:
                _served(replace(each["cold"], cache_dir=kept), items, report, progress)
            return report
        finally:
            for rag in rags.values():
                rag.close()
            for engine in engines.values():
                engine.close()


def _served(
    settings: Settings,
    items: list[QAItem],
    report: ReadingReport,
    progress: Callable[[str], None] | None,
) -> None:
    """The same questions through a `rag serve` whose reading cache holds every question's
    sentences (the first again only to start it); each counted row gains its ``served``
    figures. ``settings.cache_dir``: that folder, the server's only cache."""
    from ..server.client import Client
    from .served_vs_fresh import bench_server

    folder = settings.cache_dir
    # The engines' settings, the answer cache off: the server must answer as they did.
    same = (*ANSWER_SETTINGS, "n_batch", "n_threads", "adaptive_threads", "repack_weights")
    lines = [f"{k} = {json.dumps(v)}" for k in same if (v := getattr(settings, k)) is not None]
    (folder / "config.toml").write_text("\n".join([*lines, "answer_cache = false", ""]))
    env = {**os.environ, "RAG_CACHE_DIR": str(folder), "RAG_READING_CACHE": "true",
           "RAG_CONFIG": str(folder / "config.toml"),
           **({"RAG_MODEL": settings.model} if settings.model else {})}  # fmt: skip
    rows = {r.question: r for r in report.rows}
    with bench_server(settings, folder, env, queue=4, name="reading") as end, Client(end) as c:
        for n, item in enumerate(items):
            if progress:
                progress(f"served: question {n + 1}/{len(items)}")
            out = c.ask(item.question)
            row = rows.get(item.question)
            if row is None:
                continue
            t = out["timings"]
            row.ttft_ms[SERVED] = t["ttft_ms"]
            row.read_tokens[SERVED] = t["prefill_tokens"] + t.get("lead_tokens", 0)
            row.answers[SERVED] = out["answer"]
            row.reread_ms[SERVED] = t.get("reread_ms", 0.0)
