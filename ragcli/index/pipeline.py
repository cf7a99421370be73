"""`rag index`: bring an index up to date with a set of files and folders.

The run has three stages:

1. *Scan*: find the files and tell which are new or changed, by size and
   modification time where the index can vouch for them, else by content hash.
   Files gone from the given folders are removed.
2. *Prepare*: read, parse and chunk the new and changed files in worker
   processes (:func:`prepare_file`, run by :mod:`ragcli.index.pool`); text files
   too large to hold in memory are streamed block by block in this process instead.
3. *Embed and store*: embed passages in large batches (sorted by length, as
   ``SentenceTransformer.encode`` does) and add them to the store, which
   commits every ``commit_seconds``: a killed run keeps the files it finished.

With ``ray_address`` set, stage 2 and the embedding run on Ray instead
(:mod:`ragcli.index.ray_data`).
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..config import DEFAULT_EMBED_MODEL, Settings
from ..embed.base import Embedder, backend_name, indexing_embedder
from ..errors import IndexMissingError, UsageError
from ..models import EmbeddingModelInfo, embedding_model
from ..progress import OnStep, Step
from ..records import Chunk
from ..stores.base import TEXT_VERSION, IndexInfo
from ..stores.factory import open_store, store_writer
from .chunking import TokenCounter, chunk_stream
from .discover import discover
from .document import STREAM_BYTES, stream_document, stream_source, streams
from .formats import SUFFIXES
from .pool import prepare_in_pool
from .prepare import PreparedFile, prepare_file, token_counter
from .ray_data import prepare_with_ray
from .source import fingerprint, read_error

if TYPE_CHECKING:
    import numpy as np

EMBED_SLICE = 2048  # texts per embedder call: a whole large file's passages are not one call
POOL_MIN_FILES = 8  # fewer files than this are parsed in this process (a pool costs ~0.5 s)


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
    commits: int = 0
    index_type: str = ""  # what the FAISS vector file holds ("" for other stores)
    index_spec: str = ""  # what was asked for: "auto" or a factory string
    search_params: str = ""
    embeddings: str = ""  # backend and quantization: "onnx-int8", "onnx-fp32" or "torch"
    seconds: float = 0.0
    chunks_per_s: float = 0.0  # chunks embedded per second of the whole run
    files_per_s: float = 0.0  # new and changed files per second of the whole run
    skipped: list[dict[str, str]] = field(default_factory=list)
    warnings: list[dict[str, str]] = field(default_factory=list)


def _under(path: str, roots: list[Path]) -> bool:
    p = Path(path)
    return any(p == r or r in p.parents for r in roots)


_STALE_TEXT = (
    "this ragcli turns documents into passages differently from the one that built the "
    "index: every file is read again"
)


def _unchanged(path: Path, stored: tuple[int, int, float] | None, sha: str | None) -> bool:
    """Whether an indexed file is as it was: same size and mtime (when the mtime
    is safely older than the time it was indexed), else the same content hash."""
    if stored is None or sha is None:
        return False
    size, mtime_ns, indexed_at = stored
    st = path.stat()
    if st.st_size != size:
        return False
    # A file written within a second of being indexed may change again without
    # its mtime moving (coarse clocks): only older mtimes are trusted.
    if mtime_ns and st.st_mtime_ns == mtime_ns and mtime_ns / 1e9 < indexed_at - 1.0:
        return True
    return fingerprint(path).sha256 == sha


def _existing_backend(settings: Settings) -> str | None:
    """The embeddings an existing index was built with: updating it without a choice keeps
    them, so a change of the default never turns `rag index` into a demand to rebuild."""
    try:
        store = open_store(settings)
    except IndexMissingError:
        return None
    try:
        return store.info.embeddings
    finally:
        store.close()


def build_index(
    paths: list[Path],
    settings: Settings,
    *,
    rebuild: bool = False,
    progress: OnStep | None = None,
    embedder: Embedder | None = None,
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
    workers: int | None = None,
    ray_address: str | None = None,
    stream_bytes: int = STREAM_BYTES,
) -> IndexReport:
    """Index ``paths`` into the store the settings name; returns what changed.

    ``include`` / ``exclude`` are globs on paths relative to each folder given
    (see :func:`ragcli.index.discover.discover`). Files that cannot be read (vanished,
    unreadable, empty, encrypted, corrupt) are reported in ``skipped``; indexed
    files that are now excluded or unreadable are removed from the index.
    ``workers`` parsing processes (default: one less than the cores, at least 1);
    text files over ``stream_bytes`` are streamed instead of read whole.
    ``progress`` is called with a :class:`~ragcli.progress.Step` at each file
    checked or parsed and each sub-batch of passages embedded.
    """
    started = time.perf_counter()
    model = embedding_model(settings.embed_model or DEFAULT_EMBED_MODEL)
    say = progress or _silent
    say(Step("finding files"))
    found, skipped = discover(paths, include=include, exclude=exclude)
    roots = [p.resolve() for p in paths]
    own_embedder = embedder is None
    if embedder is None:
        say(Step("checking the embedding model", detail=model.name))
        if settings.embed_backend is None and not rebuild:
            settings = settings.replace(embed_backend=_existing_backend(settings))
        embedder = indexing_embedder(model, settings)
    info = IndexInfo.for_build(
        model.name,
        model.dim,
        settings.chunk_tokens,
        settings.chunk_overlap,
        index_spec=settings.index_type,
        embed_backend=embedder.backend,
        embed_quantization=embedder.quantization,
    )
    report = IndexReport(index_dir=settings.where, embeddings=info.embeddings)
    report.skipped = [{"path": str(s.path), "reason": s.reason} for s in skipped]

    with store_writer(settings, info, rebuild=rebuild) as writer:
        if not found and not any(_under(p, roots) for p in writer.files):
            kinds = " ".join(sorted(SUFFIXES))
            raise UsageError(f"no documents to index under {' '.join(map(str, paths))} ({kinds})")
        todo: list[Path] = []
        seen: set[str] = set()
        # Passages an older reader or chunker made are not kept: every file is read again.
        stale_text = writer.info.text_version != TEXT_VERSION
        if stale_text and writer.files:
            report.warnings.append({"path": report.index_dir, "warning": _STALE_TEXT})
        for n, path in enumerate(found):
            say(Step("checking", n, len(found), "files"))
            key = str(path)
            try:
                if not stale_text and _unchanged(
                    path, writer.stats.get(key), writer.files.get(key)
                ):
                    report.unchanged += 1
                    seen.add(key)
                else:
                    todo.append(path)
            except OSError as exc:
                report.skipped.append({"path": key, "reason": read_error(exc)})
        redo = {str(p) for p in todo}
        for key in [p for p in writer.files if p not in seen and _under(p, roots)]:
            if key not in redo:
                writer.remove_file(key)
                report.removed += 1

        run = _Run(writer, report, settings, say, len(todo), stream_bytes)
        run.parsing()
        if ray_address is not None:
            big = {p for p in todo if run.streams(p)}
            used = settings.replace(
                embed_backend=backend_name(info.embed_backend, info.embed_quantization)
            )
            for prepared, vectors in prepare_with_ray(
                [p for p in todo if p not in big], used, model, ray_address
            ):
                run.parsed(prepared)
                run.store(prepared, vectors)
            todo = sorted(big)
        batch: list[PreparedFile] = []
        pending = 0  # passages in the batch
        for prepared in _prepared(todo, model, settings, run, embedder, workers):
            batch.append(prepared)
            run.parsed(prepared)
            pending += len(prepared.chunks)
            if pending >= settings.embed_batch:
                run.embed_and_store(batch, embedder)
                batch, pending = [], 0
        run.embed_and_store(batch, embedder)
        if stale_text and all(key in redo for key in writer.files):
            # Every passage is now this version's: say so in the commit below.
            writer.info = dataclasses.replace(writer.info, text_version=TEXT_VERSION)
            run.dirty = True
        if run.dirty or rebuild or not writer.has_commit or writer.needs_commit():
            if own_embedder:  # nothing is embedded after this: the model's memory goes
                getattr(embedder, "release", lambda: None)()
            _return_free_memory()  # the commit may rebuild the vector index: room for it
            say(Step("committing", detail=f"{report.chunks_embedded:,} passages embedded"))
            run.commit()
        report.files_total = len(writer.files)
        report.chunks_total = writer.count_chunks()
        if not settings.store:
            info = writer.info
            report.index_type, report.search_params = info.index_type, info.search_params
            report.index_spec = info.index_spec or ""
    report.seconds = time.perf_counter() - started
    report.chunks_per_s = round(report.chunks_embedded / max(report.seconds, 1e-9), 1)
    report.files_per_s = round((report.added + report.updated) / max(report.seconds, 1e-9), 1)
    return report


class _Run:
    """Stage 3's bookkeeping: store prepared files, count them, commit in batches."""

    def __init__(
        self,
        writer,
        report: IndexReport,
        settings: Settings,
        say: OnStep,
        n_todo: int,
        stream_bytes: int,
    ) -> None:
        self.writer = writer
        self.stream_bytes = stream_bytes
        self.report = report
        self.say = say
        self.n_todo = n_todo
        self.files_done = 0
        self.files_parsed = 0
        self.passages_parsed = 0
        self.commit_seconds = settings.commit_seconds
        self.last_commit = time.monotonic()
        self.dirty = report.removed > 0

    def streams(self, path: Path) -> bool:
        try:
            return streams(path, path.stat().st_size, self.stream_bytes)
        except OSError:
            return False

    def file_done(self) -> None:
        self.files_done += 1

    def parsing(self) -> None:
        """Report the parsing phase: files parsed so far of those to index."""
        found = f"{self.passages_parsed:,} passages found" if self.files_parsed else ""
        self.say(Step("parsing", self.files_parsed, self.n_todo, "files", detail=found))

    def parsed(self, prepared: PreparedFile) -> None:
        """Count a file parsed (in a worker or here) before it is embedded."""
        self.files_parsed += 1
        self.passages_parsed += len(prepared.chunks)
        self.parsing()

    def load(self, embedder: Embedder) -> None:
        """Load the embedding model as a phase of its own, so that its seconds
        are not read as slow embedding."""
        if not getattr(embedder, "loaded", True):
            self.say(Step("loading the embedding model", detail=embedder.info.name))
            embedder.embed([])

    def embedding(self, in_batch: int = 0) -> None:
        """Report the embedding phase: passages embedded of those expected.

        Until every file is parsed the total is an estimate from the passages per
        file so far.
        """
        done = self.report.chunks_embedded + in_batch
        parsed_all = self.files_parsed >= self.n_todo
        total = self.passages_parsed
        if not parsed_all and self.files_parsed:
            total = round(self.passages_parsed / self.files_parsed * self.n_todo)
        files = "" if parsed_all else f"{self.files_parsed}/{self.n_todo} files parsed"
        total = max(total, done)
        self.say(Step("embedding", done, total, "passages", approx=not parsed_all, detail=files))

    def skip(self, prepared: PreparedFile) -> None:
        """A file that cannot be indexed (any old version of it leaves the index)."""
        key = str(prepared.path)
        self.report.skipped.append({"path": key, "reason": prepared.skipped or "unreadable"})
        if key in self.writer.files:
            self.writer.remove_file(key)
            self.report.removed += 1
            self.dirty = True
        self.file_done()

    def store(self, prepared: PreparedFile, vectors: np.ndarray) -> None:
        if prepared.skipped or prepared.source is None:
            self.skip(prepared)
            return
        key = str(prepared.path)
        existed = key in self.writer.files
        self.report.warnings.extend({"path": key, "warning": w} for w in prepared.warnings)
        self.writer.add_file(prepared.source, prepared.chunks, vectors)
        self.report.updated += existed
        self.report.added += not existed
        self.report.chunks_embedded += len(prepared.chunks)
        self.dirty = True
        self.file_done()
        self.maybe_commit()

    def embed_and_store(self, batch: list[PreparedFile], embedder: Embedder) -> None:
        texts = [c.text for p in batch for c in p.chunks]
        vectors = None
        if texts:
            self.load(embedder)
            self.embedding()
            vectors = embed_unique(embedder, texts, self.embedding)
        offset = 0
        for p in batch:
            n = len(p.chunks)
            self.store(p, vectors[offset : offset + n] if n else _empty(embedder))
            offset += n

    def maybe_commit(self) -> None:
        if time.monotonic() - self.last_commit >= self.commit_seconds:
            self.commit()

    def commit(self) -> None:
        self.writer.commit()
        self.report.commits += 1
        self.last_commit = time.monotonic()
        self.dirty = False


