"""A file's bytes and identity: read once, hashed, decoded, and why a read failed."""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

from ..records import SourceFile


def fingerprint(path: Path) -> SourceFile:
    """Hash a file's bytes: an unchanged hash means an unchanged document."""
    digest = hashlib.sha256()
    size = 0
    with path.open("rb") as fh:
        while block := fh.read(1 << 20):
            digest.update(block)
            size += len(block)
    return SourceFile(path=path, sha256=digest.hexdigest(), size=size)


def read_source(path: Path) -> tuple[SourceFile, bytes]:
    """A regular file's identity and bytes, read once (so the hash fits the text).

    Raises OSError when it cannot be read and ValueError when it is not a
    regular file; a FIFO or device never blocks the walk.
    """
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        st = os.fstat(fd)  # before reading: a later change shows as a newer mtime
        if not stat.S_ISREG(st.st_mode):
            raise ValueError("not a regular file")
        with os.fdopen(fd, "rb", closefd=False) as fh:
            data = fh.read()
    finally:
        os.close(fd)
    return SourceFile(path, hashlib.sha256(data).hexdigest(), len(data), st.st_mtime_ns), data


def read_error(exc: OSError) -> str:
    """Why a file could not be read, in words."""
    if isinstance(exc, FileNotFoundError):
        return "vanished before it was read"
    if isinstance(exc, PermissionError):
        return "permission denied"
    if isinstance(exc, IsADirectoryError):
        return "is a folder"
    return f"unreadable ({exc.strerror or exc})"


def decode(data: bytes) -> tuple[str, str | None]:
    """Text of a file's bytes and a warning when it was not UTF-8.

    Raises ValueError for binary data (a NUL byte), which is not text at all.
    """
    if b"\x00" in data[:8192]:
        raise ValueError("binary file (contains NUL bytes)")
    try:
        return data.decode("utf-8-sig"), None
    except UnicodeDecodeError:
        pass
    try:
        return data.decode("cp1252"), "not UTF-8; read as Windows-1252"
    except UnicodeDecodeError:
        return data.decode("latin-1"), "not UTF-8; read as Latin-1"
