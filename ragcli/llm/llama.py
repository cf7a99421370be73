"""Run a prompt through llama.cpp: prefill with prefix reuse, then greedy decode.

We drive ``llama_decode`` ourselves instead of ``Llama.create_completion`` so
that we decide which tokens are evaluated: the KV cache of the longest common
prefix is kept between questions in one process, and can be restored from
disk (:mod:`ragcli.llm.kv_cache`) in a new one. Prefill, the cost that grows with
prompt length, is timed on its own.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import itertools
import logging
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, TextIO

from ..cpus import physical_cores
from ..errors import ModelError
from ..log import debugging
from ..models import GenerationModel
from .base import CONTEXT, MAX_TOKENS, Constraint, Generation, OnText, Prompt, StopStream, Timings
from .threads import ThreadGovernor

if TYPE_CHECKING:
    from .constrain import Vocabulary
    from .kv_cache import PrefixCache

# Prompt tokens per llama_decode call while the thread count follows the machine: the count
# is set between calls, so one call for a whole 400-token prompt held the count the first
# look chose for 4 s or more. Smaller calls read more slowly: on a quiet 2-core machine C
# (docs/BENCHMARKS.md), 448 tokens at 2.4 % below one call in 256-token calls, 7.6 % in 128.
GOVERNED_BATCH = 256


def common_prefix(a: list[int], b: list[int]) -> int:
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


class LlamaEngine:
    """One loaded GGUF model and context; answers prompts one at a time."""

    can_constrain = True  # logits are at hand: generation can be a constrained choice

    def __init__(
        self,
        model: GenerationModel,
        n_ctx: int = 4096,
        n_batch: int = 512,
        n_threads: int = 0,
        cache: PrefixCache | None = None,
        repack: bool = False,
        adaptive_threads: bool = True,
    ) -> None:
        """``n_threads`` 0: one per physical core. ``adaptive_threads``: use only the cores
        other processes leave free, judged again every quarter second or so (llm/threads.py)."""
        import llama_cpp

        self._lib = llama_cpp
        self.model = model
        self.cache = cache
        threads = n_threads or physical_cores()
        # The sampler's first window starts now and covers the load.
        self._governor = ThreadGovernor(threads) if adaptive_threads and threads > 1 else None
        self._threads = threads  # what llama.cpp is set to
        self._thread_tokens = 0  # sum over evaluated tokens of the threads that evaluated them
        self._evaluated = 0
        try:
            llama_class = llama_cpp.Llama if repack else _without_repack(llama_cpp.Llama)
            with _quiet_native_logs():
                self.llm = llama_class(
                    model_path=str(model.path),
                    n_ctx=n_ctx,
                    n_batch=n_batch,
                    n_ubatch=n_batch,
                    n_threads=threads,
                    n_threads_batch=threads,
                    # Not False: then llama-cpp-python points fds 1 and 2 at /dev/null for
                    # the whole load, which runs on a thread while `rag ask` may already
                    # print an answer that needs no model (it was lost). What it logs is
                    # kept off the terminal by _quiet_native_logs instead.
                    verbose=True,
                    # Sliding-window layers (Gemma 3) drop old positions unless the
                    # full cache is kept, and then a prefix cannot be trimmed and reused.
                    swa_full=True,
                )
        except (ValueError, RuntimeError) as exc:
            raise ModelError(f"cannot load model {model.path}: {exc}") from None
        # llama.cpp reports warnings at a level llama-cpp-python maps to ERROR;
        # they are not ours to show. Debug logging keeps them.
        if not debugging():
            logging.getLogger("llama-cpp-python").setLevel(logging.CRITICAL + 1)
        self.ctx = self.llm.ctx
        self.n_ctx = llama_cpp.llama_n_ctx(self.ctx)
        self.n_batch = llama_cpp.llama_n_batch(self.ctx)
        self.n_vocab = self.llm.n_vocab()
        self._vocab = llama_cpp.llama_model_get_vocab(self.llm.model)
        self._mem = llama_cpp.llama_get_memory(self.ctx)
        self.n_swa = int(llama_cpp.llama_model_n_swa(self.llm.model))  # 0: no sliding window
        self._batch = llama_cpp.llama_batch_init(self.n_batch, 0, 1)
        for i in range(self.n_batch):
            self._batch.n_seq_id[i] = 1
            self._batch.seq_id[i][0] = 0
        self.kv_tokens: list[int] = []  # tokens whose keys and values are in the cache
        self._vocab_lock = threading.Lock()
        self._vocab_future: Future[Vocabulary] | None = None
        meta = self.llm.metadata
        self.chat_template = meta.get("tokenizer.chat_template")  # base models have none
        self.bos = self._piece(self.llm.token_bos())
        self.eos = self._piece(self.llm.token_eos())

    # -- tokens ----------------------------------------------------------
    def _piece(self, token: int) -> str:
        if token < 0:
            return ""
        return self.llm.detokenize([token], special=True).decode("utf-8", "replace")

    def _segment_tokens(self, prompt: Prompt) -> list[list[int]]:
        """Segments are tokenized apart, so a shared segment always has the same tokens.

        The context segment is document text: its "<start_of_turn>"-like strings stay
        text (special=False), so a document cannot forge chat control tokens.
        """
        return [
            self.llm.tokenize(seg.encode("utf-8"), add_bos=(i == 0), special=(i != CONTEXT))
            if seg
            else []
            for i, seg in enumerate(prompt.segments)
        ]

    def start_vocabulary(self) -> None:
        """Build the token pieces on a thread: llama.cpp releases the GIL while it reads
        the prompt, so the ~0.4 s this takes hides behind the first prefill."""
        with self._vocab_lock:
            if self._vocab_future is None:
                pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="vocabulary")
                self._vocab_future = pool.submit(self._build_vocabulary)
                pool.shutdown(wait=False)

    @property
    def vocabulary(self) -> Vocabulary:
        """Every token's bytes, for decoding that may only copy (built once)."""
        self.start_vocabulary()
        assert self._vocab_future is not None
        return self._vocab_future.result()

    def _build_vocabulary(self) -> Vocabulary:
        from .constrain import Vocabulary

        lib, vocab = self._lib, self._vocab
        buf = ctypes.create_string_buffer(256)
        pieces, ends = [], []
        for tok in range(self.n_vocab):
            n = lib.llama_token_to_piece(vocab, tok, buf, 256, 0, False)
            pieces.append(buf.raw[:n] if n > 0 else b"")
            if lib.llama_vocab_is_eog(vocab, tok):
                ends.append(tok)
        return Vocabulary.build(pieces, ends)

    def tokenize(self, prompt: Prompt) -> list[int]:
        return [t for seg in self._segment_tokens(prompt) for t in seg]

    def segment_ends(self, prompt: Prompt) -> list[int]:
        """Token counts at the end of each segment: where cached states are cut."""
        return list(itertools.accumulate(len(seg) for seg in self._segment_tokens(prompt)))

    # -- low level -------------------------------------------------------
    def _fit_threads(self) -> int:
        """Give llama.cpp the threads the machine has free now (see llm/threads.py)."""
        if self._governor is not None:
            n = self._governor.pick()
            if n != self._threads:
                self._lib.llama_set_n_threads(self.ctx, n, n)
                self._threads = n
        return self._threads

    def evaluate(self, tokens: list[int], start: int) -> None:
        """Evaluate tokens at positions start.. (prefill, or one decoded token); logits for
        the last one only. `rag bench prefill` times it against bare ``llama_decode``."""
        b = self._batch
        step = min(self.n_batch, GOVERNED_BATCH) if self._governor is not None else self.n_batch
        for off in range(0, len(tokens), step):
            part = tokens[off : off + step]
            threads = self._fit_threads()
            for i, tok in enumerate(part):
                b.token[i] = tok
                b.pos[i] = start + off + i
                b.logits[i] = 0
            b.logits[len(part) - 1] = off + len(part) == len(tokens)
            b.n_tokens = len(part)
            rc = self._lib.llama_decode(self.ctx, b)
            if rc != 0:
                raise ModelError(f"llama_decode failed with code {rc}")
            self._thread_tokens += threads * len(part)
            self._evaluated += len(part)
        self.kv_tokens = self.kv_tokens[:start] + list(tokens)

    def _logits(self):
        """The last evaluated token's logits, as a numpy view of llama.cpp's buffer."""
        import numpy as np

        ptr = self._lib.llama_get_logits_ith(self.ctx, -1)
        return np.ctypeslib.as_array(ptr, shape=(self.n_vocab,))

    def trim(self, keep: int) -> int:
        """Drop cached positions from ``keep`` on; returns how many remain.

        A sliding-window model restored from a saved state holds only the last window
        of its windowed layers, and llama.cpp reports success when trimming below it
        while later output is silently wrong: such a cut clears the cache instead
        (llama-server's rule: the window must still reach back from ``keep``).
        """
        if keep < len(self.kv_tokens):
            ok = bool(self._lib.llama_memory_seq_rm(self._mem, 0, keep, -1))
            if ok and keep and self.n_swa:
                low = self._lib.llama_memory_seq_pos_min(self._mem, 0)
                ok = low != -1 and low <= max(0, keep - self.n_swa)
            if not ok:
                self._lib.llama_memory_clear(self._mem, True)
                keep = 0
            self.kv_tokens = self.kv_tokens[:keep]
        return len(self.kv_tokens)

    def save_state(self) -> bytes:
        """KV state of sequence 0 (keys and values only: no logits buffer)."""
        size = self._lib.llama_state_seq_get_size(self.ctx, 0)
        buf = (ctypes.c_uint8 * size)()
        n = self._lib.llama_state_seq_get_data(self.ctx, buf, size, 0)
        if n == 0:
            raise ModelError("llama_state_seq_get_data failed")
        return ctypes.string_at(buf, n)

    def load_state(self, data: bytes, tokens: list[int]) -> bool:
        """Restore a saved prefix state for ``tokens``; False leaves an empty cache."""
        self._lib.llama_memory_clear(self._mem, True)
        self.kv_tokens = []
        buf = (ctypes.c_uint8 * len(data)).from_buffer_copy(data)
        if self._lib.llama_state_seq_set_data(self.ctx, buf, len(data), 0) != len(data):
            self._lib.llama_memory_clear(self._mem, True)
            return False
        if self._lib.llama_memory_seq_pos_max(self._mem, 0) != len(tokens) - 1:
            self._lib.llama_memory_clear(self._mem, True)
            return False
        self.kv_tokens = list(tokens)
        return True

    def _thread_mark(self) -> tuple[int, int]:
        return self._thread_tokens, self._evaluated

    def _mean_threads(self, mark: tuple[int, int]) -> float:
        """Threads per token evaluated since ``mark``; the current count if none was."""
        tokens = self._evaluated - mark[1]
        return (self._thread_tokens - mark[0]) / tokens if tokens else float(self._threads)

    # -- generation ------------------------------------------------------
    def generate(
        self,
        prompt: Prompt,
        max_tokens: int = MAX_TOKENS,
        on_text: OnText | None = None,
        use_cache: bool = True,
        constraint: Constraint | None = None,
        follow_up: bool = False,
    ) -> Generation:
        """Greedy completion of ``prompt``; streams text through ``on_text``.

        With a ``constraint``, each token is its choice among the model's logits, so the
        text can only be what it allows (a span of the context, or a fixed reply).
        ``follow_up``: see :class:`ragcli.llm.base.Engine`."""
        t = Timings()
        started = time.perf_counter()
        segments = self._segment_tokens(prompt)
        tokens = [tok for seg in segments for tok in seg]
        ends = list(itertools.accumulate(len(seg) for seg in segments))
        t.prompt_tokens = len(tokens)
        if len(tokens) + max_tokens > self.n_ctx:
            raise ModelError(
                f"prompt of {len(tokens)} tokens plus {max_tokens} to generate exceeds the "
                f"context of {self.n_ctx}; lower -k or raise n_ctx"
            )
        # Reuse what is cached: at least one token must be evaluated for logits.
        reuse = use_cache or follow_up
        live = self.trim(common_prefix(self.kv_tokens, tokens[:-1]) if reuse else 0)
        t.cached_tokens, t.cache_source = live, "live" if live else "none"
        cache = self.cache if use_cache else None
        if cache is not None:
            restored = cache.restore(self, tokens, ends, better_than=live)
            if restored:
                t.cached_tokens, t.cache_source = restored.tokens, "disk"
                t.state_load_ms = restored.ms
            elif len(self.kv_tokens) < live:  # a state llama.cpp refused cleared the cache
                t.cached_tokens, t.cache_source = 0, "none"
        t.prefill_tokens = len(tokens) - t.cached_tokens
        # Prefill segment by segment, saving the state at each boundary the
        # disk cache does not have yet.
        pos = t.cached_tokens
        mark = self._thread_mark()
        for end in [*ends[:-1], len(tokens)]:
            if end <= pos:
                continue
            t0 = time.perf_counter()
            self.evaluate(tokens[pos:end], pos)
            t.prefill_ms += (time.perf_counter() - t0) * 1000
            pos = end
            if cache is not None and end < len(tokens):
                t.state_save_ms += cache.save(self, tokens[:end])
        t.prefill_tok_s = t.prefill_tokens / max(t.prefill_ms / 1000, 1e-9)
        t.prefill_threads = self._mean_threads(mark)

        out: list[int] = []
        mark = self._thread_mark()
        stream = StopStream(prompt.stop, on_text)
        t_decode = time.perf_counter()
        for _ in range(max_tokens):
            logits = self._logits()
            t0 = time.perf_counter()
            tok = int(logits.argmax()) if constraint is None else constraint.choose(logits)
            t.constrain_ms += (time.perf_counter() - t0) * 1000
            if not out:
                t.ttft_ms = (time.perf_counter() - started) * 1000
            if self._lib.llama_vocab_is_eog(self._vocab, tok):
                break
            out.append(tok)
            if constraint is not None:
                t0 = time.perf_counter()
                constraint.advance(tok)
                t.constrain_ms += (time.perf_counter() - t0) * 1000
            if stream.update(self.llm.detokenize(out).decode("utf-8", "ignore")):
                break
            self.evaluate([tok], len(self.kv_tokens))
        text = stream.finish()
        if constraint is not None:
            constraint.finish()
        t.completion_tokens = len(out)
        t.decode_ms = (time.perf_counter() - t_decode) * 1000
        t.decode_tok_s = len(out) / max(t.decode_ms / 1000, 1e-9)
        t.decode_threads = self._mean_threads(mark)
        t.total_ms = (time.perf_counter() - started) * 1000
        return Generation(text=text, timings=t)

    def close(self) -> None:
        if self._vocab_future is not None:  # it reads the model's vocabulary: not after free
            with contextlib.suppress(Exception):
                self._vocab_future.result()
        if self._batch is not None:
            self._lib.llama_batch_free(self._batch)
            self._batch = None
        self.llm.close()


@functools.cache
def _without_repack(llama: type) -> type:
    """``Llama`` with llama.cpp's load-time weight repacking off.

    Its constructor has no argument for ``use_extra_bufts``; it builds the model
    parameters and assigns them to ``self.model_params`` before loading, so this
    subclass turns the flag off as they are assigned. Measured (docs/BENCHMARKS.md,
    "Loading the model"): a third of the load time and no 600 MB copy of the weights.
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
def _quiet_native_logs() -> Iterator[None]:
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
