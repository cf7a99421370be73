import itertools
from pathlib import Path

import pytest

from ragcli.chunking import TokenCounter, chunk_document
from ragcli.ingest import Document, read_document
from ragcli.models import embedding_model

CORPORA = Path(__file__).resolve().parent.parent / "corpora"


@pytest.fixture(scope="module")
def counter() -> TokenCounter:
    return TokenCounter(embedding_model().path / "tokenizer.json")


def _doc(text: str) -> Document:
    return Document(Path("/x.txt"), text, list(range(1, text.count("\n") + 2)))


def _n_tokens(counter: TokenCounter, text: str) -> int:
    return len(counter.encode([text])[0])


def test_chunks_respect_budget_and_cover_every_line(counter):
    doc = read_document(CORPORA / "cricket" / "cricket-world-cup-2023.md")
    chunks = chunk_document(doc, counter, max_tokens=120, overlap=30)
    assert len(chunks) > 3
    src = doc.text.split("\n")
    covered = set()
    for c in chunks:
        assert _n_tokens(counter, c.text) <= 120 + 2  # joining lines may merge a token or two
        assert c.text.split("\n")[0] == src[c.start_line - 1].strip()
        assert c.text.split("\n")[-1] == src[c.end_line - 1].strip()
        covered.update(range(c.start_line, c.end_line + 1))
    content = {i + 1 for i, line in enumerate(src) if line.strip()}
    assert content <= covered


def test_consecutive_chunks_overlap(counter):
    doc = read_document(CORPORA / "science" / "photosynthesis.txt")
    chunks = chunk_document(doc, counter, max_tokens=100, overlap=40)
    for a, b in itertools.pairwise(chunks):
        assert b.start_line <= a.end_line + 1
        assert b.start_line > a.start_line  # always moves forward


def test_long_line_is_split_into_pieces_with_overlap(counter):
    words = " ".join(f"word{i}" for i in range(600))
    chunks = chunk_document(_doc(words), counter, max_tokens=100, overlap=20)
    assert len(chunks) >= 5
    assert all(c.start_line == c.end_line == 1 for c in chunks)
    assert all(_n_tokens(counter, c.text) <= 102 for c in chunks)
    # the last words of one piece open the next
    assert chunks[1].text.split()[0] in chunks[0].text.split()
    assert "word599" in chunks[-1].text


def test_prefers_paragraph_breaks(counter):
    para = "The quick brown fox jumps over the lazy dog again and again. " * 4
    text = "\n\n".join([para.strip()] * 6)
    chunks = chunk_document(_doc(text), counter, max_tokens=120, overlap=0)
    for c in chunks:
        assert c.text.endswith("again.")  # ends where a paragraph ends


def test_empty_document_gives_no_chunks(counter):
    assert chunk_document(_doc("\n\n  \n"), counter) == []
