"""Incremental indexing, refusal of mismatched indexes, and commits that are all or nothing."""

import json
import sqlite3

import pytest

from ragcli.answer.retrieval import Retriever
from ragcli.config import load_settings
from ragcli.errors import IndexCorruptError, IndexMismatchError, IndexMissingError, UsageError
from ragcli.index.pipeline import build_index
from ragcli.stores.faiss_store import FaissStore


@pytest.fixture
def docs(tmp_path):
    d = tmp_path / "docs"
    d.mkdir()
    (d / "otters.md").write_text(
        "# Otters\n\nSea otters float on their backs and crack shellfish on stones.\n"
    )
    (d / "bees.txt").write_text("Honey bees dance to tell their sisters where the flowers are.\n")
    return d


def _settings(tmp_path, **kw):
    return load_settings({"index_dir": tmp_path / "idx", **kw})


def _top_path(settings, embedder, query):
    r = Retriever(settings, embedder=embedder)
    try:
        return r.search(query, 1).hits[0].chunk
    finally:
        r.close()


def test_add_change_delete(tmp_path, docs, embedder):
    s = _settings(tmp_path)
    r1 = build_index([docs], s, embedder=embedder)
    assert (r1.added, r1.updated, r1.removed, r1.unchanged) == (2, 0, 0, 0)

    r2 = build_index([docs], s, embedder=embedder)
    assert (r2.added, r2.updated, r2.removed, r2.unchanged, r2.chunks_embedded) == (0, 0, 0, 2, 0)

    (docs / "bees.txt").write_text(
        "Bumblebees can fly in cold weather by shivering their muscles.\n"
    )
    (docs / "volcano.rst").write_text(
        "Volcanoes\n=========\n\nMagma that reaches the surface is called lava.\n"
    )
    r3 = build_index([docs], s, embedder=embedder)
    assert (r3.added, r3.updated, r3.removed, r3.unchanged) == (1, 1, 0, 1)
    chunk = _top_path(s, embedder, "How do bees stay warm?")
    assert "shivering" in chunk.text  # the new text replaced the old one
    store = FaissStore.open(s.index_dir)
    assert not any("dance" in c.text for c in store.all_chunks())
    store.close()

    (docs / "otters.md").unlink()
    r4 = build_index([docs], s, embedder=embedder)
    assert (r4.added, r4.updated, r4.removed, r4.unchanged) == (0, 0, 1, 2)
    store = FaissStore.open(s.index_dir)
    assert not any("otters" in p for p in store.files())
    assert len(store.vectors) == store.count_chunks() == r4.chunks_total
    store.close()


def test_binary_and_odd_files_are_reported_not_fatal(tmp_path, docs, embedder):
    (docs / "image.txt").write_bytes(b"\x89PNG\x00\x00binary")
    (docs / "old.txt").write_bytes("Na\xefve r\xe9sum\xe9 of the caf\xe9".encode("cp1252"))
    report = build_index([docs], _settings(tmp_path), embedder=embedder)
    assert report.added == 3
    assert [s["path"].endswith("image.txt") for s in report.skipped] == [True]
    assert "binary" in report.skipped[0]["reason"]
    assert any(w["path"].endswith("old.txt") for w in report.warnings)


def test_missing_and_empty_folders_are_usage_errors(tmp_path, embedder):
    with pytest.raises(UsageError, match="no such file"):
        build_index([tmp_path / "nowhere"], _settings(tmp_path), embedder=embedder)
    (tmp_path / "empty").mkdir()
    with pytest.raises(UsageError, match="no documents"):
        build_index([tmp_path / "empty"], _settings(tmp_path), embedder=embedder)


def test_index_built_with_another_model_is_refused(tmp_path, docs, embedder):
    s = _settings(tmp_path)
    build_index([docs], s, embedder=embedder)
    db = sqlite3.connect(s.index_dir / "index.sqlite")
    with db:
        db.execute(
            "UPDATE meta SET value = ? WHERE key = 'info.embed_model'",
            (json.dumps("BAAI/bge-base-en"),),
        )
        db.execute("UPDATE meta SET value = '768' WHERE key = 'info.embed_dim'")
    db.close()
    with pytest.raises(IndexMismatchError, match="bge-base-en"):
        build_index([docs], s, embedder=embedder)
    # --rebuild is the way out
    report = build_index([docs], s, rebuild=True, embedder=embedder)
    assert report.added == 2


