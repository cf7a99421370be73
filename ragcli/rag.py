"""The library's one face: open an index, search it, ask it, close it.

Every front end goes through :class:`Rag`: the `rag` commands, `rag serve` (HTTP and
the OpenAI-compatible API), `rag mcp`, and programs (docs/example.py). So each sees
the same answers and results, as the same JSON (``Answer.as_dict``,
``SearchResult.as_dict``), and each follows the index: every search and question
reads the newest commit of `rag index`, whole, however long the reader has lived.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .config import Settings, load_settings

if TYPE_CHECKING:
    from .answer.asker import Answer, Asker
    from .answer.evaluation import EvalReport, QAItem
    from .answer.retrieval import SearchResult
    from .answer.warming import WarmReport
    from .embed.base import Embedder
    from .llm.base import Engine, OnText
    from .progress import OnStep
    from .stores.base import Store


class Rag:
    """One index and one model, kept open across calls; safe to share between threads
    (calls run one at a time: there is one model and one llama.cpp context).

    ``engine`` and ``store`` replace what the settings name (the caller keeps owning
    the engine); ``preload`` starts loading the model at once, on a thread;
    ``memo_queries`` keeps the vectors of that many texts seen (a resident server).
    """

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        engine: Engine | None = None,
        store: Store | None = None,
        embedder: Embedder | None = None,
        preload: bool = True,
        memo_queries: int = 0,
    ) -> None:
        from .answer.retrieval import Retriever

        self.settings = settings or load_settings()
        self._retriever = Retriever(self.settings, embedder, store=store, memo=memo_queries)
        self._engine = engine
        self._asker: Asker | None = None  # made on the first question: a search needs none
        self._lock = threading.RLock()
        self.generation = self._retriever.store.generation()
        self.commits_followed = 0  # commits of the index seen since it was opened
        if preload:
            try:
                self._answering(preload=True)
            except BaseException:
                self._retriever.close()
                raise

    @classmethod
    def open(cls, index: str | Path | None = None, **settings: Any) -> Rag:
        """``Rag.open(".rag", top_k=6)``: settings from the file and environment, with
        these on top (``store="milvus-lite://x.db"`` for a Milvus index)."""
        return cls(load_settings({"index_dir": index, **settings}))

    def search(
        self, query: str, top_k: int | None = None, retriever: str | None = None
    ) -> SearchResult:
        """The top-k passages for ``query`` (dense, bm25 or hybrid: default the settings'),
        re-ranked by the model when `rerank` is on."""
        from .answer.question_batch import check_question

        query = check_question(query)
        with self._lock:
            if self.settings.rerank:
                result = self._answering().search(query, top_k, retriever)
            else:
                result = self._retriever.search(query, top_k, retriever)
            self._saw(result.generation)
        return result

    def ask(self, question: str, on_text: OnText | None = None) -> Answer:
        """The answer from the documents, or "I don't know"; ``on_text`` hears the model's
        text as it is written."""
        from .answer.question_batch import check_question

        question = check_question(question)
        with self._lock:
            answer = self._answering().ask(question, on_text=on_text)
            self._saw(answer.generation)
        return answer

    def evaluate(
        self,
        items: Sequence[QAItem],
        progress: OnStep | None = None,
        retrieval_only: bool = False,
    ) -> EvalReport:
        """Score retrieval, answers and abstention on a question set (`rag eval`)."""
        from .answer.evaluation import evaluate

        with self._lock:
            asker = self._answering(preload=not retrieval_only)
            return evaluate(asker, list(items), progress, retrieval_only)

    def warm(
        self,
        progress: OnStep | None = None,
        *,
        first: Iterable[int] = (),
        seen: set[int] | None = None,
        stop: Callable[[], bool] | None = None,
    ) -> WarmReport:
        """Read the passages into the reading cache (`rag index --warm`; `rag serve` when
        idle): ``first`` before the others, none of ``seen``, until ``stop()`` says so."""
        from .answer.warming import warm

        with self._lock:
            return warm(self._answering(preload=True), progress, first, seen, stop)

    def load(self) -> None:
        """Load the model and the query encoder now, so a broken one fails here."""
        with self._lock:
            self._answering().engine  # noqa: B018
            self._retriever.embedder  # noqa: B018

    @property
    def model(self) -> str:
        """The generation model's name (its file, or the server's model)."""
        return self._answering().engine.model.name

    def _answering(self, preload: bool = False) -> Asker:
        """The asker, made on first use; ``preload`` starts loading the model now."""
        if self._asker is None:
            from .answer.asker import Asker

            self._asker = Asker(self.settings, self._retriever, preload, engine=self._engine)
        return self._asker

    def _saw(self, generation: str) -> None:
        if generation and generation != self.generation:
            self.generation = generation
            self.commits_followed += 1

    def close(self) -> None:
        with self._lock:
            if self._asker is not None:
                self._asker.close()  # the retriever with it
            else:
                self._retriever.close()

    def __enter__(self) -> Rag:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
