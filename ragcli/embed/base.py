"""Turn passages and questions into normalized vectors.

sentence-transformers (and torch behind it) take seconds to import, so they
are imported inside ``SentenceTransformerEmbedder`` on first use only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from ..models import EmbeddingModelInfo

if TYPE_CHECKING:
    import numpy as np

Progress = Callable[[int], None]  # called with the number of texts just finished


class Embedder(Protocol):
    info: EmbeddingModelInfo

    def embed(self, texts: list[str], progress: Progress | None = None) -> np.ndarray: ...


class SentenceTransformerEmbedder:
    """The reference embedder: the model exactly as sentence-transformers runs it."""

    def __init__(self, info: EmbeddingModelInfo, batch_size: int = 32) -> None:
        self.info = info
        self.batch_size = batch_size
        self._model = None

    @property
    def loaded(self) -> bool:
        """Whether the model is in memory (loading it takes seconds: torch)."""
        return self._model is not None

    def _load(self):
        if self._model is None:
            import os

            os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the model is local; never phone home
            os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
            os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")  # keep stderr clean
            os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
            from sentence_transformers import SentenceTransformer

            self._model = SentenceTransformer(str(self.info.path), device="cpu")
        return self._model

    def embed(self, texts: list[str], progress: Progress | None = None) -> np.ndarray:
        import numpy as np

        model = self._load()
        out = np.zeros((len(texts), self.info.dim), dtype=np.float32)
        # Longest first, as encode() orders a call's texts: batches of similar
        # length waste little work on padding.
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        for start in range(0, len(texts), self.batch_size):
            rows = order[start : start + self.batch_size]
            out[rows] = model.encode(
                [texts[i] for i in rows],
                batch_size=self.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
            if progress:
                progress(len(rows))
        return out
