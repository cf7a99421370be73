"""Run a prompt through llama.cpp: prefill with prefix reuse, then greedy decode.

We drive ``llama_decode`` ourselves instead of ``Llama.create_completion`` so
that we decide which tokens are evaluated: the KV cache of the longest common
prefix is kept between questions in one process, and can be restored from
disk (:mod:`ragcli.llm.kv_cache`) in a new one. Prefill, the cost that grows with
prompt length, is timed on its own.

This module is long because one KV state is shared by everything that reuses it: the
prefix cache, sentences placed from the reading cache or read in place, the thread
governor and copy-only decoding must agree on which cells hold which tokens.
"""

from __future__ import annotations

import contextlib
import ctypes
import itertools
import logging
import math
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from ..cpus import physical_cores
from ..errors import ModelError
from ..log import debugging
from ..models import GenerationModel
from .base import CONTEXT, MAX_TOKENS, Constraint, Generation, OnText, Prompt, StopStream, Timings
from .kv_cache import common_prefix
from .loading import import_llama_cpp, quiet_native_logs, with_sequences, without_repack
from .reading_cache import SEQUENCES, SentenceReader
from .threads import engine_governor

if TYPE_CHECKING:
    import numpy as np

    from .attention import AttentionReader
    from .constrain import Vocabulary
    from .kv_cache import PrefixCache
    from .reading_cache import ReadingCache

# Prompt tokens per llama_decode call while the thread count follows the machine: the count
# is set between calls, so one call for a whole 400-token prompt held the count the first
# look chose for 4 s or more. Smaller calls read more slowly: on a quiet 2-core machine C
# (docs/BENCHMARKS.md), 448 tokens at 2.4 % below one call in 256-token calls, 7.6 % in 128.
GOVERNED_BATCH = 256
# Tokens the context that ranks candidates holds: 12-20 passages of up to 200 tokens, the
# instructions and the question (f16 keys and values: 28 KB a token for the 1.5B model).
RANK_CTX = 6144


Apart = list[tuple[int, tuple[int, ...]]]  # where each piece read apart starts, its lead
FRESH = (-1,)  # the "lead" of a piece read in place, after the prompt's own tokens before it


def _reusable(kv: list[int], kv_apart: Apart, tokens: list[int], apart: Apart, end: int) -> int:
    """How much of the cached ``kv`` a prompt of ``tokens`` may keep.

    Tokens must match, short of the last (whose logits are needed), and so must the way
    they were read: the same pieces encoded apart after the same leads (``apart``, pieces
    up to ``end``; ``kv_apart``: the same for ``kv``), none cut in two. The keys and values
    of a sentence read apart are not those of the same tokens read after other sentences.
    """
    keep = min([common_prefix(kv, tokens[:-1]), *(s for s, _ in set(kv_apart) ^ set(apart))])
    if apart and apart[0][0] < keep < end:
        keep = max(s for s, _ in apart if s <= keep)
    return keep


