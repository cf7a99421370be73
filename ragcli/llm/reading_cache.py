"""The reading cache: keys and values of each sentence the model has read, for any prompt.

A new question's prompt is mostly sentences of the documents, and most of them were read
for some earlier question, in another order and at other positions. Each sentence (a
:attr:`~ragcli.llm.base.Prompt.pieces` unit) is encoded apart: right after the prompt's
fixed first segment and the sentences before it in its passage (its lead), not after the
other passages' sentences. So its keys and values depend only on those tokens, and its
state is kept here, keyed by them. A later prompt loads it into a spare sequence, moves it
to where it goes (llama.cpp rotates the keys to the new positions) and joins it to the
prompt's sequence; only the question is read anew.

What a sentence encoded apart loses is attention to the other passages: the question, read
last, still attends to everything. docs/BENCHMARKS.md, "Reading cache", has what that costs
in answers. Given a prompt with pieces, the engine reads them apart whether or not their
state is cached; the asker gives it one only when the cache holds nearly all of them, else
the prompt is read whole and its pieces kept afterwards (answer/asker.py), and an answer read
apart that won by a hair is read again whole (``reading_margin``).

Files are :class:`~ragcli.llm.kv_cache.StateFolder` files: checked, atomic, evicted least
recently used first, never unpickled.
"""

from __future__ import annotations

import ctypes
import time
from collections.abc import Iterator
from typing import Any, Protocol

from ..errors import ModelError
from .kv_cache import StateFolder, common_prefix


class ReadingCache(StateFolder):
    """Sentence states, each kept under :func:`piece_key` (only the sentence's cells are in
    the payload)."""


# Sequence 0 is the prompt. In READER pieces are encoded: the head, then a piece's lead and
# the piece, kept while the next piece's lead goes on from it (the sentences of one passage
# in a row are one pass). A piece's state is cut out through SPARE; a saved state is loaded
# into SPARE, moved, and joined to sequence 0.
READER, SPARE = 1, 2
SEQUENCES = SPARE + 1


def piece_key(head: list[int], lead: list[int], piece: list[int]) -> list[int]:
    """The tokens a piece's state is kept under; -1 (no token) marks where the lead ends."""
    return [*head, *lead, -1, *piece]


def _ahead(wants: list[list[int]], k: int) -> list[int]:
    """The longest of ``wants[k:]`` that goes on from ``wants[k]``: read in one pass."""
    return max((w for w in wants[k:] if w[: len(wants[k])] == wants[k]), key=len)


class Context(Protocol):
    """What a :class:`SentenceReader` needs of an engine: its llama.cpp context and memory,
    a decode of tokens at positions into a sequence, a sequence's saved state."""

    ctx: Any
    _lib: Any
    _mem: Any

    def _decode(self, tokens: list[int], start: int, seq: int) -> None: ...

    def _seq_state(self, seq: int) -> bytes: ...


