"""The records that flow through ragcli, from a file on disk to a retrieved passage.

:class:`SourceFile` (a file found) -> :class:`Document` (its visible text) ->
:class:`Chunk` (one passage) -> :class:`StoredChunk` (a passage with its id in a
store) -> :class:`Hit` (a passage retrieved for a question). Plain data: this module
imports only the citation format (:mod:`ragcli.citations`), so every layer can use it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .citations import cite, location


@dataclass(frozen=True)
class SourceFile:
    """A file found on disk, identified by its resolved path and content hash."""

    path: Path
    sha256: str
    size: int
    mtime_ns: int = 0  # when it was read; 0 if unknown


@dataclass
class Document:
    """Visible text of one file; ``line_map[i]`` is the source line of text line i."""

    path: Path
    text: str
    line_map: list[int]
    warnings: list[str] = field(default_factory=list)
    pages: list[int] | None = None  # PDF only: ``pages[i]`` is the page of text line i
    # (text line index, level 1-6, title) of each heading, in order
    headings: list[tuple[int, int, str]] = field(default_factory=list)


HEADING_SEP = " › "


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
    heading: str = ""  # the headings the passage sits under, outermost first, HEADING_SEP between

    @property
    def title(self) -> str:
        """The outermost heading: the page's title, where the document has one."""
        return self.heading.split(HEADING_SEP, 1)[0]


@dataclass(frozen=True)
class StoredChunk(Chunk):
    id: int = 0


@dataclass(frozen=True)
class Hit:
    """A retrieved passage: its rank, its ranking score under the retriever used
    (cosine, BM25 or fused), and its cosine similarity to the question, which
    the "I don't know" threshold uses whatever the retriever."""

    chunk: StoredChunk
    score: float
    rank: int
    similarity: float
    # Where the model's attention put it among the candidates (answer/rerank.py); None:
    # not re-ranked, and the rank is the retriever's.
    rerank_score: float | None = None

    @property
    def location(self) -> str:
        """Where to look: ``path:page N`` for paged documents, else ``path:start-end``."""
        c = self.chunk
        return location(c.path, c.start_line, c.end_line, c.page)

    @property
    def citation(self) -> str:
        """The location and, when the document has headings, the section it is in."""
        c = self.chunk
        return cite(location(c.path, c.start_line, c.end_line, c.page), c.heading)

    def as_dict(self) -> dict[str, str | int | float | None]:
        """One passage in every JSON the front ends write (CLI, HTTP, MCP)."""
        c = self.chunk
        return {
            "rank": self.rank,
            "path": c.path,
            "start_line": c.start_line,
            "end_line": c.end_line,
            "page": c.page,
            "heading": c.heading,
            "citation": self.citation,
            "score": round(self.score, 4),
            "similarity": round(self.similarity, 4),
            "rerank_score": self.rerank_score,
            "text": c.text,
        }
