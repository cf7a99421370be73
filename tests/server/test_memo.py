"""The server's query encoder keeps the vectors it computed: the same vectors, fewer calls."""

from __future__ import annotations

import numpy as np

from ragcli.embed.memo import MemoEmbedder


class Counting:
    """The real encoder, with the texts it was asked to embed written down."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.info = self.inner.info
        self.backend, self.quantization = inner.backend, inner.quantization
        self.asked: list[str] = []

    def embed(self, texts, progress=None):
        self.asked += texts
        return self.inner.embed(texts)


def test_memo_gives_the_encoders_vectors_and_embeds_each_text_once(embedder):
    texts = ["Bees dance.", "The Moon raises tides.", "Bees dance.", "Rivers run to the sea."]
    counting = Counting(embedder)
    memo = MemoEmbedder(counting, capacity=3)
    first = memo.embed(texts)
    assert counting.asked == ["Bees dance.", "The Moon raises tides.", "Rivers run to the sea."]
    direct = counting.inner.embed(texts)
    assert np.allclose(first, direct, atol=1e-5)
    assert np.array_equal(first[0], first[2])
    again = memo.embed(["Rivers run to the sea.", "Bees dance."])
    assert counting.asked[3:] == []  # both remembered
    assert np.array_equal(again[0], first[3])
    memo.embed(["A fourth text."])  # over capacity: the least recently used goes
    memo.embed(["The Moon raises tides."])
    assert counting.asked[3:] == ["A fourth text.", "The Moon raises tides."]
