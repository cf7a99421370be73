"""The library face: one `Rag` per index, following every commit of `rag index`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ragcli import Rag, Retriever
from ragcli.config import load_settings
from ragcli.errors import IndexLockedError, IndexMissingError
from ragcli.index.pipeline import build_index

from .conftest import RAG

BEES = "# Bees\n\nHoney bees dance to show the hive where the flowers are.\n"
LIGHTHOUSE = "# Quillmoor\n\nThe Quillmoor lighthouse keeper writes in a logbook every night.\n"
QUERY = "Quillmoor lighthouse keeper logbook"


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "bees.md").write_text(BEES)
    return folder


def test_open_readers_see_a_file_added_then_removed(tmp_path, docs, embedder):
    """The reproduction of the issue: a Retriever opened before `rag index` added a file
    failed in FAISS ("key not found"); now it, and a Rag, find the new passage."""
    settings = load_settings({"index_dir": tmp_path / "index"})
    build_index([docs], settings, embedder=embedder)
    retriever = Retriever(settings)
    rag = Rag(settings, preload=False)
    try:
        assert [h.chunk.path for h in retriever.search(QUERY).hits] == [str(docs / "bees.md")]
        assert len(rag.search(QUERY).hits) == 1
        (docs / "lighthouse.md").write_text(LIGHTHOUSE)
        build_index([docs], settings, embedder=embedder)
        for reader in (retriever, rag):
            for mode in ("hybrid", "dense", "bm25"):
                found = reader.search(QUERY, retriever=mode)
                assert found.hits[0].chunk.path == str(docs / "lighthouse.md"), mode
        assert rag.commits_followed == 1
        (docs / "lighthouse.md").unlink()
        build_index([docs], settings, embedder=embedder, rebuild=True)
        assert [h.chunk.path for h in rag.search(QUERY).hits] == [str(docs / "bees.md")]
        assert [h.chunk.path for h in retriever.search(QUERY).hits] == [str(docs / "bees.md")]
        assert rag.commits_followed == 2
    finally:
        retriever.close()
        rag.close()


def test_one_json_shape_for_search_results(corpus_index):
    with Rag.open(corpus_index, top_k=2) as rag:
        result = rag.search("Apollo 11 recovery ship")
        out = result.as_dict()
    assert set(out) == {"query", "results", "timings"}
    assert [r["rank"] for r in out["results"]] == [1, 2]
    first = out["results"][0]
    assert first["citation"] == result.hits[0].citation
    assert first["path"].endswith("apollo-11.md") and first["text"] == result.hits[0].chunk.text


def test_an_engine_passed_in_answers_and_stays_the_callers(corpus_index):
    """The engine seam: a loaded engine answers through Rag, and closing Rag leaves it open."""
    from ragcli.llm.factory import open_engine

    settings = load_settings({"index_dir": corpus_index})
    engine = open_engine(settings)
    try:
        with Rag(settings, engine=engine) as rag:
            answer = rag.ask("Which ship picked up the Apollo 11 crew after splashdown?")
            assert answer.model == engine.model.name
            assert answer.timings.prompt_tokens > 0  # the model ran: no answer cache here
        again = engine.generate(
            _prompt(engine), max_tokens=4, use_cache=False
        )  # still usable: the caller owns it
        assert again.timings.prompt_tokens > 0
    finally:
        engine.close()


def _prompt(engine):
    from ragcli.answer.prompt import engine_prompt

    return engine_prompt(
        "When does the ferry leave?", ["The ferry leaves Quillmoor at nine."], engine
    )


def test_an_index_without_its_first_commit_is_not_there_yet(tmp_path, docs):
    """While the first `rag index` of a folder runs, a reader is told there is no index yet
    (it once read the empty metadata table: "IndexInfo missing fields"), and a second
    `rag index` says in one line that another run holds the index."""
    from ragcli.stores.base import IndexInfo
    from ragcli.stores.faiss_store import FaissStore

    root = tmp_path / "index"
    info = IndexInfo.for_build("sentence-transformers/all-MiniLM-L6-v2", 384, 200, 40)
    with FaissStore.writer(root, info):
        assert (root / "index.sqlite").is_file()  # created, with no commit in it
        with pytest.raises(IndexMissingError, match="has not committed"):
            FaissStore.open(root)
        with pytest.raises(IndexLockedError), FaissStore.writer(root, info):
            pass
        second = subprocess.run(
            [str(RAG), "index", str(docs), "--index", str(root), "-q"],
            capture_output=True,
            text=True,
            timeout=300,
        )
        search = subprocess.run(
            [str(RAG), "search", "bees", "--index", str(root), "--no-server"],
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert second.returncode == 3, second.stderr
    assert second.stderr.count("\n") == 1 and "another `rag index`" in second.stderr
    assert search.returncode == 3, search.stderr
    assert search.stderr.count("\n") == 1 and "yet" in search.stderr


def test_chat_follows_a_commit_between_two_questions(tmp_path, docs, embedder):
    settings = load_settings({"index_dir": tmp_path / "index"})
    build_index([docs], settings, embedder=embedder)
    chat = subprocess.Popen(
        [str(RAG), "chat", "--index", str(tmp_path / "index"), "--no-server", "-k", "1"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert chat.stdin and chat.stderr
        chat.stdin.write(f"What does the {QUERY} do?\n")
        chat.stdin.flush()
        _wait_for_timing_line(chat.stderr)  # the first answer is out
        (docs / "lighthouse.md").write_text(LIGHTHOUSE)
        build_index([docs], settings, embedder=embedder)
        out, err = chat.communicate(f"What does the {QUERY} do?\n", timeout=300)
    finally:
        chat.kill()
    assert chat.returncode == 0, err
    first, second = out.split("\n[1] ", 2)[1:3]
    assert first.startswith("docs/bees.md") or "bees.md" in first.splitlines()[0]
    assert "lighthouse.md" in second.splitlines()[0]


def _wait_for_timing_line(stderr) -> None:
    """Read the chat's stderr up to the figures printed after an answer."""
    for line in iter(stderr.readline, ""):
        if line.startswith(("prompt ", "no model call")):
            return
    raise AssertionError("the chat ended before its first answer")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__]))
