"""The Milvus store, against Milvus Lite for real: the same retrieval as the FAISS
store, incremental sync, crash recovery, refusals and the missing-extra hint."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from ragcli.answer.retrieval import Retriever
from ragcli.config import load_settings
from ragcli.errors import ConfigError, IndexLockedError, IndexMismatchError, IndexMissingError
from ragcli.index.pipeline import build_index
from ragcli.stores.factory import open_store

from ..conftest import CORPORA, ROOT

pytest.importorskip("pymilvus", reason="needs the milvus extra: pip install 'ragcli[milvus]'")
pytest.importorskip("milvus_lite", reason="needs the milvus extra: pip install 'ragcli[milvus]'")

# The demo corpus questions (corpora/questions.jsonl).
QUESTIONS = [
    "Who won the 2023 Cricket World Cup?",
    "Who was player of the final in the 2023 World Cup?",
    "Who scored the most runs in the 2023 Cricket World Cup?",
    "Who took the most wickets at the 2023 Cricket World Cup?",
    "Who scored 201 not out against Afghanistan?",
    "Who won the first Cricket World Cup in 1975?",
    "Who captained India to the 1983 World Cup title?",
    "Who won the 1996 Cricket World Cup?",
    "Where in plant cells does photosynthesis take place?",
    "What gas is released as a by-product of photosynthesis?",
    "Which enzyme fixes carbon dioxide in the Calvin cycle?",
    "How long is the Rhine?",
    "Into which lake does the Alpine Rhine flow?",
    "Where does the Rhine meet the sea?",
    "In which city did Gutenberg develop his printing press?",
    "Who set up the first printing press in England?",
    "When did Apollo 11 launch?",
    "Where did the Apollo 11 lunar module land?",
    "Who stayed in lunar orbit during Apollo 11?",
    "What was the Apollo 11 command module called?",
]


def _lite(tmp: Path, name: str = "idx.db") -> str:
    return f"milvus-lite://{tmp / name}"


@pytest.fixture(scope="module")
def both(tmp_path_factory, embedder, corpus_index):
    """The demo corpus in FAISS (the session's index) and in Milvus Lite."""
    milvus = load_settings({"store": _lite(tmp_path_factory.mktemp("milvus"))})
    report = build_index([CORPORA], milvus, embedder=embedder)
    return load_settings({"index_dir": corpus_index}), milvus, report


class _Batched:
    """The session model's vectors for QUESTIONS, embedded in one batch up front
    (one query at a time costs ~0.2 s each with torch on this machine)."""

    def __init__(self, embedder) -> None:
        self._vectors = dict(zip(QUESTIONS, embedder.embed(QUESTIONS), strict=True))

    def embed(self, texts, progress=None):
        import numpy as np

        return np.vstack([self._vectors[t] for t in texts])


@pytest.fixture(scope="module")
def questions_embedder(embedder):
    return _Batched(embedder)


def _search(settings, embedder, mode: str, k: int = 4):
    r = Retriever(settings, embedder=embedder)
    try:
        return [r.search(q, k, retriever=mode).hits for q in QUESTIONS]
    finally:
        r.close()


def test_dense_results_match_faiss(both, questions_embedder):
    embedder = questions_embedder
    faiss, milvus, report = both
    assert report.chunks_total > 20 and report.files_total == 6
    for f_hits, m_hits in zip(
        _search(faiss, embedder, "dense"), _search(milvus, embedder, "dense"), strict=True
    ):
        assert [(h.chunk.path, h.chunk.start_line, h.chunk.text) for h in m_hits] == [
            (h.chunk.path, h.chunk.start_line, h.chunk.text) for h in f_hits
        ]
        for f, m in zip(f_hits, m_hits, strict=True):
            assert m.score == pytest.approx(f.score, abs=1e-4)
            assert m.similarity == pytest.approx(f.similarity, abs=1e-4)
            assert m.chunk == type(m.chunk)(**{**vars(f.chunk), "id": m.chunk.id})


def test_hybrid_and_bm25_find_the_same_passages_mostly(both, questions_embedder):
    """BM25 differs a little (Milvus does not stem; other k1): most top-4 sets agree."""
    faiss, milvus, _ = both
    for mode, floor in (("bm25", 0.6), ("hybrid", 0.75)):
        f_runs = _search(faiss, questions_embedder, mode)
        m_runs = _search(milvus, questions_embedder, mode)
        shared = total = 0
        for f_hits, m_hits in zip(f_runs, m_runs, strict=True):
            f_set = {(h.chunk.path, h.chunk.ordinal) for h in f_hits}
            shared += len(f_set & {(h.chunk.path, h.chunk.ordinal) for h in m_hits})
            total += len(f_set)
            assert m_hits, mode  # every question finds something
        assert shared / total >= floor, (mode, shared, total)


def test_reader_counts_and_files(both):
    faiss, milvus, report = both
    f, m = open_store(faiss), open_store(milvus)
    try:
        assert m.files() == f.files()
        assert m.count_chunks() == f.count_chunks() == report.chunks_total
        assert [(c.path, c.ordinal, c.text) for c in m.all_chunks()] == [
            (c.path, c.ordinal, c.text) for c in f.all_chunks()
        ]
        assert m.info.embed_model == f.info.embed_model
    finally:
        f.close()
        m.close()


@pytest.fixture
def docs(tmp_path):
    d = tmp_path / "docs"
    d.mkdir()
    (d / "otters.md").write_text("# Otters\n\nSea otters crack shellfish on stones.\n")
    (d / "bees.txt").write_text("Honey bees dance to tell their sisters where flowers are.\n")
    (d / "moon.txt").write_text("The Moon's gravity raises the tides of the oceans.\n")
    return d


def _state(settings):
    store = open_store(settings)
    try:
        return store.files(), store.count_chunks(), [c.text for c in store.all_chunks()]
    finally:
        store.close()


def test_incremental_sync(tmp_path, docs, embedder):
    s = load_settings({"store": _lite(tmp_path)})
    r1 = build_index([docs], s, embedder=embedder)
    assert (r1.added, r1.chunks_total, r1.files_total) == (3, 3, 3)
    r2 = build_index([docs], s, embedder=embedder)
    assert (r2.unchanged, r2.chunks_embedded) == (3, 0)

    (docs / "bees.txt").write_text("Bumblebees fly in cold weather by shivering.\n")
    (docs / "otters.md").unlink()
    (docs / "volcano.rst").write_text("Volcanoes\n=========\n\nMagma at the surface is lava.\n")
    r3 = build_index([docs], s, embedder=embedder)
    assert (r3.added, r3.updated, r3.removed, r3.unchanged) == (1, 1, 1, 1)
    assert (r3.chunks_total, r3.files_total) == (3, 3)

    files, n, texts = _state(s)
    assert sorted(Path(p).name for p in files) == ["bees.txt", "moon.txt", "volcano.rst"]
    assert n == 3 and len(texts) == 3
    joined = " ".join(texts)
    assert "shivering" in joined and "lava" in joined
    assert "dance" not in joined and "otters" not in joined  # no stale chunks
    r = Retriever(s, embedder=embedder)
    try:
        assert "shivering" in r.search("How do bees keep warm?", 1).hits[0].chunk.text
        assert all("dance" not in h.chunk.text for h in r.search("bees dance", 3).hits)
    finally:
        r.close()


_CRASH = """
import os, sys
from pathlib import Path
from ragcli.config import load_settings
from ragcli.index.pipeline import build_index
from ragcli.stores import milvus_store

if sys.argv[2] == "after-commit-point":
    # die after the state row names the new generation, before old rows go
    def die(self, paths, gen):
        os._exit(9)
    milvus_store.MilvusWriter._delete_superseded = die
else:
    # die after staging the changes, before the commit point
    milvus_store.MilvusWriter.commit = lambda self: os._exit(9)
settings = load_settings({"store": sys.argv[1]})
build_index([Path(sys.argv[3])], settings)  # ONNX Runtime: torch-free, quick to start
"""


@pytest.mark.parametrize("when", ["before-commit-point", "after-commit-point"])
def test_crash_never_lists_a_file_without_its_chunks(tmp_path, docs, embedder, when):
    s = load_settings({"store": _lite(tmp_path)})
    build_index([docs], s, embedder=embedder)
    (docs / "bees.txt").write_text("Bumblebees fly in cold weather by shivering.\n")
    (docs / "otters.md").unlink()
    proc = subprocess.run(
        [sys.executable, "-c", _CRASH, s.store, when, str(docs)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 9, proc.stderr

    files, n, texts = _state(s)
    names = sorted(Path(p).name for p in files)
    joined = " ".join(texts)
    if when == "before-commit-point":  # the old index, whole
        assert names == ["bees.txt", "moon.txt", "otters.md"]
        assert "dance" in joined and "shivering" not in joined and n == 3
    else:  # the new index, perhaps with old rows beside it until the next writer
        assert names == ["bees.txt", "moon.txt"]
        assert "shivering" in joined
    r = build_index([docs], s, embedder=embedder)  # the next run tidies up
    files, n, texts = _state(s)
    assert sorted(Path(p).name for p in files) == ["bees.txt", "moon.txt"]
    assert n == r.chunks_total == 2 and len(texts) == 2
    assert not any("dance" in t or "otters" in t for t in texts)


def test_mismatch_refused_and_rebuild(tmp_path, docs, embedder):
    s = load_settings({"store": _lite(tmp_path)})
    build_index([docs], s, embedder=embedder)
    other = load_settings({"store": s.store, "chunk_tokens": 100})
    with pytest.raises(IndexMismatchError, match="--rebuild"):
        build_index([docs], other, embedder=embedder)
    r = build_index([docs], other, rebuild=True, embedder=embedder)
    assert (r.added, r.chunks_total) == (3, 3)
    store = open_store(other)
    try:
        assert store.info.chunk_tokens == 100
    finally:
        store.close()


def test_missing_index_and_bad_urls(tmp_path):
    with pytest.raises(IndexMissingError, match="rag index --store"):
        open_store(load_settings({"store": _lite(tmp_path, "none.db")}))
    assert not (tmp_path / "none.db").exists()  # a reader creates nothing
    for bad in ("milvus-lite://idx", "milvus://", "milvus://h:1/9bad", "sqlite://x", "x.db"):
        with pytest.raises(ConfigError):
            load_settings({"store": bad})
    ok = load_settings({"store": "milvus://db.example:19531/docs"})
    assert ok.store == "milvus://db.example:19531/docs"


def test_store_from_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("RAG_STORE", _lite(tmp_path))
    assert load_settings().store == _lite(tmp_path)
    monkeypatch.setenv("RAG_STORE", "redis://x")
    with pytest.raises(ConfigError):
        load_settings()


_HOLD = """
import sys
from ragcli.config import load_settings
from ragcli.stores.factory import open_store
store = open_store(load_settings({"store": sys.argv[1]}))
print("open", flush=True)
sys.stdin.read()
store.close()
"""


def test_lite_file_used_by_another_process(tmp_path, docs, embedder):
    s = load_settings({"store": _lite(tmp_path)})
    build_index([docs], s, embedder=embedder)
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD, s.store],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "open"
        with pytest.raises(IndexLockedError, match="another process"):
            open_store(s)
        with pytest.raises(IndexLockedError):
            build_index([docs], s, embedder=embedder)
    finally:
        holder.communicate("", timeout=60)
    open_store(s).close()  # free again once the other process ends


def test_missing_extra_gives_a_one_line_hint(tmp_path):
    code = textwrap.dedent(
        """
        import sys
        sys.modules["pymilvus"] = None  # as if the extra were not installed
        from ragcli.cli import main
        sys.argv = ["rag", "search", "--store", sys.argv[1], "anything"]
        main()
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, _lite(tmp_path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ},
        timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1
    assert "pip install 'ragcli[milvus]'" in proc.stderr


def test_faiss_path_does_not_import_pymilvus(corpus_index):
    code = textwrap.dedent(
        """
        import sys
        from ragcli.config import load_settings
        from ragcli.stores.factory import open_store
        open_store(load_settings({"index_dir": sys.argv[1]})).close()
        assert "pymilvus" not in sys.modules and "milvus_lite" not in sys.modules
        """
    )
    subprocess.run([sys.executable, "-c", code, str(corpus_index)], check=True, timeout=120)


@pytest.fixture
def milvus_server(tmp_path):
    """A Milvus-protocol server (Milvus Lite's own), so milvus:// is tested for real."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    args = ["--data-dir", str(tmp_path / "srv"), "--host", "127.0.0.1", "--port", str(port)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "milvus_lite", "server", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert proc.poll() is None and time.monotonic() < deadline, "server did not start"
            time.sleep(0.2)
        yield f"milvus://127.0.0.1:{port}/docs"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


_HOLD_WRITER = """
import sys
from ragcli.config import load_settings
from ragcli.stores.base import IndexInfo
from ragcli.stores.factory import store_writer
info = IndexInfo.for_build(
    "sentence-transformers/all-MiniLM-L6-v2", 384, 200, 40,
    embed_backend=sys.argv[2], embed_quantization=sys.argv[3],
)  # fmt: skip
with store_writer(load_settings({"store": sys.argv[1]}), info) as writer:
    print("writing", flush=True)
    sys.stdin.read()
"""


def test_server_store_shared_by_processes(tmp_path, docs, embedder, milvus_server):
    s = load_settings({"store": milvus_server})
    r = build_index([docs], s, embedder=embedder)
    assert (r.added, r.chunks_total) == (3, 3)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            _HOLD_WRITER,
            milvus_server,
            embedder.backend,
            embedder.quantization,
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "writing"
        with pytest.raises(IndexLockedError, match="being written by another"):
            build_index([docs], s, embedder=embedder)
        store = open_store(s)  # readers are welcome meanwhile
        try:
            assert store.count_chunks() == 3 and len(store.files()) == 3
        finally:
            store.close()
    finally:
        holder.communicate("", timeout=60)
    (docs / "moon.txt").unlink()
    r = build_index([docs], s, embedder=embedder)
    assert (r.removed, r.unchanged, r.chunks_total) == (1, 2, 2)
    retriever = Retriever(s, embedder=embedder)
    try:
        assert "otters" in retriever.search("otters and shellfish", 1).hits[0].chunk.text
    finally:
        retriever.close()
