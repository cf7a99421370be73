"""The index on disk: a FAISS vector file beside a SQLite database of chunks.

Layout of an index folder::

    index.sqlite        files, chunks (text, path, line range) and build metadata
    vectors-<gen>.faiss the vectors, ids = chunk ids; <gen> named in the metadata
    lock                held by the one writer

A write never touches the files a reader uses: the new vectors go to a new
generation file, and the SQLite commit that names it is the single atomic
commit point. A crash before it leaves the previous index as it was; the
orphaned file is removed by the next writer.

A reader holds one SQLite read transaction for each search (:meth:`FaissStore.reading`),
so the chunks it reads and the vector file it searches belong to the same commit. The
writer removes the previous vector file right after its commit; a reader that had just
read that file's name finds it gone, and then reads the metadata again (a new commit
names a new file) instead of failing.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import fcntl
import json
import shutil
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import (
    DiskFullError,
    IndexCorruptError,
    IndexLockedError,
    IndexMismatchError,
    IndexMissingError,
)
from ..records import Chunk, SourceFile, StoredChunk
from .base import AUTO, FileWriter, IndexInfo, check_format, lexical_terms
from .faiss_index import VectorIndex, check_index_type, maps_when_writing

if TYPE_CHECKING:
    import numpy as np

DB_NAME = "index.sqlite"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS files (
    path TEXT PRIMARY KEY, sha256 TEXT NOT NULL, size INTEGER NOT NULL,
    n_chunks INTEGER NOT NULL, indexed_at REAL NOT NULL, mtime_ns INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS chunks (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    path TEXT NOT NULL REFERENCES files(path) ON DELETE CASCADE,
    ordinal INTEGER NOT NULL, start_line INTEGER NOT NULL, end_line INTEGER NOT NULL,
    n_tokens INTEGER NOT NULL, text TEXT NOT NULL, page INTEGER,
    heading TEXT NOT NULL DEFAULT '');
CREATE INDEX IF NOT EXISTS chunks_path ON chunks(path);
CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts USING fts5(
    text, content='chunks', content_rowid='id', tokenize='porter unicode61');
CREATE TRIGGER IF NOT EXISTS chunks_fts_add AFTER INSERT ON chunks BEGIN
    INSERT INTO chunks_fts(rowid, text) VALUES (new.id, new.text); END;
CREATE TRIGGER IF NOT EXISTS chunks_fts_del AFTER DELETE ON chunks BEGIN
    INSERT INTO chunks_fts(chunks_fts, rowid, text) VALUES ('delete', old.id, old.text); END;
"""


# -- index types ---------------------------------------------------------------


def _stored_type(db: sqlite3.Connection) -> tuple[str, str]:
    """The factory string and search parameters the metadata records for the vector file."""
    rows = dict(
        db.execute(
            "SELECT key, value FROM meta WHERE key IN ('info.index_type', 'info.search_params')"
        )
    )
    kind, params = rows.get("info.index_type"), rows.get("info.search_params")
    return (json.loads(kind) if kind else "Flat"), (json.loads(params) if params else "")


