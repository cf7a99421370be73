"""How llama-cpp-python's ``Llama`` is made for ragcli: how its threads wait, parameters its
constructor does not take, and llama.cpp's load-time logs kept off the terminal."""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import threading
from collections.abc import Iterator
from types import ModuleType
from typing import Any, TextIO

from ..log import debugging

# How many times a thread of llama.cpp that waits for the others at a barrier checks
# before it sleeps in the kernel. The build runs its threads as an OpenMP team (libgomp),
# whose default is 300,000 checks, some 3 ms by libgomp's own estimate and up to five times
# that on CPUs with a slow pause instruction. When another process holds the core of the
# thread waited for, the waiting one spins through its own time slice instead of giving
# the core up, and two processes that share the CPUs spin against each other (issue #47).
# Barrier waits on a machine with a core per thread take microseconds, so a tenth of a
# millisecond of spinning still catches them, and a longer wait yields the core.
SPIN_COUNT = 10_000
# libgomp's own variables: set by the user, they decide and ragcli leaves them alone.
OPENMP_WAIT = ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")


def import_llama_cpp() -> ModuleType:
    """``llama_cpp``, its OpenMP runtime loaded with SPIN_COUNT (unless the user set one
    of OPENMP_WAIT). libgomp reads its environment once, as it is loaded, which is when
    llama_cpp is first imported: a process that imported llama_cpp before keeps libgomp's
    default. The variable stays set (unsetting it while other threads may read the
    environment is not safe), so ragcli processes started from this one wait alike."""
    if "llama_cpp" not in sys.modules and not any(name in os.environ for name in OPENMP_WAIT):
        os.environ["GOMP_SPINCOUNT"] = str(SPIN_COUNT)
    import llama_cpp

    return llama_cpp


@functools.cache
def without_repack(llama: type) -> type:
    """``Llama`` with llama.cpp's load-time weight repacking off.

    Its constructor has no argument for ``use_extra_bufts``; it builds the model
    parameters and assigns them to ``self.model_params`` before loading, so this
    subclass turns the flag off as they are assigned. Measured (docs/BENCHMARKS.md, "Loading
    the model without weight repacking"): a third of the load time and no 600 MB copy of
    the weights.
    """

    class Llama(llama):  # type: ignore[misc, valid-type]
        @property
        def model_params(self):
            return self.__dict__["_ragcli_model_params"]

        @model_params.setter
        def model_params(self, params) -> None:
            params.use_extra_bufts = False
            self.__dict__["_ragcli_model_params"] = params

    return Llama


@functools.cache
def with_sequences(llama: type, n: int) -> type:
    """``Llama`` whose context holds ``n`` sequences in one KV buffer.

    Its constructor has no argument for either; it assigns the context parameters to
    ``self.context_params`` before creating the context. Unified: llama.cpp can then copy
    cells between sequences (across separate buffers a copy replaces the whole target).
    """

    class Llama(llama):  # type: ignore[misc, valid-type]
        @property
        def context_params(self):
            return self.__dict__["_ragcli_context_params"]

        @context_params.setter
        def context_params(self, params) -> None:
            params.n_seq_max = n
            params.kv_unified = True
            self.__dict__["_ragcli_context_params"] = params

    return Llama


class _OtherThreadsOnly:
    """A stand-in for ``sys.stderr`` that drops what one thread writes and passes the
    rest: the model loads on a thread while the main thread may report on stderr."""

    def __init__(self, stream: TextIO, muted: int) -> None:
        self._stream, self._muted = stream, muted

    def write(self, text: str) -> int:
        if threading.get_ident() == self._muted:
            return len(text)
        return self._stream.write(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


@contextlib.contextmanager
def quiet_native_logs() -> Iterator[None]:
    """Keep what llama.cpp and llama-cpp-python log while a model loads off stderr.

    Both write through Python's ``sys.stderr`` (llama.cpp's log callback and the
    verbose prints of ``Llama``), so only the loading thread's writes are dropped;
    file descriptors are left alone, since other threads are writing through them.
    Load failures still surface, as the exception llama-cpp-python raises.
    """
    if debugging():
        yield
        return
    real = sys.stderr
    sys.stderr = _OtherThreadsOnly(real, threading.get_ident())
    try:
        yield
    finally:
        sys.stderr = real
