"""The index on disk: a FAISS vector file beside a SQLite database of chunks.

Layout of an index folder::

    index.sqlite        files, chunks (text, path, line range) and build metadata
    vectors-<gen>.faiss the vectors, ids = chunk ids; <gen> named in the metadata
    lock                held by the one writer

A write never touches the files a reader uses: the new vectors go to a new
generation file, and the SQLite commit that names it is the single atomic
commit point. A crash before it leaves the previous index as it was; the
orphaned file is removed by the next writer.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import sqlite3
import time
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING

from . import __version__
from .chunking import Chunk
from .errors import IndexCorruptError, IndexLockedError, IndexMismatchError, IndexMissingError
from .ingest import SourceFile

if TYPE_CHECKING:
    import numpy as np

FORMAT_VERSION = 3  # 2: BM25 full-text table; 3: PDF page of each chunk
DB_NAME = "index.sqlite"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS files (
    path TEXT PRIMARY KEY, sha256 TEXT NOT NULL, size INTEGER NOT NULL,
    n_chunks INTEGER NOT NULL, indexed_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS chunks (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    path TEXT NOT NULL REFERENCES files(path) ON DELETE CASCADE,
    ordinal INTEGER NOT NULL, start_line INTEGER NOT NULL, end_line INTEGER NOT NULL,
    n_tokens INTEGER NOT NULL, text TEXT NOT NULL, page INTEGER);
CREATE INDEX IF NOT EXISTS chunks_path ON chunks(path);
CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts USING fts5(
    text, content='chunks', content_rowid='id', tokenize='porter unicode61');
CREATE TRIGGER IF NOT EXISTS chunks_fts_add AFTER INSERT ON chunks BEGIN
    INSERT INTO chunks_fts(rowid, text) VALUES (new.id, new.text); END;
CREATE TRIGGER IF NOT EXISTS chunks_fts_del AFTER DELETE ON chunks BEGIN
    INSERT INTO chunks_fts(chunks_fts, rowid, text) VALUES ('delete', old.id, old.text); END;
"""
# Words too common to help BM25 find a passage; FTS5 keeps them in the index.
_STOPWORDS = frozenset(
    "a an and are as at be by can do does for from has have how i in is it its of on or that "
    "the this to was what when where which who why will with you your".split()
)


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


@dataclass(frozen=True)
class IndexInfo:
    """How an index was built. Querying it with other settings is refused."""

    embed_model: str
    embed_dim: int
    chunk_tokens: int
    chunk_overlap: int
    index_type: str = "Flat"
    format_version: int = FORMAT_VERSION
    ragcli_version: str = __version__
    faiss_version: str = ""
    sentence_transformers_version: str = ""

    @classmethod
    def for_build(cls, embed_model: str, embed_dim: int, chunk_tokens: int, chunk_overlap: int):
        return cls(
            embed_model=embed_model,
            embed_dim=embed_dim,
            chunk_tokens=chunk_tokens,
            chunk_overlap=chunk_overlap,
            faiss_version=_version("faiss-cpu"),
            sentence_transformers_version=_version("sentence-transformers"),
        )

    def mismatch(self, other: IndexInfo) -> str | None:
        """Why vectors built with ``other`` cannot go into this index, if they cannot."""
        if (self.embed_model, self.embed_dim) != (other.embed_model, other.embed_dim):
            return (
                f"it was built with embedding model {self.embed_model} ({self.embed_dim}-d), "
                f"not {other.embed_model} ({other.embed_dim}-d)"
            )
        if (self.chunk_tokens, self.chunk_overlap) != (other.chunk_tokens, other.chunk_overlap):
            return (
                f"it was built with chunks of {self.chunk_tokens} tokens overlapping by "
                f"{self.chunk_overlap}, not {other.chunk_tokens}/{other.chunk_overlap}"
            )
        return None


@dataclass(frozen=True)
class StoredChunk(Chunk):
    id: int = 0


