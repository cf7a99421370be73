"""`rag search`: the passages nearest to a question.

The question is embedded with the model the index records, so a search can
never mix vectors from two models; asking for another model is an error.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from .config import Settings
from .embedding import Embedder, SentenceTransformerEmbedder
from .errors import IndexMismatchError
from .models import embedding_model
from .store import IndexStore, StoredChunk


@dataclass(frozen=True)
class Hit:
    """A retrieved passage, its cosine similarity and its 1-based rank."""

    chunk: StoredChunk
    score: float
    rank: int

    def as_dict(self) -> dict[str, str | int | float]:
        c = self.chunk
        return {
            "rank": self.rank,
            "path": c.path,
            "start_line": c.start_line,
            "end_line": c.end_line,
            "score": round(self.score, 4),
            "text": c.text,
        }


@dataclass(frozen=True)
class SearchResult:
    query: str
    hits: list[Hit]
    embed_ms: float
    search_ms: float


class Retriever:
    """Holds an open index and its embedder so batches pay for loading once."""

    def __init__(self, settings: Settings, embedder: Embedder | None = None) -> None:
        self.settings = settings
        self.store = IndexStore.open(settings.index_dir)
        recorded = self.store.info.embed_model
        if settings.embed_model and embedding_model(settings.embed_model).name != recorded:
            raise IndexMismatchError(
                f"index {settings.index_dir} was built with embedding model {recorded}, "
                f"not {settings.embed_model}; rebuild it with `rag index --rebuild` to switch"
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
            self._embedder = SentenceTransformerEmbedder(info)
        return self._embedder

    def search(self, query: str, k: int | None = None) -> SearchResult:
        t0 = time.perf_counter()
        vector = self.embedder.embed([query])[0]
        t1 = time.perf_counter()
        found = self.store.search(vector, k or self.settings.top_k)
        t2 = time.perf_counter()
        hits = [Hit(chunk, score, rank) for rank, (chunk, score) in enumerate(found, 1)]
        return SearchResult(query, hits, (t1 - t0) * 1000, (t2 - t1) * 1000)

    def close(self) -> None:
        self.store.close()
