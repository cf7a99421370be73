"""`rag index`: bring an index up to date with a set of files and folders.

Files are compared by content hash, so only new and changed files are parsed
and embedded; files that disappeared from the given folders are removed.
Everything is committed at once at the end (see :mod:`ragcli.store`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .chunking import Chunk, TokenCounter, chunk_document
from .config import DEFAULT_EMBED_MODEL, Settings
from .embedding import Embedder, SentenceTransformerEmbedder
from .errors import UsageError
from .ingest import (
    PDF_SUFFIXES,
    SUFFIXES,
    SourceFile,
    discover,
    read_document,
    read_error,
    read_source,
)
from .models import embedding_model
from .store import IndexInfo, IndexStore

Progress = Callable[[int, int], None]  # (chunks embedded so far, chunks to embed)


@dataclass
class IndexReport:
    """What a run changed, for the summary line and ``--json``."""

    index_dir: str
    added: int = 0
    updated: int = 0
    removed: int = 0
    unchanged: int = 0
    chunks_embedded: int = 0
    chunks_total: int = 0
    files_total: int = 0
    seconds: float = 0.0
    chunks_per_s: float = 0.0  # chunks embedded per second of the whole run
    files_per_s: float = 0.0  # new and changed files per second of the whole run
    skipped: list[dict[str, str]] = field(default_factory=list)
    warnings: list[dict[str, str]] = field(default_factory=list)


def _under(path: str, roots: list[Path]) -> bool:
    p = Path(path)
    return any(p == r or r in p.parents for r in roots)


def build_index(
    paths: list[Path],
    settings: Settings,
    *,
    rebuild: bool = False,
    progress: Progress | None = None,
    embedder: Embedder | None = None,
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
) -> IndexReport:
    """Index ``paths`` into ``settings.index_dir``; returns counts of what changed.

    ``include`` / ``exclude`` are globs on paths relative to each folder given
    (see :func:`ragcli.ingest.discover`). Files that cannot be read (vanished,
    unreadable, empty, encrypted, corrupt) are reported in ``skipped``; indexed
    files that are now excluded or unreadable are removed from the index.
    """
    started = time.perf_counter()
    model = embedding_model(settings.embed_model or DEFAULT_EMBED_MODEL)
    found, skipped = discover(paths, include=include, exclude=exclude)
    roots = [p.resolve() for p in paths]
    info = IndexInfo.for_build(model.name, model.dim, settings.chunk_tokens, settings.chunk_overlap)
    report = IndexReport(index_dir=str(settings.index_dir))
    report.skipped = [{"path": str(s.path), "reason": s.reason} for s in skipped]

    with IndexStore.writer(settings.index_dir, info, rebuild=rebuild) as writer:
        if not found and not any(_under(p, roots) for p in writer.files):
            kinds = " ".join(sorted(SUFFIXES))
            raise UsageError(f"no documents to index under {' '.join(map(str, paths))} ({kinds})")
        counter = TokenCounter(model.path / "tokenizer.json")
        pending: list[tuple[SourceFile, list[Chunk], bool]] = []
        seen: set[str] = set()
        for path in found:
            key = str(path)
            try:
                source, data = read_source(path)
                old = writer.files.get(key)
                if old == source.sha256:
                    report.unchanged += 1
                    seen.add(key)
                    continue
                doc = read_document(path, data)
            except OSError as exc:
                report.skipped.append({"path": key, "reason": read_error(exc)})
                continue
            except ValueError as exc:
                report.skipped.append({"path": key, "reason": str(exc)})
                continue
            seen.add(key)
            report.warnings.extend({"path": str(path), "warning": w} for w in doc.warnings)
            chunks = chunk_document(doc, counter, settings.chunk_tokens, settings.chunk_overlap)
            if not chunks:
                pdf = path.suffix.lower() in PDF_SUFFIXES
                why = "no extractable text (a scanned PDF needs OCR)" if pdf else "no text"
                report.skipped.append({"path": key, "reason": why})
                seen.discard(key)
                continue
            pending.append((source, chunks, old is not None))

        gone = [p for p in writer.files if p not in seen and _under(p, roots)]
        texts = [c.text for _, chunks, _ in pending for c in chunks]
        if texts:
            embedder = embedder or SentenceTransformerEmbedder(model)
            done = 0

            def advance(n: int) -> None:
                nonlocal done
                done += n
                if progress:
                    progress(done, len(texts))

            vectors = embedder.embed(texts, progress=advance)
            offset = 0
            for source, chunks, existed in pending:
                writer.add_file(source, chunks, vectors[offset : offset + len(chunks)])
                offset += len(chunks)
                report.updated += existed
                report.added += not existed
            report.chunks_embedded = len(texts)
        for path in gone:
            writer.remove_file(path)
        report.removed = len(gone)
        if texts or gone or rebuild or not writer.has_commit:
            writer.commit()
        report.files_total = len(writer.files)
        report.chunks_total = len(writer.vectors)
    report.seconds = time.perf_counter() - started
    report.chunks_per_s = round(report.chunks_embedded / max(report.seconds, 1e-9), 1)
    report.files_per_s = round((report.added + report.updated) / max(report.seconds, 1e-9), 1)
    return report