def _return_free_memory() -> None:
    """Hand the heap pages the embedder freed back to the system (glibc only)."""
    import contextlib
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def embed_unique(
    embedder: Embedder, texts: list[str], progress: Callable[[int], None] | None = None
) -> np.ndarray:
    """Embed each distinct text once: boilerplate repeated across files (licences,
    navigation, generated sections) costs one passage, not one per copy.

    ``progress`` gets the texts done so far after each of the embedder's own
    sub-batches, counting repeats, so that it ends at ``len(texts)``.
    """
    import numpy as np

    unique = list(dict.fromkeys(texts))
    step = _scaled(progress, len(texts), len(unique))
    # A slice at a time: the embedder holds every text's token ids as Python ints
    # (a 20 MB file's 38k passages at once: about 250 MB).
    vectors = embedder.embed(unique[:EMBED_SLICE], step)
    if len(unique) > EMBED_SLICE:
        first, vectors = vectors, np.empty((len(unique), vectors.shape[1]), vectors.dtype)
        vectors[:EMBED_SLICE] = first
        for begin in range(EMBED_SLICE, len(unique), EMBED_SLICE):
            part = unique[begin : begin + EMBED_SLICE]
            vectors[begin : begin + len(part)] = embedder.embed(part, step)
    if len(unique) == len(texts):
        return vectors
    row = {t: i for i, t in enumerate(unique)}
    return vectors[[row[t] for t in texts]]


