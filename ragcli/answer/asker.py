"""`rag ask`: retrieve, build the prompt, generate, and enforce the rules.

:class:`Asker` keeps the index, the embedder and the model loaded, so a
batch of questions (``rag ask -``, ``rag chat``) pays for loading once and
reuses the KV cache of the prompt prefix it shares with the last question.
Before any of that, an answer already given for the same passages to the same
question, or to one close enough in meaning, is served from the answer cache
(:mod:`ragcli.answer.semcache`) without running the model.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, fields
from pathlib import Path

from .. import __version__
from ..config import ANSWER_SETTINGS, Settings
from ..errors import RagError
from ..llm.base import Engine, OnText, Timings
from ..llm.constrain import SpanDecoder
from ..llm.open import open_engine
from ..models import CATALOG, DEFAULT_MODEL, GenerationModel, generation_model
from ..records import Hit
from ..stores.base import package_version
from . import answerable, copying, verify
from .copying import Copied
from .focus import Focus, focus, subject_pages
from .grounding import support
from .prompt import (
    CHAT_EXAMPLES,
    CHAT_INSTRUCTIONS,
    EXAMPLES,
    IDK,
    INSTRUCTIONS,
    LIST_HINT,
    PROMPT_VERSION,
    Prompt,
    clean_answer,
    engine_prompt,
    is_refusal,
)
from .retrieval import Retriever
from .semcache import FILE as ANSWER_CACHE_FILE
from .semcache import AnswerCache, CachedAnswer, cache_key
from .shapes import fits

MODEL_REASONS = (
    "answered",
    "model_abstained",
    "not_supported",
    "not_answerable",
)  # outcomes the model decided


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
    # answered | no_relevant_passages | model_abstained | not_supported | not_answerable
    reason: str
    sources: list[Hit]
    timings: AnswerTimings
    model: str
    support: float | None = None
    prompt: str = field(default="", repr=False)
    cited: list[int] = field(default_factory=list)  # ranks of the sources the answer came from
    # The sentences the answer was copied from: {"rank": source rank, "line": file line, "text"}
    evidence: list[dict] = field(default_factory=list)
    signals: dict[str, float] = field(default_factory=dict)  # what answerability was judged on
    # Served from the answer cache: how close the question was to the one answered then.
    cache_similarity: float | None = None
    cached_question: str | None = None
    generation: str = field(default="", repr=False)  # the index commit the passages came from

    def as_dict(self) -> dict:
        """What `rag ask --json`, POST /ask and the MCP `ask` tool return."""
        return {
            "question": self.question,
            "answer": self.answer,
            "answered": self.answered,
            "raw_answer": self.raw_answer,
            "grounded": self.grounded,
            "cited": self.cited,
            "evidence": self.evidence,
            "reason": self.reason,
            "sources": [h.as_dict() for h in self.sources],
            "timings": self.timings.as_dict(),
            "model": self.model,
            "cache_similarity": self.cache_similarity,
            "cached_question": self.cached_question,
            "signals": self.signals,
        }


def _cached_answer(question: str, hit: CachedAnswer, hits: list[Hit], t: AnswerTimings) -> Answer:
    """The answer served from the cache, with this question's own passages and timings."""
    rank_of = {h.chunk.id: h.rank for h in hits}
    return Answer(
        question=question,
        answer=hit.answer,
        answered=hit.reason == "answered",
        raw_answer=hit.raw_answer,
        grounded=hit.grounded,
        reason=hit.reason,
        sources=hits,
        timings=t,
        model=hit.model,
        support=hit.support,
        cited=[rank_of[i] for i in hit.cited if i in rank_of],
        evidence=[{**e, "rank": rank_of[e["rank"]]} for e in hit.evidence if e["rank"] in rank_of],
        cache_similarity=round(hit.similarity, 4),
        cached_question=hit.question,
    )


def _ids(hits: list[Hit]) -> list[int]:
    return [h.chunk.id for h in hits]


