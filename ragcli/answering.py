"""`rag ask`: retrieve, build the prompt, generate, and enforce the rules.

:class:`Asker` keeps the index, the embedder and the model loaded, so a
batch of questions (``rag ask -``, ``rag chat``) pays for loading once and
reuses the KV cache of the prompt prefix it shares with the last question.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from .config import Settings
from .generation import LlamaEngine, OnText, Timings
from .grounding import support
from .models import generation_model
from .prompt import IDK, Prompt, chat_prompt, clean_answer, completion_prompt, is_refusal
from .retrieval import Hit, Retriever


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
    timings: dict[str, float | int | str]
    model: str
    support: float | None = None
    prompt: str = field(default="", repr=False)

    def as_dict(self) -> dict:
        return {
            "question": self.question,
            "answer": self.answer,
            "answered": self.answered,
            "raw_answer": self.raw_answer,
            "grounded": self.grounded,
            "reason": self.reason,
            "sources": [h.as_dict() for h in self.sources],
            "timings": self.timings,
            "model": self.model,
        }


def order_for_prompt(hits: list[Hit]) -> list[Hit]:
    """Passages in document order (path, then position), not by score.

    Questions that retrieve the same passages then build the same prompt
    prefix whatever their ranking, which is what the KV cache reuses.
    """
    return sorted(hits, key=lambda h: (h.chunk.path, h.chunk.ordinal))


class Asker:
    """Answers questions against one index with one model."""

    def __init__(self, settings: Settings, retriever: Retriever | None = None) -> None:
        self.settings = settings
        self.retriever = retriever or Retriever(settings)
        self._engine: LlamaEngine | None = None

    @property
    def engine(self) -> LlamaEngine:
        if self._engine is None:
            s = self.settings
            model = generation_model(s.model, s.cache_dir)
            cache = None
            if s.use_cache:
                from .cache import PrefixCache

                cache = PrefixCache(s.cache_dir / "prefix", s.cache_max_bytes)
            self._engine = LlamaEngine(model, s.n_ctx, s.n_batch, s.threads, cache=cache)
        return self._engine

    def build_prompt(self, question: str, hits: list[Hit]) -> Prompt:
        passages = [h.chunk.text for h in order_for_prompt(hits)]
        eng = self.engine
        if eng.chat_template:
            return chat_prompt(question, passages, eng.chat_template, eng.bos, eng.eos)
        return completion_prompt(question, passages)

    def ask(self, question: str, on_text: OnText | None = None) -> Answer:
        started = time.perf_counter()
        s = self.settings
        found = self.retriever.search(question, s.top_k)
        hits = found.hits
        base = {"retrieval_ms": round(found.embed_ms + found.search_ms, 2)}
        model_name = s.model.name if s.model else "gemma-3-270m-q4_k_m.gguf"
        if not hits or max(h.similarity for h in hits) < s.min_score:
            timings = {**base, **Timings().as_dict()}
            timings["total_ms"] = round((time.perf_counter() - started) * 1000, 2)
            return Answer(
                question, IDK, False, "", True, "no_relevant_passages", hits, timings, model_name
            )
        prompt = self.build_prompt(question, hits)
        gen = self.engine.generate(prompt, s.max_tokens, on_text=on_text, use_cache=s.use_cache)
        raw = clean_answer(gen.text)
        timings = {**base, **gen.timings.as_dict()}
        timings["total_ms"] = round((time.perf_counter() - started) * 1000, 2)
        model_name = self.engine.model.name
        if is_refusal(raw):
            return Answer(
                question,
                IDK,
                False,
                raw,
                True,
                "model_abstained",
                hits,
                timings,
                model_name,
                prompt=prompt.text,
            )
        share = support(raw, [h.chunk.text for h in hits])
        if share < s.min_support:
            return Answer(
                question,
                IDK,
                False,
                raw,
                False,
                "not_supported",
                hits,
                timings,
                model_name,
                support=share,
                prompt=prompt.text,
            )
        return Answer(
            question,
            raw,
            True,
            raw,
            True,
            "answered",
            hits,
            timings,
            model_name,
            support=share,
            prompt=prompt.text,
        )

    def close(self) -> None:
        if self._engine is not None:
            self._engine.close()
            self._engine = None
        self.retriever.close()
