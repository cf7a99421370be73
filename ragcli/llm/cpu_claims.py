"""Cores that ragcli's engines run threads on, claimed in files every ragcli process reads:
two engines that judge the machine free at the same instant do not both take every core.

The sampler (:mod:`ragcli.cpus`) sees what other processes used over its last window.
Two `rag ask` started together both see a quiet machine, both run a thread per core, and
llama.cpp's threads, which wait for each other hundreds of times a token, wait for a
thread the other process holds the core of: each decodes at a few percent of its quiet
rate (issue #47). A claim says how many threads an engine runs; an engine takes what the
others' claims leave, and gives cores back when it stops.

One folder (``cache_dir/cpus``) holds a file per engine that runs, with its count in it.
The engine holds an exclusive ``flock`` on its file while the file exists, and the kernel
drops that lock when the process ends however it ends (killed, crashed): a file whose lock
another can take belongs to no live engine, so it is removed and never counted. Every
decision (read the others' claims, write one's own) is made under an exclusive ``flock``
of the folder's lock file, so two engines decide one after the other, the second seeing
what the first took.

``flock``, not ``fcntl`` locks: those belong to the whole process, so two engines of one
process would each see the other's claim as dead, and closing any descriptor of a file
would drop them. Standard library only; where the folder cannot be used (read-only, or a
system without ``flock``), nothing is claimed and the sampler alone decides.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator
from pathlib import Path

try:
    import fcntl
except ImportError:  # not on Windows: no claims there
    fcntl = None  # type: ignore[assignment]

FOLDER = "cpus"  # in cache_dir
SUFFIX = ".claim"
LOCK = "lock"


class CpuClaims:
    """One engine's claim on the cores of a machine shared with other ragcli engines."""

    def __init__(self, folder: Path, cores: int) -> None:
        """``cores``: how many threads the machine runs well between all engines."""
        self.folder = folder
        self.cores = cores
        self.held = 0  # cores this engine's claim holds now
        self._fd: int | None = None  # this engine's claim file, locked while open
        self._name = ""

    def take(self, want: int) -> int:
        """Claim ``want`` cores, or what the other engines' claims leave if fewer, and at
        least one: an engine cannot run on none, and one thread waits for no other, so a
        machine whose cores are all claimed is shared by time slices, never spun on.
        Returns the count claimed; ``want`` itself where the folder cannot be used."""
        try:
            with self._decision():
                n = max(1, min(want, self.cores - self._others()))
                self._write(n)
        except OSError:
            return want
        self.held = n
        return n

    def others(self) -> int:
        """Cores the live claims of other engines hold now (0 where none can be read)."""
        try:
            with self._decision():
                return self._others()
        except OSError:
            return 0

    def release(self) -> None:
        """Hold nothing: the engine stopped. Its file goes, and its lock with it."""
        if self._fd is None:
            return
        with contextlib.suppress(OSError), self._decision():
            os.unlink(self.folder / self._name)
        os.close(self._fd)
        self._fd, self.held = None, 0

    @contextlib.contextmanager
    def _decision(self) -> Iterator[None]:
        """The folder's lock, held while claims are read and written."""
        if fcntl is None:
            raise OSError("no flock on this system")
        self.folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.folder / LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # and the lock with it

    def _others(self) -> int:
        """The sum of the other live claims; the files of dead engines are removed."""
        total = 0
        for name in os.listdir(self.folder):
            if not name.endswith(SUFFIX) or name == self._name:
                continue
            try:
                fd = os.open(self.folder / name, os.O_RDONLY | os.O_CLOEXEC)
            except FileNotFoundError:
                continue
            try:
                try:
                    fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                except BlockingIOError:  # its engine holds it: a live claim
                    total += _count(os.pread(fd, 32, 0))
                else:  # nobody holds it: its engine is gone
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(self.folder / name)
            finally:
                os.close(fd)
        return total

    def _write(self, n: int) -> None:
        if self._fd is None:
            name = f"{os.getpid()}-{secrets.token_hex(4)}{SUFFIX}"  # the pid is for people
            flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
            fd = os.open(self.folder / name, flags, 0o644)
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a new file: nobody else has it
            self._fd, self._name = fd, name
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, f"{n}\n".encode(), 0)


def _count(data: bytes) -> int:
    """A claim file's count; 0 for anything else (its engine had not written it yet)."""
    try:
        return max(0, int(data))
    except ValueError:
        return 0