# Both prompt styles: a cached answer must not outlive a change to either.
_PROMPT_DIGEST = hashlib.sha256(
    repr((INSTRUCTIONS, EXAMPLES, CHAT_INSTRUCTIONS, CHAT_EXAMPLES, LIST_HINT)).encode()
).hexdigest()[:16]


def _model_name(s: Settings) -> str:
    if s.llm_url:
        return s.llm_url
    if s.model is None or s.model in CATALOG:
        return CATALOG[s.model or DEFAULT_MODEL].file
    return Path(s.model).name


class Asker:
    """Answers questions against one index with one model."""

    def __init__(
        self,
        settings: Settings,
        retriever: Retriever | None = None,
        preload: bool = True,
        engine: Engine | None = None,
    ) -> None:
        """``engine``: a loaded engine to answer with (the caller still owns it), instead
        of the one the settings name, loaded here."""
        self.settings = settings
        self.retriever = retriever or Retriever(settings)
        self.model_load_ms = 0.0
        self._model_lock = threading.Lock()
        self._model_file: GenerationModel | None = None
        self._answers: AnswerCache | None = None
        # Load the model on a thread while the question is embedded and searched:
        # llama.cpp releases the GIL, so a fresh `rag ask` hides most of the load.
        self._loader = ThreadPoolExecutor(max_workers=1, thread_name_prefix="model-load")
        self._engine_future: Future[Engine] | None = None
        self._owns_engine = engine is None
        if engine is not None:
            self._engine_future = Future()
            self._engine_future.set_result(engine)
        # When answers for this index are cached, the question may be served without the
        # model: then it loads only once a question needs it.
        if preload and not self._answers_cached():
            self.start_loading()

    def start_loading(self) -> None:
        """Start loading the model on the loader thread, unless it is loading already."""
        if self._engine_future is None:
            self._engine_future = self._loader.submit(self._load_engine)

    def _load_engine(self) -> Engine:
        t0 = time.perf_counter()
        engine = open_engine(self.settings, None if self.settings.llm_url else self.model_file())
        self.model_load_ms = (time.perf_counter() - t0) * 1000
        return engine

    def model_file(self) -> GenerationModel:
        """The local model's file and digest, resolved once (the loader and the cache key share it)."""
        with self._model_lock:
            if self._model_file is None:
                self._model_file = generation_model(self.settings.model, self.settings.cache_dir)
            return self._model_file

    def answer_cache(self) -> AnswerCache | None:
        """The answer cache, opened on first use; None when the settings turn it off."""
        s = self.settings
        if not s.answer_cache:
            return None
        if self._answers is None:
            self._answers = AnswerCache(
                s.cache_dir / ANSWER_CACHE_FILE, s.answer_cache_max_bytes, s.answer_cache_threshold
            )
        return self._answers

    def answer_scope(self, generation: str | None = None) -> str:
        """What every cached answer of this index (at ``generation``, default: its newest
        commit), model and settings depends on."""
        s = self.settings
        store = self.retriever.store
        model = f"server {s.llm_url}" if s.llm_url else self.model_file().digest
        return cache_key(
            {
                "prompt_version": PROMPT_VERSION,
                "prompt": _PROMPT_DIGEST,
                "ragcli": __version__,
                "llama_cpp": package_version("llama-cpp-python"),
                "model": model,
                "store": s.index_name,
                "generation": generation or store.generation(),
                "embed_model": store.info.embed_model,
                "settings": {name: getattr(s, name) for name in ANSWER_SETTINGS},
            }
        )

    def _answers_cached(self) -> bool:
        cache = self.answer_cache()
        if cache is None:
            return False
        try:
            return cache.has_scope(self.answer_scope())
        except RagError:  # an unusable model is reported when the model is needed
            return False

    @property
    def engine(self) -> Engine:
        if self._engine_future is None:
            self._engine_future = self._loader.submit(self._load_engine)
        return self._engine_future.result()

    @property
    def engine_loaded(self) -> bool:
        return self._engine_future is not None and self._engine_future.done()

    def build_prompt(self, question: str, context: list[str]) -> Prompt:
        return engine_prompt(question, context, self.engine)

    def ask(self, question: str, on_text: OnText | None = None) -> Answer:
        """Retrieve, generate, then apply the rules; never raises for "no answer"."""
        started = time.perf_counter()
        s = self.settings
        found = self.retriever.search(question, s.top_k)
        hits = found.hits
        timings = AnswerTimings(
            embed_ms=round(found.embed_ms, 2), search_ms=round(found.search_ms, 2)
        )

        cache, scope, key = self._answer_slot(hits, found.vector, found.generation)
        if cache is not None and key is not None:
            hit = cache.lookup(key, question, found.vector)
            if hit is not None:
                if on_text:
                    on_text(hit.raw_answer)
                timings.cache_source = "answer"
                timings.total_ms = timings.ttft_ms = round(
                    (time.perf_counter() - started) * 1000, 2
                )
                cached = _cached_answer(question, hit, hits, timings)
                cached.generation = found.generation
                return cached
        self.start_loading()  # no cached answer: the model is needed (if anything is)

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
                generation=found.generation,
            )

        if self.retriever.unknown_names(question):  # about something the documents never name
            return answer(IDK, "", "no_relevant_passages")
        t0 = time.perf_counter()
        top = hits[: s.context_passages]
        pages = subject_pages(question, top)
        if pages:  # the question names a page: read all of it
            rest = self.retriever.rest_of_pages(hits, pages, found.vector)
            top, hits = top + rest, hits + rest
        chosen = focus(question, top, self.retriever.embedder, len(top), s.context_sentences, pages)
        timings.focus_ms = round((time.perf_counter() - t0) * 1000, 2)
        if not chosen.sentences or chosen.best_similarity < s.min_score:
            return answer(IDK, "", "no_relevant_passages")
        t_wait = time.perf_counter()
        waited = not self.engine_loaded
        prompt = self.build_prompt(question, chosen.sentences)
        if waited:  # what the question waited for the model, not the whole load
            timings.model_load_ms = round((time.perf_counter() - t_wait) * 1000, 2)
        engine = self.engine
        copies = s.copy_answers and engine.can_constrain
        dec = (
            copying.decoder(question, chosen.sentences, lambda: engine.vocabulary)
            if copies
            else None
        )
        max_tokens = s.max_tokens
        if dec is not None and dec.lists:
            max_tokens = max(max_tokens, copying.COUNT_TOKENS)
        before_generate = (time.perf_counter() - started) * 1000
        gen = engine.generate(
            prompt, max_tokens, on_text=on_text, use_cache=s.use_cache, constraint=dec
        )
        timings.take(gen.timings)
        # Time to first token as the user feels it: from the question, retrieval included.
        timings.ttft_ms = round(before_generate + gen.timings.ttft_ms, 2)
        if dec is not None:
            copied = copying.read(dec, question, chosen.sentences)
            signals = self._signals(question, chosen, hits, dec, copied)
            if copied.abstained:
                result = answer(IDK, gen.text.strip(), "model_abstained", prompt=prompt)
            elif not self._answerable(question, copied.text, signals):
                result = answer(IDK, copied.text, "not_answerable", prompt=prompt)
            else:
                result = answer(copied.text, gen.text.strip(), "answered", 1.0, prompt)
                result.evidence = copying.evidence(copied, chosen.sentences, chosen.ranks, hits)
                result.cited = list(dict.fromkeys(e["rank"] for e in result.evidence))
            result.signals = signals
            return self._keep(cache, scope, key, found.vector, result)
        raw = clean_answer(gen.text)
        if is_refusal(raw):
            result = answer(IDK, raw, "model_abstained", prompt=prompt)
            return self._keep(cache, scope, key, found.vector, result)
        # The answer must come from what the model was shown.
        share = support(raw, chosen.sentences, question)
        if share < s.min_support:
            result = answer(IDK, raw, "not_supported", share, prompt)
            return self._keep(cache, scope, key, found.vector, result)
        result = answer(raw, raw, "answered", share, prompt)
        # Cite the sources of the sentences that hold every word of the answer.
        result.cited = list(
            dict.fromkeys(
                rank
                for sentence, rank in zip(chosen.sentences, chosen.ranks, strict=True)
                if support(raw, [sentence], question) == 1.0
            )
        )
        return self._keep(cache, scope, key, found.vector, result)

    def _signals(
        self, question: str, chosen: Focus, hits: list[Hit], dec: SpanDecoder, copied: Copied
    ) -> dict[str, float]:
        """What the answerability rule judges a copied answer on (see answer/answerable.py):
        the decoder's figures, the words shown, and, for an answer, whether its sentences
        name what the question is about and the model's replies to the two checks of
        answer/verify.py."""
        s = self.settings
        signals = {
            "similarity": round(chosen.best_similarity, 4),
            "idk_prob": round(dec.first_fixed_prob[0], 4) if dec.first_fixed_prob else 0.0,
            "overruled": dec.overruled,
            "first_overruled": float(dec.first_overruled),
            "logprob": round(dec.logprob / max(dec.steps, 1), 4),
            **answerable.lexical(question, chosen.sentences, [h.chunk.text for h in hits]),
        }
        if not copied.abstained:
            by_rank = {h.rank: h.chunk for h in hits}
            shown = [
                (by_rank[chosen.ranks[i]], chosen.sentences[i])
                for i in copied.sentences
                if chosen.ranks[i] in by_rank
            ]
            evidence = [(chunk.heading, sentence) for chunk, sentence in shown]
            signals.update(answerable.subject(question, evidence, self.retriever.rare_words))
            if s.check_answers:
                engine = self.engine
                asked = verify.answerable(engine, question, chosen.sentences, s.use_cache)
                titled = [(chunk.title, sentence) for chunk, sentence in shown]
                judged = verify.supported(engine, question, copied.text, titled, s.use_cache)
                signals.update(asked=round(asked, 4), supported=round(judged, 4))
        signals["answerable"] = round(answerable.probability(signals), 4)
        return signals

    def _answerable(self, question: str, text: str, signals: dict[str, float]) -> bool:
        """Whether a copied answer may stand. Withheld: the model's own first token was not
        in the sentences (it wanted an answer from memory, and copying bent it to a nearby
        span: 8 of 56 such answers to unanswerable questions on our sets, 1 of 123 right
        ones), an answer without the number a "when" question asks for, and a low score
        from the fitted rule (docs/BENCHMARKS.md, "Answers grounded by construction")."""
        if signals.get("first_overruled"):
            return False
        if not fits(question, text):
            return False
        return signals["answerable"] >= self.settings.min_answerable

    def _answer_slot(
        self, hits: list[Hit], vector, generation: str
    ) -> tuple[AnswerCache | None, str, str | None]:
        """The answer cache, its scope and this retrieval's key; (None, "", None) when off.

        The key holds the set of passages, not their order: the same evidence, ranked
        a little differently for a reworded question, gives the same answer."""
        cache = self.answer_cache() if hits and vector is not None else None
        if cache is None:
            return None, "", None
        try:
            scope = self.answer_scope(generation)
        except RagError:  # the model is unusable: that is reported when it is needed
            return None, "", None
        return cache, scope, cache_key({"scope": scope, "passages": sorted(_ids(hits))})

    @staticmethod
    def _keep(
        cache: AnswerCache | None, scope: str, key: str | None, vector, result: Answer
    ) -> Answer:
        """Save what the model decided in the answer cache (one that fails costs nothing).

        Citations are kept as passage ids, since a later question may rank them otherwise."""
        if cache is not None and key is not None and result.reason in MODEL_REASONS:
            by_rank = {h.rank: h.chunk.id for h in result.sources}
            fields_ = {
                **vars(result),
                "cited": [by_rank[r] for r in result.cited],
                "evidence": [{**e, "rank": by_rank[e["rank"]]} for e in result.evidence],
            }
            cache.store(scope, key, result.question, vector, fields_)
        return result

    def __enter__(self) -> Asker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._engine_future is not None and self._owns_engine:
            with contextlib.suppress(Exception):  # a failed load has nothing to close
                self._engine_future.result().close()
        self._engine_future = None
        self._loader.shutdown()
        if self._answers is not None:
            self._answers.close()
        self.retriever.close()