def test_asking_with_another_embedding_model_is_refused(tmp_path, docs, embedder):
    import shutil

    from ragcli.models import embedding_model

    s = _settings(tmp_path)
    build_index([docs], s, embedder=embedder)
    other = tmp_path / "other-model"
    shutil.copytree(embedding_model().path, other)
    with pytest.raises(IndexMismatchError, match="built with embedding model"):
        Retriever(s.replace(embed_model=str(other)))


def test_failed_update_leaves_previous_index_intact(tmp_path, docs, embedder):
    s = _settings(tmp_path)
    build_index([docs], s, embedder=embedder)
    before = sorted(FaissStore.open(s.index_dir).files().items())

    class Exploding:
        info = embedder.info
        backend, quantization = embedder.backend, embedder.quantization

        def embed(self, texts, progress=None):
            raise RuntimeError("power cut")

    (docs / "bees.txt").write_text("Something entirely new about wasps.\n")
    with pytest.raises(RuntimeError, match="power cut"):
        build_index([docs], s, embedder=Exploding())
    store = FaissStore.open(s.index_dir)
    assert sorted(store.files().items()) == before
    assert len(store.vectors) == store.count_chunks()


def test_missing_and_corrupt_indexes_give_clear_errors(tmp_path, docs, embedder):
    s = _settings(tmp_path)
    with pytest.raises(IndexMissingError, match="rag index"):
        FaissStore.open(s.index_dir)
    build_index([docs], s, embedder=embedder)
    for f in s.index_dir.glob("vectors-*.faiss"):
        f.write_bytes(b"garbage")
    with pytest.raises(IndexCorruptError, match="--rebuild"):
        _ = FaissStore.open(s.index_dir).vectors
    assert build_index([docs], s, rebuild=True, embedder=embedder).added == 2


def test_search_finds_the_right_passage(corpus_index, embedder):
    r = Retriever(load_settings({"index_dir": corpus_index}), embedder=embedder)
    hits = r.search("Who won the 2023 Cricket World Cup?", 4).hits
    r.close()
    assert hits[0].chunk.path.endswith("cricket-world-cup-2023.md")
    assert any(
        "Australia won the 2023 Cricket World Cup" in " ".join(h.chunk.text.split()) for h in hits
    )
    assert [h.rank for h in hits] == [1, 2, 3, 4]
    assert hits[0].score >= hits[-1].score


@pytest.mark.parametrize("mode", ["dense", "bm25", "hybrid"])
def test_every_retriever_finds_the_passage(corpus_index, embedder, mode):
    r = Retriever(load_settings({"index_dir": corpus_index, "retriever": mode}), embedder=embedder)
    hits = r.search("Which enzyme fixes carbon dioxide in the Calvin cycle?", 3).hits
    r.close()
    assert hits[0].chunk.path.endswith("photosynthesis.txt")
    assert any("RuBisCO" in h.chunk.text for h in hits)
    assert all(-1.0 <= h.similarity <= 1.0 for h in hits)


def test_bm25_index_follows_updates(tmp_path, docs, embedder):
    s = _settings(tmp_path, retriever="bm25")
    build_index([docs], s, embedder=embedder)
    (docs / "bees.txt").write_text("Carpenter bees bore tunnels into soft timber.\n")
    build_index([docs], s, embedder=embedder)
    r = Retriever(s, embedder=embedder)
    assert r.search("timber tunnels", 1).hits[0].chunk.path.endswith("bees.txt")
    assert r.search("dance sisters flowers", 5).hits == []  # the old text is gone
    r.close()


def _chunk_rows(settings) -> list[tuple]:
    store = FaissStore.open(settings.index_dir)
    try:
        return sorted(
            (c.path, c.ordinal, c.start_line, c.end_line, c.text, c.heading)
            for c in store.all_chunks()
        )
    finally:
        store.close()


