"""`rag ask`: retrieve, build the prompt, generate, and enforce the rules.

:class:`Asker` keeps the index, the embedder and the model loaded, so a
batch of questions (``rag ask -``, ``rag chat``) pays for loading once and
reuses the KV cache of the prompt prefix it shares with the last question.
Before any of that, an answer already given for the same passages to the same
question, or to one close enough in meaning, is served from the answer cache
(:mod:`ragcli.answer.answer_cache`) without running the model.

This module is long because the stages of one answer meet here and nowhere else: the
answer cache, retrieval, what the model reads and how (whole, or apart from the reading
cache and read again when too close to call), the verdict and what is kept afterwards.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

from .. import __version__
from ..config import ANSWER_SETTINGS, Settings
from ..errors import RagError
from ..llm.base import Engine, OnText, ReadingEngine, Timings
from ..llm.constrain import SpanDecoder
from ..llm.factory import open_engine
from ..models import CATALOG, DEFAULT_MODEL, GenerationModel, generation_model
from ..records import Hit
from ..stores.base import package_version
from . import copying, counting, verdict
from .answer_cache import FILE as ANSWER_CACHE_FILE
from .answer_cache import AnswerCache, CachedAnswer, cache_key
from .focus import Focus, focus
from .prompt import (
    CHAT_EXAMPLES,
    CHAT_INSTRUCTIONS,
    EXAMPLES,
    INSTRUCTIONS,
    LIST_HINT,
    PROMPT_VERSION,
    Prompt,
    engine_prompt,
    in_place,
)
from .question import Question
from .rerank import reranked
from .retrieval import Retriever, SearchResult
from .verdict import Verdict

MODEL_REASONS = (
    "answered",
    "model_abstained",
    "not_supported",
    "not_answerable",
)  # outcomes the model decided
# A prompt is read apart (its sentences placed from the reading cache) only when what the
# cache lacks, encoded apart with the passage before each sentence, is at most this share
# of the context read whole: else reading apart costs more than it saves, a question read
# again whole (reading_margin) costs both, and reading whole gives reading whole's answer.
APART_UNREAD = 0.25


@dataclass
class AnswerTimings(Timings):
    """Where the time of one answer went: retrieval, then the engine's figures.

    Values are in milliseconds rounded to 0.01, as they are written out.
    """

    embed_ms: float = 0.0
    search_ms: float = 0.0
    model_load_ms: float = 0.0
    focus_ms: float = 0.0
    rerank_ms: float = 0.0  # the model ranking the candidates (answer/rerank.py)
    # A reading apart given up because its answer won by too little (see reading_margin).
    reread_ms: float = 0.0
    # After a prompt read whole for want of cached sentences: its sentences read apart into
    # the reading cache, for the next question that shows them.
    keep_tokens: int = 0
    keep_ms: float = 0.0

    def take(self, engine: Timings) -> None:
        """Copy the engine's figures of one generation."""
        for f in fields(Timings):
            value = getattr(engine, f.name)
            setattr(self, f.name, round(value, 2) if isinstance(value, float) else value)

    def as_dict(self) -> dict[str, float | int | str]:
        out = super().as_dict()
        first = ("embed_ms", "search_ms", "rerank_ms", "model_load_ms", "focus_ms")
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


def _cached_enough(reader: ReadingEngine, prompt: Prompt) -> bool:
    """Whether the reading cache holds enough of ``prompt``'s sentences to read it apart:
    what is left to encode at most :data:`APART_UNREAD` of reading it whole (a prompt with
    no sentences to place is read whole)."""
    need, whole = reader.unread(prompt)
    return whole > 0 and need <= APART_UNREAD * whole


