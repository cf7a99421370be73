"""The semantic answer cache: an answer reused without running the model.

A question is served an earlier answer when everything the answer depends on
is the same (the key: model, index generation, prompt version, the settings
that shape the prompt, and the passages retrieved, in order) and its
embedding lies within a calibrated cosine threshold of the cached question's
(``python -m benchmarks semcache`` measures the threshold on paraphrases and near-misses), and
both questions hold the same numbers and ask for the same type of answer: "Python 3.11"
and "Python 3.12" embed almost alike (cosine 0.95) but ask different things, and so do
"Who is Ann's brother?" and "How many brothers does Ann have?".

Entries live in one SQLite file beside the prompt (KV) cache. Like that cache it
only ever costs speed: a file SQLite cannot read is deleted and rebuilt, a row
whose checksum or fields do not check out is deleted, a locked or read-only file
is skipped, and the sum of the entries is kept under a size bound by evicting
the least recently used. Rows are plain JSON text and float32 blobs; nothing is
unpickled.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from .question import Question

FILE = "answers.sqlite"
SCHEMA = 2
SIMILARITY_SLACK = 1e-5
ROW_OVERHEAD = 64  # bytes counted per row on top of its fields (ids, times, checksum)
_CORRUPT = ("SQLITE_CORRUPT", "SQLITE_NOTADB")
_FIELDS: dict[str, type | tuple[type, ...]] = {
    "answer": str,
    "raw_answer": str,
    "reason": str,
    "grounded": bool,
    "support": (float, int, type(None)),
    "cited": list,
    "evidence": list,
    "model": str,
}
T = TypeVar("T")


def asks_alike(question: Question, other: Question) -> bool:
    """Whether two questions name the same numbers (years, versions, counts) and want the
    same type of answer."""
    return (question.numbers, question.shape, question.wants) == (
        other.numbers,
        other.shape,
        other.wants,
    )


def cache_key(parts: dict[str, Any]) -> str:
    """One digest of everything a cached answer depends on besides the question."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def unit(vector: np.ndarray) -> np.ndarray:
    """The question vector at unit length, as float32 (cosine = inner product)."""
    v = np.asarray(vector, dtype=np.float32).ravel()
    norm = float(np.linalg.norm(v))
    return v / norm if norm > 0 else v


@dataclass(frozen=True)
class CachedAnswer:
    """An answer found in the cache, and how close its question was to the new one."""

    question: str
    similarity: float
    answer: str
    raw_answer: str
    reason: str
    grounded: bool
    support: float | None
    cited: list[int] = field(default_factory=list)
    model: str = ""
    evidence: list[dict] = field(default_factory=list)  # "rank" holds the passage id here


@dataclass(frozen=True)
class AnswerCacheStats:
    path: str
    entries: int
    bytes: int
    max_bytes: int


def _checksum(key: str, question: str, vector: bytes, payload: str) -> str:
    h = hashlib.sha256()
    for part in (key.encode(), question.encode(), vector, payload.encode()):
        h.update(len(part).to_bytes(8, "little"))
        h.update(part)
    return h.hexdigest()


def _is_corrupt(exc: sqlite3.Error) -> bool:
    """A file to rebuild, as against one that is only busy or read-only for now."""
    if getattr(exc, "sqlite_errorname", "") in _CORRUPT:
        return True
    if isinstance(exc, sqlite3.OperationalError):  # locked, read-only, I/O: try next time
        return str(exc).startswith("no such")  # a foreign file with other tables
    return isinstance(exc, sqlite3.DatabaseError)


