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
import dataclasses
import fcntl
import json
import math
import os
import re
import sqlite3
import tempfile
import time
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING

from .. import __version__
from ..errors import (
    ConfigError,
    IndexCorruptError,
    IndexLockedError,
    IndexMismatchError,
    IndexMissingError,
)
from ..index.chunking import Chunk
from ..index.read import SourceFile

if TYPE_CHECKING:
    import numpy as np

FORMAT_VERSION = 4  # 2: BM25 full-text table; 3: PDF page of each chunk; 4: heading path
DB_NAME = "index.sqlite"
AUTO = "auto"  # index type chosen by size: see auto_index_type
# "auto" searches exactly below this many vectors: flat search of 100k 384-d vectors
# takes ~9 ms a query here, 200k ~20 ms (docs/BENCHMARKS.md, "Index types at scale").
FLAT_MAX = 100_000
MIN_TRAIN_PER_LIST = 39  # faiss's k-means wants this many points per centroid
TRAIN_PER_LIST = 64  # more only slows training
# Search-time parameters are set at each (re)build: the smallest nprobe / efSearch that
# finds this share of the exact 10 nearest neighbours of sample vectors of the index.
# Above the 0.95 target: questions lie further from passages than passages from each
# other (MiniLM on pydocs: recall 0.90 for the questions where held-out passages gave 0.96).
CALIBRATION_RECALL = 0.99
CALIBRATION_QUERIES = 200
REBUILD_SLICE = 32_768  # vectors moved at a time by a rebuild
# Floors, as a margin: on clustered vectors IVF lists match the clusters so well that one
# probe passes the sample, yet a question lies further from its passages than they do
# from each other. Below these the search costs well under a millisecond anyway.
NPROBE_MIN = 16

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
    # index_type is what the vector file holds; index_spec what was asked for ("auto",
    # or a factory string); search_params are stored in the vector file too.
    index_spec: str | None = AUTO  # None only while building: keep what the index has
    search_params: str = ""

    @classmethod
    def for_build(
        cls,
        embed_model: str,
        embed_dim: int,
        chunk_tokens: int,
        chunk_overlap: int,
        index_spec: str | None = AUTO,
    ):
        return cls(
            embed_model=embed_model,
            embed_dim=embed_dim,
            chunk_tokens=chunk_tokens,
            chunk_overlap=chunk_overlap,
            faiss_version=_version("faiss-cpu"),
            sentence_transformers_version=_version("sentence-transformers"),
            index_spec=None if index_spec is None else _checked_spec(index_spec, embed_dim),
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
    string such as "Flat", "HNSW32" or "IVF256,Flat") can change freely:
    :meth:`finalize` rebuilds the vectors into the type the index info asks
    for. IVF types keep chunk ids themselves (an ``IDMap2`` wrapper would
    mis-number them after a removal); the others sit in an ``IDMap2``.
    """

    def __init__(self, index, index_type: str = "Flat", search_params: str = "") -> None:
        self._index = index
        self.index_type = index_type
        self.search_params = search_params  # as recorded: value and the recall it measured
        # Ids removed from a type that cannot remove (HNSW): left out at the next rebuild.
        self._dropped: set[int] = set()

    @classmethod
    def create(cls, dim: int, index_type: str = "Flat") -> VectorIndex:
        return cls(_new_faiss_index(dim, index_type), index_type)

    @classmethod
    def load(
        cls, path: Path, mmap: bool = True, index_type: str = "Flat", search_params: str = ""
    ) -> VectorIndex:
        """Read an index file; ``mmap`` maps flat vectors and IVF lists instead of
        reading them (readers only: a writer needs its own copy to add and remove)."""
        import faiss

        if mmap:
            flags = getattr(faiss, "IO_FLAG_MMAP_IFC", faiss.IO_FLAG_MMAP) | faiss.IO_FLAG_READ_ONLY
            try:
                return cls(faiss.read_index(str(path), flags), index_type, search_params)
            except RuntimeError:
                pass  # an index type that cannot be mapped: read it whole
        return cls(faiss.read_index(str(path)), index_type, search_params)

    def __len__(self) -> int:
        return int(self._index.ntotal) - len(self._dropped)

    def add(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        self._index.add_with_ids(vectors, ids)

    def remove(self, ids: Iterable[int]) -> None:
        import numpy as np

        arr = np.fromiter(ids, dtype=np.int64)
        if not len(arr):
            return
        try:
            self._index.remove_ids(arr)
        except RuntimeError:  # HNSW cannot remove: the next finalize rebuilds without them
            self._dropped.update(int(i) for i in arr)

    def search(self, queries: np.ndarray, k: int) -> list[list[tuple[int, float]]]:
        if self._dropped:
            self._rebuild(self.index_type)
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

    def target_type(self, spec: str, flat_max: int = FLAT_MAX) -> str:
        """The type these vectors should have under ``spec`` ("auto" or a factory string).

        "auto" keeps the current type while it still fits the size (no rebuild
        each time the index grows by a file); a type that needs more training
        points than there are vectors waits as "Flat".
        """
        n = len(self)
        if spec == AUTO:
            if _auto_fits(self.index_type, n, flat_max):
                return self.index_type
            spec = auto_index_type(n, flat_max)
        return spec if _trainable(spec, n) else "Flat"

    def needs_finalize(self, info: IndexInfo, flat_max: int = FLAT_MAX) -> bool:
        """Whether :meth:`finalize` would rebuild (other type wanted, or removals pending)."""
        return bool(self._dropped) or self.target_type(info.index_spec, flat_max) != self.index_type

    def finalize(self, info: IndexInfo, flat_max: int = FLAT_MAX) -> IndexInfo:
        """Before a save: rebuild into the type ``info.index_spec`` asks for at this size,
        set the search parameters, and return ``info`` saying what the file holds."""
        want = self.target_type(info.index_spec, flat_max)
        if want != self.index_type or self._dropped:
            self._rebuild(want)
        return dataclasses.replace(
            info,
            index_type=self.index_type,
            search_params=self.search_params or _search_params(self._index),
        )

    def _rebuild(self, index_type: str) -> None:
        """Build ``index_type`` from the vectors this index holds (exact for Flat and
        IVF-Flat; decoded approximations for quantized types), training it first.

        The vectors pass through a temporary file: memory holds the old index, then
        the new one, never both plus a copy (a 1M-vector rebuild would otherwise
        need three times the index's size).
        """
        import faiss
        import numpy as np

        old = self._index
        ids = _stored_ids(old)
        keep = np.ones(len(ids), dtype=bool)
        if self._dropped:
            keep = ~np.isin(ids, np.fromiter(self._dropped, dtype=np.int64))
        kept_ids = ids[keep]
        n, dim = len(kept_ids), int(old.d)
        new = _new_faiss_index(dim, index_type)
        knob = _search_knob(new)
        held = _calibration_sample(n) if knob[0] else np.zeros(0, np.int64)
        where = np.flatnonzero(keep)  # kept position -> storage position
        queries = _vectors_at(old, ids, where[held])
        sample = np.zeros(0, np.int64) if new.is_trained else _training_positions(n, new)
        k = min(10, n - len(held))
        nearest = _TopK(queries, k)
        with tempfile.TemporaryFile(prefix="ragcli-rebuild-") as spill:
            train_rows, pos = [], 0
            for begin in range(0, len(ids), REBUILD_SLICE):
                block = _vectors_at(
                    old, ids, np.arange(begin, min(begin + REBUILD_SLICE, len(ids)))
                )
                if not keep[begin : begin + REBUILD_SLICE].all():
                    block = block[keep[begin : begin + REBUILD_SLICE]]
                spill.write(memoryview(np.ascontiguousarray(block, dtype=np.float32)))
                span = slice(pos, pos + len(block))
                train_rows.append(block[_within(sample, span)])
                nearest.update(block, kept_ids[span], exclude=_within(held, span))
                pos += len(block)
            self._index = old = None  # free the old copy before building the new one
            if not new.is_trained:
                try:
                    new.train(np.concatenate(train_rows) if train_rows else queries)
                except RuntimeError:  # too few vectors for this type yet: exact until there are
                    new, index_type = _new_faiss_index(dim, "Flat"), "Flat"
            del train_rows
            spill.seek(0)
            for begin in range(0, n, REBUILD_SLICE):
                rows = min(REBUILD_SLICE, n - begin)
                block = np.frombuffer(spill.read(rows * dim * 4), dtype=np.float32)
                block = block.reshape(rows, dim)
                free = np.ones(rows, dtype=bool)
                free[_within(held, slice(begin, begin + rows))] = False
                new.add_with_ids(block[free], kept_ids[begin : begin + rows][free])
        # The held vectors go in last: until now they served as unseen queries.
        params = ""
        if len(held):
            recall = _calibrate(new, queries, nearest.ids())
            new.add_with_ids(queries, kept_ids[held])
            params = f"{_search_params(new)}, held-out recall@10 {recall:.3f}"
        elif knob[0]:  # too few vectors to measure: the widest search tried
            faiss.ParameterSpace().set_index_parameter(new, knob[0], knob[1][-1])
        self._index, self.index_type, self._dropped = new, index_type, set()
        self.search_params = params

    def save(self, path: Path) -> None:
        import faiss

        if self._dropped:
            self._rebuild(self.index_type)
        tmp = path.with_name(path.name + ".tmp")
        faiss.write_index(self._index, str(tmp))
        with tmp.open("rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)


# -- index types ---------------------------------------------------------------


def auto_index_type(n: int, flat_max: int = FLAT_MAX) -> str:
    """What "auto" builds for ``n`` vectors: exact "Flat" below ``flat_max``, else
    "IVF<nlist>,Flat" with about 2*sqrt(n) lists (a power of two). IVF-Flat keeps
    the exact vectors, so it can be rebuilt without loss as the index grows."""
    if n < flat_max:
        return "Flat"
    return f"IVF{_auto_nlist(n)},Flat"


def _auto_nlist(n: int) -> int:
    by_size = round(math.log2(2 * math.sqrt(max(n, 1))))
    by_training = math.floor(math.log2(max(n // MIN_TRAIN_PER_LIST, 1)))
    return 1 << max(0, min(by_size, by_training))


def _auto_fits(index_type: str, n: int, flat_max: int) -> bool:
    """Whether an existing type is still an "auto" choice for ``n`` (with some slack,
    so an index near a boundary is not rebuilt back and forth)."""
    if index_type == "Flat":
        return n < flat_max
    m = re.fullmatch(r"IVF(\d+),Flat", index_type)
    if not m or n < flat_max // 2:
        return False
    return int(m.group(1)) in {_auto_nlist(n) // 2, _auto_nlist(n), _auto_nlist(n) * 2}


def _checked_spec(spec: str, dim: int) -> str:
    check_index_type(spec, dim)
    return spec


def _stored_type(db: sqlite3.Connection) -> tuple[str, str]:
    """The factory string and search parameters the metadata records for the vector file."""
    rows = dict(
        db.execute(
            "SELECT key, value FROM meta WHERE key IN ('info.index_type', 'info.search_params')"
        )
    )
    kind, params = rows.get("info.index_type"), rows.get("info.search_params")
    return (json.loads(kind) if kind else "Flat"), (json.loads(params) if params else "")


def check_index_type(spec: str, dim: int) -> None:
    """Refuse, with a one-line error, a type FAISS cannot build (before any index is touched)."""
    if spec == AUTO:
        return
    import faiss

    try:
        index = faiss.index_factory(dim, spec, faiss.METRIC_INNER_PRODUCT)
    except RuntimeError as exc:
        raise ConfigError(
            f"index type {spec!r} is not one FAISS can build ({_faiss_reason(exc)}); "
            'use "auto" or a factory string such as "HNSW32" or "IVF1024,Flat"'
        ) from None
    if spec.upper().startswith("IDMAP"):
        raise ConfigError(f"index type {spec!r}: leave out IDMap, ragcli maps chunk ids itself")
    ivf = faiss.try_extract_index_ivf(index)
    if ivf is not None and ivf.nlist < 1:
        raise ConfigError(f"index type {spec!r}: an IVF index needs at least one list")


def _faiss_reason(exc: Exception) -> str:
    """The readable part of a FAISS C++ exception (it starts with a source location)."""
    text = " ".join(str(exc).split())
    text = re.sub(r"^Error in .*? at \S+:\d+: ", "", text)
    return re.sub(r"^Error: '.*?' failed: ", "", text) or "rejected"


def _new_faiss_index(dim: int, index_type: str):
    import faiss

    index = faiss.index_factory(dim, index_type, faiss.METRIC_INNER_PRODUCT)
    ivf = faiss.try_extract_index_ivf(index)
    if ivf is None:
        return faiss.index_factory(dim, f"IDMap2,{index_type}", faiss.METRIC_INNER_PRODUCT)
    ivf.set_direct_map_type(faiss.DirectMap.Hashtable)  # reconstruct and remove by chunk id
    return index


def _trainable(index_type: str, n: int) -> bool:
    """Whether ``n`` vectors are enough to train ``index_type`` without FAISS warning
    (k-means wants 39 points per centroid: per IVF list, per PQ code)."""
    m = re.search(r"IVF(\d+)", index_type)
    if m and n < MIN_TRAIN_PER_LIST * int(m.group(1)):
        return False
    return not re.search(r"PQ\d", index_type) or n >= MIN_TRAIN_PER_LIST * 256


def _training_positions(n: int, index) -> np.ndarray:
    """Seeded random positions of a training set big enough for the index's k-means."""
    import faiss
    import numpy as np

    ivf = faiss.try_extract_index_ivf(index)
    limit = max(TRAIN_PER_LIST * (ivf.nlist if ivf is not None else 0), 65_536)
    if n <= limit:
        return np.arange(n)
    return np.sort(np.random.default_rng(0).choice(n, limit, replace=False))


def _within(positions: np.ndarray, span: slice) -> np.ndarray:
    """The sorted ``positions`` inside ``span``, relative to its start."""
    lo, hi = positions.searchsorted([span.start, span.stop])
    return positions[lo:hi] - span.start


def _stored_ids(index) -> np.ndarray:
    """The ids of an index's vectors in storage order."""
    import faiss
    import numpy as np

    if isinstance(index, faiss.IndexIDMap2):
        return faiss.vector_to_array(index.id_map).astype(np.int64)
    ivf = faiss.extract_index_ivf(index)
    lists = ivf.invlists
    parts = []
    for i in range(ivf.nlist):
        size = lists.list_size(i)
        if size:
            ptr = lists.get_ids(i)
            parts.append(faiss.rev_swig_ptr(ptr, size).copy())
            lists.release_ids(i, ptr)
    return np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, np.int64)


