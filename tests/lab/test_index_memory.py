"""Indexing memory does not grow with the input beyond its vectors (issue #29)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import ragcli
from benchmarks.index_memory import make_markdown, markdown_blocks
from ragcli.bench.fresh_process import run_measured

ROOT = Path(ragcli.__file__).resolve().parents[1]


def test_the_generated_markdown_is_the_same_every_time(tmp_path: Path):
    a = make_markdown(tmp_path / "a.md", 0.2).read_bytes()
    b = make_markdown(tmp_path / "b.md", 0.2).read_bytes()
    assert a == b and 200_000 <= len(a) < 210_000
    text = a.decode("utf-8")
    assert text.startswith("# ") and "\n## 1.1 " in text
    assert next(markdown_blocks(seed=1)) != next(markdown_blocks())


def _peak(doc: Path, index: Path, stream_bytes: int = 1_000_000) -> tuple[float, int]:
    """Peak RSS (MB) and passages of indexing ``doc`` with random vectors in a fresh
    process: streamed in 1 MB blocks (by default), IVF from 4,000 passages (so the
    commit rebuilds the vectors)."""
    args = [sys.executable, "-m", "benchmarks.index_memory", "random", str(doc), str(index)]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    _, peak, out = run_measured([*args, str(stream_bytes), "4000"], env)
    return peak, int(out.strip())


def test_indexing_peak_memory_grows_by_the_vectors_only(tmp_path: Path):
    """Measured (MB): 3 MB 92, 12 MB 117 (its 17,301 more passages have 25 MB more
    vectors), 12 MB read whole 220. Before the vectors waited on disk, the IVF lists
    were sized once and lines were tokenized a slice at a time: 143, 184 and 786."""
    small = _peak(make_markdown(tmp_path / "3.md", 3), tmp_path / "i3")
    doc = make_markdown(tmp_path / "12.md", 12)
    large = _peak(doc, tmp_path / "i12")
    whole = _peak(doc, tmp_path / "w12", stream_bytes=1 << 30)
    assert large[1] > 3.5 * small[1]
    vectors = (large[1] - small[1]) * 384 * 4 / 2**20
    assert large[0] - small[0] <= vectors + 10, (small, large)
    # Read whole, the file's text, lines and passages are held too: under 10 times its size.
    assert whole[0] - small[0] <= vectors + 10 * 12, (small, whole)