def _scaled(progress: Callable[[int], None] | None, n_texts: int, n_unique: int):
    """The embedder's per-sub-batch counts as a running total over all texts."""
    if progress is None or not n_unique:
        return None
    done = 0

    def step(n: int) -> None:
        nonlocal done
        done += n
        progress(round(done * n_texts / n_unique))

    return step


def _silent(_step: Step) -> None:
    """No one is watching."""


def _empty(embedder: Embedder) -> np.ndarray:
    import numpy as np

    return np.zeros((0, embedder.info.dim), dtype=np.float32)


def _prepared(
    todo: list[Path],
    model: EmbeddingModelInfo,
    settings: Settings,
    run: _Run,
    embedder: Embedder,
    workers: int | None,
) -> Iterator[PreparedFile]:
    """Stage 2: prepared files in order; large text files are streamed straight
    into the store here and yield nothing."""
    tokenizer = model.path / "tokenizer.json"
    size = (settings.chunk_tokens, settings.chunk_overlap)
    big = {p for p in todo if run.streams(p)}
    small = [p for p in todo if p not in big]
    for path in todo:
        if path in big:
            _index_streamed(path, token_counter(tokenizer), settings, run, embedder)
    n_workers = workers if workers is not None else max(1, (os.cpu_count() or 2) - 1)
    if len(small) < POOL_MIN_FILES or n_workers < 1:
        for path in small:
            yield prepare_file(path, token_counter(tokenizer), *size)
        return
    yield from prepare_in_pool(small, tokenizer, size, n_workers)


