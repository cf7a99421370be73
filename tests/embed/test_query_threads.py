"""The query encoder runs beside the model loading: it takes few threads, and they never
spin; the indexing encoder keeps every thread."""

from __future__ import annotations

import pytest

from ragcli.config import load_settings
from ragcli.embed.base import indexing_embedder, query_embedder
from ragcli.embed.onnx import OnnxEmbedder, query_threads
from ragcli.models import embedding_model


@pytest.mark.parametrize(("threads", "query"), [(1, 1), (2, 1), (3, 2), (4, 2), (64, 2)])
def test_query_threads_leave_a_core_to_the_model(threads: int, query: int):
    assert query_threads(threads) == query


@pytest.mark.parametrize("quantization", ["fp32", "int8"])
def test_query_session_is_small_and_indexing_keeps_its_threads(embedder, quantization: str):
    settings = load_settings({"n_threads": 4, "embed_backend": f"onnx-{quantization}"})
    info = embedding_model()
    query = query_embedder(info, "onnx", quantization, settings)
    indexing = indexing_embedder(info, settings)
    assert isinstance(query, OnnxEmbedder) and isinstance(indexing, OnnxEmbedder)
    assert (query.threads, query.spinning) == (2, False)
    assert (indexing.threads, indexing.spinning) == (4, False)
    assert query.embed(["Which pier does the ferry leave from?"]).shape == (1, info.dim)
