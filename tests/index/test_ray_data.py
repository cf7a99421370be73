"""`rag index --ray`: Ray Data gives the single-process index, and without Ray a hint."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ..conftest import CORPORA, rag

# Ray Data's own settings object warns about its own deprecated fields.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:ray.data.context")

needs_ray = pytest.mark.skipif(
    importlib.util.find_spec("ray") is None, reason="the ray extra is not installed"
)


def _contents(index_dir: Path) -> dict[tuple, np.ndarray]:
    """Every passage (path, ordinal, lines, page, text) with its vector."""
    from ragcli.stores.faiss_store import FaissStore

    store = FaissStore.open(index_dir)
    try:
        faiss_index = store.vectors._index  # IDMap2 over Flat: vectors by chunk id
        return {
            (c.path, c.ordinal, c.start_line, c.end_line, c.page, c.text): faiss_index.reconstruct(
                c.id
            )
            for c in store.all_chunks()
        }
    finally:
        store.close()


@needs_ray
def test_ray_index_equals_single_process(tmp_path: Path, embedder) -> None:
    from ragcli.config import load_settings
    from ragcli.index.pipeline import build_index

    docs = tmp_path / "docs"
    subprocess.run(["cp", "-r", str(CORPORA), str(docs)], check=True)
    (docs / "empty.txt").write_text("")  # a skipped file travels through Ray too
    single = tmp_path / "single"
    build_index([docs], load_settings({"index_dir": single}), embedder=embedder)

    # A fresh process, as a user runs it: Ray starts on this machine's 2 cores,
    # is shut down afterwards and prints nothing of its own.
    out = rag("index", str(docs), "--index", str(tmp_path / "ray"), "--ray", "local", "--json")
    assert out.returncode == 0, out.stderr
    assert out.stderr == ""
    assert '"skipped": [{"path": ' in out.stdout and "empty.txt" in out.stdout

    expected, got = _contents(single), _contents(tmp_path / "ray")
    assert len(expected) > 40
    assert set(got) == set(expected)
    worst = max(float(np.abs(got[k] - expected[k]).max()) for k in expected)
    assert worst < 1e-5
    assert all(abs(float(np.linalg.norm(v)) - 1.0) < 1e-5 for v in got.values())


@needs_ray
def test_an_error_on_a_worker_keeps_its_class_and_ray_stops() -> None:
    """A ragcli error raised inside an actor (here: the model is missing on the
    node) reaches the caller as that error, one line, and the local Ray is shut down."""
    import ray

    from ragcli.config import load_settings
    from ragcli.errors import ModelError
    from ragcli.index.ray_data import prepare_with_ray
    from ragcli.models import EmbeddingModelInfo

    missing = EmbeddingModelInfo("no-such-model", Path("/no/such/model"), 384)
    paths = sorted(CORPORA.rglob("*.md"))[:2]
    with pytest.raises(ModelError, match=r"^embedding model no-such-model: [^\n]*$"):
        list(prepare_with_ray(paths, load_settings({}), missing, "local", num_cpus=2))
    assert not ray.is_initialized()


@needs_ray
def test_unreachable_cluster_is_one_line(tmp_path: Path) -> None:
    out = rag("index", str(CORPORA), "--index", str(tmp_path / "i"), "--ray", "127.0.0.1:9")
    assert out.returncode == 2
    assert out.stderr.strip().count("\n") == 0
    assert "--ray 127.0.0.1:9: cannot reach a Ray cluster there" in out.stderr


def test_missing_extra_gives_the_install_hint(tmp_path: Path) -> None:
    """Without Ray installed, --ray fails before any work with the pip hint."""
    probe = (
        "import sys; sys.modules['ray'] = None\n"  # import ray now raises ImportError
        "from ragcli.cli import main\n"
        "sys.argv = ['rag', 'index', sys.argv[1], '--index', sys.argv[2], '--ray', 'local']\n"
        "main()\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe, str(CORPORA), str(tmp_path / "i")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 2
    assert out.stderr.strip() == "rag: error: --ray needs Ray Data: pip install 'ragcli[ray]'"
