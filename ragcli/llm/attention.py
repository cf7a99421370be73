"""Where a question looks: llama.cpp's attention weights, summed over each passage.

In-context re-ranking (Chen, Jiménez Gutiérrez and Su, ICLR 2025) ranks passages by the
attention the question's tokens pay to each, less what a content-free query pays the same
places: length and position draw attention whatever is asked. llama.cpp computes each
layer's attention weights as the tensor ``kq_soft_max-<layer>`` ([n_kv, n_tokens, n_head],
float32, one row a query token) only while flash attention is off, and hands every tensor
it computes to the graph callback ``cb_eval`` the context was made with.

:class:`AttentionReader` is a second llama.cpp context over an engine's loaded weights,
made with that callback: the weights are shared, the KV cache and compute buffers are its
own, so reading the candidates disturbs neither the answer's prefix cache nor depends on
its KV type (q8_0 keys and values need flash attention). Layers past the last one the
ranking sums are not computed at all: the callback stops the graph after that layer's
weights (ggml's scheduler ends a graph whose callback answers false).
"""

from __future__ import annotations

import ctypes
import re
from collections.abc import Sequence
from types import ModuleType
from typing import TYPE_CHECKING

from ..errors import ModelError

if TYPE_CHECKING:
    import numpy as np

_NAME = re.compile(rb"kq_soft_max-(\d+)")
GGML_TYPE_F32 = 0


class _Tensor(ctypes.Structure):
    """The head of ggml's ``struct ggml_tensor`` (ggml.h), as far as ``name``.

    A layout that does not match shows as a name that is not llama.cpp's, and then
    nothing is read (:class:`AttentionReader` refuses)."""

    _fields_ = [
        ("type", ctypes.c_int),
        ("buffer", ctypes.c_void_p),
        ("ne", ctypes.c_int64 * 4),
        ("nb", ctypes.c_size_t * 4),
        ("op", ctypes.c_int),
        ("op_params", ctypes.c_int32 * 16),
        ("flags", ctypes.c_int32),
        ("src", ctypes.c_void_p * 10),
        ("view_src", ctypes.c_void_p),
        ("view_offs", ctypes.c_size_t),
        ("data", ctypes.c_void_p),
        ("name", ctypes.c_char * 64),
    ]


class _Tap:
    """The graph callback: while armed, the attention the first ``rows`` rows of the batch
    pay to each span of cells, summed over those rows and every head, one array a layer.
    Layer ``last`` is the last computed, armed or not."""

    def __init__(self, lib: ModuleType) -> None:
        self.armed = False
        self.last = 0
        self.rows = 0  # the first ``rows`` tokens of the batch are the query's
        self.spans: list[tuple[int, int]] = []
        self.layers: dict[int, np.ndarray] = {}
        self.fault = ""
        self.callback = lib.ggml_backend_sched_eval_callback(self._see)

    def _see(self, pointer: int, ask: bool, _user: int) -> bool:
        import numpy as np

        t = ctypes.cast(pointer, ctypes.POINTER(_Tensor)).contents
        m = _NAME.fullmatch(t.name)
        if m is None:
            return not ask  # ask: not wanted; told: go on
        layer = int(m.group(1))
        if ask:
            return self.armed or layer >= self.last
        if not self.armed:
            return layer < self.last
        ne, nb = list(t.ne), list(t.nb)
        if (
            t.type != GGML_TYPE_F32
            or nb[0] != 4
            or nb[1] != 4 * ne[0]
            or ne[1] < self.rows
            or ne[3] != 1
            or max((e for _, e in self.spans), default=0) > ne[0]
        ):
            self.fault = f"attention weights of an unexpected shape {ne[:3]}"
            return False
        n = ne[0] * ne[1] * ne[2]
        buf = (ctypes.c_float * n).from_address(t.data)
        weights = np.frombuffer(buf, dtype=np.float32, count=n).reshape(ne[2], ne[1], ne[0])
        looked = weights[:, : self.rows, :].sum(axis=(0, 1))  # [n_kv]
        self.layers[layer] = np.array([looked[s:e].sum() for s, e in self.spans])
        return layer < self.last


