import itertools
from pathlib import Path

import pytest

from ragcli.index.chunking import TokenCounter, chunk_document
from ragcli.index.document import read_document
from ragcli.models import embedding_model
from ragcli.records import Document

CORPORA = Path(__file__).resolve().parents[2] / "corpora"


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


MARKDOWN = """# Guide

Intro text for the guide.

## Install

Run the installer.

```sh
# not a heading: a comment in a code block
```

### On Linux

Use the package manager.

## Use
Setext section
--------------

Body of the setext section.
"""


def test_markdown_headings_give_each_passage_its_path(counter):
    doc = read_document(_write("guide.md", MARKDOWN))
    titles = [(level, title) for _, level, title in doc.headings]
    assert titles == [
        (1, "Guide"),
        (2, "Install"),
        (3, "On Linux"),
        (2, "Use"),
        (2, "Setext section"),
    ]
    chunks = chunk_document(doc, counter, max_tokens=16, overlap=0)

    texts = [c.text.splitlines() for c in chunks]

    def heading_of(line: str) -> str:
        return next(c.heading for c in chunks if line in c.text.splitlines())

    assert heading_of("### On Linux") == "Guide › Install › On Linux"
    assert heading_of("Use the package manager.") == "Guide › Install › On Linux"
    assert heading_of("## Use") == "Guide › Use"
    assert heading_of("Body of the setext section.") == "Guide › Setext section"
    # a heading opens a passage, never ends one (unless it is all the passage has)
    titles = {"# Guide", "## Install", "### On Linux", "## Use"}
    assert all(len(lines) == 1 or lines[-1] not in titles for lines in texts)


def test_rst_headings_take_levels_in_order_of_first_use():
    text = "=====\nTitle\n=====\n\nIntro.\n\nPart one\n--------\n\nText.\n\nDetail\n~~~~~~\n\nMore.\n\nPart two\n--------\n"
    doc = read_document(_write("doc.rst", text))
    assert [(lvl, t) for _, lvl, t in doc.headings] == [
        (1, "Title"),
        (2, "Part one"),
        (3, "Detail"),
        (2, "Part two"),
    ]


def test_html_headings_and_passages_start_at_a_new_section(counter):
    sections = "".join(
        f"<h2>Section {i}</h2><p>{f'Words about topic {i}. ' * 12}</p>" for i in range(4)
    )
    doc = read_document(_write("page.html", f"<html><body><h1>Page</h1>{sections}</body></html>"))
    chunks = chunk_document(doc, counter, max_tokens=120, overlap=30)
    assert len(chunks) >= 2
    for c in chunks[1:]:
        # Each passage after the first opens with its section's heading: no
        # overlap is carried across a heading.
        first = c.text.splitlines()[0]
        assert first.startswith("Section "), c.text
        assert c.heading == f"Page › {first}"


def test_streamed_blocks_cover_the_file_and_carry_headings(counter, tmp_path):
    from ragcli.index.chunking import chunk_stream
    from ragcli.index.document import stream_document, stream_source

    parts = []
    for i in range(40):
        parts.append(f"## Chapter {i}\n")
        parts += [f"Line {i}.{j} of chapter {i} — café" for j in range(30)]
        parts.append("")
    text = "# Book\n\n" + "\n".join(parts)
    path = tmp_path / "book.md"
    path.write_bytes(text.encode("cp1252"))
    _, encoding, warning = stream_source(path)
    assert encoding == "cp1252" and warning
    blocks = list(stream_document(path, encoding, block_chars=4000))
    assert len(blocks) > 5
    chunks = list(chunk_stream(blocks, counter, max_tokens=100, overlap=20))
    assert [c.ordinal for c in chunks] == list(range(len(chunks)))
    lines = text.split("\n")
    covered = set()
    for c in chunks:
        assert c.text.splitlines()[0] == lines[c.start_line - 1].strip()
        covered.update(range(c.start_line, c.end_line + 1))
        chapter = c.text.split(" of chapter ")[-1].split()[0] if " of chapter " in c.text else None
        if chapter and c.text.startswith("Line"):
            assert c.heading.startswith("Book › Chapter ")
    assert {i + 1 for i, line in enumerate(lines) if line.strip()} <= covered


def _write(name: str, text: str) -> Path:
    import tempfile

    folder = Path(tempfile.mkdtemp())
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path
