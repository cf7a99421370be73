"""`rag index` SIGKILLed at random moments over a corpus that takes about a minute:
the previous index always opens and answers, and the run after completes with the
passages of an uninterrupted run (slow: `make test-slow`)."""

from __future__ import annotations

import os
import random
import shutil
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from ..conftest import CORPORA, rag
from .test_crash_safety import RAG, _check_consistent, _kill, _start

pytestmark = pytest.mark.slow
KILLS = 10


def _generate(docs: Path, n: int) -> None:
    """``n`` generated files of a few passages each, in folders of 50."""
    rng = random.Random(15)
    words = (CORPORA / "science" / "photosynthesis.txt").read_text().split()
    for i in range(n):
        paras = [" ".join(rng.choice(words) for _ in range(120)) for _ in range(4)]
        folder = docs / "gen" / f"{i // 50:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"note-{i:04d}.md").write_text(f"# Note {i}\n\n" + "\n\n".join(paras) + "\n")


def _chunk_ids(index_dir: Path) -> list[tuple[str, int, int, int, str]]:
    """What identifies the stored passages, the same for equal runs."""
    db = sqlite3.connect(f"file:{index_dir / 'index.sqlite'}?mode=ro", uri=True)
    try:
        rows = db.execute("SELECT path, ordinal, start_line, end_line, text FROM chunks").fetchall()
    finally:
        db.close()
    return sorted(rows)


def test_random_kills_never_break_the_index(tmp_path):
    docs = tmp_path / "docs"
    shutil.copytree(CORPORA, docs)
    index_dir = tmp_path / "idx"
    assert rag("index", str(docs), "--index", str(index_dir)).returncode == 0  # the previous index
    _generate(docs, 250)
    reference = tmp_path / "reference"
    started = time.monotonic()
    done = rag("index", str(docs), "--index", str(reference))
    assert done.returncode == 0, done.stderr
    full_s = time.monotonic() - started

    rng = random.Random(1515)
    for _ in range(KILLS):
        proc = _start(docs, index_dir, dict(os.environ))
        time.sleep(rng.uniform(0.3, full_s))
        _kill(proc)
        _check_consistent(index_dir)
        found = rag("search", "--index", str(index_dir), "Who won the Cricket World Cup?")
        assert found.returncode == 0 and "cricket" in found.stdout, found.stderr
    last = subprocess.run(
        [str(RAG), "index", str(docs), "--index", str(index_dir)],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert last.returncode == 0, last.stderr
    _check_consistent(index_dir)
    assert _chunk_ids(index_dir) == _chunk_ids(reference)
