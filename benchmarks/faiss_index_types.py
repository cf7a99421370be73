"""`python -m benchmarks index-types`: FAISS index types at scale, on clustered synthetic vectors or
on the vectors of an existing index: build time, size, latency and recall.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ragcli.cli.bench.common import status_line
from ragcli.cli.failures import handle_errors
from ragcli.cli.options import JsonOpt, QuietOpt
from ragcli.cli.output import print_json, stdout_console
from ragcli.errors import UsageError

if TYPE_CHECKING:
    import numpy as np


@dataclass
class IndexTypeRow:
    """One FAISS index type at one size, built and searched the way `rag index` does."""

    n: int
    index_type: str
    search_params: str
    build_s: float | None  # staging + train + add (None: same index, other search setting)
    index_mb: float  # the saved vector file (about what a writer holds in memory)
    reader_rss_mb: float  # RSS growth of a reader: mapped file, load, then all the queries
    load_ms: float  # opening the saved file memory-mapped, as `rag search` does
    p50_ms: float  # one query at a time on the loaded index
    p99_ms: float
    recall_at_10: float  # share of the exact top 10 found


def clustered_vectors(n: int, dim: int = 384, centres: int = 2000, seed: int = 0) -> np.ndarray:
    """Unit vectors from a Gaussian mixture around ``centres`` random directions.

    Uniform random vectors have no neighbourhoods (every point is about equally
    far from every other), which no embedding model produces and which makes
    any approximate index look worse than it is. The centres and their widths
    are fixed; ``seed`` draws the points, so queries come from another seed.
    ``centres=0`` gives the uniform worst case.
    """
    import numpy as np

    if centres == 0:
        x = np.random.default_rng(seed).standard_normal((n, dim), dtype=np.float32)
        return x / np.linalg.norm(x, axis=1, keepdims=True)
    fixed = np.random.default_rng(12345)
    centre = fixed.standard_normal((centres, dim), dtype=np.float32)
    centre /= np.linalg.norm(centre, axis=1, keepdims=True)
    width = fixed.uniform(0.035, 0.07, centres).astype(np.float32)
    rng = np.random.default_rng(seed)
    out = np.empty((n, dim), dtype=np.float32)
    for start in range(0, n, 100_000):
        m = min(100_000, n - start)
        pick = rng.integers(0, centres, m)
        x = rng.standard_normal((m, dim), dtype=np.float32) * width[pick, None] + centre[pick]
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        out[start : start + m] = x
    return out


def _rss_mb() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


def _search_timed(index, queries: np.ndarray, k: int) -> tuple[list[float], np.ndarray]:
    import numpy as np

    times, found = [], np.full((len(queries), k), -1, dtype=np.int64)
    for i in range(len(queries)):
        t0 = time.perf_counter()
        hits = index.search(queries[i : i + 1], k)[0]
        times.append((time.perf_counter() - t0) * 1000)
        found[i, : len(hits)] = [h for h, _ in hits]
    return times, found


def _recall(found: np.ndarray, exact: np.ndarray) -> float:
    return sum(len(set(f) & set(e)) for f, e in zip(found, exact, strict=True)) / exact.size


def index_types_bench(
    sizes: list[int],
    types: list[str],
    n_queries: int = 1000,
    nprobes: tuple[int, ...] = (),
    centres: int = 2000,
    vectors: np.ndarray | None = None,
    queries: np.ndarray | None = None,
    progress: Callable[[str], None] | None = None,
) -> list[IndexTypeRow]:
    """Build each type at each size through :class:`ragcli.stores.faiss_store.VectorIndex`
    (stage flat, then ``finalize`` trains and fills the wanted type, as a commit
    does), save it, map it back as a reader does, and time single queries.

    ``types`` may hold "auto". Recall is against exact inner-product search.
    ``nprobes`` adds search-only rows for IVF types at other nprobe values.
    Without ``vectors``, clustered synthetic 384-d vectors (:func:`clustered_vectors`).
    """
    import faiss
    import numpy as np

    from ragcli.stores.base import IndexInfo
    from ragcli.stores.faiss_index import VectorIndex

    k = 10
    rows: list[IndexTypeRow] = []
    for n in sizes:
        say = progress or (lambda _msg: None)
        say(f"{n:,} vectors: generating and searching exactly")
        base = clustered_vectors(n, centres=centres) if vectors is None else vectors[:n]
        if queries is None:
            qs = clustered_vectors(n_queries, base.shape[1], centres, seed=1)
        else:
            qs = queries
        exact_index = faiss.IndexFlatIP(base.shape[1])
        exact_index.add(base)
        exact = exact_index.search(qs, k)[1] + 1  # positions -> the ids given below
        del exact_index
        ids = np.arange(1, n + 1, dtype=np.int64)
        for spec in types:
            say(f"{n:,} vectors: building {spec}")
            t0 = time.perf_counter()
            vi = VectorIndex.create(base.shape[1], "Flat")
            vi.add(ids, base)
            info = IndexInfo("bench", base.shape[1], 1, 0, index_spec=spec)
            info = vi.finalize(info)
            build_s = time.perf_counter() - t0
            with tempfile.TemporaryDirectory() as tmp:
                path = Path(tmp) / "vectors.faiss"
                vi.save(path)
                del vi
                size_mb = path.stat().st_size / 1e6
                rss0 = _rss_mb()
                t0 = time.perf_counter()
                loaded = VectorIndex.load(path, mmap=True, index_type=info.index_type)
                load_ms = (time.perf_counter() - t0) * 1000
                say(f"{n:,} vectors: searching {info.index_type} ({info.search_params or 'exact'})")
                settings = [info.search_params]
                ivf = faiss.try_extract_index_ivf(loaded._index)
                if ivf is not None:
                    settings += [f"nprobe={p}" for p in nprobes if f"nprobe={p}" not in settings]
                label = f"auto: {info.index_type}" if spec == "auto" else info.index_type
                for j, params in enumerate(settings):
                    if params:  # "nprobe=32, held-out recall@10 0.97": the setting only
                        setting = params.split(",")[0]
                        faiss.ParameterSpace().set_index_parameters(loaded._index, setting)
                    times, found = _search_timed(loaded, qs, k)
                    rss = _rss_mb() - rss0
                    rows.append(
                        IndexTypeRow(
                            n=n,
                            index_type=label,
                            search_params=params,
                            build_s=round(build_s, 1) if j == 0 else None,
                            index_mb=round(size_mb, 1),
                            reader_rss_mb=round(rss, 1),
                            load_ms=round(load_ms, 1),
                            p50_ms=round(float(np.percentile(times, 50)), 2),
                            p99_ms=round(float(np.percentile(times, 99)), 2),
                            recall_at_10=round(_recall(found, exact), 4),
                        )
                    )
                del loaded
    return rows


def indexed_vectors(index_dir: Path, questions: Path) -> tuple[np.ndarray, np.ndarray]:
    """The stored vectors of an existing index, and its embedding model's vectors of the
    questions in a `rag eval` file: real passages and real questions, for a sanity check
    of what the synthetic vectors show."""
    import numpy as np

    from ragcli.config import load_settings
    from ragcli.embed.base import query_embedder
    from ragcli.models import embedding_model
    from ragcli.stores.faiss_store import FaissStore

    store = FaissStore.open(index_dir)
    try:
        vecs = np.ascontiguousarray(store.vectors.contents()[1], dtype=np.float32)
        model = embedding_model(store.info.embed_model)
        info = store.info
    finally:
        store.close()
    embedder = query_embedder(model, info.embed_backend, info.embed_quantization, load_settings())
    lines = questions.read_text(encoding="utf-8").splitlines()
    texts = [json.loads(line)["question"] for line in lines if line.strip()]
    return vecs, np.asarray(embedder.embed(texts), dtype=np.float32)


@handle_errors
def index_types_command(
    size: Annotated[
        list[int] | None,
        typer.Option("--size", min=1, help="Vectors in the index; repeatable (default: 100000)."),
    ] = None,
    index_type: Annotated[
        list[str] | None,
        typer.Option(
            "--type",
            metavar="TYPE",
            help='"auto" or a FAISS factory string; repeatable (default: Flat and auto).',
        ),
    ] = None,
    queries: Annotated[
        int, typer.Option("--queries", min=10, help="Queries, one at a time.")
    ] = 1000,
    nprobe: Annotated[
        list[int] | None,
        typer.Option("--nprobe", min=1, help="Also search IVF types at this nprobe; repeatable."),
    ] = None,
    centres: Annotated[
        int,
        typer.Option("--centres", min=0, help="Clusters of the vectors (0: uniform, no clusters)."),
    ] = 2000,
    from_index: Annotated[
        Path | None,
        typer.Option(
            "--from-index",
            help="Use this index's vectors (and --questions as queries) instead of synthetic ones.",
            show_default=False,
        ),
    ] = None,
    questions: Annotated[
        Path | None,
        typer.Option("--questions", help="`rag eval` JSONL file: the queries for --from-index."),
    ] = None,
    json_out: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Build time, size, latency and recall@10 of FAISS index types on clustered 384-d vectors."""
    from dataclasses import asdict

    from ragcli.stores.faiss_index import check_index_type

    types = index_type or ["Flat", "auto"]
    for t in types:
        check_index_type(t, 384)
    vectors = qs = None
    if from_index is not None:
        if questions is None:
            raise UsageError("--from-index needs --questions (a `rag eval` JSONL file)")

        vectors, qs = indexed_vectors(from_index, questions)
        size, queries = [len(vectors)], len(qs)
    with status_line(json_out, quiet) as say:
        rows = index_types_bench(
            size or [100_000],
            types,
            queries,
            tuple(nprobe or ()),
            centres,
            vectors=vectors,
            queries=qs,
            progress=say,
        )
    if json_out:
        print_json([asdict(r) for r in rows])
        return
    from rich.table import Table

    source = f"vectors of {from_index}" if from_index else f"{centres or 'no'} clusters"
    table = Table("vectors", "index type", "search", "build s", "file MB", "reader RSS MB",
                  "load ms", "p50 ms", "p99 ms", "recall@10",
                  title=f"FAISS index types, {source}, {queries} single queries")  # fmt: skip
    for r in rows:
        table.add_row(f"{r.n:,}", r.index_type, r.search_params or "exact",
                      "-" if r.build_s is None else f"{r.build_s:.1f}", f"{r.index_mb:.0f}",
                      f"{r.reader_rss_mb:.0f}", f"{r.load_ms:.0f}", f"{r.p50_ms:.2f}",
                      f"{r.p99_ms:.2f}", f"{r.recall_at_10:.3f}")  # fmt: skip
    stdout_console().print(table)
