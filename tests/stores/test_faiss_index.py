"""FAISS index types: "auto" by size, a chosen type recorded and used, bad types refused.

Real FAISS throughout, on small clustered vectors (no embedding model) except
where the `rag` command itself is under test.
"""

from __future__ import annotations

import json
from pathlib import Path

import faiss
import numpy as np
import pytest

from benchmarks.faiss_index_types import clustered_vectors
from ragcli.errors import ConfigError
from ragcli.records import Chunk, SourceFile
from ragcli.stores.base import IndexInfo
from ragcli.stores.faiss_index import AUTO, VectorIndex, check_index_type
from ragcli.stores.faiss_store import FaissStore

from ..conftest import rag

DIM = 384


def _info(spec: str) -> IndexInfo:
    return IndexInfo.for_build("test-model", DIM, 200, 40, index_spec=spec)


def _write(root: Path, spec: str, add: dict[str, np.ndarray], remove: tuple[str, ...] = ()):
    """One writer session: drop files, add files (one chunk per vector), commit."""
    with FaissStore.writer(root, _info(spec)) as writer:
        for name in remove:
            writer.remove_file(name)
        for name, vecs in add.items():
            chunks = [Chunk(name, i, i + 1, i + 1, f"{name} {i}", 3) for i in range(len(vecs))]
            writer.add_file(SourceFile(Path(name), sha256=name, size=1), chunks, vecs)
        writer.commit()


def _ids_of(store: FaissStore, name: str) -> set[int]:
    return {c.id for c in store.all_chunks() if c.path == name}


def _recall(store: FaissStore, vecs: np.ndarray, ids: np.ndarray, queries: np.ndarray) -> float:
    """recall@10 of the store's dense search against exact search over (ids, vecs)."""
    hits = 0
    for q in queries:
        exact = {int(ids[i]) for i in np.argsort(-(vecs @ q))[:10]}
        hits += len(exact & {i for i, _ in store.dense_search(q, 10)})
    return hits / (10 * len(queries))


def test_auto_is_flat_for_a_small_index(tmp_path: Path) -> None:
    _write(tmp_path, AUTO, {"a.md": clustered_vectors(300, seed=2)})
    store = FaissStore.open(tmp_path)
    assert (store.info.index_spec, store.info.index_type, store.info.search_params) == (
        "auto",
        "Flat",
        "",
    )
    assert isinstance(store.vectors._index, faiss.IndexIDMap2)


def test_chosen_hnsw_is_recorded_used_and_survives_a_removal(tmp_path: Path) -> None:
    a, b = clustered_vectors(400, seed=3), clustered_vectors(400, seed=4)
    _write(tmp_path, "HNSW32", {"a.md": a, "b.md": b})
    store = FaissStore.open(tmp_path)
    assert (store.info.index_type, store.info.index_spec) == ("HNSW32", "HNSW32")
    assert store.info.search_params.startswith("efSearch=")
    assert isinstance(faiss.downcast_index(store.vectors._index.index), faiss.IndexHNSWFlat)
    ids = np.array(sorted(_ids_of(store, "a.md") | _ids_of(store, "b.md")))
    both = np.vstack([a, b])  # chunk ids follow insertion order
    assert store.dense_search(b[7], 1)[0][0] == ids[400 + 7]
    assert _recall(store, both, ids, clustered_vectors(20, seed=9)) >= 0.95
    gone = _ids_of(store, "a.md")
    store.close()

    _write(tmp_path, "HNSW32", {}, remove=("a.md",))  # HNSW cannot remove: rebuilt
    store = FaissStore.open(tmp_path)
    assert len(store.vectors) == store.count_chunks() == 400
    assert store.info.index_type == "HNSW32"
    for q in a[:20]:
        assert not gone & {i for i, _ in store.dense_search(q, 10)}


def test_ivf_keeps_chunk_ids_across_removals_and_additions(tmp_path: Path) -> None:
    """IVF holds the ids itself (an IDMap2 around IVF mis-numbers after a removal)."""
    a, b, c = (clustered_vectors(400, seed=s) for s in (5, 6, 7))
    _write(tmp_path, "IVF16,Flat", {"a.md": a, "b.md": b})  # 800 >= 39 * 16: trained
    _write(tmp_path, "IVF16,Flat", {"c.md": c}, remove=("a.md",))
    store = FaissStore.open(tmp_path)
    assert store.info.index_type == "IVF16,Flat"
    assert store.info.search_params.startswith("nprobe=")
    assert faiss.try_extract_index_ivf(store.vectors._index) is not None
    c_ids = sorted(_ids_of(store, "c.md"))
    for i in (0, 123, 399):
        top = store.dense_search(c[i], 1)[0]
        assert top[0] == c_ids[i] and top[1] == pytest.approx(1.0, abs=1e-5)
    assert store.similarity(c[5], [c_ids[5]])[c_ids[5]] == pytest.approx(1.0, abs=1e-5)