class LlamaEngine:
    """One loaded GGUF model and context; answers prompts one at a time."""

    can_constrain = True  # logits are at hand: generation can be a constrained choice
    can_rank = True  # attention weights too (llm/attention.py)

    def __init__(
        self,
        model: GenerationModel,
        n_ctx: int = 4096,
        n_batch: int = 512,
        n_threads: int = 0,
        cache: PrefixCache | None = None,
        repack: bool = False,
        adaptive_threads: bool = True,
        reading: ReadingCache | None = None,
        kv_type: str = "f16",
        claims: Path | None = None,
    ) -> None:
        """``n_threads`` 0: one per physical core. ``adaptive_threads``: use only the cores
        other processes leave free, judged again every quarter second or so (llm/threads.py).
        ``reading``: encode a prompt's sentences apart and keep them (llm/reading_cache.py).
        ``kv_type``: ``f16`` or ``q8_0`` keys and values (q8_0 values need flash attention).
        ``claims``: the folder where ragcli's engines claim the cores they run on
        (llm/cpu_claims.py); None: the sampler alone decides."""
        llama_cpp = import_llama_cpp()

        self._lib = llama_cpp
        self.model = model
        self.cache = cache
        self.reading = reading
        self.kv_type = kv_type
        quantized = {"f16": {}, "q8_0": {"type_k": llama_cpp.GGML_TYPE_Q8_0,
                     "type_v": llama_cpp.GGML_TYPE_Q8_0, "flash_attn": True}}[kv_type]  # fmt: skip
        threads = n_threads or physical_cores()
        # The sampler's first window starts now and covers the load.
        self._governor = engine_governor(threads, claims) if adaptive_threads else None
        self._threads = threads  # what llama.cpp is set to
        self._thread_tokens = 0  # sum over evaluated tokens of the threads that evaluated them
        self._evaluated = 0
        try:
            llama_class = llama_cpp.Llama if repack else without_repack(llama_cpp.Llama)
            if reading is not None:  # spare sequences to read sentences in
                llama_class = with_sequences(llama_class, SEQUENCES)
            with quiet_native_logs():
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
                    # kept off the terminal by quiet_native_logs instead.
                    verbose=True,
                    # Sliding-window layers (Gemma 3) drop old positions unless the
                    # full cache is kept, and then a prefix cannot be trimmed and reused.
                    swa_full=True,
                    **quantized,
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
        # Where in kv_tokens a sentence encoded apart starts: the cache may be cut only
        # where the next prompt's sentences were encoded the same way.
        self._apart: Apart = []
        self._sentences = SentenceReader(self, reading) if reading is not None else None
        self._vocab_lock = threading.Lock()
        self._vocab_future: Future[Vocabulary] | None = None
        self._attention: AttentionReader | None = None
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
        return self._tokens(prompt, apart=False)[0]

    def _tokens(
        self, prompt: Prompt, apart: bool
    ) -> tuple[list[list[int]], list[list[int]], list[list[int]]]:
        """The tokens of each segment; ``apart``: with the context as its pieces, and the
        tokens of each piece and of each piece's lead.

        Segments and pieces are tokenized apart, so a shared one always has the same
        tokens. The context is document text: its "<start_of_turn>"-like strings stay
        text (special=False), so a document cannot forge chat control tokens. Read apart,
        the context's frame goes with the segments around it.
        """

        def tokens(text: str, first: bool, special: bool) -> list[int]:
            return self.llm.tokenize(text.encode("utf-8"), add_bos=first, special=special)

        if not (apart and prompt.pieces):
            segments = [
                tokens(seg, i == 0, i != CONTEXT) if seg else []
                for i, seg in enumerate(prompt.segments)
            ]
            return segments, [], []
        memo: dict[str, list[int]] = {}

        def piece(text: str) -> list[int]:
            if text not in memo:
                memo[text] = tokens(text, False, False)
            return memo[text]

        # A lead's tokens are its pieces', so that a passage's next sentence goes on from
        # the one before: they are read in one pass (_read_apart).
        parts = [piece(p) for p in prompt.pieces]
        leads = [[t for p in lead for t in piece(p)] for lead in prompt.leads]
        leads += [[]] * (len(parts) - len(leads))
        head, _, tail = prompt.segments
        segments = [
            tokens(head + prompt.frame[0], True, True),
            [t for part in parts for t in part],
            tokens(prompt.frame[1] + tail, False, True),
        ]
        return segments, parts, leads

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

    def passage_attention(
        self,
        head: str,
        passages: Sequence[str],
        between: str,
        queries: Sequence[str],
        depth: float = 1.0,
    ) -> tuple[np.ndarray, int]:
        """See :class:`~ragcli.llm.base.Ranker`. Passages and queries are the user's text:
        tokenized as text, so none can forge a control token."""
        from .attention import AttentionReader

        if self._attention is None:
            self._attention = AttentionReader(
                self._lib, self.llm.model, RANK_CTX, self.n_batch, self._threads
            )
        reader = self._attention
        reader.set_threads(self._fit_threads())

        def tokens(text: str, first: bool = False, special: bool = False) -> list[int]:
            return self.llm.tokenize(text.encode("utf-8"), add_bos=first, special=special)

        context = tokens(head, first=True, special=True)
        after = tokens(between, special=True)
        asked = [tokens(q)[: reader.n_batch] for q in queries]
        room = RANK_CTX - len(after) - max(map(len, asked), default=0)
        spans = []
        for text in passages:  # those that do not fit are left out, the last first
            piece = tokens(text)
            if len(context) + len(piece) > room:
                break
            spans.append((len(context), len(context) + len(piece)))
            context += piece
        layers = max(1, math.ceil(self._lib.llama_model_n_layer(self.llm.model) * depth))
        attention = reader.read(context + after, spans, asked, layers)
        if self._governor is not None:
            self._governor.pause()
        return attention, len(context) + len(after) + sum(map(len, asked))

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
        self._decode(tokens, start, 0)
        self.kv_tokens = self.kv_tokens[:start] + list(tokens)

    def _decode(self, tokens: list[int], start: int, seq: int) -> None:
        b = self._batch
        step = min(self.n_batch, GOVERNED_BATCH) if self._governor is not None else self.n_batch
        for off in range(0, len(tokens), step):
            part = tokens[off : off + step]
            threads = self._fit_threads()
            for i, tok in enumerate(part):
                b.token[i] = tok
                b.pos[i] = start + off + i
                b.seq_id[i][0] = seq
                b.logits[i] = 0
            b.logits[len(part) - 1] = off + len(part) == len(tokens)
            b.n_tokens = len(part)
            rc = self._lib.llama_decode(self.ctx, b)
            if rc != 0:
                raise ModelError(f"llama_decode failed with code {rc}")
            self._thread_tokens += threads * len(part)
            self._evaluated += len(part)

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
            self._apart = [a for a in self._apart if a[0] < keep]
        return len(self.kv_tokens)

    # -- the reading cache (llm/reading_cache.py) ------------------------
    def _read_apart(
        self,
        head: list[int],
        leads: list[list[int]],
        parts: list[list[int]],
        starts: list[int],
        fresh: frozenset[int],
        t: Timings,
    ) -> None:
        """Put each piece, read apart after ``head`` and its lead, at its start in sequence 0
        (those from ``len(self.kv_tokens)`` on); a ``fresh`` piece is read there instead,
        after all that was placed before it."""
        assert self._sentences is not None
        todo = [i for i, s in enumerate(starts) if s >= len(self.kv_tokens)]
        apart = [i for i in todo if i not in fresh]
        evaluated = self._evaluated
        pick = [leads[i] for i in apart], [parts[i] for i in apart], [starts[i] for i in apart]
        placed = self._sentences.read_apart(head, *pick)
        in_place = 0
        for i in todo:
            if i in fresh:  # everything before it is in sequence 0: read on from there
                t0 = time.perf_counter()
                self.evaluate(parts[i], starts[i])
                t.prefill_ms += (time.perf_counter() - t0) * 1000
                self._apart.append((starts[i], FRESH))
                in_place += len(parts[i])
                continue
            _, cached, ms = next(placed)
            self.kv_tokens = self.kv_tokens[: starts[i]] + parts[i]
            self._apart.append((starts[i], tuple(leads[i])))
            if cached:
                t.reading_tokens += len(parts[i])
                t.reading_ms += ms
            else:
                t.prefill_ms += ms
        for _ in placed:  # the reader's last step empties its sequences
            pass
        encoded = sum(len(parts[i]) for i in apart) - t.reading_tokens
        t.lead_tokens = self._evaluated - evaluated - encoded - in_place

    def unread(self, prompt: Prompt) -> tuple[int, int]:
        """Tokens reading ``prompt``'s context apart would still encode (the pieces the
        reading cache lacks, with their leads), and the context's tokens read whole."""
        if self._sentences is None or not prompt.pieces:
            return 0, 0
        segments, parts, leads = self._tokens(prompt, apart=True)
        need, before = 0, []
        for lead, part in self._sentences.missing(segments[0], leads, parts):
            want = lead + part  # a pass goes on from the one before where they agree
            need += len(want) - common_prefix(before, want)
            before = want
        return need, len(segments[CONTEXT])

    def holds_whole(self, prompt: Prompt) -> bool:
        """Whether the state after ``prompt``'s context read whole is at hand, live or in the
        prefix cache: restoring it costs less than placing the sentences, and is reading
        whole."""
        segments = self._segment_tokens(prompt)
        tokens = [t for seg in segments for t in seg]
        end = sum(len(seg) for seg in segments[: CONTEXT + 1])
        if common_prefix(self.kv_tokens, tokens) >= end:
            return not any(start < end for start, _ in self._apart)
        return self.cache is not None and self.cache.has(self, tokens[:end])

    def warm(self, prompt: Prompt) -> int:
        """Put every piece of ``prompt`` the reading cache lacks into it; returns the
        tokens read. What `rag index --warm` does for each passage, and `rag serve` when
        idle: the cores it ran on go back to other engines at the end."""
        if self._sentences is None:
            return 0
        segments, parts, leads = self._tokens(prompt, apart=True)
        head = segments[0]
        todo = self._sentences.missing(head, leads, parts)
        if not todo:
            return 0
        # The head in sequence 0, as a prompt would have it, and nothing after it.
        self.trim(min([common_prefix(self.kv_tokens, head), *(s for s, _ in self._apart[:1])]))
        if len(self.kv_tokens) < len(head) and self.cache is not None:
            data = self.cache.read(self, head)
            if data is None or not self.load_state(data, head):
                self.trim(0)
        if len(self.kv_tokens) < len(head):
            self.evaluate(head[len(self.kv_tokens) :], len(self.kv_tokens))
            if self.cache is not None:
                self.cache.save(self, head)
        evaluated = self._evaluated
        self._sentences.warm(head, todo)
        if self._governor is not None:  # idle until the next passage or prompt
            self._governor.release()
        return self._evaluated - evaluated

    def save_state(self) -> bytes:
        """KV state of sequence 0 (keys and values only: no logits buffer)."""
        return self._seq_state(0)

    def _seq_state(self, seq: int) -> bytes:
        size = self._lib.llama_state_seq_get_size(self.ctx, seq)
        buf = (ctypes.c_uint8 * size)()
        n = self._lib.llama_state_seq_get_data(self.ctx, buf, size, seq)
        if n == 0:
            raise ModelError("llama_state_seq_get_data failed")
        return ctypes.string_at(buf, n)

    def load_state(self, data: bytes, tokens: list[int]) -> bool:
        """Restore a saved prefix state for ``tokens``; False leaves an empty cache."""
        self._lib.llama_memory_clear(self._mem, True)
        self.kv_tokens, self._apart = [], []
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
        # Sentences are read apart when the reading cache is on.
        apart = self.reading is not None and use_cache and bool(prompt.pieces)
        segments, parts, leads = self._tokens(prompt, apart)
        tokens = [tok for seg in segments for tok in seg]
        ends = list(itertools.accumulate(len(seg) for seg in segments))
        t.prompt_tokens = len(tokens)
        if len(tokens) + max_tokens > self.n_ctx:
            raise ModelError(
                f"prompt of {len(tokens)} tokens plus {max_tokens} to generate exceeds the "
                f"context of {self.n_ctx}; lower -k or raise n_ctx"
            )
        starts = list(itertools.accumulate((len(p) for p in parts[:-1]), initial=ends[0]))
        fresh = frozenset(prompt.fresh) if apart else frozenset()
        read_as = (
            [
                (s, FRESH if i in fresh else tuple(lead))
                for i, (s, lead) in enumerate(zip(starts, leads, strict=True))
            ]
            if apart
            else []
        )
        # Reuse what is cached: at least one token must be evaluated for logits.
        reuse = use_cache or follow_up
        keep = (
            _reusable(self.kv_tokens, self._apart, tokens, read_as, ends[CONTEXT]) if reuse else 0
        )
        live = self.trim(keep)
        t.cached_tokens, t.cache_source = live, "live" if live else "none"
        cache = self.cache if use_cache else None
        if cache is not None:
            # With sentences read apart, the state after the context is not kept: the
            # reading cache holds them.
            restored = cache.restore(self, tokens, ends[:1] if apart else ends, better_than=live)
            if restored:
                t.cached_tokens, t.cache_source = restored.tokens, "disk"
                t.state_load_ms = restored.ms
            elif len(self.kv_tokens) < live:  # a state llama.cpp refused cleared the cache
                t.cached_tokens, t.cache_source = 0, "none"
        # Prefill segment by segment, saving the state at each boundary the
        # disk cache does not have yet.
        pos = t.cached_tokens
        mark = self._thread_mark()
        for i, end in enumerate([*ends[:-1], len(tokens)]):
            if end <= pos:
                continue
            if apart and i == CONTEXT:
                self._read_apart(tokens[: ends[0]], leads, parts, starts, fresh, t)
                pos = end
                continue
            t0 = time.perf_counter()
            self.evaluate(tokens[pos:end], pos)
            t.prefill_ms += (time.perf_counter() - t0) * 1000
            pos = end
            if cache is not None and end < len(tokens):
                t.state_save_ms += cache.save(self, tokens[:end])
        t.prefill_tokens = len(tokens) - t.cached_tokens - t.reading_tokens
        # The rate the model read at: leads of sentences read apart are read too.
        t.prefill_tok_s = (t.prefill_tokens + t.lead_tokens) / max(t.prefill_ms / 1000, 1e-9)
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
        if self._governor is not None:
            self._governor.pause()
        if constraint is not None:
            constraint.finish()
        t.completion_tokens = len(out)
        t.decode_ms = (time.perf_counter() - t_decode) * 1000
        t.decode_tok_s = len(out) / max(t.decode_ms / 1000, 1e-9)
        t.decode_threads = self._mean_threads(mark)
        t.total_ms = (time.perf_counter() - started) * 1000
        return Generation(text=text, timings=t)

    def close(self) -> None:
        if self._governor is not None:
            self._governor.release()
        if self._vocab_future is not None:  # it reads the model's vocabulary: not after free
            with contextlib.suppress(Exception):
                self._vocab_future.result()
        if self._batch is not None:
            self._lib.llama_batch_free(self._batch)
            self._batch = None
        if self._attention is not None:  # its context uses the model's weights: free it first
            self._attention.close()
            self._attention = None
        self.llm.close()