class FaissStore:
    """Read access to an index folder; :meth:`writer` opens it for an update."""

    def __init__(self, root: Path, db: sqlite3.Connection, info: IndexInfo) -> None:
        self.root = root
        self._db = db
        self.info = info
        self._vectors: VectorIndex | None = None
        self._generation = ""  # the commit ``info`` and the vectors were read from
        self._depth = 0  # nested reading() blocks share the outer one's transaction

    # -- opening ---------------------------------------------------------
    @classmethod
    def open(cls, root: Path) -> FaissStore:
        """Open an existing index for reading; clear errors when it is not one.

        A database without a commit is a first `rag index` still at work: until its
        first commit there is no index to read, which is what the reader is told."""
        db_path = root / DB_NAME
        if not db_path.is_file():
            raise IndexMissingError(f"no index at {root}: run `rag index PATH` first")
        with _disk_full_as_error(root):
            db = _connect(db_path)
            try:
                store = cls(root, db, IndexInfo("", 0, 0, 0))
                with store.reading():
                    return store
            except BaseException:
                db.close()
                raise

    @classmethod
    @contextlib.contextmanager
    def writer(cls, root: Path, info: IndexInfo, rebuild: bool = False) -> Iterator[FaissWriter]:
        """Hold the index's lock and yield a writer; nothing is visible until commit."""
        if info.index_spec is not None:  # a bad factory string fails before any work
            check_index_type(info.index_spec, info.embed_dim)
        root.mkdir(parents=True, exist_ok=True)
        with _disk_full_as_error(root), _lock(root):
            db = _open_for_write(root / DB_NAME, rebuild)
            try:
                existing = None if rebuild or not _has_meta(db) else _read_info(db, root)
                if existing and (why := existing.mismatch(info)):
                    raise IndexMismatchError(
                        f"index {root} cannot take these vectors: {why}; "
                        "pass --rebuild to rebuild it, or use another --index"
                    )
                if info.index_spec is None:  # no type asked for: keep the index's own
                    spec = existing.index_spec if existing else AUTO
                    info = dataclasses.replace(info, index_spec=spec)
                if existing:  # what the stored passages are, until all are read again
                    info = dataclasses.replace(info, text_version=existing.text_version)
                yield FaissWriter(root, db, info, fresh=existing is None)
            finally:
                db.close()

    def close(self) -> None:
        self._db.close()

    # -- reading ---------------------------------------------------------
    @property
    def vectors(self) -> VectorIndex:
        """The vectors of the commit held (or the newest, outside :meth:`reading`)."""
        with self.reading():
            assert self._vectors is not None
            return self._vectors

    def generation(self) -> str:
        """The vector file the last commit named (a new name on every commit)."""
        try:
            row = self._db.execute("SELECT value FROM meta WHERE key = 'vectors'").fetchone()
        except sqlite3.DatabaseError as exc:
            raise IndexCorruptError(
                f"index {self.root} is unreadable ({exc}); {_REBUILD}"
            ) from None
        return row[0] if row else ""

    @contextlib.contextmanager
    def reading(self) -> Iterator[str]:
        """Hold the newest commit for the block (one SQLite read transaction): the chunks,
        the BM25 table, ``info`` and the vectors all come from the generation yielded."""
        if self._depth:
            yield self._generation
            return
        for attempt in range(READ_ATTEMPTS):
            self._db.execute("BEGIN")
            try:
                generation = self.generation()  # the first read fixes the snapshot
                if not generation:
                    raise IndexMissingError(
                        f"no index at {self.root} yet: the first `rag index` of it has not "
                        "committed; try again when it has"
                    )
                if generation != self._generation:
                    self._follow(generation)
                break
            except IndexCorruptError:
                self._db.execute("ROLLBACK")
                # The vector file just named was replaced by a newer commit: read that one.
                if attempt + 1 < READ_ATTEMPTS and self.generation() != generation:
                    continue
                raise
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        self._depth += 1
        try:
            yield generation
        finally:
            self._depth -= 1
            self._db.execute("COMMIT")

    def _follow(self, generation: str) -> None:
        """Take the build record and the vectors (memory-mapped) of a new commit."""
        info = _read_info(self._db, self.root)
        vectors = _load_vectors(self._db, self.root, mmap=True)
        self.info, self._vectors, self._generation = info, vectors, generation

    def files(self) -> dict[str, str]:
        """Indexed file path -> content sha256."""
        return dict(self._db.execute("SELECT path, sha256 FROM files"))

    def count_chunks(self) -> int:
        return int(self._db.execute("SELECT count(*) FROM chunks").fetchone()[0])

    def dense_search(self, query: np.ndarray, k: int) -> list[tuple[int, float]]:
        """(chunk id, cosine) of the top-k chunks for a normalized query vector."""
        with self.reading():
            if not len(self.vectors):
                return []
            return self.vectors.search(query.reshape(1, -1), k)[0]

    def similarity(self, query: np.ndarray, ids: list[int]) -> dict[int, float]:
        """Cosine between the query and the stored vectors of ``ids``."""
        with self.reading():
            return self.vectors.similarity(query, ids)

    def lexical_search(self, query: str, k: int) -> list[tuple[int, float]]:
        """BM25 (SQLite FTS5) over the chunk texts: (chunk id, score), best first."""
        terms = lexical_terms(query)
        if not terms:
            return []
        match = " OR ".join(f'"{t}"' for t in dict.fromkeys(terms))
        with self.reading():
            rows = self._db.execute(
                "SELECT rowid, bm25(chunks_fts) FROM chunks_fts WHERE chunks_fts MATCH ? "
                "ORDER BY bm25(chunks_fts) LIMIT ?",
                (match, k),
            ).fetchall()
        return [(int(i), -float(score)) for i, score in rows]

    def chunks(self, ids: list[int]) -> dict[int, StoredChunk]:
        if not ids:
            return {}
        marks = ",".join("?" * len(ids))
        with self.reading():
            rows = self._db.execute(f"{_CHUNK_ROWS} WHERE id IN ({marks})", ids).fetchall()
        return {r[0]: _stored(r) for r in rows}

    def page(self, path: str, limit: int) -> list[StoredChunk]:
        with self.reading():
            query = f"{_CHUNK_ROWS} WHERE path = ? ORDER BY ordinal LIMIT ?"
            rows = self._db.execute(query, (path, limit)).fetchall()
        return [_stored(r) for r in rows]

    def all_chunks(self) -> Iterator[StoredChunk]:
        rows = self._db.execute(f"{_CHUNK_ROWS} ORDER BY id")
        for r in rows:
            yield _stored(r)


