"""`rag search`: the passages nearest to a question.

The question is embedded with the model the index records, so a search can
never mix vectors from two models; asking for another model is an error.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..config import Settings
from ..embed.base import Embedder
from ..embed.base import query_embedder as _query_embedder
from ..errors import IndexMismatchError
from ..models import EmbeddingModelInfo, embedding_model
from ..records import Hit
from ..stores.base import IndexInfo
from ..stores.url import open_store

if TYPE_CHECKING:
    import numpy as np

RRF_K = 60  # reciprocal-rank fusion constant (Cormack et al.); ranks matter, not raw scores
CANDIDATES = 30  # per retriever, before fusion


def fuse(rankings: list[list[int]], k: int) -> list[tuple[int, float]]:
    """Reciprocal-rank fusion: ids by the sum of 1 / (RRF_K + rank) over rankings, with
    each ranking's own first id kept in the top k.

    Fusion sees ranks, not scores, so a passage far closer in meaning than any other but
    missed by BM25 (other words, same sense) falls behind passages both rank middling;
    keeping each retriever's best in place of the last fused ones costs nothing when they
    agree (docs/BENCHMARKS.md, "Answer quality").
    """
    scores: dict[int, float] = {}
    for ranking in rankings:
        for rank, i in enumerate(ranking, 1):
            scores[i] = scores.get(i, 0.0) + 1.0 / (RRF_K + rank)
    top = sorted(scores.items(), key=lambda kv: -kv[1])[:k]
    chosen = {i for i, _ in top}
    firsts = [i for i in dict.fromkeys(r[0] for r in rankings if r) if i not in chosen][:k]
    return top[: k - len(firsts)] + [(i, scores[i]) for i in firsts]


@dataclass(frozen=True)
class SearchResult:
    query: str
    hits: list[Hit]
    embed_ms: float
    search_ms: float
    vector: np.ndarray | None = field(default=None, repr=False)  # the query's embedding


def query_embedder(info: EmbeddingModelInfo, store_info: IndexInfo, settings: Settings) -> Embedder:
    """The embedder that built the index: the same ONNX file (fp32 or int8), verified,
    or sentence-transformers for an index built on torch."""
    return _query_embedder(info, store_info.embed_backend, store_info.embed_quantization, settings)


class Retriever:
    """Holds an open index and its embedder so batches pay for loading once."""

    def __init__(self, settings: Settings, embedder: Embedder | None = None) -> None:
        self.settings = settings
        self.store = open_store(settings)
        recorded = self.store.info.embed_model
        if settings.embed_model and embedding_model(settings.embed_model).name != recorded:
            raise IndexMismatchError(
                f"index {settings.index_dir} was built with embedding model {recorded}, "
                f"not {settings.embed_model}; rebuild it with `rag index --rebuild` to switch"
            )
        if settings.embed_backend and settings.embed_backend != self.store.info.embeddings:
            raise IndexMismatchError(
                f"index {settings.store or settings.index_dir} was built with "
                f"{self.store.info.embeddings} embeddings, not {settings.embed_backend}; rebuild "
                "it with `rag index --rebuild` to switch"
            )
        self._embedder = embedder

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            info = embedding_model(self.store.info.embed_model)
            if info.dim != self.store.info.embed_dim:
                raise IndexMismatchError(
                    f"embedding model {info.name} now gives {info.dim}-d vectors, the index holds "
                    f"{self.store.info.embed_dim}-d; rebuild it with `rag index --rebuild`"
                )
            self._embedder = query_embedder(info, self.store.info, self.settings)
        return self._embedder

    def search(
        self, query: str, k: int | None = None, retriever: str | None = None
    ) -> SearchResult:
        """Top-k passages by dense vectors, BM25, or both fused (``settings.retriever``)."""
        k = k or self.settings.top_k
        mode = retriever or self.settings.retriever
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
        return SearchResult(query, hits, (t1 - t0) * 1000, (t2 - t1) * 1000, vector)

    def __enter__(self) -> Retriever:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.store.close()
