"""IVF-Flat files written list by list are the index FAISS itself would build and write."""

from __future__ import annotations

import os
from pathlib import Path

import faiss
import numpy as np
import pytest

from benchmarks.faiss_index_types import clustered_vectors
from ragcli.stores import ivf_stream
from ragcli.stores.base import IndexInfo
from ragcli.stores.faiss_index import VectorIndex, _read_mapped

DIM = 64


def _vectors(n: int, seed: int = 0) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal((n, DIM), dtype=np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _trained(x: np.ndarray, nlist: int = 16) -> faiss.Index:
    index = faiss.index_factory(DIM, f"IVF{nlist},Flat", faiss.METRIC_INNER_PRODUCT)
    index.set_direct_map_type(faiss.DirectMap.Hashtable)
    index.train(x)
    return index


def _streamed(path: Path, empty: faiss.Index, ids: np.ndarray, x: np.ndarray, step: int) -> None:
    assert ivf_stream.writable(empty)
    list_nos = empty.quantizer.assign(x, 1).ravel()

    def slices():
        for begin in range(0, len(ids), step):
            yield ids[begin : begin + step], x[begin : begin + step]

    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC)
    try:
        size = ivf_stream.write(fd, empty, slices, list_nos)
    finally:
        os.close(fd)
    assert size == path.stat().st_size


def _lists(index) -> list[list[int]]:
    lists = index.invlists
    out = []
    for no in range(index.nlist):
        n = lists.list_size(no)
        out.append(faiss.rev_swig_ptr(lists.get_ids(no), n).tolist() if n else [])
    return out


@pytest.mark.parametrize("spread", [True, False], ids=["full", "sparse"])
def test_a_streamed_file_searches_as_the_index_faiss_builds(tmp_path: Path, spread: bool):
    """The same trained quantizer and vectors, added by FAISS in memory and written here:
    the same lists in the same order, the same ids and scores for every query, the same
    vectors by id; read whole and mapped. ``sparse``: fewer than half the lists hold
    vectors, which FAISS writes in another form."""
    x = _vectors(3000)
    empty = _trained(x)
    if not spread:  # vectors near three centroids only
        centroids = empty.quantizer.reconstruct_n(0, 16)
        x = np.repeat(centroids[:3], 700, axis=0) + 0.01 * _vectors(2100, seed=3)
    ids = np.random.default_rng(1).permutation(10 * len(x))[: len(x)].astype(np.int64)
    reference = faiss.clone_index(empty)
    reference.add_with_ids(x, ids)
    filled = sum(1 for ids_ in _lists(reference) if ids_)
    assert (filled > 8) == spread
    path = tmp_path / "v.faiss"
    _streamed(path, empty, ids, x, step=701)  # slices that cut lists anywhere

    queries = _vectors(50, seed=2)
    for nprobe in (1, 4, 16):
        reference.nprobe = nprobe
        want_scores, want_ids = reference.search(queries, 10)
        for index in (faiss.read_index(str(path)), _read_mapped(path)):
            assert index.ntotal == len(x) and _lists(index) == _lists(reference)
            index.nprobe = nprobe
            scores, found = index.search(queries, 10)
            assert np.array_equal(found, want_ids) and np.array_equal(scores, want_scores)
            picked = ids[[0, 17, len(x) - 1]]
            assert np.array_equal(
                index.reconstruct_batch(picked), reference.reconstruct_batch(picked)
            )
    whole = faiss.read_index(str(path))
    stored = np.concatenate([np.asarray(ids_, dtype=np.int64) for ids_ in _lists(whole)])
    lists = ivf_stream.ListFile.of(_read_mapped(path), path, stored)
    assert lists is not None  # the lists read back from the file as the index holds them
    assert np.array_equal(lists.rows(0, len(x)), whole.reconstruct_batch(stored))
    assert np.array_equal(lists.rows(5, 2000), whole.reconstruct_batch(stored[5:2000]))
    assert ivf_stream.ListFile.of(_read_mapped(path), path, stored[::-1]) is None
    whole.remove_ids(ids[:5])  # the direct map is whole: removal by id works
    assert whole.ntotal == len(x) - 5


def test_only_plain_ivf_flat_is_written_here():
    assert not ivf_stream.writable(faiss.index_factory(DIM, "IVF16,SQ8"))
    assert not ivf_stream.writable(faiss.index_factory(DIM, "IDMap2,Flat"))
    assert ivf_stream.writable(faiss.index_factory(DIM, "IVF16,Flat"))
    filled = _trained(_vectors(1000))
    filled.add(_vectors(10))
    assert not ivf_stream.writable(filled)


def test_the_probed_lists_give_the_recall_faiss_measures():
    x = clustered_vectors(4000, seed=4)[:, :DIM].copy()
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    index = _trained(x, nlist=32)
    index.add_with_ids(x[200:], np.arange(200, 4000))
    queries = x[:200]
    truth = np.argsort(-(queries @ x[200:].T), axis=1)[:, :10] + 200
    truth_lists = index.quantizer.assign(x, 1).ravel()[truth]
    for nprobe in (1, 2, 4, 8):
        index.nprobe = nprobe
        found = index.search(queries, 10)[1]
        want = np.mean([len(set(t) & set(f)) / 10 for t, f in zip(truth, found, strict=True)])
        got = ivf_stream.probe_recall(index.quantizer, queries, truth_lists, nprobe)
        assert got == pytest.approx(want)


def test_a_writer_builds_maps_and_keeps_changing_a_streamed_index(tmp_path: Path):
    """Spilled vectors finalized into IVF-Flat: written to disk, mapped, calibrated as an
    in-memory build is; then changed in the same process and saved again."""
    x = _vectors(6000)
    ids = np.arange(100, 6100, dtype=np.int64)
    spilled, direct = VectorIndex.create(DIM), VectorIndex.create(DIM)
    spilled.spill_to(tmp_path)
    for begin in range(0, 6000, 1000):
        spilled.add(ids[begin : begin + 1000], x[begin : begin + 1000])
        direct.add(ids[begin : begin + 1000], x[begin : begin + 1000])
    info = IndexInfo.for_build("m", DIM, 200, 40, index_spec="IVF32,Flat")
    got, want = spilled.finalize(info), direct.finalize(info)
    assert got.index_type == want.index_type == "IVF32,Flat"
    assert got.search_params == want.search_params and "recall@10" in got.search_params
    queries = _vectors(20, seed=5)
    assert spilled.search(queries, 10) == direct.search(queries, 10)
    assert not isinstance(spilled._index.invlists, faiss.OnDiskInvertedLists)
    path = tmp_path / "vectors-1.faiss"
    spilled.save(path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["vectors-1.faiss"]
    for index in (faiss.read_index(str(path)), _read_mapped(path)):
        assert index.ntotal == 6000 and index.nprobe == spilled._index.nprobe

    # Further changes in the same process: a removal, an addition, a search, a save.
    more = _vectors(500, seed=6)
    for v in (spilled, direct):
        v.remove([100, 101, 6099])
        v.add(np.arange(7000, 7500, dtype=np.int64), more)
    assert len(spilled) == len(direct) == 6497
    spilled.save(tmp_path / "vectors-2.faiss")
    assert spilled._mapped == tmp_path / "vectors-2.faiss"  # rewritten from disk, not read whole
    assert spilled.search(queries, 10) == direct.search(queries, 10)
    assert spilled.search(more[:1], 1)[0][0][0] == 7000
    loaded = VectorIndex.load(tmp_path / "vectors-2.faiss", mmap=False)
    assert len(loaded) == 6497 and not {100, 101, 6099} & set(loaded.contents()[0].tolist())