_CHUNK_ROWS = (
    "SELECT id, path, ordinal, start_line, end_line, text, n_tokens, page, heading FROM chunks"
)


def _stored(r: tuple) -> StoredChunk:
    return StoredChunk(r[1], r[2], r[3], r[4], r[5], r[6], page=r[7], heading=r[8], id=r[0])


class FaissWriter(FileWriter):
    """Stages file additions and removals; :meth:`commit` makes them visible at once.

    A long run commits several times (between files), so a killed run keeps
    the files it finished; what it staged after its last commit is lost whole.
    """

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
            self.vectors = _load_vectors(db, root, mmap=None)
            self.info = dataclasses.replace(
                info, index_type=self.vectors.index_type, search_params=self.vectors.search_params
            )
        self.vectors.spill_to(root)  # new vectors wait on disk until the commit
        self.files: dict[str, str] = {}
        # path -> (size, mtime_ns, indexed_at): lets an unchanged file skip hashing
        self.stats: dict[str, tuple[int, int, float]] = {}
        for path, sha, size, mtime_ns, at in db.execute(
            "SELECT path, sha256, size, mtime_ns, indexed_at FROM files"
        ):
            self.files[path] = sha
            self.stats[path] = (size, mtime_ns, at)
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
        self.stats.pop(path, None)

    def start_file(self, source: SourceFile) -> None:
        """Drop the file's old chunks; its new ones follow in one or more
        :meth:`add_chunks` calls (a streamed file), then :meth:`finish_file`."""
        path = str(source.path)
        if path in self.files:
            self.remove_file(path)
        self._db.execute(
            "INSERT INTO files (path, sha256, size, n_chunks, indexed_at, mtime_ns) "
            "VALUES (?, ?, ?, 0, ?, ?)",
            (path, source.sha256, source.size, time.time(), source.mtime_ns),
        )

    def add_chunks(self, path: str, chunks: list[Chunk], vectors: np.ndarray) -> None:
        import numpy as np

        ids = []
        for c in chunks:
            cur = self._db.execute(
                "INSERT INTO chunks (path, ordinal, start_line, end_line, n_tokens, text, page, "
                "heading) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (path, c.ordinal, c.start_line, c.end_line, c.n_tokens, c.text, c.page, c.heading),
            )
            ids.append(cur.lastrowid)
        if ids:
            self.vectors.add(np.asarray(ids, dtype=np.int64), vectors)

    def finish_file(self, source: SourceFile, n_chunks: int) -> None:
        path = str(source.path)
        now = time.time()
        self._db.execute(
            "UPDATE files SET n_chunks = ?, indexed_at = ? WHERE path = ?", (n_chunks, now, path)
        )
        self.files[path] = source.sha256
        self.stats[path] = (source.size, source.mtime_ns, now)

    def count_chunks(self) -> int:
        return len(self.vectors)

    def needs_commit(self) -> bool:
        """Whether a commit is due with no file changed: the vectors want another
        index type (``--index-type`` changed, or the index outgrew flat search)."""
        return self.vectors.needs_finalize(self.info)

    def commit(self) -> None:
        """Write the vectors to a new generation file, then commit the metadata naming it."""
        gen = f"vectors-{time.time_ns():x}.faiss"
        self.info = self.vectors.finalize(self.info)  # index type chosen by size, trained
        self.vectors.save(self.root / gen)
        meta = {f"info.{k}": json.dumps(v) for k, v in asdict(self.info).items()}
        meta["vectors"] = gen
        self._db.executemany("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", meta.items())
        self._db.execute("COMMIT")
        self.has_commit = True
        for stale in self.root.glob("vectors-*.faiss*"):
            if stale.name != gen:
                stale.unlink(missing_ok=True)
        self._db.execute("BEGIN IMMEDIATE")  # the next batch; dropped if nothing follows


