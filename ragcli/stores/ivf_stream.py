"""IVF-Flat index files written list by list from vectors read in slices, so that the
writer never holds the inverted lists in memory.

``faiss.write_index`` needs the whole index in memory: for a 200 MB text file, 564 MB
of vectors at the commit. Here FAISS serializes the trained, empty index (its header,
the quantizer, an empty direct map and empty "ilar" lists), and the rest is written in
FAISS's own layout (faiss/impl/index_write.cpp, ``write_direct_map`` and the
``ArrayInvertedLists`` branch of ``write_InvertedLists``): the id -> (list, offset)
pairs of the direct map, the list sizes, then each list's codes and ids one after the
other. The file is an ordinary FAISS index: ``read_index`` reads it with or without
mmap, and old readers read it unchanged.

The rows go to their lists by a counting sort: the caller assigns every row a list
(one int64 a row), the sizes give each list its place in the file, and a second pass
writes each slice's rows there with ``os.pwrite``. Written that way the data passes
through the page cache, which is not the process's memory; written through a memory
map it would count as the process's own.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

    Slices = Callable[[], Iterable[tuple[np.ndarray, np.ndarray]]]

_U64 = struct.Struct("=Q")
_EMPTY_LISTS = b"sprs" + _U64.pack(0)  # no list holds anything: the sparse form, no pairs


def writable(index) -> bool:
    """Whether ``index`` (trained or not, empty) is an IVF-Flat index whose file this
    module can write: plain ``IndexIVFFlat``, lists in memory, and a serialization
    that ends as the layout above says (so a FAISS that changed it is noticed here and
    the caller writes the file the ordinary way)."""
    import faiss

    if type(index) is not faiss.IndexIVFFlat or index.ntotal:
        return False
    if index.code_size != 4 * index.d or index.by_residual:
        return False
    if not isinstance(faiss.downcast_InvertedLists(index.invlists), faiss.ArrayInvertedLists):
        return False
    if index.direct_map.type not in (faiss.DirectMap.NoMap, faiss.DirectMap.Hashtable):
        return False
    return _header(index, 0) is not None


def _header(index, n: int) -> bytes | None:
    """The file up to the direct map: FAISS's own bytes for the index with ``n`` vectors."""
    import faiss

    blob = faiss.serialize_index(index).tobytes()
    tail = _direct_map_head(index, 0) + _lists_head(index) + _EMPTY_LISTS
    if blob[:4] != b"IwFl" or blob[8:16] != _U64.pack(0) or not blob.endswith(tail):
        return None
    # fourcc, d (int32), then ntotal (int64): the one field of the header that changes.
    return blob[:8] + _U64.pack(n) + blob[16 : len(blob) - len(tail)]


def _direct_map_head(index, n: int) -> bytes:
    """The direct map's type, its (empty) array, and for a hash table the pair count."""
    import faiss

    kind = int(index.direct_map.type)
    head = bytes([kind]) + _U64.pack(0)
    return head + _U64.pack(n) if kind == faiss.DirectMap.Hashtable else head


def _lists_head(index) -> bytes:
    return b"ilar" + _U64.pack(index.nlist) + _U64.pack(index.code_size)


def _sizes(counts: np.ndarray) -> bytes:
    """The list sizes as FAISS writes them: all of them when most lists hold vectors,
    else (list, size) pairs of the lists that do."""
    import numpy as np

    filled = np.flatnonzero(counts)
    if len(filled) > len(counts) // 2:
        return b"full" + _U64.pack(len(counts)) + counts.astype(np.uint64).tobytes()
    pairs = np.column_stack([filled, counts[filled]]).astype(np.uint64)
    return b"sprs" + _U64.pack(pairs.size) + pairs.tobytes()


def write(fd: int, index, slices: Slices, list_nos: np.ndarray) -> int:
    """Write ``index`` (a trained, empty IVF-Flat index for which :func:`writable`
    holds) to the open file ``fd``, holding the rows of ``slices()`` in the lists
    ``list_nos`` gives them (one entry a row, in the order the slices come).

    ``slices`` is called once and yields (ids, float32 vectors) blocks. Within a list
    the rows keep their order, as ``add_with_ids`` would leave them. Returns the
    bytes written.
    """
    import faiss
    import numpy as np

    n, nlist, code_size = len(list_nos), int(index.nlist), int(index.code_size)
    header = _header(index, n)
    if header is None:
        raise ValueError("this FAISS writes IVF-Flat files in a layout not known here")
    counts = np.bincount(list_nos, minlength=nlist).astype(np.int64)
    hashtable = index.direct_map.type == faiss.DirectMap.Hashtable
    head = header + _direct_map_head(index, n)
    map_at = len(head)
    lists = _lists_head(index) + _sizes(counts)
    data_at = map_at + (16 * n if hashtable else 0) + len(lists)
    list_at = data_at + np.concatenate([[0], np.cumsum(counts * (code_size + 8))[:-1]])
    _pwrite(fd, head, 0)
    _pwrite(fd, lists, data_at - len(lists))
    cursor = np.zeros(nlist, dtype=np.int64)  # rows written to each list so far
    begin = 0
    for ids, block in slices():
        m = len(ids)
        nos = list_nos[begin : begin + m]
        order = np.argsort(nos, kind="stable")
        nos, ids = nos[order], np.ascontiguousarray(ids[order], dtype=np.int64)
        block = np.ascontiguousarray(block[order], dtype=np.float32)
        starts = np.flatnonzero(np.r_[True, nos[1:] != nos[:-1]])
        ends = np.r_[starts[1:], m]
        # Each row's place in its list: after the rows earlier slices put there.
        offsets = cursor[nos] + np.arange(m) - np.repeat(starts, ends - starts)
        for lo, hi in zip(starts.tolist(), ends.tolist(), strict=True):
            no = int(nos[lo])
            at = int(list_at[no])
            _pwrite(fd, block[lo:hi], at + int(offsets[lo]) * code_size)
            _pwrite(fd, ids[lo:hi], at + int(counts[no]) * code_size + int(offsets[lo]) * 8)
            cursor[no] += hi - lo
        if hashtable:  # id -> list << 32 | offset (faiss lo_build), in any order
            pairs = np.column_stack([ids, (nos << 32) | offsets])
            _pwrite(fd, pairs, map_at + 16 * begin)
        begin += m
    if begin != n or (cursor != counts).any():
        raise RuntimeError(f"{begin} rows came for {n} list numbers")
    return int(data_at + n * (code_size + 8))


