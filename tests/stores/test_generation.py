"""A reader can tell that the index moved under it: `generation()` is read afresh and
changes on every commit, whichever store holds the index."""

from __future__ import annotations

import pytest

from ragcli.config import load_settings
from ragcli.index.pipeline import build_index
from ragcli.stores.factory import open_store


def _settings(kind: str, tmp_path):
    if kind == "milvus-lite":
        pytest.importorskip("milvus_lite")
        return load_settings({"store": f"milvus-lite://{tmp_path / 'idx.db'}"})
    return load_settings({"index_dir": tmp_path / "idx"})


@pytest.mark.parametrize("kind", ["folder", "milvus-lite"])
def test_generation_changes_on_commit_only(kind, tmp_path, embedder):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "bees.txt").write_text("Honey bees dance to tell their sisters where flowers are.\n")
    s = _settings(kind, tmp_path)
    build_index([docs], s, embedder=embedder)
    store = open_store(s)
    try:
        first = store.generation()
        assert first
        build_index([docs], s, embedder=embedder)  # nothing changed: nothing committed
        assert store.generation() == first
        (docs / "moon.txt").write_text("The Moon's gravity raises the tides of the oceans.\n")
        build_index([docs], s, embedder=embedder)
        second = store.generation()  # the open reader sees the new commit
        assert second and second != first
    finally:
        store.close()
