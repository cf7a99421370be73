"""Vectors a writer adds wait in a file until the index is used, then go in unchanged."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ragcli.stores.base import IndexInfo
from ragcli.stores.faiss_index import VectorIndex

DIM = 384


def _vectors(n: int, seed: int = 0) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal((n, DIM), dtype=np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _pair(tmp_path: Path, n: int = 3000, step: int = 700) -> tuple[VectorIndex, VectorIndex]:
    """The same vectors added to an index in memory and to one that spills."""
    direct, spilled = VectorIndex.create(DIM), VectorIndex.create(DIM)
    spilled.spill_to(tmp_path)
    x, ids = _vectors(n), np.arange(10, 10 + n, dtype=np.int64)
    for begin in range(0, n, step):
        direct.add(ids[begin : begin + step], x[begin : begin + step])
        spilled.add(ids[begin : begin + step], x[begin : begin + step])
    return direct, spilled


def test_spilled_vectors_are_searched_as_added_ones(tmp_path: Path):
    direct, spilled = _pair(tmp_path)
    assert len(spilled) == len(direct) == 3000
    queries = _vectors(5, seed=1)
    assert spilled.search(queries, 10) == direct.search(queries, 10)
    spilled.add(np.array([5], dtype=np.int64), queries[:1])  # after a search: spills again
    direct.add(np.array([5], dtype=np.int64), queries[:1])
    assert spilled.search(queries[:1], 3) == direct.search(queries[:1], 3)
    assert spilled.search(queries[:1], 1)[0][0][0] == 5
    spilled.remove([5, 11])
    direct.remove([5, 11])
    assert len(spilled) == len(direct) == 2999
    assert spilled.similarity(queries[0], [10, 12]) == direct.similarity(queries[0], [10, 12])
    ids, vectors = spilled.contents()
    want_ids, want_vectors = direct.contents()
    assert (ids == want_ids).all() and (vectors == want_vectors).all()


def test_a_rebuild_from_spilled_vectors_keeps_every_vector(tmp_path: Path):
    direct, spilled = _pair(tmp_path, n=6000, step=1000)
    info = IndexInfo.for_build("m", DIM, 200, 40, index_spec="IVF16,Flat")
    assert spilled.finalize(info).index_type == direct.finalize(info).index_type == "IVF16,Flat"
    ids, vectors = spilled.contents()
    want_ids, want_vectors = direct.contents()
    assert sorted(ids.tolist()) == sorted(want_ids.tolist()) == list(range(10, 6010))
    order, want = np.argsort(ids), np.argsort(want_ids)
    assert (vectors[order] == want_vectors[want]).all()
    queries = _vectors(3, seed=2)
    assert spilled.search(queries, 5) == direct.search(queries, 5)
    spilled.save(tmp_path / "v.faiss")
    assert len(VectorIndex.load(tmp_path / "v.faiss")) == 6000