def _pwrite(fd: int, data, offset: int) -> None:
    view = memoryview(data).cast("B")
    while len(view):
        done = os.pwrite(fd, view, offset)
        view, offset = view[done:], offset + done


def probe_recall(quantizer, queries: np.ndarray, truth_lists: np.ndarray, nprobe: int) -> float:
    """Recall of an IVF-Flat search with ``nprobe`` for ``queries`` whose exact
    neighbours lie in the lists ``truth_lists`` (a row a query, -1 for none).

    The codes are the vectors themselves, so a search finds an exact neighbour exactly
    when it probes that neighbour's list: no list needs to be read.
    """

    valid = truth_lists >= 0
    if not valid.any():
        return 0.0
    probed = quantizer.search(queries, nprobe)[1]
    found = (truth_lists[:, :, None] == probed[:, None, :]).any(axis=2)
    return float((found & valid).sum() / valid.sum())


def empty_copy(ivf):
    """An empty IVF-Flat index with ``ivf``'s quantizer, nprobe and direct map type."""
    import faiss

    quantizer = faiss.deserialize_index(faiss.serialize_index(ivf.quantizer))
    new = faiss.IndexIVFFlat(quantizer, ivf.d, ivf.nlist, ivf.metric_type)
    new.nprobe = ivf.nprobe
    new.set_direct_map_type(ivf.direct_map.type)
    return new


class ListFile:
    """The lists of an IVF-Flat index file read with ``pread``, in storage order (list
    by list): pages read through the index's memory map would count as this process's
    memory, the page cache does not.

    The lists are the end of an IVF-Flat file, each list's codes then its ids, so their
    places follow from the list sizes and the file size alone.
    """

    def __init__(self, path: Path, sizes: np.ndarray, code_size: int) -> None:
        import numpy as np

        self.path, self.code_size = path, code_size
        row = code_size + 8
        data_at = path.stat().st_size - int(sizes.sum()) * row
        self.at = data_at + np.concatenate([[0], np.cumsum(sizes * row)[:-1]]).astype(np.int64)
        self.sizes = sizes
        self.first = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)

    @classmethod
    def of(cls, index, path: Path, ids: np.ndarray) -> ListFile | None:
        """The lists of mapped IVF-Flat ``index`` in its file ``path``, or None when the
        file does not hold them as expected (checked against ``ids``, the index's ids in
        storage order)."""
        import faiss
        import numpy as np

        if type(index) is not faiss.IndexIVFFlat or not path.is_file():
            return None
        lists = index.invlists
        sizes = np.array([lists.list_size(no) for no in range(index.nlist)], dtype=np.int64)
        if int(sizes.sum()) != len(ids):
            return None
        found = cls(path, sizes, int(index.code_size))
        filled = np.flatnonzero(sizes)
        ends = filled[[0, -1]] if len(filled) else []
        same = all(
            np.array_equal(found.ids(no), ids[found.first[no] : found.first[no + 1]]) for no in ends
        )
        return found if found.at[0] >= 0 and same else None

    def ids(self, no: int) -> np.ndarray:
        import numpy as np

        with self.path.open("rb") as fh:
            at = int(self.at[no]) + int(self.sizes[no]) * self.code_size
            data = os.pread(fh.fileno(), int(self.sizes[no]) * 8, at)
        return np.frombuffer(data, dtype=np.int64)

    def rows(self, begin: int, end: int) -> np.ndarray:
        """The codes (for IVF-Flat: the float32 vectors) at storage positions [begin, end)."""
        import numpy as np

        out = np.empty((end - begin) * self.code_size, dtype=np.uint8)
        no = int(np.searchsorted(self.first, begin, side="right")) - 1
        with self.path.open("rb") as fh:
            pos = begin
            while pos < end:
                hi = min(end, int(self.first[no + 1]))
                if hi > pos:
                    want = (hi - pos) * self.code_size
                    at = int(self.at[no]) + (pos - int(self.first[no])) * self.code_size
                    view = memoryview(out)[(pos - begin) * self.code_size :][:want]
                    if os.preadv(fh.fileno(), [view], at) != want:
                        raise RuntimeError(f"vector file {self.path} is shorter than its lists")
                    pos = hi
                no += 1
        return out.view(np.float32).reshape(end - begin, -1)
