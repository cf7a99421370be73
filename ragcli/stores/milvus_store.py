"""Milvus as the index store: a Milvus server (``milvus://HOST:PORT/COLLECTION``)
or Milvus Lite embedded in this process (``milvus-lite://PATH.db``).

Two collections hold everything, so a server needs no local files:

* ``COLLECTION``: one row per chunk: ``id`` (an int64 we allocate), ``gen``,
  ``path``, ``text`` (analysed for BM25), ``vector`` (inner product, the
  same score as the FAISS store), ``sparse`` (filled by Milvus's BM25
  function from ``text``) and ``fields`` (JSON: every other ``Chunk`` field,
  so new fields need no schema change).
* ``COLLECTION_meta``: the ``state`` row (the build's ``IndexInfo``, the last
  committed generation, the next chunk id), one ``file:<gen>:<path>`` row per
  file version, and the writer's ``lock`` row.

Milvus has no transactions, so the state row is the commit point. Each commit
writes its rows under a new generation number that readers filter out
(``gen <= committed``) until the state row names it; only then are the
superseded rows of the files it touched deleted. A crash before the commit
point leaves rows that readers never see and the next writer deletes; a crash
after it leaves superseded rows (a file's old chunks beside its new ones, for
a moment) that the next writer deletes. A file is never listed with missing
chunks.

This module is long because it is the whole store on those two collections: the schema,
the reader and the writer all follow the generation and lock rules above, and keeping
them side by side keeps those rules in one place.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import logging
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..addresses import StoreURL, parse_store
from ..errors import (
    ConfigError,
    IndexCorruptError,
    IndexLockedError,
    IndexMismatchError,
    IndexMissingError,
)
from ..records import Chunk, StoredChunk
from .base import STOPWORDS, FileWriter, IndexInfo, check_format, lexical_terms, package_version

if TYPE_CHECKING:
    import numpy as np

    from ..records import SourceFile

EXTRA_HINT = "pip install 'ragcli[milvus]'"
log = logging.getLogger(__name__)
_BATCH = 500  # rows per insert call, well under gRPC's message limit
_PATHS_PER_FILTER = 100  # paths per `path in [...]` expression
_STALE_LOCK_S = 3600.0  # a writer lock from another host this old is ignored
_MAX_LIMIT = 16384  # Milvus's cap on a search's limit


# -- connecting ------------------------------------------------------------------

_lite_users: dict[str, int] = {}  # open clients per Milvus Lite path in this process


def _import_pymilvus(target: StoreURL):
    # gRPC's C core logs to stderr on its own (e.g. a keep-alive GOAWAY while a long
    # run embeds, which it recovers from); errors reach us as exceptions anyway.
    os.environ.setdefault("GRPC_VERBOSITY", "NONE")
    try:
        import pymilvus

        if target.lite_path is not None:
            import milvus_lite  # noqa: F401
    except ImportError:
        raise ConfigError(f"store {target.url} needs the Milvus extra: {EXTRA_HINT}") from None
    # Library warnings and tracebacks would break the one-line error rule;
    # failures reach us as exceptions anyway.
    logging.getLogger("pymilvus").setLevel(logging.ERROR)
    logging.getLogger("milvus_lite").setLevel(logging.CRITICAL)
    return pymilvus


def _served_here(path: Path) -> bool:
    from milvus_lite.server_manager import server_manager_instance

    return str(path) in getattr(server_manager_instance, "_servers", {})


def _check_lite_lock(path: Path, url: str) -> None:
    """Milvus Lite serves one process per file: say so clearly instead of its traceback."""
    lock = path / "LOCK"
    if not lock.exists() or _served_here(path):
        return
    with lock.open("a") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise IndexLockedError(
                f"{url} is open in another process (Milvus Lite allows one process per file; "
                "run a Milvus server, milvus://HOST:PORT/COLLECTION, to share an index)"
            ) from None
        fcntl.flock(fh, fcntl.LOCK_UN)


class _Connection:
    """A MilvusClient, plus the bookkeeping that lets Milvus Lite release its file."""

    def __init__(self, target: StoreURL, create: bool, token: str = "") -> None:
        pymilvus = _import_pymilvus(target)
        self.target = target
        self._lite: Path | None = None
        if target.lite_path is not None:
            path = target.lite_path.resolve()
            if not create and not path.exists():
                raise IndexMissingError(
                    f"no index at {target.url}: run `rag index --store {target.url} PATH` first"
                )
            path.parent.mkdir(parents=True, exist_ok=True)
            _check_lite_lock(path, target.url)
            uri = str(path)
        else:
            uri = f"http://{target.host}:{target.port}"
        try:
            self.client = pymilvus.MilvusClient(uri=uri, token=token, timeout=30)
        except pymilvus.MilvusException as exc:
            if target.lite_path is not None:
                raise IndexCorruptError(
                    f"cannot open {target.url} as a Milvus Lite database ({exc.message})"
                ) from None
            raise IndexMissingError(
                f"cannot reach Milvus at {target.host}:{target.port} ({exc.message})"
            ) from None
        if target.lite_path is not None:
            self._lite = Path(uri)
            _lite_users[uri] = _lite_users.get(uri, 0) + 1

    def close(self) -> None:
        self.client.close()
        if self._lite is not None:
            key = str(self._lite)
            _lite_users[key] -= 1
            if not _lite_users[key]:
                del _lite_users[key]
                from milvus_lite.server_manager import server_manager_instance

                server_manager_instance.release_server(key)  # flushes and frees the file
            self._lite = None


def _lit(value: str) -> str:
    """A string literal for a Milvus filter expression."""
    return json.dumps(value, ensure_ascii=False)


_CHUNK_FIELDS = tuple(f.name for f in dataclasses.fields(Chunk))


def _chunk_from(row: dict[str, Any]) -> StoredChunk:
    extra = {k: v for k, v in (row.get("fields") or {}).items() if k in _CHUNK_FIELDS}
    return StoredChunk(**extra, path=row["path"], text=row["text"], id=int(row["id"]))


def _iterate(client, collection: str, filter: str, fields: list[str]) -> Iterator[dict]:
    """Every matching row, in batches (a plain query stops at 16,384 rows)."""
    it = client.query_iterator(collection, batch_size=1000, filter=filter, output_fields=fields)
    try:
        while batch := it.next():
            yield from batch
    finally:
        it.close()


def _state(client, target: StoreURL) -> dict | None:
    if not (client.has_collection(target.collection) and client.has_collection(target.meta)):
        return None
    _load(client, target.meta)
    rows = client.get(target.meta, ids=["state"], output_fields=["value"])
    return rows[0]["value"] if rows else None


def _load(client, collection: str) -> None:
    """Collections come back released after a restart; searching needs them loaded."""
    state = client.get_load_state(collection).get("state")
    if getattr(state, "name", str(state)) != "Loaded":
        client.load_collection(collection)


def _info_from(state: dict, url: str) -> IndexInfo:
    names = {f.name for f in dataclasses.fields(IndexInfo)}
    try:
        info = IndexInfo(**{k: v for k, v in state["info"].items() if k in names})
    except (KeyError, TypeError, AttributeError) as exc:
        raise IndexCorruptError(
            f"index {url} has unreadable metadata ({exc}); rebuild it with "
            f"`rag index --rebuild --store {url} PATH`"
        ) from None
    check_format(info, url, f"rebuild it with `rag index --rebuild --store {url} PATH`")
    return info


def _file_rows(client, target: StoreURL, max_gen: int | None) -> dict[str, list[dict]]:
    """Path -> its file rows (newest generation first), up to ``max_gen``."""
    where = 'kind == "file"' + (f" and gen <= {max_gen}" if max_gen is not None else "")
    rows: dict[str, list[dict]] = {}
    for r in _iterate(client, target.meta, where, ["key", "gen", "path", "value"]):
        rows.setdefault(r["path"], []).append(r)
    for versions in rows.values():
        versions.sort(key=lambda r: -int(r["gen"]))
    return rows


# -- reading ---------------------------------------------------------------------


class MilvusStore:
    """Read access to an index in Milvus; the same interface as ``FaissStore``."""

    def __init__(self, conn: _Connection, state: dict) -> None:
        self._conn = conn
        self._client = conn.client
        self.target = conn.target
        self.info = _info_from(state, conn.target.url)
        self._gen = int(state["gen"])
        self._visible = f"gen <= {self._gen}"
        self._bm25 = bool(state.get("bm25", True))
        self._noted = False

    @classmethod
    def open(cls, store: str, token: str = "") -> MilvusStore:
        """The index at ``store``; ``token`` is the server's (the ``milvus_token`` setting)."""
        target = parse_store(store)
        conn = _Connection(target, create=False, token=token)
        try:
            state = _state(conn.client, target)
            if state is None:
                raise IndexMissingError(
                    f"no index at {target.url}: run `rag index --store {target.url} PATH` first"
                )
            _load(conn.client, target.collection)
            return cls(conn, state)
        except BaseException:
            conn.close()
            raise

    def close(self) -> None:
        self._conn.close()

    def generation(self) -> str:
        """The committed generation number in the state row now."""
        state = _state(self._client, self.target)
        return str(state["gen"]) if state else ""

    @contextlib.contextmanager
    def reading(self) -> Iterator[str]:
        """Move to the newest committed generation, and read only its rows in the block.

        Milvus has no read transaction: a commit that lands inside the block may delete
        rows it superseded, which the block's reads then miss (never rows of another
        generation)."""
        state = _state(self._client, self.target)
        if state is None:
            raise IndexMissingError(f"no index at {self.target.url} any more")
        if int(state["gen"]) != self._gen:
            self.info = _info_from(state, self.target.url)
            self._gen = int(state["gen"])
            self._visible = f"gen <= {self._gen}"
            self._bm25 = bool(state.get("bm25", True))
        yield str(self._gen)

    def files(self) -> dict[str, str]:
        """Indexed file path -> content sha256 (the newest committed row of each path)."""
        out = {}
        for path, versions in _file_rows(self._client, self.target, self._gen).items():
            value = versions[0]["value"]
            if not value.get("removed"):
                out[path] = value["sha256"]
        return out

    def count_chunks(self) -> int:
        rows = self._client.query(
            self.target.collection, filter=self._visible, output_fields=["count(*)"]
        )
        return int(rows[0]["count(*)"])

    def dense_search(self, query: np.ndarray, k: int) -> list[tuple[int, float]]:
        """(chunk id, inner product = cosine for normalised vectors), best first."""
        res = self._client.search(
            self.target.collection,
            data=[[float(x) for x in query.reshape(-1)]],
            anns_field="vector",
            limit=max(1, min(k, _MAX_LIMIT)),
            filter=self._visible,
            search_params={"metric_type": "IP"},
        )
        return [(int(h["id"]), float(h["distance"])) for h in res[0]]

    def lexical_search(self, query: str, k: int) -> list[tuple[int, float]]:
        """BM25 through Milvus's full-text search: (chunk id, score), best first."""
        if not self._bm25:
            if not self._noted:
                log.info(
                    "%s has no BM25 full-text search (Milvus >= 2.5 has it); "
                    "retrieving with dense vectors only",
                    self.target.url,
                )
                self._noted = True
            return []
        terms = lexical_terms(query)
        if not terms:
            return []
        res = self._client.search(
            self.target.collection,
            data=[" ".join(terms)],
            anns_field="sparse",
            limit=max(1, min(k, _MAX_LIMIT)),
            filter=self._visible,
            search_params={"metric_type": "BM25"},
        )
        # A server reports the BM25 score; Milvus Lite its negation (as a distance).
        return [(int(h["id"]), abs(float(h["distance"]))) for h in res[0]]

    def similarity(self, query: np.ndarray, ids: list[int]) -> dict[int, float]:
        """Inner product between the query and the stored vectors of ``ids``."""
        import numpy as np

        if not ids:
            return {}
        rows = self._client.get(self.target.collection, ids=ids, output_fields=["vector"])
        q = np.asarray(query, dtype=np.float32).reshape(-1)
        return {int(r["id"]): float(np.asarray(r["vector"], dtype=np.float32) @ q) for r in rows}

    def chunks(self, ids: list[int]) -> dict[int, StoredChunk]:
        if not ids:
            return {}
        rows = self._client.get(
            self.target.collection, ids=ids, output_fields=["path", "text", "fields"]
        )
        return {int(r["id"]): _chunk_from(r) for r in rows}

    def page(self, path: str, limit: int) -> list[StoredChunk]:
        # Milvus Lite has no filter parameters; a JSON string is a quoted Milvus literal.
        quoted = json.dumps(path, ensure_ascii=False)
        rows = self._client.query(
            self.target.collection,
            filter=f"{self._visible} and path == {quoted}",
            output_fields=["path", "text", "fields"],
        )
        return sorted((_chunk_from(r) for r in rows), key=lambda c: c.ordinal)[:limit]

    def all_chunks(self) -> Iterator[StoredChunk]:
        """Every visible chunk, in id order (held in memory to sort: fine for a
        listing, not meant for millions of chunks)."""
        rows = list(
            _iterate(
                self._client, self.target.collection, self._visible, ["path", "text", "fields"]
            )
        )
        for r in sorted(rows, key=lambda r: int(r["id"])):
            yield _chunk_from(r)


