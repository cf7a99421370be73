"""`rag search`: the passages nearest to a question.

The question is embedded with the model the index records, so a search can
never mix vectors from two models; asking for another model is an error.
Each search reads the index's newest commit, whole (``Store.reading``): a
retriever that lives across `rag index` runs sees every commit and never mixes
two, and a rebuild with another embedding model brings its own query encoder.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..config import Settings
from ..embed.base import Embedder
from ..embed.base import query_embedder as _query_embedder
from ..errors import IndexMismatchError
from ..models import EmbeddingModelInfo, embedding_model
from ..records import Hit
from ..stores.base import IndexInfo, Store, lexical_terms
from ..stores.factory import open_store

if TYPE_CHECKING:
    import numpy as np

    from .question import Question

RRF_K = 60  # reciprocal-rank fusion constant (Cormack et al.); ranks matter, not raw scores
CANDIDATES = 30  # per retriever, before fusion
# A word in at most this share of the passages sets a question apart from the corpus's topic.
RARE_SHARE = 0.1
# Passages of a page read beyond the retrieved ones, when a question names the page: a
# person's or a module's page runs to a few passages.
PAGE_PASSAGES = 8


# Words that make the word beside them a product's name: "the attrs package".
_KINDS_OF_SOFTWARE = frozenset(
    "library libraries package packages framework frameworks module modules crate gem "
    "plugin plug-in".split()
)
_KINDS_BEFORE = frozenset("bibliothèque paquet logiciel extension".split())  # French order
_WORD = re.compile(r"[^\W\d][\w.+-]*\w|[^\W\d]", re.UNICODE)


# Words that describe such a thing rather than name it: "the standard library".
_DESCRIBING = frozenset(
    "standard shared static dynamic external third-party built-in builtin core main client "
    "server whole entire same other new own this that which what whose your our their its "
    "python".split()
)
# Names of peoples are made from names of places the pages hold in another form (seven
# letters at least: "Julian" and "Lucien" are people).
_DEMONYM = re.compile(
    r"^\w{4,}(?:ais|aise|aises|ois|oise|oises|ien|ienne|iens|iennes|ian|ians|ese)$"
)
_IDENTIFIER = re.compile(r"\d|_|\w{2}\.\w{2}")


def lowercase_names(question: str) -> list[str]:
    """Lower-case words of the question that read as a name: with a digit, an underscore
    or a dot inside ("fail2ban", "snake_case", "pyproject.toml"), or right before
    "library", "package", "framework" or "module" ("the attrs package", "le paquet
    attrs"). Words merely missing from a dictionary do not count: a paraphrase uses words
    the pages lack."""
    words = _WORD.findall(question)
    out = []
    for i, w in enumerate(words):
        before = words[i - 1] if i else ""
        after = words[i + 1] if i + 1 < len(words) else ""
        if not w[0].islower() or len(w) < 3 or not lexical_terms(w) or w in _DESCRIBING:
            continue
        if (
            _IDENTIFIER.search(w)
            or after.lower() in _KINDS_OF_SOFTWARE
            or before.lower() in _KINDS_BEFORE
        ):
            out.append(w)
    return out


def fuse(rankings: list[list[int]], k: int) -> list[tuple[int, float]]:
    """Reciprocal-rank fusion: ids by the sum of 1 / (RRF_K + rank) over rankings, with
    each ranking's own first id kept in the top k.

    Fusion sees ranks, not scores, so a passage far closer in meaning than any other but
    missed by BM25 (other words, same sense) falls behind passages both rank middling;
    keeping each retriever's best in place of the last fused ones costs nothing when they
    agree (docs/BENCHMARKS.md, "Answers on unseen documents").
    """
    scores: dict[int, float] = {}
    for ranking in rankings:
        for rank, i in enumerate(ranking, 1):
            scores[i] = scores.get(i, 0.0) + 1.0 / (RRF_K + rank)
    ordered = sorted(scores, key=lambda i: -scores[i])
    firsts = list(dict.fromkeys(r[0] for r in rankings if r))[:k]
    # A first already among the fused top k keeps its place there; the best others fill
    # the places left, and firsts ranked lower come last.
    kept = set(firsts) | set([i for i in ordered if i not in firsts][: k - len(firsts)])
    head = [i for i in ordered[:k] if i in kept]
    return [(i, scores[i]) for i in head + [i for i in firsts if i not in head]]


@dataclass(frozen=True)
class SearchResult:
    query: str
    hits: list[Hit]
    embed_ms: float
    search_ms: float
    vector: np.ndarray | None = field(default=None, repr=False)  # the query's embedding
    generation: str = ""  # the index commit searched
    rerank_ms: float = 0.0  # the model ranking the candidates (answer/rerank.py)
    rerank_tokens: int = 0  # the tokens it read to rank them

    def as_dict(self) -> dict:
        """What `rag search --json`, POST /search and the MCP `search` tool return."""
        return {
            "query": self.query,
            "results": [h.as_dict() for h in self.hits],
            "timings": {
                "embed_ms": round(self.embed_ms, 2),
                "search_ms": round(self.search_ms, 2),
                "rerank_ms": round(self.rerank_ms, 2),
                "rerank_tokens": self.rerank_tokens,
            },
        }


def query_embedder(info: EmbeddingModelInfo, store_info: IndexInfo, settings: Settings) -> Embedder:
    """The embedder that built the index: the same ONNX file (fp32 or int8), verified,
    or sentence-transformers for an index built on torch."""
    return _query_embedder(info, store_info.embed_backend, store_info.embed_quantization, settings)


class Retriever:
    """Holds an open index and its embedder so batches pay for loading once."""

    def __init__(
        self,
        settings: Settings,
        embedder: Embedder | None = None,
        store: Store | None = None,
        memo: int = 0,
    ) -> None:
        """``store``: an open index to search (closed with the retriever), instead of the
        one the settings name; ``memo``: keep the vectors of this many texts seen (a
        resident reader meets the same sentences again and again)."""
        self.settings = settings
        self.memo = memo
        self.store = store or open_store(settings)
        self._embedder = embedder
        self._built_with: tuple[str, str] = ("", "")  # (model, embeddings) the embedder is for
        try:
            self._check(self.store.info)
        except BaseException:
            self.store.close()
            raise

    def _check(self, info: IndexInfo) -> None:
        """Refuse an index built other than the settings ask; after a rebuild with another
        embedding model or backend, drop the query encoder of the old one."""
        s = self.settings
        where = s.where
        if s.embed_model and embedding_model(s.embed_model).name != info.embed_model:
            raise IndexMismatchError(
                f"index {where} was built with embedding model {info.embed_model}, "
                f"not {s.embed_model}; rebuild it with `rag index --rebuild` to switch"
            )
        if s.embed_backend and s.embed_backend != info.embeddings:
            raise IndexMismatchError(
                f"index {where} was built with {info.embeddings} embeddings, not "
                f"{s.embed_backend}; rebuild it with `rag index --rebuild` to switch"
            )
        built_with = (info.embed_model, info.embeddings)
        if self._built_with != built_with:
            if self._built_with != ("", ""):
                self._embedder = None
            self._built_with = built_with

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            info = embedding_model(self.store.info.embed_model)
            if info.dim != self.store.info.embed_dim:
                raise IndexMismatchError(
                    f"embedding model {info.name} now gives {info.dim}-d vectors, the index holds "
                    f"{self.store.info.embed_dim}-d; rebuild it with `rag index --rebuild`"
                )
            embedder = query_embedder(info, self.store.info, self.settings)
            if self.memo:
                from ..embed.memo import MemoEmbedder

                embedder = MemoEmbedder(embedder, self.memo)
            self._embedder = embedder
        return self._embedder

    def search(
        self, query: str, k: int | None = None, retriever: str | None = None
    ) -> SearchResult:
        """Top-k passages by dense vectors, BM25, or both fused (``settings.retriever``)."""
        k = k or self.settings.top_k
        mode = retriever or self.settings.retriever
        with self.store.reading() as generation:
            self._check(self.store.info)
            t0 = time.perf_counter()
            vector = self.embedder.embed([query])[0]
            t1 = time.perf_counter()
            if mode == "dense":
                ranked = self.store.dense_search(vector, k)
            elif mode == "bm25":
                ranked = self.store.lexical_search(query, k)
            else:
                n = max(CANDIDATES, k)
                dense = [i for i, _ in self.store.dense_search(vector, n)]
                lexical = [i for i, _ in self.store.lexical_search(query, n)]
                ranked = fuse([dense, lexical], k)
            ids = [i for i, _ in ranked]
            sims = self.store.similarity(vector, ids)
            chunks = self.store.chunks(ids)
        hits = [
            Hit(chunks[i], score, rank, sims[i])
            for rank, (i, score) in enumerate(ranked, 1)
            if i in chunks
        ]
        t2 = time.perf_counter()
        return SearchResult(query, hits, (t1 - t0) * 1000, (t2 - t1) * 1000, vector, generation)

    def rest_of_pages(
        self,
        hits: Sequence[Hit],
        paths: Iterable[str],
        vector: np.ndarray | None = None,
        limit: int = PAGE_PASSAGES,
    ) -> list[Hit]:
        """The passages of the pages at ``paths`` that ``hits`` lack, as hits ranked after
        them (not retrieved: score 0), with their similarity to the query ``vector`` (or,
        without one, that of their page's best hit).

        Asked who Ann married, retrieval brings every page that speaks of marriage, and
        the passage of Ann's page that says it may not be among them."""
        have = {(h.chunk.path, h.chunk.ordinal) for h in hits}
        best: dict[str, float] = {}
        for h in hits:
            best[h.chunk.path] = max(best.get(h.chunk.path, -1.0), h.similarity)
        with self.store.reading():
            rest = [
                c
                for path in paths
                for c in self.store.page(path, limit)
                if (c.path, c.ordinal) not in have
            ]
            sims = {} if vector is None else self.store.similarity(vector, [c.id for c in rest])
        after = max((h.rank for h in hits), default=0)
        return [
            Hit(c, 0.0, after + i, sims.get(c.id, best.get(c.path, 0.0)))
            for i, c in enumerate(rest, 1)
        ]

    def unknown_names(self, question: Question) -> list[str]:
        """The names the question gives that no passage of the index holds.

        Pages that never say "Django" do not answer a question about Django, whatever
        nearby words a model could copy from them. A name is a capitalized word after the
        first, of three letters or more ("PC", "A" and "I" are too often something else)
        and not a people's name made from a place's ("Lyonnais" of "Lyon", "Parisian"),
        or a lower-case one that reads as a name (:func:`lowercase_names`: "fail2ban",
        "the attrs package"). A store whose BM25 finds nothing for the whole question (one
        without BM25) tells nothing here."""
        asked = {n for n in question.names if len(n) >= 3 and not _DEMONYM.search(n)}
        asked |= set(lowercase_names(question.text))
        with self.store.reading():
            if not self.store.lexical_search(question.text, 1):
                return []
            return [
                name
                for name in sorted(asked)
                if (terms := lexical_terms(name))  # not a stop word ("For")
                and not any(self.store.lexical_search(t, 1) for t in terms)
            ]

    def rare_words(self, words: Sequence[str], share: float = RARE_SHARE) -> list[str]:
        """The ``words`` that at most ``share`` of the index's passages hold, none
        included (by BM25 lookups, so a store without BM25 finds every word rare)."""
        out = []
        with self.store.reading():
            limit = max(2, int(self.store.count_chunks() * share))
            for word in words:
                terms = lexical_terms(word)
                if (
                    terms
                    and min(len(self.store.lexical_search(t, limit + 1)) for t in terms) <= limit
                ):
                    out.append(word)
        return out

    def __enter__(self) -> Retriever:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.store.close()