def _vectors_at(index, ids: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """The vectors at storage ``positions`` (ids from :func:`_stored_ids`)."""
    import faiss
    import numpy as np

    if not len(positions):
        return np.zeros((0, index.d), dtype=np.float32)
    if isinstance(index, faiss.IndexIDMap2):
        inner = index.index
        if positions[-1] - positions[0] + 1 == len(positions):  # a contiguous run
            return inner.reconstruct_n(int(positions[0]), len(positions))
        return np.vstack([inner.reconstruct(int(p)) for p in positions])
    return index.reconstruct_batch(ids[positions])


class _TopK:
    """Exact inner-product neighbours of a few queries, gathered block by block."""

    def __init__(self, queries: np.ndarray, k: int) -> None:
        import numpy as np

        self.queries, self.k = queries, k
        self.scores = np.full((len(queries), k), -np.inf, dtype=np.float32)
        self.found = np.full((len(queries), k), -1, dtype=np.int64)

    def update(self, block: np.ndarray, block_ids: np.ndarray, exclude: np.ndarray) -> None:
        import numpy as np

        if not len(self.queries) or not len(block) or self.k <= 0:
            return
        step = 8192  # keeps the score and index matrices at a few MB
        for lo in range(0, len(block), step):
            scores = self.queries @ block[lo : lo + step].T
            scores[:, exclude[(exclude >= lo) & (exclude < lo + step)] - lo] = -np.inf
            both = np.hstack([self.scores, scores])
            ids = np.hstack([self.found, np.broadcast_to(block_ids[lo : lo + step], scores.shape)])
            top = np.argpartition(-both, self.k - 1, axis=1)[:, : self.k]
            self.scores = np.take_along_axis(both, top, axis=1)
            self.found = np.take_along_axis(ids, top, axis=1)

    def ids(self) -> list[set[int]]:
        return [set(row[row >= 0].tolist()) for row in self.found]


def _contents(index) -> tuple[np.ndarray, np.ndarray]:
    """(ids, vectors) of everything an index holds."""
    import numpy as np

    ids = _stored_ids(index)
    return ids, _vectors_at(index, ids, np.arange(len(ids)))


def _search_knob(index) -> tuple[str, list[int]]:
    """The search-time parameter of an approximate index and the values worth trying."""
    import faiss

    ivf = faiss.try_extract_index_ivf(index)
    if ivf is not None:
        # Up to a quarter of the lists (beyond, flat search is about as fast), or 64.
        top = max(ivf.nlist // 4, min(ivf.nlist, 64))
        low = min(NPROBE_MIN, top)
        return "nprobe", [p for p in (2**i for i in range(11)) if low <= p < top] + [top]
    inner = faiss.downcast_index(index.index) if isinstance(index, faiss.IndexIDMap2) else index
    if hasattr(inner, "hnsw"):
        return "efSearch", [32, 64, 128, 256, 512]
    return "", []


def _search_params(index) -> str:
    """The search-time parameter the vector file holds, e.g. "nprobe=32" ("" for exact)."""
    import faiss

    name, _ = _search_knob(index)
    if name == "nprobe":
        return f"nprobe={faiss.try_extract_index_ivf(index).nprobe}"
    if name == "efSearch":
        inner = faiss.downcast_index(index.index) if isinstance(index, faiss.IndexIDMap2) else index
        return f"efSearch={inner.hnsw.efSearch}"
    return ""


def _calibration_sample(n: int) -> np.ndarray:
    """Positions of the vectors held out to calibrate search (none for a tiny index)."""
    import numpy as np

    if n < 4 * CALIBRATION_QUERIES // 10:
        return np.zeros(0, np.int64)
    size = min(CALIBRATION_QUERIES, n // 10)
    return np.sort(np.random.default_rng(0).choice(n, size, replace=False))


def _calibrate(index, queries: np.ndarray, truth: list[set[int]]) -> float:
    """Set nprobe / efSearch to the smallest value whose recall@10 for the held-out
    ``queries`` (not in the index; ``truth`` = their exact neighbours in it) reaches
    CALIBRATION_RECALL, or where more stops helping (quantized codes cap recall
    below exact).

    Measured on the index's own data, so a corpus with less structure gets a wider
    search; the benchmark checks the outcome on other queries.
    """
    import faiss

    name, values = _search_knob(index)
    k = max(1, max(len(t) for t in truth))
    space = faiss.ParameterSpace()
    best = recall = 0.0
    for value in values:
        space.set_index_parameter(index, name, value)
        found = index.search(queries, k)[1]
        hits = sum(len(t & set(row.tolist())) for t, row in zip(truth, found, strict=True))
        recall = hits / max(1, sum(len(t) for t in truth))
        if recall >= CALIBRATION_RECALL or recall - best < 0.002:
            break
        best = recall
    return recall


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
                if info.index_spec is None:  # no type asked for: keep the index's own
                    spec = existing.index_spec if existing else AUTO
                    info = dataclasses.replace(info, index_spec=spec)
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
            "SELECT id, path, ordinal, start_line, end_line, text, n_tokens, page, heading "
            f"FROM chunks WHERE id IN ({marks})",
            ids,
        )
        return {r[0]: _stored(r) for r in rows}

    def all_chunks(self) -> Iterator[StoredChunk]:
        rows = self._db.execute(
            "SELECT id, path, ordinal, start_line, end_line, text, n_tokens, page, heading "
            "FROM chunks ORDER BY id"
        )
        for r in rows:
            yield _stored(r)


def _stored(r: tuple) -> StoredChunk:
    return StoredChunk(r[1], r[2], r[3], r[4], r[5], r[6], page=r[7], heading=r[8], id=r[0])


class FileWriter:
    """What every store's writer shares: a whole file is a start, its chunks, a finish."""

    def start_file(self, source: SourceFile) -> None:
        raise NotImplementedError

    def add_chunks(self, path: str, chunks: list[Chunk], vectors: np.ndarray) -> None:
        raise NotImplementedError

    def finish_file(self, source: SourceFile, n_chunks: int) -> None:
        raise NotImplementedError

    def add_file(self, source: SourceFile, chunks: list[Chunk], vectors: np.ndarray) -> None:
        """Replace whatever the index held for this file with these chunks."""
        self.start_file(source)
        self.add_chunks(str(source.path), chunks, vectors)
        self.finish_file(source, len(chunks))


class IndexWriter(FileWriter):
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
            self.vectors = _load_vectors(db, root, mmap=False)
            self.info = dataclasses.replace(
                info, index_type=self.vectors.index_type, search_params=self.vectors.search_params
            )
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
        kind, params = _stored_type(db)
    except (sqlite3.DatabaseError, ValueError) as exc:
        raise IndexCorruptError(f"index {root} is unreadable ({exc}); {_REBUILD}") from None
    if row is None:
        raise IndexCorruptError(f"index {root} names no vector file; {_REBUILD}")
    path = root / row[0]
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


# -- choosing the store (`--store`) ------------------------------------------------

if TYPE_CHECKING:
    from ..config import Settings
    from .milvus import MilvusStore, MilvusWriter


def open_store(settings: Settings) -> IndexStore | MilvusStore:
    """The index to read: the FAISS folder at ``index_dir``, or Milvus by ``store``."""
    if not settings.store:
        return IndexStore.open(settings.index_dir)
    from .milvus import MilvusStore

    return MilvusStore.open(settings.store)


def store_writer(
    settings: Settings, info: IndexInfo, rebuild: bool = False
) -> contextlib.AbstractContextManager[IndexWriter | MilvusWriter]:
    """The writer for the same choice as :func:`open_store` (a context manager)."""
    if not settings.store:
        return IndexStore.writer(settings.index_dir, info, rebuild=rebuild)
    from .milvus import milvus_writer

    return milvus_writer(settings.store, info, rebuild=rebuild)