def test_parallel_parsing_gives_the_same_index(tmp_path, embedder):
    """Worker processes parse exactly what this process would."""
    from ragcli.index.pipeline import POOL_MIN_FILES

    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(POOL_MIN_FILES + 4):
        sections = "\n\n".join(f"## Part {j}\n\nNote {i}.{j} about item {i}." for j in range(5))
        (docs / f"note-{i:02d}.md").write_text(f"# Note {i}\n\n{sections}\n")
    here = _settings(tmp_path / "a")
    pool = _settings(tmp_path / "b")
    build_index([docs], here, embedder=embedder, workers=0)
    build_index([docs], pool, embedder=embedder, workers=1)
    rows = _chunk_rows(here)
    assert rows == _chunk_rows(pool)
    assert {r[5] for r in rows} >= {"Note 3", "Note 11"}


def test_large_text_file_is_streamed(tmp_path, embedder):
    """A file over the streaming limit is indexed block by block, with the same
    line numbers and headings a whole read gives, and is unchanged on a re-run."""
    docs = tmp_path / "docs"
    docs.mkdir()
    lines = []
    for i in range(60):
        lines += [f"## Topic {i}", ""] + [
            f"Fact {i}.{j}: item {i} weighs {j} grams." for j in range(12)
        ]
        lines.append("")
    big = docs / "big.md"
    big.write_text("# Catalogue\n\n" + "\n".join(lines))
    s = _settings(tmp_path)
    report = build_index([docs], s, embedder=embedder, stream_bytes=10_000)
    assert report.added == 1 and report.chunks_embedded > 20
    source = big.read_text().split("\n")
    rows = _chunk_rows(s)
    for _, _, start, _, text, heading in rows:
        assert text.splitlines()[0] == source[start - 1].strip()
        assert heading.startswith("Catalogue")
    assert any(h == "Catalogue › Topic 41" for *_, h in rows)
    again = build_index([docs], s, embedder=embedder, stream_bytes=10_000)
    assert (again.unchanged, again.chunks_embedded) == (1, 0)
    assert _top_path(s, embedder, "How much does item 41 weigh?").heading.endswith("Topic 41")


def test_search_results_carry_the_heading(tmp_path, docs, embedder):
    s = _settings(tmp_path)
    build_index([docs], s, embedder=embedder)
    r = Retriever(s, embedder=embedder)
    try:
        hit = r.search("sea otters shellfish", 1).hits[0]
    finally:
        r.close()
    assert hit.chunk.heading == "Otters"
    assert hit.citation.endswith(":1-3 — Otters")
    assert hit.as_dict()["heading"] == "Otters"


def _text_version(settings) -> int:
    with sqlite3.connect(settings.index_dir / "index.sqlite") as db:
        row = db.execute("SELECT value FROM meta WHERE key = 'info.text_version'").fetchone()
    return json.loads(row[0]) if row else 1


def test_passages_made_by_an_older_reader_are_read_again(tmp_path, docs, embedder):
    from ragcli.stores.base import TEXT_VERSION

    s = _settings(tmp_path)
    build_index([docs], s, embedder=embedder)
    assert _text_version(s) == TEXT_VERSION
    # An index from before the version was recorded: its passages count as version 1.
    with sqlite3.connect(s.index_dir / "index.sqlite") as db:
        db.execute("DELETE FROM meta WHERE key = 'info.text_version'")

    # Indexing one of its folders re-reads that folder, but the rest is still old text.
    (docs / "more").mkdir()
    (docs / "more" / "owls.md").write_text("Owls turn their heads far round to look behind.\n")
    part = build_index([docs / "more"], s, embedder=embedder)
    assert part.added == 1 and part.warnings
    assert _text_version(s) == 1

    whole = build_index([docs], s, embedder=embedder)
    assert (whole.added, whole.updated, whole.unchanged) == (0, 3, 0)
    assert _text_version(s) == TEXT_VERSION
    again = build_index([docs], s, embedder=embedder)
    assert (again.updated, again.unchanged, again.warnings) == (0, 3, [])
    assert _top_path(s, embedder, "where do owls look").path.endswith("owls.md")
