"""The query encoder with the vectors of texts it has seen kept (least recently used out).

A resident reader (`rag serve`) meets the same passages' sentences question after
question, and choosing them (:mod:`ragcli.answer.focus`) is most of a repeated
question's time.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

    from ..progress import Progress
    from .base import Embedder

MEMO_VECTORS = 20_000  # 384-d float32: about 31 MB


class MemoEmbedder:
    """An :class:`~ragcli.embed.base.Embedder` that encodes each distinct text once."""

    def __init__(self, inner: Embedder, capacity: int = MEMO_VECTORS) -> None:
        self.info = inner.info
        self.backend = inner.backend
        self.quantization = inner.quantization
        self._inner = inner
        self._capacity = capacity
        self._memo: OrderedDict[str, np.ndarray] = OrderedDict()

    def embed(self, texts: list[str], progress: Progress | None = None) -> np.ndarray:
        import numpy as np

        memo = self._memo
        missing = list(dict.fromkeys(t for t in texts if t not in memo))
        if missing:
            for text, vec in zip(missing, self._inner.embed(missing), strict=True):
                memo[text] = vec.copy()
        out = np.stack([memo[t] for t in texts])
        for t in texts:
            memo.move_to_end(t)
        while len(memo) > self._capacity:
            memo.popitem(last=False)
        if progress:
            progress(len(texts))
        return out
