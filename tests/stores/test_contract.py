"""What every store promises its readers, checked on each store the same way: the FAISS
folder and Milvus Lite, both opened through `open_store` and used as a `Store` only."""

from __future__ import annotations

import dataclasses
import importlib.util
from pathlib import Path

import numpy as np
import pytest

from ragcli.config import load_settings
from ragcli.index.pipeline import build_index
from ragcli.stores.base import Store
from ragcli.stores.factory import open_store

FILES = {
    "bees.md": "# Bees\n\nHoney bees dance to show the hive where the flowers are.\n",
    "tides.md": "# Tides\n\nThe Moon pulls the oceans, and the tides rise and fall twice a day.\n",
    "rivers.md": "# Rivers\n\nRivers carry rain from the hills down to the sea.\n",
}
NEW = "# Quillmoor\n\nThe Quillmoor lighthouse keeper writes in a logbook every night.\n"


def _milvus_ready() -> bool:
    return all(importlib.util.find_spec(m) for m in ("pymilvus", "milvus_lite"))


@pytest.fixture(params=["faiss-folder", "milvus-lite"])
def settings(request, tmp_path: Path):
    if request.param == "milvus-lite":
        if not _milvus_ready():
            pytest.fail("the milvus extra is not installed: pip install 'ragcli[milvus]'")
        return load_settings({"store": f"milvus-lite://{tmp_path / 'idx.db'}"})
    return load_settings({"index_dir": tmp_path / "index"})


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    folder.mkdir()
    for name, text in FILES.items():
        (folder / name).write_text(text)
    return folder


def _store(settings) -> Store:
    return open_store(settings)


def test_reads_what_was_indexed(settings, docs, embedder):
    build_index([docs], settings, embedder=embedder)
    store = _store(settings)
    try:
        assert store.info.embed_model == embedder.info.name
        assert store.info.embed_dim == 384
        assert sorted(Path(p).name for p in store.files()) == sorted(FILES)
        chunks = list(store.all_chunks())
        assert store.count_chunks() == len(chunks) == 3
        by_id = store.chunks([c.id for c in chunks])
        assert {c.id: c.text for c in by_id.values()} == {c.id: c.text for c in chunks}
        tides = next(c for c in chunks if c.path.endswith("tides.md"))
        vector = embedder.embed([tides.text])[0]
        dense = store.dense_search(vector, 3)
        assert dense[0][0] == tides.id and dense[0][1] == pytest.approx(1.0, abs=1e-3)
        assert [s for _, s in dense] == sorted((s for _, s in dense), reverse=True)
        sims = store.similarity(vector, [i for i, _ in dense])
        for i, score in dense:
            assert sims[i] == pytest.approx(score, abs=1e-3)
        lexical = store.lexical_search("Which way do bees dance?", 3)
        assert lexical and by_id[lexical[0][0]].path.endswith("bees.md")
        assert store.lexical_search("the of and", 3) == []  # stopwords only
    finally:
        store.close()


def test_a_page_comes_whole_and_in_order(settings, docs, embedder):
    sections = [f"## Part {i}\n\nThe keeper logs ship number {i} at dawn.\n" for i in range(6)]
    (docs / 'log "1".md').write_text("# Logbook\n\n" + "\n".join(sections))
    settings = dataclasses.replace(settings, chunk_tokens=24, chunk_overlap=0)
    build_index([docs], settings, embedder=embedder)
    store = _store(settings)
    try:
        log = [c for c in store.all_chunks() if c.path.endswith('log "1".md')]
        assert len(log) >= 3
        got = store.page(log[0].path, 100)
        assert [c.ordinal for c in got] == sorted(c.ordinal for c in log)
        assert {c.id: c for c in got} == {c.id: c for c in log}
        assert store.page(log[0].path, 2) == got[:2]
        assert store.page(log[0].path, 0) == [] and store.page("/no/such.md", 8) == []
    finally:
        store.close()


def test_an_open_store_follows_each_commit(settings, docs, embedder):
    build_index([docs], settings, embedder=embedder)
    store = _store(settings)
    try:
        with store.reading() as first:
            assert first == store.generation()
        (docs / "quillmoor.md").write_text(NEW)
        (docs / "rivers.md").unlink()
        build_index([docs], settings, embedder=embedder)
        with store.reading() as second:
            assert second != first and second == store.generation()
            hits = store.lexical_search("Quillmoor lighthouse logbook", 4)
            chunks = store.chunks([i for i, _ in hits])
            assert chunks[hits[0][0]].path.endswith("quillmoor.md")
            vector = embedder.embed([NEW])[0]
            dense = store.dense_search(vector, 10)
            paths = {c.path for c in store.chunks([i for i, _ in dense]).values()}
            assert len(dense) == 3 and not any(p.endswith("rivers.md") for p in paths)
            assert store.similarity(vector, [dense[0][0]])[dense[0][0]] > 0.9
    finally:
        store.close()


def test_generation_names_the_commit(settings, docs, embedder):
    build_index([docs], settings, embedder=embedder)
    store = _store(settings)
    try:
        before = store.generation()
        build_index([docs], settings, embedder=embedder)  # nothing changed: no commit
        assert store.generation() == before
        (docs / "bees.md").write_text(FILES["bees.md"] + "\nThey also fan the hive to cool it.\n")
        build_index([docs], settings, embedder=embedder)
        assert store.generation() != before
    finally:
        store.close()


def test_vectors_are_unit_length(settings, docs, embedder):
    """Scores are cosines in every store: the "I don't know" threshold depends on it."""
    build_index([docs], settings, embedder=embedder)
    store = _store(settings)
    try:
        q = embedder.embed(["Why do the tides rise?"])[0]
        assert np.linalg.norm(q) == pytest.approx(1.0, abs=1e-4)
        for _, score in store.dense_search(q, 3):
            assert -1.0 <= score <= 1.0 + 1e-4
    finally:
        store.close()
