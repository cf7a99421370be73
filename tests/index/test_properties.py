"""Readers, parsers and the chunker over arbitrary bytes and text (Hypothesis).

Whatever a file holds, reading it either gives a Document or raises the
ValueError the indexer turns into a skipped file; passages never point
outside their file, and heading paths are well formed.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ragcli.errors import RagError
from ragcli.index.chunking import TokenCounter, chunk_document, chunk_stream
from ragcli.index.document import read_document, stream_document
from ragcli.index.formats.text import text_headings
from ragcli.models import embedding_model
from ragcli.records import HEADING_SEP

SUFFIXES = [".txt", ".md", ".markdown", ".rst", ".html", ".htm", ".pdf", ".docx"]
# Lines of the kinds the parsers look for, mixed with anything at all.
MARKUP = st.sampled_from(
    [
        "# Title", "## Sub ##", "####### seven", "Title\n=====", "===\nOver\n===", "```", "~~~",
        "<h1>Head</h1>", "<h2></h2>", "<script>x</script>", "<p>para", "</div>", "&amp;&#0;",
        "-----", "", "   ", "\t#\t", "%PDF-1.4", "PK\x03\x04",
    ]
)  # fmt: skip
TEXT = st.lists(st.one_of(MARKUP, st.text(max_size=40)), max_size=25).map("\n".join)
DATA = st.one_of(st.binary(max_size=400), TEXT.map(lambda t: t.encode("utf-8", "surrogatepass")))


@pytest.fixture(scope="module")
def counter() -> TokenCounter:
    return TokenCounter(embedding_model().path / "tokenizer.json")


def _read(path: Path, data: bytes):
    """read_document, with its documented refusal (ValueError) as None."""
    try:
        return read_document(path, data)
    except RagError:
        return None
    except ValueError:
        return None


def _check_chunks(chunks, n_lines: int) -> None:
    for c in chunks:
        assert 1 <= c.start_line <= c.end_line <= n_lines, c
        assert c.text.strip()
        if c.heading:
            parts = c.heading.split(HEADING_SEP)
            assert all(p.strip() and "\n" not in p for p in parts), c.heading
    assert [c.ordinal for c in chunks] == list(range(len(chunks)))


@given(data=DATA, suffix=st.sampled_from(SUFFIXES), budget=st.integers(8, 200))
def test_any_file_reads_and_chunks_inside_its_lines(
    tmp_path_factory, counter, data, suffix, budget
):
    path = Path("/corpus/file" + suffix)
    doc = _read(path, data)
    if doc is None:
        return
    if doc.line_map:  # a page of markup only may have no lines at all
        assert len(doc.line_map) == doc.text.count("\n") + 1
    else:
        assert not doc.text
    n_lines = max(doc.line_map, default=0)
    if suffix not in (".pdf", ".docx"):  # text formats: lines are the file's own lines
        assert n_lines <= data.count(b"\n") + data.count(b"\r") + 1
    _check_chunks(chunk_document(doc, counter, budget, budget // 4), n_lines)


@given(text=TEXT, suffix=st.sampled_from([".md", ".rst", ".txt"]))
def test_headings_are_well_formed(text, suffix):
    lines = text.split("\n")
    for index, level, title in text_headings(text, suffix):
        assert 0 <= index < len(lines)
        assert 1 <= level <= 6
        assert title and title == title.strip() and "\n" not in title


@given(text=TEXT, block=st.integers(16, 200))
def test_streamed_blocks_chunk_inside_the_file(tmp_path_factory, counter, text, block):
    path = tmp_path_factory.mktemp("stream") / "big.md"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    n_lines = text.count("\n") + text.count("\r") + 1
    chunks = list(chunk_stream(stream_document(path, "utf-8", block), counter, 60, 10))
    for c in chunks:
        assert 1 <= c.start_line <= c.end_line <= n_lines, c