class VectorIndex:
    """FAISS inner-product index addressed by chunk id.

    Callers see ids and scores only, so the FAISS index type (a factory
    string such as "Flat", "HNSW32" or "IVF256,Flat") can change freely.
    """

    def __init__(self, index) -> None:
        self._index = index

    @classmethod
    def create(cls, dim: int, index_type: str = "Flat") -> VectorIndex:
        import faiss

        return cls(faiss.index_factory(dim, f"IDMap2,{index_type}", faiss.METRIC_INNER_PRODUCT))

    @classmethod
    def load(cls, path: Path, mmap: bool = True) -> VectorIndex:
        """Read an index file; ``mmap`` maps flat vectors instead of reading them
        (readers only: a writer needs its own copy to add and remove)."""
        import faiss

        if mmap:
            flags = getattr(faiss, "IO_FLAG_MMAP_IFC", faiss.IO_FLAG_MMAP) | faiss.IO_FLAG_READ_ONLY
            try:
                return cls(faiss.read_index(str(path), flags))
            except RuntimeError:
                pass  # an index type that cannot be mapped: read it whole
        return cls(faiss.read_index(str(path)))

    def __len__(self) -> int:
        return int(self._index.ntotal)

    def add(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        self._index.add_with_ids(vectors, ids)

    def remove(self, ids: Iterable[int]) -> None:
        import numpy as np

        arr = np.fromiter(ids, dtype=np.int64)
        if len(arr):
            self._index.remove_ids(arr)

    def search(self, queries: np.ndarray, k: int) -> list[list[tuple[int, float]]]:
        scores, ids = self._index.search(queries, min(k, len(self)) or 1)
        return [
            [(int(i), float(s)) for i, s in zip(row_ids, row_scores, strict=True) if i >= 0]
            for row_ids, row_scores in zip(ids, scores, strict=True)
        ]

    def similarity(self, query: np.ndarray, ids: list[int]) -> dict[int, float]:
        import numpy as np

        if not ids:
            return {}
        vecs = np.vstack([self._index.reconstruct(int(i)) for i in ids])
        return {i: float(v) for i, v in zip(ids, vecs @ query, strict=True)}

    def save(self, path: Path) -> None:
        import faiss

        tmp = path.with_name(path.name + ".tmp")
        faiss.write_index(self._index, str(tmp))
        with tmp.open("rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)


class IndexStore:
    """Read access to an index folder; :meth:`writer` opens it for an update."""

    def __init__(self, root: Path, db: sqlite3.Connection, info: IndexInfo) -> None:
        self.root = root
        self._db = db
        self.info = info
        self._vectors: VectorIndex | None = None

    # -- opening ---------------------------------------------------------
    @classmethod
    def open(cls, root: Path) -> IndexStore:
        """Open an existing index for reading; clear errors when it is not one."""
        db_path = root / DB_NAME
        if not db_path.is_file():
            raise IndexMissingError(f"no index at {root}: run `rag index PATH` first")
        db = _connect(db_path)
        return cls(root, db, _read_info(db, root))

    @classmethod
    @contextlib.contextmanager
    def writer(cls, root: Path, info: IndexInfo, rebuild: bool = False) -> Iterator[IndexWriter]:
        """Hold the index's lock and yield a writer; nothing is visible until commit."""
        root.mkdir(parents=True, exist_ok=True)
        with _lock(root):
            db = _open_for_write(root / DB_NAME, rebuild)
            try:
                existing = None if rebuild or not _has_meta(db) else _read_info(db, root)
                if existing and (why := existing.mismatch(info)):
                    raise IndexMismatchError(
                        f"index {root} cannot take these vectors: {why}; "
                        "pass --rebuild to rebuild it, or use another --index"
                    )
                yield IndexWriter(root, db, info, fresh=existing is None)
            finally:
                db.close()

    def close(self) -> None:
        self._db.close()

    # -- reading ---------------------------------------------------------
    @property
    def vectors(self) -> VectorIndex:
        if self._vectors is None:
            self._vectors = _load_vectors(self._db, self.root, mmap=True)
        return self._vectors

    def files(self) -> dict[str, str]:
        """Indexed file path -> content sha256."""
        return dict(self._db.execute("SELECT path, sha256 FROM files"))

    def count_chunks(self) -> int:
        return int(self._db.execute("SELECT count(*) FROM chunks").fetchone()[0])

    def dense_search(self, query: np.ndarray, k: int) -> list[tuple[int, float]]:
        """(chunk id, cosine) of the top-k chunks for a normalized query vector."""
        if not len(self.vectors):
            return []
        return self.vectors.search(query.reshape(1, -1), k)[0]

    def similarity(self, query: np.ndarray, ids: list[int]) -> dict[int, float]:
        """Cosine between the query and the stored vectors of ``ids``."""
        return self.vectors.similarity(query, ids)

    def lexical_search(self, query: str, k: int) -> list[tuple[int, float]]:
        """BM25 (SQLite FTS5) over the chunk texts: (chunk id, score), best first."""
        terms = [t for t in re.findall(r"\w+", query.lower()) if t not in _STOPWORDS]
        if not terms:
            return []
        match = " OR ".join(f'"{t}"' for t in dict.fromkeys(terms))
        rows = self._db.execute(
            "SELECT rowid, bm25(chunks_fts) FROM chunks_fts WHERE chunks_fts MATCH ? "
            "ORDER BY bm25(chunks_fts) LIMIT ?",
            (match, k),
        )
        return [(int(i), -float(score)) for i, score in rows]

    def chunks(self, ids: list[int]) -> dict[int, StoredChunk]:
        if not ids:
            return {}
        marks = ",".join("?" * len(ids))
        rows = self._db.execute(
            "SELECT id, path, ordinal, start_line, end_line, text, n_tokens, page "
            f"FROM chunks WHERE id IN ({marks})",
            ids,
        )
        return {r[0]: _stored(r) for r in rows}

    def all_chunks(self) -> Iterator[StoredChunk]:
        rows = self._db.execute(
            "SELECT id, path, ordinal, start_line, end_line, text, n_tokens, page "
            "FROM chunks ORDER BY id"
        )
        for r in rows:
            yield _stored(r)


def _stored(r: tuple) -> StoredChunk:
    return StoredChunk(r[1], r[2], r[3], r[4], r[5], r[6], page=r[7], id=r[0])


class IndexWriter:
    """Stages file additions and removals; :meth:`commit` makes them visible at once."""

    def __init__(self, root: Path, db: sqlite3.Connection, info: IndexInfo, fresh: bool) -> None:
        self.root = root
        self._db = db
        self.info = info
        self.has_commit = not fresh
        db.execute("BEGIN IMMEDIATE")
        if fresh:
            db.execute("DELETE FROM chunks")
            db.execute("DELETE FROM files")
            self.vectors = VectorIndex.create(info.embed_dim, info.index_type)
        else:
            self.vectors = _load_vectors(db, root, mmap=False)
        self.files: dict[str, str] = dict(db.execute("SELECT path, sha256 FROM files"))
        # Vector files a crashed writer left behind (we hold the lock, so no writer
        # is using them, and readers only open the file the metadata names).
        row = db.execute("SELECT value FROM meta WHERE key = 'vectors'").fetchone()
        for stale in root.glob("vectors-*.faiss*"):
            if row is None or stale.name != row[0]:
                stale.unlink(missing_ok=True)

    def remove_file(self, path: str) -> None:
        ids = [r[0] for r in self._db.execute("SELECT id FROM chunks WHERE path = ?", (path,))]
        self.vectors.remove(ids)
        self._db.execute("DELETE FROM chunks WHERE path = ?", (path,))
        self._db.execute("DELETE FROM files WHERE path = ?", (path,))
        self.files.pop(path, None)

    def add_file(self, source: SourceFile, chunks: list[Chunk], vectors: np.ndarray) -> None:
        """Replace whatever the index held for this file with these chunks."""
        import numpy as np

        path = str(source.path)
        if path in self.files:
            self.remove_file(path)
        self._db.execute(
            "INSERT INTO files (path, sha256, size, n_chunks, indexed_at) VALUES (?, ?, ?, ?, ?)",
            (path, source.sha256, source.size, len(chunks), time.time()),
        )
        ids = []
        for c in chunks:
            cur = self._db.execute(
                "INSERT INTO chunks (path, ordinal, start_line, end_line, n_tokens, text, page) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (path, c.ordinal, c.start_line, c.end_line, c.n_tokens, c.text, c.page),
            )
            ids.append(cur.lastrowid)
        if ids:
            self.vectors.add(np.asarray(ids, dtype=np.int64), vectors)
        self.files[path] = source.sha256

    def commit(self) -> None:
        """Write the vectors to a new generation file, then commit the metadata naming it."""
        gen = f"vectors-{time.time_ns():x}.faiss"
        self.vectors.save(self.root / gen)
        meta = {f"info.{k}": json.dumps(v) for k, v in asdict(self.info).items()}
        meta["vectors"] = gen
        self._db.executemany("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", meta.items())
        self._db.execute("COMMIT")
        for stale in self.root.glob("vectors-*.faiss*"):
            if stale.name != gen:
                stale.unlink(missing_ok=True)


def _connect(path: Path) -> sqlite3.Connection:
    try:
        db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        db.execute("PRAGMA foreign_keys = ON")
        db.execute("PRAGMA journal_mode = WAL")
        return db
    except sqlite3.DatabaseError as exc:
        raise IndexCorruptError(
            f"index database {path} is unreadable ({exc}); {_REBUILD}"
        ) from None


_REBUILD = "rebuild it with `rag index --rebuild PATH`"


def _open_for_write(path: Path, rebuild: bool) -> sqlite3.Connection:
    """The database with its tables; with ``rebuild`` an unreadable one starts over."""
    try:
        db = _connect(path)
        db.executescript(_SCHEMA)
        columns = {r[1] for r in db.execute("PRAGMA table_info(chunks)")}
        if "page" not in columns:  # format 2; its rows are rebuilt or the index refused
            db.execute("ALTER TABLE chunks ADD COLUMN page INTEGER")
        n_fts = db.execute("SELECT count(*) FROM chunks_fts_docsize").fetchone()[0]
        if n_fts != db.execute("SELECT count(*) FROM chunks").fetchone()[0]:
            db.execute("INSERT INTO chunks_fts(chunks_fts) VALUES ('rebuild')")
        return db
    except (sqlite3.DatabaseError, IndexCorruptError):
        if not rebuild:
            raise IndexCorruptError(f"index database {path} is unreadable; {_REBUILD}") from None
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    db = _connect(path)
    db.executescript(_SCHEMA)
    return db


def _has_meta(db: sqlite3.Connection) -> bool:
    return db.execute("SELECT 1 FROM meta WHERE key = 'vectors'").fetchone() is not None


def _read_info(db: sqlite3.Connection, root: Path) -> IndexInfo:
    try:
        rows = dict(db.execute("SELECT key, value FROM meta WHERE key LIKE 'info.%'"))
        fields = {k.removeprefix("info."): json.loads(v) for k, v in rows.items()}
        info = IndexInfo(**fields)
    except (sqlite3.DatabaseError, ValueError, TypeError) as exc:
        raise IndexCorruptError(
            f"index {root} has unreadable metadata ({exc}); {_REBUILD}"
        ) from None
    if info.format_version != FORMAT_VERSION:
        raise IndexMismatchError(
            f"index {root} has format {info.format_version}, this ragcli reads {FORMAT_VERSION}; "
            + _REBUILD
        )
    return info


def _load_vectors(db: sqlite3.Connection, root: Path, mmap: bool) -> VectorIndex:
    try:
        row = db.execute("SELECT value FROM meta WHERE key = 'vectors'").fetchone()
        n_chunks = db.execute("SELECT count(*) FROM chunks").fetchone()[0]
    except sqlite3.DatabaseError as exc:
        raise IndexCorruptError(f"index {root} is unreadable ({exc}); {_REBUILD}") from None
    if row is None:
        raise IndexCorruptError(f"index {root} names no vector file; {_REBUILD}")
    path = root / row[0]
    try:
        vectors = VectorIndex.load(path, mmap=mmap)
    except RuntimeError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else "unreadable"
        raise IndexCorruptError(f"vector file {path} is unreadable ({first}); {_REBUILD}") from None
    if len(vectors) != n_chunks:
        raise IndexCorruptError(
            f"index {root} is inconsistent ({len(vectors)} vectors for {n_chunks} chunks); {_REBUILD}"
        )
    return vectors


@contextlib.contextmanager
def _lock(root: Path) -> Iterator[None]:
    with (root / "lock").open("a+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise IndexLockedError(
                f"index {root} is being written by another `rag index`; try again when it ends"
            ) from None
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