def _ms_since(t0: float) -> float:
    return round((time.perf_counter() - t0) * 1000, 2)


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

    def build_prompt(self, question: Question, chosen: Focus) -> Prompt:
        return engine_prompt(
            question.text,
            chosen.sentences,
            self.engine,
            chosen.leads,
            counts=question.counts,
            fresh=chosen.in_place,
        )

    def ask(self, question: str, on_text: OnText | None = None) -> Answer:
        """Answer ``question``; never raises for "no answer".

        The pipeline: the answer cache, names the index never holds, what the model reads,
        the prompt, generation, the verdict (answer/verdict.py), and keeping it. The
        question is read once (:class:`~ragcli.answer.question.Question`) and that reading
        is what every stage gets."""
        started = time.perf_counter()
        s = self.settings
        asked = Question.parse(question)
        # Re-ranked, the answer still comes from the candidates: they key the answer cache,
        # which then answers without the model.
        found = self.retriever.search(question, self.candidates())
        timings = AnswerTimings(
            embed_ms=round(found.embed_ms, 2), search_ms=round(found.search_ms, 2)
        )
        cache, scope, key = self._answer_slot(found.hits, found.vector, found.generation)
        if cache is not None and key is not None:
            hit = cache.lookup(key, asked, found.vector)
            if hit is not None:
                if on_text:
                    on_text(hit.raw_answer)
                timings.cache_source = "answer"
                timings.total_ms = timings.ttft_ms = _ms_since(started)
                cached = _cached_answer(question, hit, found.hits, timings)
                cached.generation = found.generation
                return cached
        self.start_loading()  # no cached answer: the model is needed (if anything is)

        def answer(judged: Verdict, hits: list[Hit], prompt: Prompt | None = None) -> Answer:
            timings.total_ms = _ms_since(started)
            model = self.engine.model.name if self.engine_loaded else _model_name(s)
            return Answer(
                question=question,
                answer=judged.text,
                answered=judged.answered,
                raw_answer=judged.raw,
                grounded=judged.reason != "not_supported",
                reason=judged.reason,
                sources=hits,
                timings=timings,
                model=model,
                support=judged.support,
                prompt=prompt.text if prompt else "",
                cited=judged.cited,
                evidence=judged.evidence,
                signals=judged.signals,
                generation=found.generation,
            )

        if self.retriever.unknown_names(asked):  # about something the documents never name
            return answer(verdict.nothing_found(asked), found.hits[: s.top_k])
        found = self.rerank(question, found, s.top_k)
        timings.rerank_ms = round(found.rerank_ms, 2)
        t0 = time.perf_counter()
        asked, hits, chosen = self.read(asked, found)
        timings.focus_ms = _ms_since(t0)
        if not chosen.sentences or chosen.best_similarity < s.min_score:
            return answer(verdict.nothing_found(asked), hits)
        t_wait = time.perf_counter()
        waited = not self.engine_loaded
        prompt = self.build_prompt(asked, chosen)
        if waited:  # what the question waited for the model, not the whole load
            timings.model_load_ms = _ms_since(t_wait)
        judged = self._generate(asked, prompt, hits, chosen, timings, started, on_text)
        return self._keep(cache, scope, key, found.vector, answer(judged, hits, prompt))

    def _generate(
        self,
        question: Question,
        prompt: Prompt,
        hits: list[Hit],
        chosen: Focus,
        timings: AnswerTimings,
        started: float,
        on_text: OnText | None,
    ) -> Verdict:
        """Run the model over ``prompt`` (copying from the sentences where it can) and judge
        what it gave."""
        s = self.settings
        engine = self.engine
        dec = None
        if s.copy_answers and engine.can_constrain:
            dec = copying.decoder(question, chosen.sentences, lambda: engine.vocabulary)
        max_tokens = s.max_tokens
        if dec is not None and dec.lists:
            max_tokens = max(max_tokens, copying.COUNT_TOKENS)
        before_generate = _ms_since(started)
        reader = engine if s.reads_apart and isinstance(engine, ReadingEngine) else None
        kept = None  # the prompt whose sentences are read apart into the cache once answered
        # Sentences read whole before are restored, not placed.
        whole = reader is not None and reader.holds_whole(prompt)
        if reader is not None and not whole and not _cached_enough(reader, prompt):
            # Mostly new sentences: reading them apart would cost more than reading whole,
            # and could answer otherwise. Read whole; keep them apart once answered.
            whole, kept = True, prompt
        if whole:
            chosen = replace(chosen, in_place=tuple(range(len(chosen.sentences))))
            prompt = self.build_prompt(question, chosen)
        # Read apart, an answer may yet be given up (below): it is told only once kept.
        guarded = dec is not None and reader is not None and not whole and s.reading_margin > 0
        gen = engine.generate(
            prompt,
            max_tokens,
            on_text=None if guarded else on_text,
            use_cache=s.use_cache,
            constraint=dec,
        )
        reread = 0.0
        if guarded and dec.margin < s.reading_margin:
            # Read apart, the answer won by a hair: reading whole might have chosen another,
            # so the prompt is read whole (every sentence in place) and that answer kept.
            reread = gen.timings.total_ms
            chosen = replace(chosen, in_place=tuple(range(len(chosen.sentences))))
            prompt = self.build_prompt(question, chosen)
            dec = copying.decoder(question, chosen.sentences, lambda: engine.vocabulary)
            gen = engine.generate(
                prompt, max_tokens, on_text=on_text, use_cache=s.use_cache, constraint=dec
            )
        elif guarded and on_text and gen.text:
            on_text(gen.text)
        timings.take(gen.timings)
        timings.reread_ms = round(reread, 2)
        # Time to first token as the user feels it: from the question, retrieval included
        # (and the reading apart given up, if it was).
        timings.ttft_ms = round(before_generate + reread + gen.timings.ttft_ms, 2)
        judged = self._judge(question, gen.text, chosen, hits, dec)
        if reader is not None and kept is not None:
            t0 = time.perf_counter()
            timings.keep_tokens = reader.warm(kept)
            timings.keep_ms = _ms_since(t0)
        return judged

    def _judge(
        self,
        question: Question,
        text: str,
        chosen: Focus,
        hits: list[Hit],
        dec: SpanDecoder | None,
    ) -> Verdict:
        """The verdict on what the model gave (with its checks, over the same reading)."""
        s = self.settings
        if dec is None:
            return verdict.judge_written(question, text, chosen, s.min_support)
        copied = counting.recount(
            question, chosen, hits, copying.read(dec, question, chosen.sentences)
        )
        checks = self.engine if s.check_answers else None
        measured = verdict.signals(
            question, chosen, hits, dec, copied, self.retriever.rare_words, checks, s.use_cache
        )
        return verdict.judge_copied(question, copied, chosen, hits, measured, s, text)

    def candidates(self, k: int | None = None) -> int:
        """Passages to retrieve for ``k`` read: more when the model re-ranks them."""
        k = k or self.settings.top_k
        return max(k, self.settings.rerank_candidates) if self.settings.rerank else k

    def rerank(self, question: str, found: SearchResult, k: int) -> SearchResult:
        """The ``k`` of ``found`` the model ranks best, with `rerank` on (else the first)."""
        if len(found.hits) <= k:
            return found
        return reranked(question, found, self.engine if self.settings.rerank else None, k)

    def search(
        self, query: str, k: int | None = None, retriever: str | None = None
    ) -> SearchResult:
        """The top ``k`` passages for ``query``, re-ranked by the model when `rerank` is on."""
        k = k or self.settings.top_k
        return self.rerank(query, self.retriever.search(query, self.candidates(k), retriever), k)

    def read(self, question: Question, found: SearchResult) -> tuple[Question, list[Hit], Focus]:
        """What the model reads for ``question``: the question with the pages it names among
        the best passages, the sentences chosen from those passages (all of a page the
        question names), and the hits they may come from."""
        s = self.settings
        hits = found.hits
        top = hits[: s.context_passages]
        question = question.naming(question.pages_among(top))
        if question.pages:  # the question names a page: read all of it
            rest = self.retriever.rest_of_pages(hits, question.pages, found.vector)
            top, hits = top + rest, hits + rest
        chosen = focus(question, top, self.retriever.embedder, len(top), s.context_sentences)
        if s.reads_apart:
            fresh = in_place(chosen.sentences, chosen.best, s.reading_in_place)
            chosen = replace(chosen, in_place=fresh)
        return question, hits, chosen

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
