"""Persistent KV cache of prompt prefixes, shared by every `rag` process.

Only keys and values depend on earlier tokens, so the state of sequence 0
after a prompt prefix (instructions; instructions + passages) can be saved
and restored by a later process, which then prefills only the rest.

Each state is one file named by a hash of everything that must match for
the bytes to be valid: model file digest, llama.cpp version, context and
batch size, KV cache type, and the prefix token ids. Files carry a JSON
header and a sha256 of the payload; anything that does not check out is
deleted and rebuilt, never handed to llama.cpp. Writes are atomic (temp
file + rename); the folder is kept under a size bound by evicting the least
recently used files.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import struct
import tempfile
import time
import weakref
from array import array
from dataclasses import dataclass
from pathlib import Path

from .base import StatefulEngine

MAGIC = b"RAGKV01\n"
SUFFIX = ".kv"
RESCAN_EVERY = 64  # writes between scans of the folder's size


@dataclass(frozen=True)
class Restored:
    tokens: int
    ms: float


@dataclass(frozen=True)
class CacheStats:
    path: str
    files: int
    bytes: int
    max_bytes: int


def engine_fingerprint(engine: StatefulEngine) -> str:
    """What a saved state depends on besides its tokens."""
    import llama_cpp

    lib = Path(llama_cpp.__file__).parent / "lib"
    builds = sorted(
        (p.name, p.stat().st_size, p.stat().st_mtime_ns)
        for p in lib.glob("lib*.so*")
        if p.is_file()
    )
    parts = {
        "model_sha256": engine.model.digest,
        "llama_cpp": llama_cpp.__version__,
        # The native build (compiled for this CPU) and its features decide the bytes too.
        "build": builds,
        "system": llama_cpp.llama_print_system_info().decode("utf-8", "replace"),
        "n_ctx": engine.n_ctx,
        "n_batch": engine.n_batch,
        "kv_type": engine.kv_type,
        "swa_full": True,
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def common_prefix(a: list[int], b: list[int]) -> int:
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


def _token_bytes(tokens: list[int]) -> bytes:
    return array("i", tokens).tobytes()


class StateFolder:
    """Saved KV states in one folder, each file the state of exactly one token sequence,
    bounded by ``max_bytes`` (least recently used out first)."""

    def __init__(self, root: Path, max_bytes: int = 1 << 30) -> None:
        self.root = root
        self.max_bytes = max_bytes
        # The folder's size as last scanned plus what this process wrote since: a scan of a
        # folder of thousands of sentences after every write made warming quadratic.
        self._size: int | None = None
        self._writes = 0
        self._fingerprints: weakref.WeakKeyDictionary[StatefulEngine, str] = (
            weakref.WeakKeyDictionary()
        )

    def _fingerprint(self, engine: StatefulEngine) -> str:
        if engine not in self._fingerprints:
            self._fingerprints[engine] = engine_fingerprint(engine)
        return self._fingerprints[engine]

    def _path(self, fingerprint: str, tokens: list[int]) -> Path:
        key = hashlib.sha256(fingerprint.encode() + _token_bytes(tokens)).hexdigest()
        return self.root / f"{key[:40]}{SUFFIX}"

    def has(self, engine: StatefulEngine, tokens: list[int]) -> bool:
        return self._path(self._fingerprint(engine), tokens).is_file()

    def read(self, engine: StatefulEngine, tokens: list[int]) -> bytes | None:
        """The saved state of ``tokens``, if a whole one is here (it counts as used)."""
        path = self._path(self._fingerprint(engine), tokens)
        payload = self._read(path, self._fingerprint(engine), tokens)
        if payload is not None:
            with contextlib.suppress(OSError):
                os.utime(path)  # recently used: evicted last
        return payload

    def forget(self, engine: StatefulEngine, tokens: list[int]) -> None:
        """Drop the state of ``tokens``: llama.cpp refused it, so it is never tried again."""
        self._path(self._fingerprint(engine), tokens).unlink(missing_ok=True)

    def _read(self, path: Path, fingerprint: str, tokens: list[int]) -> bytes | None:
        """The payload if the file is whole and is the state of exactly ``tokens``."""
        try:
            with path.open("rb") as fh:
                data = fh.read()
        except OSError:
            return None
        try:
            if not data.startswith(MAGIC):
                raise ValueError("bad magic")
            (hlen,) = struct.unpack_from("<I", data, len(MAGIC))
            start = len(MAGIC) + 4
            header = json.loads(data[start : start + hlen])
            body = memoryview(data)[start + hlen :]
            want = _token_bytes(tokens)
            if (
                header.get("fingerprint") != fingerprint
                or header.get("n_tokens") != len(tokens)
                or bytes(body[: len(want)]) != want
                or len(body) != len(want) + header.get("payload_len", -1)
            ):
                raise ValueError("not this prefix")
            payload = bytes(body[len(want) :])
            if hashlib.sha256(payload).hexdigest() != header.get("payload_sha256"):
                raise ValueError("checksum")
            return payload
        except (ValueError, struct.error, UnicodeDecodeError, AttributeError):
            path.unlink(missing_ok=True)  # corrupt or foreign: rebuilt on the next save
            return None

    def write(self, engine: StatefulEngine, tokens: list[int], payload: bytes) -> None:
        """Keep ``payload`` as the state of ``tokens``. A folder that cannot be written
        (full disk, read-only) only costs speed, never the answer; several processes may
        write at once, since a file appears whole (renamed in) or not at all."""
        fp = self._fingerprint(engine)
        header = json.dumps(
            {
                "fingerprint": fp,
                "n_tokens": len(tokens),
                "payload_len": len(payload),
                "payload_sha256": hashlib.sha256(payload).hexdigest(),
                "model": engine.model.name,
                "created": time.time(),
            }
        ).encode()
        parts = (MAGIC + struct.pack("<I", len(header)) + header, _token_bytes(tokens), payload)
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.root, suffix=".tmp")
            try:
                with os.fdopen(fd, "wb") as fh:
                    for part in parts:
                        fh.write(part)
                os.replace(tmp, self._path(fp, tokens))
            finally:
                Path(tmp).unlink(missing_ok=True)
            self._wrote(sum(map(len, parts)))
        except OSError:
            pass

    def _wrote(self, size: int) -> None:
        """Evict once the folder may be over its bound; scan it anew every so often, since
        other processes write to it too."""
        self._writes += 1
        if self._size is not None and self._writes % RESCAN_EVERY:
            self._size += size
            if self._size <= self.max_bytes:
                return
        self._evict()

    def _entries(self) -> list[tuple[float, int, Path]]:
        out = []
        for p in self.root.glob(f"*{SUFFIX}"):
            try:
                st = p.stat()
            except OSError:
                continue
            out.append((st.st_mtime, st.st_size, p))
        return sorted(out)

    def _evict(self) -> None:
        entries = self._entries()
        total = sum(size for _, size, _ in entries)
        for _, size, path in entries:
            if total <= self.max_bytes:
                break
            path.unlink(missing_ok=True)
            total -= size
        self._size = total

    # -- maintenance -----------------------------------------------------
    def stats(self) -> CacheStats:
        entries = self._entries()
        return CacheStats(
            str(self.root), len(entries), sum(s for _, s, _ in entries), self.max_bytes
        )

    def clear(self) -> int:
        n = 0
        for p in [*self.root.glob(f"*{SUFFIX}"), *self.root.glob("*.tmp")]:
            p.unlink(missing_ok=True)
            n += 1
        return n


class PrefixCache(StateFolder):
    """The states of sequence 0 after prompt prefixes."""

    def restore(
        self, engine: StatefulEngine, tokens: list[int], boundaries: list[int], better_than: int = 0
    ) -> Restored | None:
        """Load the longest saved prefix ending at one of ``boundaries``.

        Only prefixes longer than ``better_than`` (what the live cache already
        holds) and shorter than the prompt are tried.
        """
        for n in sorted({b for b in boundaries if better_than < b < len(tokens)}, reverse=True):
            t0 = time.perf_counter()
            payload = self.read(engine, tokens[:n])
            if payload is None:
                continue
            if engine.load_state(payload, tokens[:n]):
                return Restored(n, (time.perf_counter() - t0) * 1000)
            self.forget(engine, tokens[:n])
        return None

    def save(self, engine: StatefulEngine, tokens: list[int]) -> float:
        """Save the engine's current state as the state of ``tokens``; returns ms spent."""
        t0 = time.perf_counter()
        if self.has(engine, tokens):
            return 0.0
        self.write(engine, tokens, engine.save_state())
        return (time.perf_counter() - t0) * 1000