def test_too_few_vectors_to_train_wait_as_flat(tmp_path: Path) -> None:
    _write(tmp_path, "IVF64,Flat", {"a.md": clustered_vectors(200, seed=8)})  # < 39 * 64
    store = FaissStore.open(tmp_path)
    assert (store.info.index_type, store.info.index_spec) == ("Flat", "IVF64,Flat")
    store.close()
    _write(tmp_path, "IVF64,Flat", {"b.md": clustered_vectors(2600, seed=9)})
    assert FaissStore.open(tmp_path).info.index_type == "IVF64,Flat"


def test_auto_switches_type_when_the_index_crosses_the_threshold() -> None:
    vecs = clustered_vectors(4000, centres=50, seed=10)
    ids = np.arange(100, 4100, dtype=np.int64)
    index = VectorIndex.create(DIM)
    index.add(ids[:1000], vecs[:1000])
    info = index.finalize(_info(AUTO), flat_max=2000)
    assert (info.index_type, index.index_type) == ("Flat", "Flat")

    index.add(ids[1000:], vecs[1000:])
    assert index.needs_finalize(info, flat_max=2000)
    info = index.finalize(info, flat_max=2000)
    assert info.index_type == "IVF64,Flat" and info.search_params.startswith("nprobe=")
    assert not index.needs_finalize(info, flat_max=2000)  # no rebuild at the same size
    queries = clustered_vectors(30, centres=50, seed=11)
    hits = 0
    for q in queries:
        exact = {int(ids[i]) for i in np.argsort(-(vecs @ q))[:10]}
        hits += len(exact & {i for i, _ in index.search(q[None, :], 10)[0]})
    assert hits / 300 >= 0.95

    index.remove(ids[:3500].tolist())  # shrinks below half the threshold: exact again
    info = index.finalize(info, flat_max=2000)
    assert info.index_type == "Flat" and len(index) == 500
    assert index.search(vecs[3600][None, :], 1)[0][0][0] == ids[3600]


def test_bad_types_are_refused_in_one_line() -> None:
    with pytest.raises(ConfigError, match="could not parse index string Bogus"):
        check_index_type("Bogus", DIM)
    with pytest.raises(ConfigError, match="multiple of the number of subquantizers"):
        check_index_type("IVF16,PQ7", DIM)
    with pytest.raises(ConfigError, match="ragcli maps chunk ids itself"):
        check_index_type("IDMap2,Flat", DIM)
    check_index_type("HNSW32,SQ8", DIM)


def test_bad_index_type_exits_2_and_leaves_the_index_alone(tmp_path: Path) -> None:
    index = tmp_path / "idx"
    _write(index, AUTO, {"a.md": clustered_vectors(50, seed=12)})
    before = {p.name: p.read_bytes() for p in index.iterdir() if p.is_file()}
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "note.md").write_text("Some text about index types.\n")
    for bad in ("Bogus", "IVF16,PQ7"):
        res = rag("index", "--index", str(index), "--index-type", bad, str(docs))
        assert res.returncode == 2, res.stderr
        assert res.stderr.startswith("rag: error: index type ") and res.stderr.count("\n") == 1
    assert {p.name: p.read_bytes() for p in index.iterdir() if p.is_file()} == before

    config = tmp_path / "config.toml"
    config.write_text('index_type = ""\n')
    res = rag("index", "--index", str(index), str(docs), env={"RAG_CONFIG": str(config)})
    assert res.returncode == 2 and "index_type" in res.stderr


def test_rag_index_records_and_uses_the_chosen_type(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "cricket.md").write_text("Australia won the 2023 Cricket World Cup final.\n")
    (docs / "space.md").write_text("The Moon orbits the Earth about once a month.\n")
    index = tmp_path / "idx"
    res = rag("index", "--index", str(index), "--index-type", "HNSW32", "--json", str(docs))
    assert res.returncode == 0, res.stderr
    store = FaissStore.open(index)
    assert store.info.index_type == "HNSW32"
    assert store.info.search_params.startswith("efSearch=")
    res = rag("search", "--index", str(index), "--retriever", "dense", "--json", "cricket final")
    assert res.returncode == 0, res.stderr
    assert "cricket.md" in json.dumps(json.loads(res.stdout))


def test_another_type_converts_the_index_without_reembedding(tmp_path: Path) -> None:
    a, b = clustered_vectors(300, seed=13), clustered_vectors(300, seed=14)
    _write(tmp_path, "HNSW32", {"a.md": a})
    with FaissStore.writer(tmp_path, _info(AUTO)) as writer:
        assert writer.vectors.needs_finalize(writer.info)  # even with nothing else to do
    _write(tmp_path, AUTO, {"b.md": b})
    store = FaissStore.open(tmp_path)
    assert (store.info.index_type, store.info.index_spec) == ("Flat", "auto")
    a_ids = sorted(_ids_of(store, "a.md"))
    assert store.dense_search(a[42], 1)[0][0] == a_ids[42]  # a's vectors came across
    assert len(store.vectors) == 600
