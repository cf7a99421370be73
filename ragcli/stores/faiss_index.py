"""The FAISS vector index of a folder store: type choice by size, rebuilds, and the
calibration of search parameters.

This module is long because one class holds all the state of the vectors a writer
changes: the index and its type, the vectors waiting on disk for the commit, the file an
IVF-Flat index is mapped from and rewritten to list by list (the bytes are written by
``ivf_stream``), and the rebuild into another type with its training sample; split,
each part would reach into the others. FAISS is imported on first use, so importing this module is cheap.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeVar

from ..errors import ConfigError
from . import ivf_stream
from .base import AUTO

if TYPE_CHECKING:
    import numpy as np


class BuildInfo(Protocol):
    """What the index needs to know of how it is built (see stores.base.IndexInfo)."""

    index_spec: str | None


InfoT = TypeVar("InfoT", bound=BuildInfo)

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
STREAM_SLICE = 8_192  # vectors at a time by a build written to disk (12 MB of 384-d)
# Floors, as a margin: on clustered vectors IVF lists match the clusters so well that one
# probe passes the sample, yet a question lies further from its passages than they do
# from each other. Below these the search costs well under a millisecond anyway.
NPROBE_MIN = 16


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
        # Vectors added since the FAISS index was last brought up to date, on disk (see
        # :meth:`spill_to`): their ids here, the rows in ``_spill``.
        self._spill_dir: Path | None = None
        self._spill = None
        self._spill_ids: list[np.ndarray] = []
        self._pending = 0
        # The file a read-only, memory-mapped index was read from (same bytes): read
        # whole from there the first time the index must change in place.
        self._mapped: Path | None = None
        # A file :meth:`finalize` wrote the index to, list by list, which :meth:`save`
        # moves into place (the mapped index is read from it).
        self._built: Path | None = None

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
            try:
                index = cls(_read_mapped(path), index_type, search_params)
            except RuntimeError:
                pass  # an index type that cannot be mapped: read it whole
            else:
                index._mapped = path
                return index
        return cls(faiss.read_index(str(path)), index_type, search_params)

    def __len__(self) -> int:
        return int(self._index.ntotal) + self._pending - len(self._dropped)

    def spill_to(self, directory: Path) -> None:
        """Keep added vectors in a temporary file in ``directory`` until the index is
        next used (searched, changed otherwise, saved), not in memory.

        A writer's memory then stays flat while it embeds: a flat index grows by
        doubling its buffer (twice the vectors at a resize), an IVF index by list. On
        the way in, a flat index is sized once, exactly, and filled from the file.
        """
        self._spill_dir = directory

    def add(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        import numpy as np

        if self._spill_dir is None:
            if self._mapped is not None:
                self._materialize()
            self._index.add_with_ids(vectors, ids)
            return
        if self._spill is None:
            # Closed (and so deleted) by _settle: it outlives this call.
            self._spill = tempfile.TemporaryFile(prefix="vectors-spill-", dir=self._spill_dir)  # noqa: SIM115
        self._spill.write(memoryview(np.ascontiguousarray(vectors, dtype=np.float32)))
        self._spill_ids.append(np.asarray(ids, dtype=np.int64))
        self._pending += len(ids)

    def _settle(self) -> None:
        """Move the spilled vectors into the FAISS index, and the removals recorded while
        it was mapped: a mapped index is read whole first (it cannot change in place)."""
        if self._mapped is not None and (self._spill is not None or self._dropped):
            self._materialize()
        self._add_spilled()

    def _materialize(self) -> None:
        """Replace the mapped index by a copy in memory read from its file, with the
        removals recorded while it was mapped (an index that cannot remove keeps them
        for its next rebuild)."""
        import faiss
        import numpy as np

        path, self._mapped = self._mapped, None
        self._index = faiss.read_index(str(path))
        self._forget_build()
        self._add_spilled()  # before the removals, which may name spilled vectors
        if self._dropped:
            with contextlib.suppress(RuntimeError):
                self._index.remove_ids(np.fromiter(self._dropped, dtype=np.int64))
                self._dropped = set()

    def _forget_build(self) -> None:
        """Delete the file an unsaved streamed build left, once the index no longer is it."""
        if self._built is not None:
            self._built.unlink(missing_ok=True)
            self._built = None

    def _add_spilled(self) -> None:
        import numpy as np

        if self._spill is None:
            return
        spill, ids = self._spill, np.concatenate(self._spill_ids)
        self._spill, self._spill_ids, self._pending = None, [], 0
        with spill:
            spill.seek(0)
            if _is_flat(self._index):
                _append_flat(self._index, ids, spill)
                return
            dim = int(self._index.d)
            for begin in range(0, len(ids), REBUILD_SLICE):
                rows = min(REBUILD_SLICE, len(ids) - begin)
                block = np.frombuffer(spill.read(rows * dim * 4), dtype=np.float32)
                self._index.add_with_ids(block.reshape(rows, dim), ids[begin : begin + rows])

    def remove(self, ids: Iterable[int]) -> None:
        import numpy as np

        arr = np.fromiter(ids, dtype=np.int64)
        if not len(arr):
            return
        if self._mapped is not None:  # left out when the index is next written or read whole
            self._dropped.update(int(i) for i in arr)
            return
        self._settle()
        try:
            self._index.remove_ids(arr)
        except RuntimeError:  # HNSW cannot remove: the next finalize rebuilds without them
            self._dropped.update(int(i) for i in arr)

    def search(self, queries: np.ndarray, k: int) -> list[list[tuple[int, float]]]:
        self._settle()
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
        self._settle()
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

    def needs_finalize(self, info: BuildInfo, flat_max: int = FLAT_MAX) -> bool:
        """Whether :meth:`finalize` would rebuild (other type wanted, or removals pending)."""
        return bool(self._dropped) or self.target_type(info.index_spec, flat_max) != self.index_type

    def finalize(self, info: InfoT, flat_max: int = FLAT_MAX) -> InfoT:
        """Before a save: rebuild into the type ``info.index_spec`` asks for at this size,
        set the search parameters, and return ``info`` saying what the file holds."""
        want = self.target_type(info.index_spec, flat_max)
        changed = self._spill is not None or bool(self._dropped)
        if not (want != self.index_type or changed) or not self._stream(want):
            self._settle()
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
        with tempfile.TemporaryFile(prefix="ragcli-rebuild-", dir=self._spill_dir) as spill:
            pos = 0
            for begin in range(0, len(ids), REBUILD_SLICE):
                block = _vectors_at(
                    old, ids, np.arange(begin, min(begin + REBUILD_SLICE, len(ids)))
                )
                if not keep[begin : begin + REBUILD_SLICE].all():
                    block = block[keep[begin : begin + REBUILD_SLICE]]
                spill.write(memoryview(np.ascontiguousarray(block, dtype=np.float32)))
                span = slice(pos, pos + len(block))
                nearest.update(block, kept_ids[span], exclude=_within(held, span))
                pos += len(block)
            self._index = old = block = None  # free the old copy before building the new one
            if not new.is_trained:
                # Read back only now: the sample and the old index are never both held.
                train_rows = _rows_at(spill, n, dim, sample) if len(sample) else queries
                try:
                    new.train(train_rows)
                except RuntimeError:  # too few vectors for this type yet: exact until there are
                    new, index_type = _new_faiss_index(dim, "Flat"), "Flat"
                del train_rows
            spill.seek(0)
            if not len(held) and _is_flat(new):
                _append_flat(new, kept_ids, spill)
            else:
                _reserve_lists(new, spill, n, dim)
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
        self.search_params, self._mapped = params, None
        self._forget_build()

    def contents(self) -> tuple[np.ndarray, np.ndarray]:
        """(ids, vectors) of everything the index holds, in storage order."""
        self._settle()
        return index_contents(self._index)

    def save(self, path: Path) -> None:
        import faiss

        if self._spill is not None or self._dropped:
            self._stream(self.index_type)  # no-op unless it can write the lists itself
        tmp = path.with_name(path.name + ".tmp")
        if self._built is not None:
            tmp = self._built
        elif self._mapped is not None and self._spill is None and not self._dropped:
            shutil.copyfile(self._mapped, tmp)  # through the page cache, not this process
        else:
            self._settle()
            if self._dropped:
                self._rebuild(self.index_type)
            faiss.write_index(self._index, str(tmp))
        with tmp.open("rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        if self._mapped is not None:  # the same bytes, and a file this writer keeps
            self._mapped, self._built = path, None

    def _stream(self, index_type: str) -> bool:
        """Build ``index_type`` from this index's vectors and the spilled ones straight into
        a file beside the index, list by list (:mod:`ivf_stream`), then map that file;
        False, with nothing changed, when this cannot be done: no spill directory, not an
        IVF-Flat type, or too few vectors to train.

        Memory holds the training sample, a list number per vector and a slice of
        vectors at a time, never the lists: indexing a 200 MB text file peaks at 217 MB
        (while training on 100 MB of sample), where building the lists in memory took
        800 MB. The new type is trained and its
        nprobe calibrated as :meth:`_rebuild` does; the same type keeps its quantizer.
        """
        import faiss
        import numpy as np

        if self._spill_dir is None:
            return False
        retrain = index_type != self.index_type
        if retrain:
            new = _new_faiss_index(int(self._index.d), index_type)
        else:
            if type(self._index) is not faiss.IndexIVFFlat:
                return False
            new = ivf_stream.empty_copy(self._index)
        if not ivf_stream.writable(new):
            return False
        rows = _Rows(self)
        n = rows.n
        knob = _search_knob(new)
        held = _calibration_sample(n) if retrain and knob[0] else np.zeros(0, np.int64)
        sample = np.zeros(0, np.int64) if new.is_trained else _training_positions(n, new)
        queries, train_rows = rows.at(held, sample)
        if len(sample):
            try:
                new.train(train_rows)
            except RuntimeError:  # too few vectors for this type: the ordinary path decides
                return False
        del train_rows
        # A list number for each vector (the same quantizer keeps the stored ones where
        # they are), and the exact neighbours of the held-out ones.
        list_nos = np.empty(n, dtype=np.int64)
        if not retrain:
            list_nos[: rows.n_stored] = rows.stored_lists()
        nearest = _TopK(queries, min(10, n - len(held)))
        for begin, ids, block in rows.slices(spilled_only=not retrain):
            span = slice(begin, begin + len(ids))
            list_nos[span] = new.quantizer.assign(block, 1).ravel()
            nearest.update(block, np.arange(span.start, span.stop), exclude=_within(held, span))
        params = self.search_params if not retrain else ""
        if len(held):
            found = nearest.found
            truth = np.where(found >= 0, list_nos[np.maximum(found, 0)], -1)
            nprobe, recall = _pick(
                knob[1], lambda p: ivf_stream.probe_recall(new.quantizer, queries, truth, p)
            )
            new.nprobe = nprobe
            params = f"{_search_params(new)}, held-out recall@10 {recall:.3f}"
        elif retrain and knob[0]:  # too few vectors to measure: the widest search tried
            new.nprobe = knob[1][-1]
        fd, name = tempfile.mkstemp(prefix="vectors-", suffix=".faiss.new", dir=self._spill_dir)
        built = Path(name)
        try:
            with os.fdopen(fd, "wb"):
                ivf_stream.write(fd, new, lambda: (s[1:] for s in rows.slices()), list_nos)
            mapped = _read_mapped(built)
        except BaseException:
            built.unlink(missing_ok=True)
            raise
        rows = None
        self._forget_build()  # an earlier build of this index, never saved
        if self._spill is not None:
            self._spill.close()
        self._spill, self._spill_ids, self._pending = None, [], 0
        self._index, self._mapped, self._built = mapped, built, built
        self.index_type, self._dropped, self.search_params = index_type, set(), params
        return True


def maps_when_writing(index_type: str) -> bool:
    """Whether a writer keeps an index of this type mapped from its file instead of read
    whole: IVF-Flat, whose lists a commit rewrites from the file (see ``_stream``)."""
    return re.fullmatch(r"IVF\d+(_HNSW\d+)?,Flat", index_type) is not None


def _read_mapped(path: Path):
    """The index in file ``path``, its vectors mapped, not read (RuntimeError if its
    type cannot be mapped)."""
    import faiss

    flags = getattr(faiss, "IO_FLAG_MMAP_IFC", faiss.IO_FLAG_MMAP) | faiss.IO_FLAG_READ_ONLY
    return faiss.read_index(str(path), flags)


class _Rows:
    """The vectors a build written to disk takes, a slice at a time and always in the
    same order: the index's own in storage order, then the spilled ones; the removed
    ones left out."""

    def __init__(self, vectors: VectorIndex) -> None:
        import numpy as np

        self.index, self.dim = vectors._index, int(vectors._index.d)
        self.ids = _stored_ids(self.index)
        self.spill = vectors._spill
        self.spill_ids = (
            np.concatenate(vectors._spill_ids) if vectors._spill_ids else np.zeros(0, np.int64)
        )
        dropped = np.fromiter(vectors._dropped, dtype=np.int64)
        self.keep = ~np.isin(self.ids, dropped) if len(dropped) else None
        self.spill_keep = ~np.isin(self.spill_ids, dropped) if len(dropped) else None
        self.n_stored = len(self.ids) if self.keep is None else int(self.keep.sum())
        self.n = self.n_stored + (
            len(self.spill_ids) if self.spill_keep is None else int(self.spill_keep.sum())
        )
        self.file = None
        if vectors._mapped is not None:
            self.file = ivf_stream.ListFile.of(self.index, vectors._mapped, self.ids)

    def stored_lists(self) -> np.ndarray:
        """The list of each kept stored vector (an IVF index's own: its storage order
        is list by list)."""
        import faiss
        import numpy as np

        ivf = faiss.extract_index_ivf(self.index)
        sizes = [ivf.invlists.list_size(no) for no in range(ivf.nlist)]
        nos = np.repeat(np.arange(ivf.nlist, dtype=np.int64), sizes)
        return nos if self.keep is None else nos[self.keep]

    def slices(self, spilled_only: bool = False) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
        """(position of the first row, ids, vectors) of each slice."""
        import numpy as np

        parts = [
            (self.ids, self.keep, self._stored),
            (self.spill_ids, self.spill_keep, self._spilled),
        ]
        pos = 0
        if spilled_only:
            parts, pos = parts[1:], self.n_stored
        for ids, keep, read in parts:
            for begin in range(0, len(ids), STREAM_SLICE):
                end = min(begin + STREAM_SLICE, len(ids))
                block, block_ids = read(begin, end), ids[begin:end]
                if keep is not None and not keep[begin:end].all():
                    block, block_ids = block[keep[begin:end]], block_ids[keep[begin:end]]
                if len(block_ids):
                    yield pos, block_ids, np.ascontiguousarray(block, dtype=np.float32)
                pos += len(block_ids)

    def _stored(self, begin: int, end: int) -> np.ndarray:
        import numpy as np

        if self.file is not None:
            return self.file.rows(begin, end)
        return _vectors_at(self.index, self.ids, np.arange(begin, end))

    def _spilled(self, begin: int, end: int) -> np.ndarray:
        import numpy as np

        row = self.dim * 4
        data = os.pread(self.spill.fileno(), (end - begin) * row, begin * row)
        if len(data) != (end - begin) * row:
            raise RuntimeError("the spilled vectors are shorter than their ids")
        return np.frombuffer(data, dtype=np.float32).reshape(end - begin, self.dim)

    def at(self, *positions: np.ndarray) -> list[np.ndarray]:
        """The rows at each array of sorted positions, gathered in one pass."""
        import numpy as np

        out = [np.empty((len(p), self.dim), dtype=np.float32) for p in positions]
        if not any(len(p) for p in positions):
            return out
        for begin, ids, block in self.slices():
            span = slice(begin, begin + len(ids))
            for p, o in zip(positions, out, strict=True):
                lo, hi = p.searchsorted([span.start, span.stop])
                o[lo:hi] = block[p[lo:hi] - begin]
        return out


def _is_flat(index) -> bool:
    import faiss

    return isinstance(index, faiss.IndexIDMap2) and isinstance(
        faiss.downcast_index(index.index), faiss.IndexFlat
    )


def _rows_at(spill, n: int, dim: int, positions: np.ndarray) -> np.ndarray:
    """The rows at sorted ``positions`` of a file of ``n`` float32 rows of ``dim``."""
    import numpy as np

    out = np.empty((len(positions), dim), dtype=np.float32)
    spill.seek(0)
    got = 0
    for begin in range(0, n, REBUILD_SLICE):
        rows = min(REBUILD_SLICE, n - begin)
        block = np.frombuffer(spill.read(rows * dim * 4), dtype=np.float32).reshape(rows, dim)
        picked = _within(positions, slice(begin, begin + rows))
        out[got : got + len(picked)] = block[picked]
        got += len(picked)
    return out


def _reserve_lists(index, spill, n: int, dim: int) -> None:
    """Give each inverted list of a trained, empty IVF index room for exactly the
    vectors of file ``spill`` it will receive: grown by appends, the lists would double
    their buffers and leave the old ones behind in the heap (about 1.4 times the
    vectors in all)."""
    import faiss
    import numpy as np

    ivf = faiss.try_extract_index_ivf(index)
    if ivf is None or ivf.ntotal or ivf.d != dim:  # none, filled, or behind a transform
        return
    lists = faiss.downcast_InvertedLists(ivf.invlists)
    if not isinstance(lists, faiss.ArrayInvertedLists):
        return
    counts = np.zeros(ivf.nlist, dtype=np.int64)
    for begin in range(0, n, REBUILD_SLICE):
        rows = min(REBUILD_SLICE, n - begin)
        block = np.frombuffer(spill.read(rows * dim * 4), dtype=np.float32).reshape(rows, dim)
        counts += np.bincount(ivf.quantizer.assign(block, 1).ravel(), minlength=ivf.nlist)
    for list_no in np.flatnonzero(counts):
        lists.resize(int(list_no), int(counts[list_no]))  # allocated at this size...
        lists.resize(int(list_no), 0)  # ...and kept when emptied: appends then fit


def _append_flat(index, ids: np.ndarray, spill) -> None:
    """Append the vectors in file ``spill`` to an ``IDMap2,Flat`` index: its buffer is
    resized once to the exact size and read into, instead of grown by ``add_with_ids``
    (which doubles it, briefly holding the old and the new buffer)."""
    import faiss
    import numpy as np

    inner = faiss.downcast_index(index.index)
    n0, m, row = int(inner.ntotal), len(ids), int(inner.code_size)
    inner.codes.resize((n0 + m) * row)
    codes = faiss.rev_swig_ptr(inner.codes.data(), (n0 + m) * row)
    step = REBUILD_SLICE * row
    for begin in range(n0 * row, (n0 + m) * row, step):
        want = min(step, (n0 + m) * row - begin)
        if spill.readinto(memoryview(codes[begin : begin + want])) != want:
            raise RuntimeError("the spilled vectors are shorter than their ids")
    index.id_map.resize(n0 + m)
    faiss.rev_swig_ptr(index.id_map.data(), n0 + m)[n0:] = ids.astype(np.int64)
    inner.ntotal = index.ntotal = n0 + m
    index.construct_rev_map()


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


def index_contents(index) -> tuple[np.ndarray, np.ndarray]:
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

    def recall_at(value: int) -> float:
        space.set_index_parameter(index, name, value)
        found = index.search(queries, k)[1]
        hits = sum(len(t & set(row.tolist())) for t, row in zip(truth, found, strict=True))
        return hits / max(1, sum(len(t) for t in truth))

    return _pick(values, recall_at)[1]


def _pick(values: list[int], recall_at: Callable[[int], float]) -> tuple[int, float]:
    """The first of ``values`` (in rising order) whose recall reaches CALIBRATION_RECALL,
    or where the next step gained little; the last value tried is the one left set."""
    best = recall = 0.0
    value = values[-1]
    for value in values:
        recall = recall_at(value)
        if recall >= CALIBRATION_RECALL or recall - best < 0.002:
            break
        best = recall
    return value, recall
