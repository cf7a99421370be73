"""Read a document's visible text, whole or, for a large text file, in blocks.

Each document keeps a map from its text lines back to the source file's lines, so
that a citation points at the lines a person would open, even for HTML whose visible
text is far shorter than its markup. PDF text lines also carry their page number;
Word paragraphs are numbered as lines. The formats themselves are read by
:mod:`ragcli.index.formats`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

from ..records import Document, SourceFile
from .formats import DOCX_SUFFIXES, HTML_SUFFIXES, PDF_SUFFIXES, TEXT_SUFFIXES
from .formats.docx import docx_text
from .formats.html import html_text
from .formats.pdf import pdf_text
from .formats.text import text_headings
from .source import decode


def read_document(path: Path, data: bytes | None = None) -> Document:
    """Read one supported file (or its already-read ``data``) into visible text.

    Raises OSError when the file cannot be read, ValueError when it holds no
    usable text (empty, binary, encrypted or corrupt).
    """
    if data is None:
        data = path.read_bytes()
    if not data:
        raise ValueError("empty file")
    suffix = path.suffix.lower()
    if suffix in PDF_SUFFIXES:
        lines, pages = pdf_text(data)
        return Document(path, "\n".join(lines), list(range(1, len(lines) + 1)), pages=pages)
    if suffix in DOCX_SUFFIXES:
        lines, line_map, headings = docx_text(data)
        return Document(path, "\n".join(lines), line_map, headings=headings)
    text, warning = decode(data)
    warnings = [warning] if warning else []
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if suffix in HTML_SUFFIXES:
        lines, line_map, headings = html_text(text)
        return Document(path, "\n".join(lines), line_map, warnings, headings=headings)
    line_map = list(range(1, text.count("\n") + 2))
    return Document(path, text, line_map, warnings, headings=text_headings(text, suffix))


STREAM_BYTES = 64 << 20  # text files larger than this are read in blocks, never whole
BLOCK_CHARS = 1 << 20  # a streamed block ends at the first blank line after this many chars


def streams(path: Path, size: int, limit: int = STREAM_BYTES) -> bool:
    """Whether a file is big enough to read in blocks (plain text formats only)."""
    return size > limit and path.suffix.lower() in TEXT_SUFFIXES


def stream_source(path: Path) -> tuple[SourceFile, str, str | None]:
    """Hash a large text file and choose its encoding in one pass of 1 MB reads.

    Returns the identity, the codec to read it with and a warning when it is
    not UTF-8. Raises ValueError for binary data, like :func:`decode`.
    """
    import codecs

    digest = hashlib.sha256()
    size = 0
    utf8 = codecs.getincrementaldecoder("utf-8-sig")()
    is_utf8 = True
    mtime_ns = path.stat().st_mtime_ns
    with path.open("rb") as fh:
        while block := fh.read(1 << 20):
            if not size and b"\x00" in block[:8192]:
                raise ValueError("binary file (contains NUL bytes)")
            digest.update(block)
            size += len(block)
            if is_utf8:
                try:
                    utf8.decode(block)
                except UnicodeDecodeError:
                    is_utf8 = False
    if not size:
        raise ValueError("empty file")
    source = SourceFile(path, digest.hexdigest(), size, mtime_ns)
    if is_utf8:
        return source, "utf-8-sig", None
    # cp1252 leaves five bytes undefined; Latin-1 decodes anything.
    return source, "cp1252", "not UTF-8; read as Windows-1252 (undefined bytes replaced)"


def stream_document(
    path: Path, encoding: str, block_chars: int = BLOCK_CHARS
) -> Iterator[Document]:
    """A large text file as a series of Documents of about BLOCK_CHARS each.

    Blocks end at a blank line where possible, so passages do not straddle
    them; lines longer than a block are cut (their pieces keep the line number).
    Memory stays at a few blocks whatever the file's size.
    """
    suffix = path.suffix.lower()
    with path.open(encoding=encoding, errors="replace", newline=None) as fh:
        lines: list[str] = []
        line_map: list[int] = []
        chars, number, at_line_start = 0, 1, True
        while piece := fh.readline(block_chars):
            ends = piece.endswith("\n")
            text = piece.rstrip("\n")
            if not at_line_start:
                number -= 1  # the rest of a line cut by the read limit (or by a block's end)
            lines.append(text)
            line_map.append(number)
            chars += len(piece)
            number += 1
            at_line_start = ends
            if chars >= block_chars and (not text.strip() or chars >= 4 * block_chars):
                block = "\n".join(lines)
                yield Document(path, block, line_map, headings=text_headings(block, suffix))
                lines, line_map, chars = [], [], 0
        if lines:
            block = "\n".join(lines)
            yield Document(path, block, line_map, headings=text_headings(block, suffix))
