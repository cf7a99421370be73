"""Turn passages and questions into normalized vectors, and pick the engine that does it.

Two backends: ONNX Runtime (:mod:`ragcli.embed.onnx`, fp32 or int8, the default for
every model the export covers) and sentence-transformers on torch, kept for folders
the export cannot cover. torch takes seconds to import, so it is imported inside
``SentenceTransformerEmbedder`` on first use only, and never for an ONNX index.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Protocol

from ..config import DEFAULT_EMBED_BACKEND, Settings
from ..errors import ModelError
from ..models import EmbeddingModelInfo
from ..progress import Progress
from .manifest import verified_onnx

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger(__name__)


class Embedder(Protocol):
    info: EmbeddingModelInfo
    backend: str  # "onnx" or "torch": recorded in the index
    quantization: str  # "fp32" or "int8": recorded in the index

    def embed(self, texts: list[str], progress: Progress | None = None) -> np.ndarray: ...


class SentenceTransformerEmbedder:
    """The reference embedder: the model exactly as sentence-transformers runs it."""

    backend = "torch"
    quantization = "fp32"

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


def split_backend(name: str) -> tuple[str, str]:
    """A backend setting ("onnx-int8", "onnx-fp32", "torch") as (backend, quantization)."""
    return ("torch", "fp32") if name == "torch" else ("onnx", name.removeprefix("onnx-"))


def backend_name(backend: str, quantization: str) -> str:
    """The setting's spelling of what an index records."""
    return "torch" if backend == "torch" else f"{backend}-{quantization}"


def indexing_embedder(info: EmbeddingModelInfo, settings: Settings) -> Embedder:
    """The embedder `rag index` uses, by the ``embed_backend`` setting (default ONNX).

    ONNX files missing or failing their sha256 are exported now (this loads torch once).
    A folder the export cannot cover runs on torch, with a note; asked for ONNX
    explicitly, it is an error instead.
    """
    backend, quantization = split_backend(settings.embed_backend or DEFAULT_EMBED_BACKEND)
    if backend == "torch":
        return SentenceTransformerEmbedder(info)
    from .onnx import OnnxEmbedder
    from .onnx_export import ExportUnsupported, ensure_onnx

    try:
        model = ensure_onnx(info, settings.cache_dir, quantization)
    except ExportUnsupported as exc:
        if settings.embed_backend:
            raise ModelError(f"{exc}; index it with --embed-backend torch") from None
        log.info("%s; embedding it with sentence-transformers on torch", exc)
        return SentenceTransformerEmbedder(info)
    # While indexing, parser processes share the cores: idle ONNX threads sleep.
    return OnnxEmbedder(info, model, settings.threads, spinning=False)


def query_embedder(
    info: EmbeddingModelInfo, backend: str, quantization: str, settings: Settings
) -> Embedder:
    """The embedder for questions to an index built with ``backend`` and ``quantization``:
    the same file the index was built with, verified, never exported here (no torch)."""
    if backend == "torch":
        log.info("%s: the index was built on torch; loading sentence-transformers", info.name)
        return SentenceTransformerEmbedder(info)
    if backend != "onnx" or quantization not in ("fp32", "int8"):
        raise ModelError(f"the index records an unknown embedding backend {backend}/{quantization}")
    from .onnx import OnnxEmbedder

    model = verified_onnx(info, settings.cache_dir, quantization)
    if model is None:
        raise ModelError(
            f"the ONNX {quantization} file of {info.name} is missing or damaged in "
            f"{settings.cache_dir / 'models' / 'onnx'}; `rag index` or "
            "`rag models pull all-MiniLM-L6-v2` makes it again"
        )
    return OnnxEmbedder(info, model, settings.threads, prepack=False)