class AnswerCache:
    """Cached answers in one SQLite file, bounded by ``max_bytes``."""

    def __init__(self, path: Path, max_bytes: int, threshold: float) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self.threshold = threshold
        self._db: sqlite3.Connection | None = None
        self._lock = threading.RLock()  # one connection, used by whichever thread asks

    # -- the file --------------------------------------------------------
    def _connect(self) -> sqlite3.Connection:
        if self._db is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(
                self.path, timeout=2.0, isolation_level=None, check_same_thread=False
            )
            try:
                # Before any table: lets the file shrink again after evictions.
                db.execute("PRAGMA auto_vacuum = INCREMENTAL")
                db.execute("PRAGMA journal_mode = WAL")
                version = db.execute("PRAGMA user_version").fetchone()[0]
                if version not in (0, SCHEMA):  # another layout: start again
                    db.execute("DROP TABLE IF EXISTS answers")
                db.execute(
                    "CREATE TABLE IF NOT EXISTS answers (id INTEGER PRIMARY KEY, scope TEXT NOT NULL,"
                    " key TEXT NOT NULL,"
                    " question TEXT NOT NULL, vector BLOB NOT NULL, payload TEXT NOT NULL,"
                    " checksum TEXT NOT NULL, bytes INTEGER NOT NULL, used REAL NOT NULL)"
                )
                db.execute("CREATE INDEX IF NOT EXISTS answers_key ON answers (key)")
                db.execute("CREATE INDEX IF NOT EXISTS answers_scope ON answers (scope)")
                db.execute("CREATE INDEX IF NOT EXISTS answers_used ON answers (used)")
                db.execute(f"PRAGMA user_version = {SCHEMA}")
            except BaseException:
                db.close()
                raise
            self._db = db
        return self._db

    def _discard_file(self) -> None:
        """Delete a file SQLite cannot read; the next use starts an empty one."""
        self.close()
        for suffix in ("", "-wal", "-shm", "-journal"):
            Path(f"{self.path}{suffix}").unlink(missing_ok=True)

    def _run(self, work: Callable[[sqlite3.Connection], T], default: T) -> T:
        """``work(db)``; a corrupt file is rebuilt once, any other failure skips the cache."""
        with self._lock:
            return self._attempt(work, default)

    def _attempt(self, work: Callable[[sqlite3.Connection], T], default: T) -> T:
        for attempt in (1, 2):
            try:
                return work(self._connect())
            except sqlite3.Error as exc:
                if not _is_corrupt(exc) or attempt == 2:
                    self.close()
                    return default
                self._discard_file()
            except OSError:
                self.close()
                return default
        return default

    # -- reading ---------------------------------------------------------
    def has_scope(self, scope: str) -> bool:
        """Whether any answer is kept for this index, model and settings (``scope``), i.e.
        whether a question could be served at all: a caller can then put off loading the model."""
        if not self.path.exists():
            return False

        def work(db: sqlite3.Connection) -> bool:
            row = db.execute("SELECT 1 FROM answers WHERE scope = ? LIMIT 1", (scope,)).fetchone()
            return row is not None

        return self._run(work, False)

    def lookup(self, key: str, question: Question, vector: np.ndarray) -> CachedAnswer | None:
        """The cached answer under ``key`` whose question asks alike (:func:`asks_alike`)
        and is most similar to ``vector``, if that reaches the threshold."""
        q = unit(vector)

        def work(db: sqlite3.Connection) -> CachedAnswer | None:
            rows = db.execute(
                "SELECT id, question, vector, payload, checksum FROM answers WHERE key = ?", (key,)
            ).fetchall()
            best: tuple[float, int, str, dict] | None = None
            for row_id, cached_q, blob, payload, checksum in rows:
                data = _valid(key, cached_q, blob, payload, checksum, q.size)
                if data is None:  # damaged: never served, and gone for the next time
                    db.execute("DELETE FROM answers WHERE id = ?", (row_id,))
                    continue
                if not asks_alike(question, Question.parse(cached_q)):
                    continue
                sim = float(np.frombuffer(blob, dtype=np.float32) @ q)
                if best is None or sim > best[0]:
                    best = (sim, row_id, cached_q, data)
            # float32 rounding: the same question again must meet even a threshold of 1
            if best is None or best[0] < self.threshold - SIMILARITY_SLACK:
                return None
            sim, row_id, cached_q, data = best
            db.execute("UPDATE answers SET used = ? WHERE id = ?", (time.time(), row_id))
            return CachedAnswer(
                question=cached_q,
                similarity=min(1.0, sim),
                answer=data["answer"],
                raw_answer=data["raw_answer"],
                reason=data["reason"],
                grounded=data["grounded"],
                support=data["support"],
                cited=list(data["cited"]),
                model=data["model"],
                evidence=list(data["evidence"]),
            )

        return self._run(work, None)

    # -- writing ---------------------------------------------------------
    def store(
        self, scope: str, key: str, question: str, vector: np.ndarray, answer: dict[str, Any]
    ) -> None:
        """Keep one answer (the fields named in ``_FIELDS``), then evict down to the bound.

        ``key`` is what the answer depends on; ``scope`` the part of it that does not
        depend on the question (see :meth:`has_scope`)."""
        blob = unit(vector).tobytes()
        payload = json.dumps({name: answer[name] for name in _FIELDS}, ensure_ascii=False)
        size = (
            len(scope)
            + len(key)
            + len(question.encode())
            + len(blob)
            + len(payload.encode())
            + ROW_OVERHEAD
        )
        if size > self.max_bytes:
            return
        row = (key, question, blob, payload, _checksum(key, question, blob, payload), size)

        def work(db: sqlite3.Connection) -> None:
            db.execute("BEGIN IMMEDIATE")
            try:
                db.execute("DELETE FROM answers WHERE key = ? AND question = ?", (key, question))
                db.execute(
                    "INSERT INTO answers (scope, key, question, vector, payload, checksum, bytes,"
                    " used) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (scope, *row, time.time()),
                )
                evicted = self._evict(db)
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
            if evicted:
                db.execute("PRAGMA incremental_vacuum")

        self._run(work, None)

    def _evict(self, db: sqlite3.Connection) -> int:
        """Delete the least recently used rows until the rest fit ``max_bytes``."""
        total = db.execute("SELECT COALESCE(SUM(bytes), 0) FROM answers").fetchone()[0]
        if total <= self.max_bytes:
            return 0
        doomed = []
        for row_id, size in db.execute("SELECT id, bytes FROM answers ORDER BY used, id"):
            if total <= self.max_bytes:
                break
            doomed.append((row_id,))
            total -= size
        db.executemany("DELETE FROM answers WHERE id = ?", doomed)
        return len(doomed)

    # -- maintenance -----------------------------------------------------
    def stats(self) -> AnswerCacheStats:
        def work(db: sqlite3.Connection) -> tuple[int, int]:
            return db.execute("SELECT COUNT(*), COALESCE(SUM(bytes), 0) FROM answers").fetchone()

        n, size = self._run(work, (0, 0)) if self.path.exists() else (0, 0)
        return AnswerCacheStats(str(self.path), n, size, self.max_bytes)

    def clear(self) -> int:
        """Forget every answer; returns how many there were."""
        with self._lock:
            n = self.stats().entries
            self._discard_file()
        return n

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None


def _valid(key: str, question: object, blob: object, payload: object, checksum: object, dim: int):
    """The row's answer fields if the row is whole and well-formed, else None."""
    if not isinstance(blob, bytes) or len(blob) != dim * 4:
        return None
    if not isinstance(question, str) or not isinstance(payload, str):
        return None
    if checksum != _checksum(key, question, blob, payload):
        return None
    try:
        data = json.loads(payload)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    for name, kind in _FIELDS.items():
        if not isinstance(data.get(name), kind):
            return None
    if not all(isinstance(c, int) and not isinstance(c, bool) for c in data["cited"]):
        return None
    if not all(isinstance(e, dict) and isinstance(e.get("rank"), int) for e in data["evidence"]):
        return None
    return data