class AttentionReader:
    """A context of its own over ``model`` (a ``llama_model`` pointer) that reads a prompt
    and then queries after it, and tells how much each query looks at each span."""

    def __init__(self, lib: ModuleType, model: int, n_ctx: int, n_batch: int, threads: int):
        self._lib = lib
        self._tap = _Tap(lib)
        params = lib.llama_context_default_params()
        params.n_ctx = n_ctx
        params.n_batch = params.n_ubatch = n_batch
        params.n_threads = params.n_threads_batch = threads
        params.flash_attn_type = lib.LLAMA_FLASH_ATTN_TYPE_DISABLED
        params.swa_full = True  # spans far back stay in view in sliding-window layers
        params.cb_eval = self._tap.callback
        params.cb_eval_user_data = None
        self.ctx = lib.llama_init_from_model(model, params)
        if not self.ctx:
            raise ModelError("cannot make a llama.cpp context to read attention in")
        self.n_ctx = n_ctx
        self.n_batch = n_batch
        self._mem = lib.llama_get_memory(self.ctx)
        self._batch = lib.llama_batch_init(n_batch, 0, 1)

    def set_threads(self, n: int) -> None:
        self._lib.llama_set_n_threads(self.ctx, n, n)

    def read(
        self,
        context: list[int],
        spans: Sequence[tuple[int, int]],
        queries: Sequence[list[int]],
        layers: int,
    ) -> np.ndarray:
        """[query, layer, span]: the attention each query's tokens, read right after
        ``context``, pay to each span of it, summed over the query's tokens and the heads,
        in the first ``layers`` layers (the only ones computed, for the context too).

        The cache is cleared first, so cell i holds position i (llama.cpp fills cells from
        its head, which a clear sets to 0); each query is removed before the next."""
        import numpy as np

        longest = max((len(q) for q in queries), default=0)
        if longest > self.n_batch:  # a query's rows must come in one batch
            raise ModelError(f"a query of {longest} tokens is too long to rank by")
        if len(context) + longest > self.n_ctx:
            raise ModelError(f"{len(context) + longest} tokens to rank do not fit in {self.n_ctx}")
        out, tap = [], self._tap
        tap.last = layers - 1
        self._lib.llama_memory_clear(self._mem, True)
        self._decode(context, 0)
        for query in queries:
            tap.rows, tap.spans, tap.layers, tap.fault = len(query), list(spans), {}, ""
            tap.armed = True
            try:
                self._decode(query, len(context))
            except ModelError:
                if not tap.fault:
                    raise
            finally:
                tap.armed = False
            if tap.fault or len(tap.layers) != layers:
                raise ModelError(tap.fault or "llama.cpp showed no attention weights")
            out.append(np.stack([tap.layers[i] for i in sorted(tap.layers)]))
            self._lib.llama_memory_seq_rm(self._mem, 0, len(context), -1)
        return np.stack(out)

    def _decode(self, tokens: list[int], start: int) -> None:
        b = self._batch
        for off in range(0, len(tokens), self.n_batch):
            part = tokens[off : off + self.n_batch]
            for i, tok in enumerate(part):
                b.token[i] = tok
                b.pos[i] = start + off + i
                b.n_seq_id[i] = 1
                b.seq_id[i][0] = 0
                b.logits[i] = 0
            b.logits[len(part) - 1] = 1  # llama.cpp wants one output a batch
            b.n_tokens = len(part)
            rc = self._lib.llama_decode(self.ctx, b)
            if rc != 0:
                raise ModelError(f"llama_decode failed with code {rc} while ranking")

    def close(self) -> None:
        if self._batch is not None:
            self._lib.llama_batch_free(self._batch)
            self._batch = None
        if self.ctx:
            self._lib.llama_free(self.ctx)
            self.ctx = None