def _index_streamed(
    path: Path, counter: TokenCounter, settings: Settings, run: _Run, embedder: Embedder
) -> None:
    """Hash, chunk, embed and store a file too large to read whole, a block at a time."""
    key = str(path)
    try:
        source, encoding, warning = stream_source(path)
    except OSError as exc:
        run.skip(PreparedFile(path, None, [], skipped=read_error(exc)))
        return
    except ValueError as exc:
        run.skip(PreparedFile(path, None, [], skipped=str(exc)))
        return
    existed = key in run.writer.files
    if warning:
        run.report.warnings.append({"path": key, "warning": warning})
    run.writer.start_file(source)
    chunks = chunk_stream(
        stream_document(path, encoding), counter, settings.chunk_tokens, settings.chunk_overlap
    )
    n = 0
    while batch := _take(chunks, settings.embed_batch):
        run.load(embedder)
        run.passages_parsed += len(batch)
        vectors = embed_unique(embedder, [c.text for c in batch], run.embedding)
        run.writer.add_chunks(key, batch, vectors)
        n += len(batch)
        run.report.chunks_embedded += len(batch)
    run.writer.finish_file(source, n)
    run.files_parsed += 1
    run.report.updated += existed
    run.report.added += not existed
    run.dirty = True
    run.file_done()
    run.maybe_commit()


def _take(items: Iterator[Chunk], n: int) -> list[Chunk]:
    out = []
    for item in items:
        out.append(item)
        if len(out) >= n:
            break
    return out
