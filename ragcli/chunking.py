"""Split documents into passages of about N embedding-model tokens.

Passages are measured with the embedding model's own tokenizer (the model
truncates at 256 tokens, so a passage counted in words could be cut off
silently), overlap by a few lines so that a fact on a boundary is whole in
at least one passage, and prefer to end at a blank line.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .ingest import Document


@dataclass(frozen=True)
class Chunk:
    """One passage and where it came from (1-based, inclusive source lines)."""

    path: str
    ordinal: int
    start_line: int
    end_line: int
    text: str
    n_tokens: int
    page: int | None = None  # PDF page of the first line; None for other formats


@dataclass(frozen=True)
class _Unit:
    text: str
    line: int
    tokens: int
    joins_previous: bool  # a later piece of the same long line
    page: int | None = None


class TokenCounter:
    """Counts tokens with a Hugging Face ``tokenizer.json`` (no torch needed)."""

    def __init__(self, tokenizer_json: Path) -> None:
        from tokenizers import Tokenizer

        self._tok = Tokenizer.from_file(str(tokenizer_json))
        self._tok.no_truncation()
        self._tok.no_padding()

    def encode(self, texts: list[str]) -> list[list[tuple[int, int]]]:
        """Character offsets of each text's tokens, special tokens left out."""
        return [enc.offsets for enc in self._tok.encode_batch(texts, add_special_tokens=False)]


def _units(doc: Document, counter: TokenCounter, piece_tokens: int) -> list[_Unit]:
    lines = doc.text.split("\n")
    pages: list[int | None] = list(doc.pages) if doc.pages is not None else [None] * len(lines)
    units: list[_Unit] = []
    for line, src, page, offsets in zip(
        lines, doc.line_map, pages, counter.encode(lines), strict=True
    ):
        if len(offsets) <= piece_tokens:
            units.append(_Unit(line, src, len(offsets), False, page))
            continue
        # A line longer than a passage (a paragraph without breaks): cut it
        # between tokens into pieces small enough to serve as overlap.
        starts = [offsets[i][0] for i in range(0, len(offsets), piece_tokens)]
        bounds = [0, *starts[1:], len(line)]
        for k in range(len(bounds) - 1):
            n = min(piece_tokens, len(offsets) - k * piece_tokens)
            units.append(_Unit(line[bounds[k] : bounds[k + 1]], src, n, k > 0, page))
    return units


def chunk_document(
    doc: Document, counter: TokenCounter, max_tokens: int = 200, overlap: int = 40
) -> list[Chunk]:
    """Passages of at most ``max_tokens`` tokens overlapping by up to ``overlap``."""
    if not doc.text.strip():
        return []  # no lines at all (an HTML page of chrome only, a PDF of scans)
    units = _units(doc, counter, max(1, min(overlap, max_tokens) or max_tokens))
    chunks: list[Chunk] = []
    i, n = 0, len(units)
    while i < n:
        while i < n and not units[i].text.strip():
            i += 1  # never start a passage on blank lines
        if i >= n:
            break
        j, total = i, 0
        while j < n and (j == i or total + units[j].tokens <= max_tokens):
            total += units[j].tokens
            j += 1
        if j < n:
            # End at the last paragraph break in the second half, if there is one.
            half, running, best = max_tokens // 2, 0, None
            for k in range(i, j):
                running += units[k].tokens
                if not units[k].text.strip() and running >= half:
                    best = k + 1
            j = best or j
        chunks.append(_make_chunk(doc.path, len(chunks), units[i:j]))
        if j >= n:
            break
        back, k = 0, j
        while k - 1 > i and back + units[k - 1].tokens <= overlap:
            k -= 1
            back += units[k].tokens
        i = k
    return chunks


def _make_chunk(path: Path, ordinal: int, units: list[_Unit]) -> Chunk:
    while units and not units[-1].text.strip():
        units = units[:-1]
    parts: list[str] = []
    for u in units:
        if u.joins_previous and parts:
            parts[-1] += u.text
        else:
            parts.append(u.text)
    return Chunk(
        path=str(path),
        ordinal=ordinal,
        start_line=units[0].line,
        end_line=units[-1].line,
        text="\n".join(parts).strip(),
        n_tokens=sum(u.tokens for u in units),
        page=units[0].page,
    )
