"""Shared fixtures: real models, real indexes, isolated cache and config folders."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings

# Property tests: a few dozen cases each in `make test`, thousands with HYPOTHESIS_PROFILE=long.
_RELAXED = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow]}
hypothesis_settings.register_profile("default", max_examples=30, **_RELAXED)
hypothesis_settings.register_profile("long", max_examples=3000, **_RELAXED)
hypothesis_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

ROOT = Path(__file__).resolve().parent.parent
CORPORA = ROOT / "corpora"
RAG = Path(sys.executable).parent / "rag"
SMALL_MODEL = "gemma-3-270m"


@pytest.fixture(scope="session", autouse=True)
def isolated_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Keep the user's config and cache out of the tests (and the tests out of them)."""
    from ragcli.config import ENV, Settings

    models = Path(os.environ.get("RAG_CACHE_DIR") or Settings().cache_dir) / "models"
    home = tmp_path_factory.mktemp("home")
    os.environ["XDG_CONFIG_HOME"] = str(home / "config")
    os.environ["XDG_CACHE_HOME"] = str(home / "cache")
    # Verified model files are shared (`make install` pulls them); caches and indexes are not.
    (home / "cache" / "ragcli").mkdir(parents=True)
    if models.is_dir():
        (home / "cache" / "ragcli" / "models").symlink_to(models)
    for var in ("RAG_CONFIG", *ENV):
        os.environ.pop(var, None)
    # Most tests run the small model; tests of the default model unset this.
    os.environ["RAG_MODEL"] = SMALL_MODEL
    return home


@pytest.fixture(scope="session")
def embedder(isolated_home):
    """The embedder `rag index` uses by default (ONNX Runtime), loaded once for the session.

    Making it exports the model's ONNX files first if the install has not (`make install`
    runs `rag models pull all-MiniLM-L6-v2`), so every test finds them in place.
    """
    from ragcli.config import load_settings
    from ragcli.embed.base import indexing_embedder
    from ragcli.models import embedding_model

    return indexing_embedder(embedding_model(), load_settings())


@pytest.fixture(scope="session")
def st_embedder():
    """The reference: the model as sentence-transformers runs it on torch."""
    from ragcli.embed.base import SentenceTransformerEmbedder
    from ragcli.models import embedding_model

    return SentenceTransformerEmbedder(embedding_model())


@pytest.fixture(scope="session")
def corpus_index(tmp_path_factory: pytest.TempPathFactory, embedder) -> Path:
    """The shipped demo corpus, indexed once."""
    from ragcli.config import load_settings
    from ragcli.index.pipeline import build_index

    index_dir = tmp_path_factory.mktemp("corpus") / "index"
    build_index([CORPORA], load_settings({"index_dir": index_dir}), embedder=embedder)
    return index_dir


def rag(*args: str, input: str | None = None, cwd: Path | None = None, env: dict | None = None):
    """Run the installed `rag` command in a new process, as a user or script would."""
    return subprocess.run(
        [str(RAG), *args],
        input=input,
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, **(env or {})},
        timeout=600,
    )