READ_ATTEMPTS = 8  # commits in a row a reader may miss before it gives up
LOW_SPACE = 1 << 20  # bytes free below which a failed write is taken for a full disk


@contextlib.contextmanager
def _disk_full_as_error(root: Path) -> Iterator[None]:
    """Say "disk full" when a write failed for want of space, not "unreadable, rebuild"
    (a rebuild would not help) or a bug; the last commit is untouched either way."""
    try:
        yield
    except (OSError, sqlite3.DatabaseError, RuntimeError, IndexCorruptError) as exc:
        if not _disk_full(root, exc):
            raise
        raise DiskFullError(
            f"no space left on the disk of {root}: the index is as its last commit left it; "
            "free some space and run again"
        ) from None


def _disk_full(root: Path, exc: BaseException) -> bool:
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    if any(s in str(exc) for s in ("disk is full", "No space left")):
        return True
    try:  # sqlite and faiss often say only "disk I/O error" or "write failed"
        return shutil.disk_usage(root).free < LOW_SPACE
    except OSError:
        return False


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
        if "heading" not in columns:  # format 3
            db.execute("ALTER TABLE chunks ADD COLUMN heading TEXT NOT NULL DEFAULT ''")
        if "mtime_ns" not in {r[1] for r in db.execute("PRAGMA table_info(files)")}:
            db.execute("ALTER TABLE files ADD COLUMN mtime_ns INTEGER NOT NULL DEFAULT 0")
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
    check_format(info, str(root), _REBUILD)
    return info


def _load_vectors(db: sqlite3.Connection, root: Path, mmap: bool | None) -> VectorIndex:
    """The vectors the last commit names; ``mmap=None``: as a writer wants them (mapped
    when a commit rewrites them from the file, else read whole to change in place)."""
    try:
        row = db.execute("SELECT value FROM meta WHERE key = 'vectors'").fetchone()
        n_chunks = db.execute("SELECT count(*) FROM chunks").fetchone()[0]
        kind, params = _stored_type(db)
    except (sqlite3.DatabaseError, ValueError) as exc:
        raise IndexCorruptError(f"index {root} is unreadable ({exc}); {_REBUILD}") from None
    if row is None:
        raise IndexCorruptError(f"index {root} names no vector file; {_REBUILD}")
    path = root / row[0]
    if mmap is None:
        mmap = maps_when_writing(kind)
    try:
        vectors = VectorIndex.load(path, mmap=mmap, index_type=kind, search_params=params)
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