# -- writing ---------------------------------------------------------------------


def _create_collections(client, target: StoreURL, dim: int) -> bool:
    """Both collections, fresh; returns whether BM25 full-text search is available."""
    from pymilvus import DataType, Function, FunctionType, MilvusClient, MilvusException

    def chunk_schema(bm25: bool):
        s = MilvusClient.create_schema(auto_id=False, enable_dynamic_field=False)
        s.add_field("id", DataType.INT64, is_primary=True)
        s.add_field("gen", DataType.INT64)
        s.add_field("path", DataType.VARCHAR, max_length=65535)
        # No stemming: Milvus Lite's analyzer has none, and a server should score alike.
        analyzer = {"tokenizer": "standard", "filter": ["lowercase"]}
        analyzer["filter"].append({"type": "stop", "stop_words": sorted(STOPWORDS)})
        s.add_field(
            "text",
            DataType.VARCHAR,
            max_length=65535,
            enable_analyzer=bm25,
            analyzer_params=analyzer if bm25 else None,
        )
        s.add_field("fields", DataType.JSON)
        s.add_field("vector", DataType.FLOAT_VECTOR, dim=dim)
        if bm25:
            s.add_field("sparse", DataType.SPARSE_FLOAT_VECTOR)
            s.add_function(
                Function(
                    name="text_bm25",
                    function_type=FunctionType.BM25,
                    input_field_names=["text"],
                    output_field_names=["sparse"],
                )
            )
        idx = client.prepare_index_params()
        idx.add_index("vector", index_type="FLAT", metric_type="IP")
        if bm25:
            idx.add_index("sparse", index_type="SPARSE_INVERTED_INDEX", metric_type="BM25")
        return s, idx

    for name in (target.collection, target.meta):
        if client.has_collection(name):
            client.drop_collection(name)
    bm25 = True
    try:
        schema, idx = chunk_schema(True)
        client.create_collection(
            target.collection, schema=schema, index_params=idx, consistency_level="Strong"
        )
    except MilvusException:
        bm25 = False  # a server older than 2.5: dense retrieval only (said at search time)
        schema, idx = chunk_schema(False)
        client.create_collection(
            target.collection, schema=schema, index_params=idx, consistency_level="Strong"
        )
    meta = MilvusClient.create_schema(auto_id=False, enable_dynamic_field=False)
    meta.add_field("key", DataType.VARCHAR, is_primary=True, max_length=65535)
    meta.add_field("kind", DataType.VARCHAR, max_length=16)
    meta.add_field("gen", DataType.INT64)
    meta.add_field("path", DataType.VARCHAR, max_length=65535)
    meta.add_field("value", DataType.JSON)
    meta.add_field("unused", DataType.FLOAT_VECTOR, dim=2)  # Milvus wants one vector field
    idx = client.prepare_index_params()
    idx.add_index("unused", index_type="FLAT", metric_type="IP")
    client.create_collection(target.meta, schema=meta, index_params=idx, consistency_level="Strong")
    return bm25


