"""A full disk during a commit leaves the previous index intact and says so in one line."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from ragcli.config import load_settings
from ragcli.errors import DiskFullError
from ragcli.index.pipeline import build_index
from ragcli.stores.faiss_index import VectorIndex

from ..conftest import CORPORA, rag
from .test_crash_safety import _check_consistent


def _more_docs(docs: Path, n: int) -> None:
    text = (CORPORA / "science" / "photosynthesis.txt").read_text()
    for i in range(n):
        (docs / f"more-{i}.txt").write_text(f"Extra {i}\n\n{text}\n")


def test_a_writer_out_of_space_keeps_the_last_commit(tmp_path, embedder, monkeypatch):
    docs = tmp_path / "docs"
    shutil.copytree(CORPORA, docs)
    index_dir = tmp_path / "idx"
    settings = load_settings({"index_dir": index_dir})
    build_index([docs], settings, embedder=embedder)
    before = _check_consistent(index_dir)
    _more_docs(docs, 3)

    def full(self, path):
        path.with_name(path.name + ".tmp").write_bytes(b"half written")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(VectorIndex, "save", full)
    with pytest.raises(DiskFullError, match="no space left"):
        build_index([docs], settings, embedder=embedder)
    monkeypatch.undo()
    assert _check_consistent(index_dir) == before
    build_index([docs], settings, embedder=embedder)  # with room again, the run completes
    assert len(_check_consistent(index_dir)) == len(before) + 3


@pytest.fixture
def small_disk(tmp_path):
    """A 2 MB tmpfs (root only), unmounted afterwards."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a small file system needs root")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mnt)], capture_output=True
    )
    if done.returncode:
        pytest.skip(f"cannot mount a tmpfs: {done.stderr.decode().strip()}")
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_a_full_disk_during_rag_index_is_one_line_and_the_index_survives(small_disk):
    docs = small_disk / "docs"
    shutil.copytree(CORPORA, docs)
    index_dir = small_disk / "idx"
    first = rag("index", str(docs), "--index", str(index_dir))
    assert first.returncode == 0, first.stderr
    _more_docs(docs, 8)
    free_kb = shutil.disk_usage(small_disk).free // 1024
    (small_disk / "filler").write_bytes(b"\0" * ((free_kb - 40) * 1024))  # leave 40 KB
    full = rag("index", str(docs), "--index", str(index_dir))
    assert full.returncode == 3, full.stderr
    assert full.stderr.count("\n") == 1 and full.stderr.startswith("rag: error: no space left")
    (small_disk / "filler").unlink()
    found = rag("search", "--index", str(index_dir), "photosynthesis")
    assert found.returncode == 0, found.stderr
    assert "photosynthesis.txt" in found.stdout and "more-" not in found.stdout