class SentenceReader:
    """Reads pieces apart into the reading cache and joins them to a prompt's sequence, in a
    context made with :data:`SEQUENCES` sequences in one unified KV buffer."""

    def __init__(self, engine: Context, cache: ReadingCache) -> None:
        self.engine, self.cache = engine, cache
        self._reader: list[int] | None = None  # tokens after the head in READER

    def reset(self) -> None:
        """Empty READER (at the start and end of a prompt: its cells take room)."""
        e = self.engine
        e._lib.llama_memory_seq_rm(e._mem, READER, -1, -1)
        self._reader = None

    def _read_into(self, head: list[int], tokens: list[int]) -> None:
        """Make READER hold ``head`` + ``tokens``, reading only what it lacks."""
        e, p = self.engine, len(head)
        if self._reader is None:
            e._lib.llama_memory_seq_rm(e._mem, READER, -1, -1)
            e._lib.llama_memory_seq_cp(e._mem, 0, READER, 0, p)  # sequence 0's head cells
            self._reader = []
        keep = common_prefix(self._reader, tokens)
        if keep == len(tokens):
            return
        if keep < len(self._reader):
            e._lib.llama_memory_seq_rm(e._mem, READER, p + keep, -1)
        e._decode(tokens[keep:], p + keep, READER)
        self._reader = list(tokens)

    def state(
        self, head: list[int], lead: list[int], piece: list[int], ahead: list[int]
    ) -> tuple[bytes, bool]:
        """The state of ``piece`` read after ``head`` and ``lead``, and whether it came from
        the cache; else it is encoded now and kept. ``ahead`` starts with ``lead`` and
        ``piece`` and goes on as far as the pieces after it do: it is read in the same pass.
        ``head`` must be sequence 0's first cells."""
        e, key = self.engine, piece_key(head, lead, piece)
        data = self.cache.read(e, key)  # type: ignore[arg-type]
        if data is not None:
            return data, True
        self._read_into(head, ahead)
        at = len(head) + len(lead)
        e._lib.llama_memory_seq_cp(e._mem, READER, SPARE, at, at + len(piece))
        data = e._seq_state(SPARE)
        e._lib.llama_memory_seq_rm(e._mem, SPARE, -1, -1)
        self.cache.write(e, key, data)  # type: ignore[arg-type]
        return data, False

    def place(self, data: bytes, n: int, at: int) -> bool:
        """Load a piece's state of ``n`` tokens, move it to positions at.. and join it to
        sequence 0; False if llama.cpp refused the state."""
        e = self.engine
        lib, mem = e._lib, e._mem
        buf = (ctypes.c_uint8 * len(data)).from_buffer_copy(data)
        ok = lib.llama_state_seq_set_data(e.ctx, buf, len(data), SPARE) == len(data)
        low = lib.llama_memory_seq_pos_min(mem, SPARE)
        if not ok or low < 0 or lib.llama_memory_seq_pos_max(mem, SPARE) != low + n - 1:
            lib.llama_memory_seq_rm(mem, SPARE, -1, -1)
            return False
        if at != low:  # llama.cpp rotates the keys to their new positions
            lib.llama_memory_seq_add(mem, SPARE, low, low + n, at - low)
        lib.llama_memory_seq_cp(mem, SPARE, 0, -1, -1)
        lib.llama_memory_seq_rm(mem, SPARE, -1, -1)
        return True

    def read_apart(
        self, head: list[int], leads: list[list[int]], parts: list[list[int]], starts: list[int]
    ) -> Iterator[tuple[int, bool, float]]:
        """Put each piece, read apart after ``head`` and its lead, at its start in sequence 0;
        yields its index, whether it came from the cache and the milliseconds it took."""
        self.reset()
        wants = [lead + part for lead, part in zip(leads, parts, strict=True)]
        for i, (lead, part, start) in enumerate(zip(leads, parts, starts, strict=True)):
            t0 = time.perf_counter()
            data, cached = self.state(head, lead, part, _ahead(wants, i))
            if not self.place(data, len(part), start):
                self.cache.forget(self.engine, piece_key(head, lead, part))  # type: ignore[arg-type]
                data, cached = self.state(head, lead, part, _ahead(wants, i))
                if not self.place(data, len(part), start):
                    raise ModelError("llama.cpp refused a sentence's state it had just made")
            yield i, cached, (time.perf_counter() - t0) * 1000
        self.reset()

    def missing(
        self, head: list[int], leads: list[list[int]], parts: list[list[int]]
    ) -> list[tuple[list[int], list[int]]]:
        """The (lead, piece) pairs whose state the cache lacks."""
        return [
            (lead, part)
            for lead, part in zip(leads, parts, strict=True)
            if not self.cache.has(self.engine, piece_key(head, lead, part))  # type: ignore[arg-type]
        ]

    def warm(self, head: list[int], todo: list[tuple[list[int], list[int]]]) -> None:
        """Keep the state of each (lead, piece) of ``todo`` (``head`` in sequence 0)."""
        self.reset()
        wants = [lead + part for lead, part in todo]
        for i, (lead, part) in enumerate(todo):
            self.state(head, lead, part, _ahead(wants, i))
        self.reset()