def _meta_row(key: str, kind: str, gen: int, path: str, value: dict) -> dict:
    return {
        "key": key,
        "kind": kind,
        "gen": gen,
        "path": path,
        "value": value,
        "unused": [1.0, 0.0],
    }


class MilvusWriter(FileWriter):
    """Stages file additions and removals under a new generation; :meth:`commit`
    makes them visible (the interface of ``faiss_store.FaissWriter``)."""

    def __init__(self, conn: _Connection, info: IndexInfo, rebuild: bool) -> None:
        self._conn = conn
        self._client = conn.client
        self.target = conn.target
        self.info = info
        url = conn.target.url
        state = None if rebuild else _state(self._client, self.target)
        if state is not None:
            existing = _info_from(state, url)
            if why := existing.mismatch(info):
                raise IndexMismatchError(
                    f"index {url} cannot take these vectors: {why}; "
                    "pass --rebuild to rebuild it, or use another --store"
                )
            # What the stored passages are, until all are read again.
            self.info = dataclasses.replace(info, text_version=existing.text_version)
        self.has_commit = state is not None
        if state is None:  # new, rebuilt, or never committed: start over
            self._bm25 = _create_collections(self._client, self.target, info.embed_dim)
            self._committed, self._next_id = 0, 1
        else:
            _load(self._client, self.target.collection)
            self._bm25 = bool(state.get("bm25", True))
            self._committed, self._next_id = int(state["gen"]), int(state["next_id"])
        self._gen = self._committed + 1
        self._touched: set[str] = set()  # paths with rows under self._gen
        self.files: dict[str, str] = {}
        self.stats: dict[str, tuple[int, int, float]] = {}  # path -> (size, mtime_ns, at)
        self._n: dict[str, int] = {}  # path -> chunks
        if self.has_commit:
            self._recover()
        self._total = sum(self._n.values())

    # -- recovery ----------------------------------------------------------------
    def _recover(self) -> None:
        """Drop what a crashed writer left: rows after the last commit point, and
        rows that a committed generation superseded but were not yet deleted."""
        c = self._committed
        self._client.delete(self.target.collection, filter=f"gen > {c}")
        self._client.delete(self.target.meta, filter=f'kind == "file" and gen > {c}')
        superseded: dict[str, int] = {}
        for path, versions in _file_rows(self._client, self.target, c).items():
            newest = versions[0]
            value = newest["value"]
            if len(versions) > 1 or value.get("removed"):
                superseded[path] = int(newest["gen"])
            if not value.get("removed"):
                self._remember(path, value)
        for gen, paths in _by_gen(superseded).items():
            self._delete_superseded(paths, gen)

    def _remember(self, path: str, value: dict) -> None:
        self.files[path] = value["sha256"]
        self.stats[path] = (
            int(value.get("size", 0)),
            int(value.get("mtime_ns", 0)),
            float(value.get("indexed_at", 0.0)),
        )
        self._n[path] = int(value.get("n_chunks", 0))

    def _delete_superseded(self, paths: list[str], gen: int) -> None:
        """Rows of ``paths`` older than ``gen`` (the generation that replaced or
        removed them), and the removal markers of ``gen`` itself."""
        for i in range(0, len(paths), _PATHS_PER_FILTER):
            group = "[" + ", ".join(_lit(p) for p in paths[i : i + _PATHS_PER_FILTER]) + "]"
            self._client.delete(self.target.collection, filter=f"path in {group} and gen < {gen}")
            self._client.delete(
                self.target.meta, filter=f'kind == "file" and path in {group} and gen < {gen}'
            )
        markers = [f"file:{gen}:{p}" for p in paths if p not in self.files]
        for i in range(0, len(markers), _BATCH):
            self._client.delete(self.target.meta, ids=markers[i : i + _BATCH])

    # -- staging -----------------------------------------------------------------
    def remove_file(self, path: str) -> None:
        self._restart(path)
        self._client.upsert(
            self.target.meta,
            [_meta_row(f"file:{self._gen}:{path}", "file", self._gen, path, {"removed": True})],
        )
        self.files.pop(path, None)
        self.stats.pop(path, None)

    def start_file(self, source: SourceFile) -> None:
        """Begin replacing a file; its chunks follow in :meth:`add_chunks` calls,
        then :meth:`finish_file` lists it. Its old rows go at the next commit."""
        self._restart(str(source.path))

    def _restart(self, path: str) -> None:
        self._total -= self._n.pop(path, 0)
        if path in self._touched:  # staged twice in one generation: the last one wins
            self._client.delete(
                self.target.collection, filter=f"path == {_lit(path)} and gen == {self._gen}"
            )
        self._touched.add(path)

    def add_chunks(self, path: str, chunks: list[Chunk], vectors: np.ndarray) -> None:
        import numpy as np

        rows = []
        for c, v in zip(chunks, np.asarray(vectors, dtype=np.float32).tolist(), strict=True):
            fields = {k: getattr(c, k) for k in _CHUNK_FIELDS if k not in ("path", "text")}
            rows.append(
                {
                    "id": self._next_id,
                    "gen": self._gen,
                    "path": path,
                    "text": c.text,
                    "fields": fields,
                    "vector": v,
                }
            )
            self._next_id += 1
        for i in range(0, len(rows), _BATCH):
            self._client.insert(self.target.collection, rows[i : i + _BATCH])
        self._n[path] = self._n.get(path, 0) + len(rows)
        self._total += len(rows)

    def finish_file(self, source: SourceFile, n_chunks: int) -> None:
        path = str(source.path)
        value = {
            "sha256": source.sha256,
            "size": source.size,
            "mtime_ns": getattr(source, "mtime_ns", 0),
            "n_chunks": n_chunks,
            "indexed_at": time.time(),
        }
        row = _meta_row(f"file:{self._gen}:{path}", "file", self._gen, path, value)
        self._client.upsert(self.target.meta, [row])
        self._remember(path, value)

    def count_chunks(self) -> int:
        return self._total

    def needs_commit(self) -> bool:
        return False  # Milvus builds its own index; nothing waits for a commit

    def commit(self) -> None:
        """Name this generation in the state row (the commit point), then delete
        the rows it superseded; the next changes go under a new generation."""
        state = {
            "gen": self._gen,
            "next_id": self._next_id,
            "bm25": self._bm25,
            "info": dataclasses.asdict(self.info),
            "backend": {
                "pymilvus": package_version("pymilvus"),
                "milvus-lite": package_version("milvus-lite"),
            },
        }
        self._client.upsert(self.target.meta, [_meta_row("state", "state", 0, "", state)])
        _take_lock(self._client, self.target)  # renewed, so a long run keeps it
        self._committed, self.has_commit = self._gen, True
        if self._touched:
            self._delete_superseded(sorted(self._touched), self._gen)
        self._touched = set()
        self._gen += 1

    def discard(self) -> None:
        """Delete what was staged after the last commit (a failed or interrupted run)."""
        self._client.delete(self.target.collection, filter=f"gen > {self._committed}")
        self._client.delete(self.target.meta, filter=f'kind == "file" and gen > {self._committed}')


