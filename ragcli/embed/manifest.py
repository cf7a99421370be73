"""The ONNX files of an embedding model in the model cache, and the check before each use.

:mod:`ragcli.embed.onnx_export` writes them once from the sentence-transformers folder
(it needs torch); the query path only verifies them, so this module imports nothing
heavy and never the exporter. Each file is a graph already optimized by ONNX Runtime
plus its weights in a ``.data`` file beside it (memory-mapped when loaded), so it
belongs to one ONNX Runtime version; a manifest records the sha256 of both.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

from ..models import EmbeddingModelInfo
from ..models.digests import file_digest

ONNX_RECIPE = 2  # bump when the export or the quantization changes: older files are rebuilt
ONNX_FILES = {"fp32": "model.onnx", "int8": "model.int8.onnx"}
_SOURCE_SUFFIXES = (".json", ".safetensors", ".bin", ".txt", ".model")


@dataclass(frozen=True)
class OnnxModel:
    """One exported, verified ONNX graph of an embedding model (weights beside it)."""

    path: Path
    quantization: str  # "fp32" or "int8"
    sha256: str  # of the graph file; its .data file is checked too


def onnx_file_names(quantization: str) -> tuple[str, str]:
    """The graph file and its weights file."""
    name = ONNX_FILES[quantization]
    return name, f"{name}.data"


def source_digest(info: EmbeddingModelInfo, cache_dir: Path) -> str:
    """One sha256 over the files of a model folder that shape its vectors (config,
    tokenizer, weights): an edited or replaced folder gets a new export."""
    memo = cache_dir / "models" / "digests"
    digest = hashlib.sha256()
    root = Path(info.path)
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.suffix in _SOURCE_SUFFIXES and not rel.startswith(".") and path.is_file():
            digest.update(f"{rel}\0{file_digest(path, memo)}\0".encode())
    return digest.hexdigest()


def onnx_dir(info: EmbeddingModelInfo, cache_dir: Path) -> Path:
    """The folder of the ONNX files of ``info``'s model folder as it is now, for the
    installed ONNX Runtime (an optimized graph is tied to its version)."""
    # Every caller runs the graph next, so ONNX Runtime is imported anyway; asking the
    # package metadata instead would add importlib.metadata's 10 ms to each query.
    import onnxruntime

    slug = "".join(c if c.isalnum() or c in "._-" else "-" for c in info.name.split("/")[-1])
    key = f"{slug[:48]}-{source_digest(info, cache_dir)[:16]}-ort{onnxruntime.__version__}"
    return cache_dir / "models" / "onnx" / key


def read_onnx_manifest(folder: Path) -> dict[str, str]:
    """File name -> sha256 recorded by the export; {} when absent, stale or unreadable."""
    try:
        data = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
        if data.get("recipe") != ONNX_RECIPE:
            return {}
        return {
            str(k): str(v) for k, v in data["files"].items() if isinstance(v, str) and len(v) == 64
        }
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}


def write_onnx_manifest(folder: Path, files: dict[str, str], about: dict[str, str]) -> None:
    """Record the sha256 of each exported file, atomically (a torn write reads as absent)."""
    tmp = folder / "manifest.json.tmp"
    tmp.write_text(
        json.dumps({"recipe": ONNX_RECIPE, "files": files, **about}, indent=1), encoding="utf-8"
    )
    os.replace(tmp, folder / "manifest.json")


def verified_onnx(info: EmbeddingModelInfo, cache_dir: Path, quantization: str) -> OnnxModel | None:
    """The exported graph for ``quantization`` if the manifest vouches for the sha256 of
    it and of its weights file.

    Files that do not check out (no manifest, another recipe, other bytes) are removed,
    never used: the caller exports them again.
    """
    folder = onnx_dir(info, cache_dir)
    names = onnx_file_names(quantization)
    expected = read_onnx_manifest(folder)
    if not all((folder / n).is_file() for n in names):
        return None
    if all(expected.get(n) and file_digest(folder / n, folder) == expected[n] for n in names):
        return OnnxModel(folder / names[0], quantization, expected[names[0]])
    for n in names:
        (folder / n).unlink(missing_ok=True)
    return None
