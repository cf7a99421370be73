"""Split documents into passages of about N embedding-model tokens.

Passages are measured with the embedding model's own tokenizer (the model
truncates at 256 tokens, so a passage counted in words could be cut off
silently), overlap by a few lines so that a fact on a boundary is whole in
at least one passage, and prefer to end before a heading, else at a blank
line. Each passage carries the heading path it sits under, for citations.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ..records import HEADING_SEP, Chunk, Document


@dataclass(frozen=True)
class _Unit:
    text: str
    line: int
    tokens: int
    joins_previous: bool  # a later piece of the same long line
    page: int | None = None
    heading: tuple[int, str] | None = None  # (level, title) when the line is a heading


@dataclass
class _Outline:
    """The heading path in effect, carried from one streamed block to the next."""

    stack: list[tuple[int, str]] = field(default_factory=list)

    def enter(self, level: int, title: str) -> str:
        while self.stack and self.stack[-1][0] >= level:
            self.stack.pop()
        self.stack.append((level, title))
        return self.path()

    def path(self) -> str:
        return HEADING_SEP.join(t for _, t in self.stack)


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


ENCODE_LINES = 512  # lines tokenized at a time (a document's every token would take GBs)


def _offsets(counter: TokenCounter, lines: list[str]) -> Iterator[list[tuple[int, int]]]:
    """Each line's token offsets, tokenizing a slice of lines at a time: the offsets of
    a whole 20 MB file held at once took over 1 GB (a tuple per token)."""
    for begin in range(0, len(lines), ENCODE_LINES):
        yield from counter.encode(lines[begin : begin + ENCODE_LINES])


def _units(doc: Document, counter: TokenCounter, piece_tokens: int) -> list[_Unit]:
    lines = doc.text.split("\n")
    pages: list[int | None] = list(doc.pages) if doc.pages is not None else [None] * len(lines)
    titles = {i: (level, title) for i, level, title in doc.headings}
    units: list[_Unit] = []
    for index, (line, src, page, offsets) in enumerate(
        zip(lines, doc.line_map, pages, _offsets(counter, lines), strict=True)
    ):
        if len(offsets) <= piece_tokens:
            units.append(_Unit(line, src, len(offsets), False, page, titles.get(index)))
            continue
        # A line longer than a passage (a paragraph without breaks): cut it
        # between tokens into pieces small enough to serve as overlap.
        starts = [offsets[i][0] for i in range(0, len(offsets), piece_tokens)]
        bounds = [0, *starts[1:], len(line)]
        for k in range(len(bounds) - 1):
            n = min(piece_tokens, len(offsets) - k * piece_tokens)
            heading = titles.get(index) if k == 0 else None
            units.append(_Unit(line[bounds[k] : bounds[k + 1]], src, n, k > 0, page, heading))
    return units


def chunk_document(
    doc: Document, counter: TokenCounter, max_tokens: int = 200, overlap: int = 40
) -> list[Chunk]:
    """Passages of at most ``max_tokens`` tokens overlapping by up to ``overlap``."""
    return list(chunk_stream([doc], counter, max_tokens, overlap))


def chunk_stream(
    docs: Iterable[Document], counter: TokenCounter, max_tokens: int = 200, overlap: int = 40
) -> Iterator[Chunk]:
    """Passages of a document read in blocks (see ``ingest.stream_document``):
    ordinals and the heading path continue from block to block."""
    outline = _Outline()
    ordinal = 0
    for doc in docs:
        for chunk in _chunk_block(doc, counter, max_tokens, overlap, outline, ordinal):
            ordinal += 1
            yield chunk


def _chunk_block(
    doc: Document,
    counter: TokenCounter,
    max_tokens: int,
    overlap: int,
    outline: _Outline,
    first_ordinal: int,
) -> list[Chunk]:
    if not doc.text.strip():
        return []  # no lines at all (an HTML page of chrome only, a PDF of scans)
    units = _units(doc, counter, max(1, min(overlap, max_tokens) or max_tokens))
    paths = []  # the heading path at each unit
    for u in units:
        paths.append(outline.enter(*u.heading) if u.heading else outline.path())
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
        before_heading = None
        if j < n:
            # End before the last heading in the second half, else at the last
            # paragraph break there, if there is one.
            half, running, best = max_tokens // 2, 0, None
            for k in range(i, j):
                if k > i and units[k].heading and running >= half:
                    before_heading = k
                running += units[k].tokens
                if not units[k].text.strip() and running >= half:
                    best = k + 1
            j = before_heading or best or j
            last = max((k for k in range(i, j) if units[k].text.strip()), default=i)
            if last > i and units[last].heading:
                j = before_heading = last  # a heading opens the next passage, never ends one
        ordinal = first_ordinal + len(chunks)
        # A passage that opens with a heading (after an rST overline, say) is under it.
        opening = next((k for k in range(i, min(j, i + 3)) if units[k].heading), i)
        chunks.append(_make_chunk(doc.path, ordinal, units[i:j], paths[opening]))
        if j >= n:
            break
        if before_heading:
            i = j  # a new section needs no overlap with the last one
            continue
        back, k = 0, j
        while k - 1 > i and back + units[k - 1].tokens <= overlap:
            k -= 1
            back += units[k].tokens
        i = k
    return chunks


def _make_chunk(path: Path, ordinal: int, units: list[_Unit], heading: str) -> Chunk:
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
        heading=heading,
    )
