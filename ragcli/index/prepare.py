"""One file made ready to embed: read, hashed, parsed and cut into passages.

Runs wherever the parsing happens: in this process, in a pool worker
(:mod:`ragcli.index.pipeline`) or in a Ray task (:mod:`ragcli.index.ray_data`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path

from ..records import Chunk, SourceFile
from .chunking import TokenCounter, chunk_document
from .document import read_document
from .formats import PDF_SUFFIXES
from .source import read_error, read_source


@dataclass
class PreparedFile:
    """One file read, parsed and cut into passages, ready to embed.

    ``skipped`` holds the reason when the file cannot be indexed; then
    ``source`` may be None and ``chunks`` is empty.
    """

    path: Path
    source: SourceFile | None
    chunks: list[Chunk]
    warnings: list[str] = field(default_factory=list)
    skipped: str | None = None


def prepare_file(
    path: Path, counter: TokenCounter, chunk_tokens: int, chunk_overlap: int
) -> PreparedFile:
    """Read, hash, parse and chunk one file (no store access: runs in workers)."""
    try:
        source, data = read_source(path)
        doc = read_document(path, data)
    except OSError as exc:
        return PreparedFile(path, None, [], skipped=read_error(exc))
    except ValueError as exc:
        return PreparedFile(path, None, [], skipped=str(exc))
    chunks = chunk_document(doc, counter, chunk_tokens, chunk_overlap)
    if not chunks:
        pdf = path.suffix.lower() in PDF_SUFFIXES
        why = "no extractable text (a scanned PDF needs OCR)" if pdf else "no text"
        return PreparedFile(path, source, [], doc.warnings, skipped=why)
    return PreparedFile(path, source, chunks, doc.warnings)


@functools.lru_cache(maxsize=4)
def token_counter(tokenizer_json: Path) -> TokenCounter:
    """One tokenizer per process (a worker loads it once, not once per file)."""
    return TokenCounter(tokenizer_json)
