"""A `rag index` killed at any moment leaves the previous index usable, and the
next `rag index` completes; a second writer is turned away while one runs.

These run the installed `rag` script in its own process and SIGKILL it; there
are no hooks, so the kill points are what can be seen from outside: the run
holding the index's lock, a commit's vector file or rows appearing.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import numpy as np
import pytest

from ragcli.config import load_settings
from ragcli.index.pipeline import build_index
from ragcli.stores.faiss_store import FaissStore

CORPORA = Path(__file__).resolve().parents[2] / "corpora"
RAG = Path(sys.executable).parent / "rag"
N_GENERATED = 24

pytestmark = pytest.mark.skipif(not RAG.exists(), reason="the rag script is not installed")


@pytest.fixture
def setup(tmp_path, embedder):
    """A corpus copy, an index of its original files, and an environment for `rag`."""
    docs = tmp_path / "docs"
    shutil.copytree(CORPORA, docs)
    index_dir = tmp_path / "idx"
    build_index([docs], load_settings({"index_dir": index_dir}), embedder=embedder)
    before = _files(index_dir)
    # More files for the killed runs to work on (small: one or two passages each).
    rng = random.Random(7)
    words = (CORPORA / "science" / "photosynthesis.txt").read_text().split()
    for i in range(N_GENERATED):
        body = " ".join(rng.choice(words) for _ in range(80))
        (docs / f"generated-{i:02d}.txt").write_text(f"Generated note {i}\n\n{body}\n")
    env = {
        **os.environ,
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
    }
    return docs, index_dir, before, env


def _start(docs: Path, index_dir: Path, env: dict) -> subprocess.Popen:
    return subprocess.Popen(
        [str(RAG), "index", str(docs), "--index", str(index_dir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def _kill(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)


def _files(index_dir: Path) -> frozenset[str]:
    store = FaissStore.open(index_dir)
    try:
        return frozenset(store.files())
    finally:
        store.close()


def _check_consistent(index_dir: Path) -> frozenset[str]:
    """The index opens, its counts agree and a search returns stored chunks."""
    store = FaissStore.open(index_dir)
    try:
        files = frozenset(store.files())
        n_chunks = store.count_chunks()
        assert len(store.vectors) == n_chunks > 0
        query = np.random.default_rng(0).standard_normal(store.info.embed_dim).astype("float32")
        query /= np.linalg.norm(query)
        ids = [i for i, _ in store.dense_search(query, 5)]
        assert ids and set(store.chunks(ids)) == set(ids)
    finally:
        store.close()
    db = sqlite3.connect(index_dir / "index.sqlite")
    try:
        per_file = db.execute("SELECT coalesce(sum(n_chunks), 0) FROM files").fetchone()[0]
        assert per_file == n_chunks
        orphans = db.execute(
            "SELECT count(*) FROM chunks WHERE path NOT IN (SELECT path FROM files)"
        ).fetchone()[0]
        assert orphans == 0
    finally:
        db.close()
    return files


def _wait_for(proc: subprocess.Popen, seen: Callable[[], bool], what: str) -> None:
    """Poll until ``seen()``; fail when the run ends without it or it takes 300 s."""
    deadline = time.monotonic() + 300
    while not seen():
        if proc.poll() is not None:
            assert seen(), f"the run ended before {what}: {proc.communicate()}"
            return
        assert time.monotonic() < deadline, f"no {what} in 300 s"
        time.sleep(0.002)


def _new_vectors(index_dir: Path, existing: set[str]) -> bool:
    return bool({p.name for p in index_dir.glob("vectors-*")} - existing)


def _generation(index_dir: Path) -> str:
    store = FaissStore.open(index_dir)
    try:
        return store.generation()
    finally:
        store.close()


def test_killed_index_runs_leave_a_usable_index(setup):
    docs, index_dir, before, env = setup
    after = before | {str((docs / f"generated-{i:02d}.txt").resolve()) for i in range(N_GENERATED)}
    # Leftovers of an earlier crash: neither may make the index unusable.
    (index_dir / "vectors-dead.faiss.tmp").write_bytes(b"half a vector file")
    (index_dir / "vectors-orphan.faiss").write_bytes(b"never committed")
    assert _check_consistent(index_dir) == before

    for point in ("the lock", "a new vector file"):
        generation = _generation(index_dir)
        existing = {p.name for p in index_dir.glob("vectors-*")}
        proc = _start(docs, index_dir, env)
        if point == "the lock":  # it is about to read, embed and stage: nothing committed
            _wait_for(proc, partial(_holds_lock, proc.pid, index_dir / "lock"), point)
        else:  # the commit is writing its vectors, or has just named them
            _wait_for(proc, partial(_new_vectors, index_dir, existing), point)
        _kill(proc)
        files = _check_consistent(index_dir)
        committed = _generation(index_dir) != generation
        assert files == (after if committed else before), point  # all of the run or none of it
        if point == "the lock":
            assert not committed

    # The next run completes, and leaves one vector file and no debris.
    done = subprocess.run(
        [str(RAG), "index", str(docs), "--index", str(index_dir)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    assert _check_consistent(index_dir) == after
    assert [p.name for p in index_dir.glob("vectors-*")] == [
        next(p.name for p in index_dir.glob("vectors-*.faiss"))
    ]
    assert not list(index_dir.glob("*.tmp"))


def test_killed_run_keeps_the_files_it_committed(setup, tmp_path):
    """With commits between batches, the next run does only what is left."""
    docs, index_dir, before, env = setup
    after = before | {str((docs / f"generated-{i:02d}.txt").resolve()) for i in range(N_GENERATED)}
    config = tmp_path / "config.toml"
    config.write_text("commit_seconds = 0\nembed_batch = 4\n")  # commit after every batch
    env = {**env, "RAG_CONFIG": str(config)}
    proc = _start(docs, index_dir, env)
    _wait_for(proc, lambda: _committed_files(index_dir) > len(before), "the first batch's commit")
    _kill(proc)
    kept = _check_consistent(index_dir)
    assert before < kept < after  # some batches committed, not all

    done = subprocess.run(
        [str(RAG), "index", str(docs), "--index", str(index_dir), "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["unchanged"] == len(kept)  # finished files are not redone
    assert report["added"] == len(after - kept)
    assert report["commits"] >= 2
    assert _check_consistent(index_dir) == after


def _committed_files(index_dir: Path) -> int:
    db = sqlite3.connect(f"file:{index_dir / 'index.sqlite'}?mode=ro", uri=True)
    try:
        return db.execute("SELECT count(*) FROM files").fetchone()[0]
    finally:
        db.close()


def _holds_lock(pid: int, lock: Path) -> bool:
    inode = lock.stat().st_ino
    for line in Path("/proc/locks").read_text().splitlines():
        fields = line.split()
        if (
            "FLOCK" in fields
            and str(pid) in fields
            and any(f.endswith(f":{inode}") for f in fields)
        ):
            return True
    return False


@pytest.mark.skipif(not Path("/proc/locks").exists(), reason="needs /proc/locks")
def test_second_writer_is_turned_away(setup):
    """A writer holds the index (here this process, mid-update, nothing committed): a
    `rag index` started meanwhile stops with one line and changes nothing."""
    docs, index_dir, before, env = setup
    store = FaissStore.open(index_dir)
    info = store.info
    store.close()
    with FaissStore.writer(index_dir, info) as writer:
        writer.remove_file(sorted(before)[0])  # staged, never committed
        second = subprocess.run(
            [str(RAG), "index", str(docs), "--index", str(index_dir)],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
        )
    assert second.returncode == 3, second.stderr
    [error] = [line for line in second.stderr.splitlines() if line.startswith("rag: error:")]
    assert "being written by another" in error
    assert _check_consistent(index_dir) == before