def _by_gen(paths: dict[str, int]) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {}
    for path, gen in paths.items():
        out.setdefault(gen, []).append(path)
    return out


# -- the writer lock (a Milvus server has no lock of its own) --------------------


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _check_lock(client, target: StoreURL) -> None:
    """Refuse to write while another writer's ``lock`` row is live. Best effort
    (Milvus cannot compare-and-set): it stops a second `rag index` started by
    mistake. A lock left by a killed writer is ignored once its process is gone
    (same host) or it is an hour old (another host; a writer renews it at each
    commit)."""
    if not client.has_collection(target.meta):
        return
    _load(client, target.meta)
    rows = client.get(target.meta, ids=["lock"], output_fields=["value"])
    if not rows:
        return
    held = rows[0]["value"]
    if held.get("host") == socket.gethostname():
        live = int(held.get("pid", 0)) != os.getpid() and _alive(int(held.get("pid", 0)))
    else:
        live = time.time() - float(held.get("at", 0)) < _STALE_LOCK_S
    if live:
        raise IndexLockedError(
            f"index {target.url} is being written by another `rag index` "
            f"({held.get('host')}, pid {held.get('pid')}); try again when it ends"
        )


def _take_lock(client, target: StoreURL) -> None:
    mine = {"host": socket.gethostname(), "pid": os.getpid(), "at": time.time()}
    client.upsert(target.meta, [_meta_row("lock", "lock", 0, "", mine)])


@contextlib.contextmanager
def milvus_writer(
    store: str, info: IndexInfo, rebuild: bool = False, token: str = ""
) -> Iterator[MilvusWriter]:
    """Open (or create) the index at ``store`` for an update."""
    target = parse_store(store)
    conn = _Connection(target, create=True, token=token)
    try:
        _check_lock(conn.client, target)
        writer = MilvusWriter(conn, info, rebuild)
        _take_lock(conn.client, target)
        try:
            yield writer
        except BaseException:
            with contextlib.suppress(Exception):
                writer.discard()
            raise
        finally:
            with contextlib.suppress(Exception):
                conn.client.delete(target.meta, ids=["lock"])
    finally:
        conn.close()
