"""`rag ask`: retrieve, build the prompt, generate, and enforce the rules.

:class:`Asker` keeps the index, the embedder and the model loaded, so a
batch of questions (``rag ask -``, ``rag chat``) pays for loading once and
reuses the KV cache of the prompt prefix it shares with the last question.
"""

from __future__ import annotations

import contextlib
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING

from ..config import Settings
from ..llm.base import OnText, Timings
from ..llm.llama import LlamaEngine
from ..models import CATALOG, DEFAULT_MODEL, generation_model
from ..records import Hit
from .focus import focus
from .grounding import support
from .prompt import IDK, Prompt, chat_prompt, clean_answer, completion_prompt, is_refusal
from .retrieval import Retriever

if TYPE_CHECKING:
    from ..llm.remote import RemoteEngine


@dataclass
class AnswerTimings(Timings):
    """Where the time of one answer went: retrieval, then the engine's figures.

    Values are in milliseconds rounded to 0.01, as they are written out.
    """

    embed_ms: float = 0.0
    search_ms: float = 0.0
    model_load_ms: float = 0.0
    focus_ms: float = 0.0

    def take(self, engine: Timings) -> None:
        """Copy the engine's figures of one generation."""
        for f in fields(Timings):
            value = getattr(engine, f.name)
            setattr(self, f.name, round(value, 2) if isinstance(value, float) else value)

    def as_dict(self) -> dict[str, float | int | str]:
        out = super().as_dict()
        first = ("embed_ms", "search_ms", "model_load_ms", "focus_ms")
        return {**{k: out[k] for k in first}, **{k: v for k, v in out.items() if k not in first}}


@dataclass
class Answer:
    """One question's outcome; ``answer`` is what the user sees."""

    question: str
    answer: str
    answered: bool
    raw_answer: str
    grounded: bool
    reason: str  # answered | no_relevant_passages | model_abstained | not_supported
    sources: list[Hit]
    timings: AnswerTimings
    model: str
    support: float | None = None
    prompt: str = field(default="", repr=False)
    cited: list[int] = field(default_factory=list)  # ranks of the sources the answer came from

    def as_dict(self) -> dict:
        return {
            "question": self.question,
            "answer": self.answer,
            "answered": self.answered,
            "raw_answer": self.raw_answer,
            "grounded": self.grounded,
            "cited": self.cited,
            "reason": self.reason,
            "sources": [h.as_dict() for h in self.sources],
            "timings": self.timings.as_dict(),
            "model": self.model,
        }


def _model_name(s: Settings) -> str:
    if s.llm_url:
        return s.llm_url
    if s.model is None or s.model in CATALOG:
        return CATALOG[s.model or DEFAULT_MODEL].file
    return Path(s.model).name


class Asker:
    """Answers questions against one index with one model."""

    def __init__(
        self, settings: Settings, retriever: Retriever | None = None, preload: bool = True
    ) -> None:
        self.settings = settings
        self.retriever = retriever or Retriever(settings)
        self.model_load_ms = 0.0
        # Load the model on a thread while the question is embedded and searched:
        # llama.cpp releases the GIL, so a fresh `rag ask` hides most of the load.
        self._loader = ThreadPoolExecutor(max_workers=1, thread_name_prefix="model-load")
        self._engine_future: Future[LlamaEngine | RemoteEngine] | None = None
        if preload:
            self._engine_future = self._loader.submit(self._load_engine)

    def _load_engine(self) -> LlamaEngine | RemoteEngine:
        s = self.settings
        t0 = time.perf_counter()
        if s.llm_url:  # a server has the model: nothing of llama.cpp is loaded here
            from ..llm.remote import RemoteEngine

            remote = RemoteEngine(s.llm_url)
            self.model_load_ms = (time.perf_counter() - t0) * 1000
            return remote
        model = generation_model(s.model, s.cache_dir)
        cache = None
        if s.use_cache:
            from ..llm.kv_cache import PrefixCache

            cache = PrefixCache(s.cache_dir / "prefix", s.cache_max_bytes)
        engine = LlamaEngine(model, s.n_ctx, s.n_batch, s.threads, cache=cache)
        self.model_load_ms = (time.perf_counter() - t0) * 1000
        return engine

    @property
    def engine(self) -> LlamaEngine | RemoteEngine:
        if self._engine_future is None:
            self._engine_future = self._loader.submit(self._load_engine)
        return self._engine_future.result()

    @property
    def engine_loaded(self) -> bool:
        return self._engine_future is not None and self._engine_future.done()

    def build_prompt(self, question: str, context: list[str]) -> Prompt:
        eng = self.engine
        if eng.chat_template:
            return chat_prompt(question, context, eng.chat_template, eng.bos, eng.eos)
        return completion_prompt(question, context)

    def ask(self, question: str, on_text: OnText | None = None) -> Answer:
        """Retrieve, generate, then apply the rules; never raises for "no answer"."""
        started = time.perf_counter()
        s = self.settings
        found = self.retriever.search(question, s.top_k)
        hits = found.hits
        timings = AnswerTimings(
            embed_ms=round(found.embed_ms, 2), search_ms=round(found.search_ms, 2)
        )

        def answer(text: str, raw: str, reason: str, share: float | None = None, prompt=None):
            timings.total_ms = round((time.perf_counter() - started) * 1000, 2)
            model = self.engine.model.name if self.engine_loaded else _model_name(s)
            return Answer(
                question=question,
                answer=text,
                answered=reason == "answered",
                raw_answer=raw,
                grounded=reason != "not_supported",
                reason=reason,
                sources=hits,
                timings=timings,
                model=model,
                support=share,
                prompt=prompt.text if prompt else "",
            )

        t0 = time.perf_counter()
        chosen = focus(
            question, hits, self.retriever.embedder, s.context_passages, s.context_sentences
        )
        timings.focus_ms = round((time.perf_counter() - t0) * 1000, 2)
        if not chosen.sentences or chosen.best_similarity < s.min_score:
            return answer(IDK, "", "no_relevant_passages")
        t_wait = time.perf_counter()
        waited = not self.engine_loaded
        prompt = self.build_prompt(question, chosen.sentences)
        if waited:  # what the question waited for the model, not the whole load
            timings.model_load_ms = round((time.perf_counter() - t_wait) * 1000, 2)
        before_generate = (time.perf_counter() - started) * 1000
        gen = self.engine.generate(prompt, s.max_tokens, on_text=on_text, use_cache=s.use_cache)
        timings.take(gen.timings)
        # Time to first token as the user feels it: from the question, retrieval included.
        timings.ttft_ms = round(before_generate + gen.timings.ttft_ms, 2)
        raw = clean_answer(gen.text)
        if is_refusal(raw):
            return answer(IDK, raw, "model_abstained", prompt=prompt)
        # The answer must come from what the model was shown.
        share = support(raw, chosen.sentences, question)
        if share < s.min_support:
            return answer(IDK, raw, "not_supported", share, prompt)
        result = answer(raw, raw, "answered", share, prompt)
        # Cite the sources of the sentences that hold every word of the answer.
        result.cited = list(
            dict.fromkeys(
                rank
                for sentence, rank in zip(chosen.sentences, chosen.ranks, strict=True)
                if support(raw, [sentence], question) == 1.0
            )
        )
        return result

    def __enter__(self) -> Asker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._engine_future is not None:
            with contextlib.suppress(Exception):  # a failed load has nothing to close
                self._engine_future.result().close()
            self._engine_future = None
        self._loader.shutdown()
        self.retriever.close()
