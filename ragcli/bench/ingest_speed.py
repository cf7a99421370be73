"""`rag bench ingest`: indexing throughput on ONNX Runtime against bare torch encoding,
an unchanged re-run, fresh `rag search` start-up, and the memory of one large file.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..config import Settings
from .fresh_process import run_measured
from .prefill_cost import sample_text


@dataclass
class IngestReport:
    """`rag index` on ONNX Runtime (int8, the default, and fp32) against bare torch fp32
    ``SentenceTransformer.encode`` on the same passages, in one process, alternating;
    plus an unchanged re-run in a fresh process."""

    docs: str
    files: int
    chunks: int
    index_s: float  # int8, the default
    index_chunks_per_s: float
    index_files_per_s: float
    index_fp32_s: float
    index_fp32_chunks_per_s: float
    encode_s: float  # bare torch fp32 encode
    encode_chunks_per_s: float
    ratio: float  # int8 indexing throughput / bare torch encode throughput
    ratio_fp32: float  # fp32 indexing throughput / bare torch encode throughput
    # the whole default `rag index --rebuild` in a fresh process: start-up, model load, all
    command_s: float
    command_ratio: float  # bare torch encode time / command_s
    rerun_s: float  # `rag index` again, nothing changed, fresh process (median)
    # a fresh `rag search` of each index (medians of SEARCH_ROUNDS, alternating)
    search_int8_ms: float
    search_int8_rss_mb: float
    search_fp32_ms: float
    search_fp32_rss_mb: float
    peak_rss_mb: float  # this process (indexing + encode) and its parsing workers
    threads: int
    reps: int


SEARCH_ROUNDS = 7
SEARCH_QUERY = "how are errors reported"  # any text: it is the start-up that is measured


def _fresh_searches(root: Path) -> dict[str, list[tuple[float, float]]]:
    """Wall ms and peak RSS MB of fresh `rag search` processes on each index under
    ``root``, the backends alternating so that the machine's drift hits both alike."""
    runs: dict[str, list[tuple[float, float]]] = {"int8": [], "fp32": []}
    for _ in range(SEARCH_ROUNDS):
        for q, found in runs.items():
            args = [sys.executable, "-m", "ragcli", "search", "--index", str(root / q)]
            wall, peak, _out = run_measured([*args, SEARCH_QUERY], dict(os.environ))
            found.append((wall, peak))
    return runs


def ingest_bench(
    docs: Path,
    settings: Settings,
    exclude: list[str] | None = None,
    reps: int = 1,
    progress: Callable[[str], None] | None = None,
) -> IngestReport:
    """Index ``docs`` from scratch with each ONNX file, and encode the resulting passages
    bare with torch, ``reps`` times each, alternating; every model is loaded before any
    clock starts."""
    import resource

    from ..embed.base import SentenceTransformerEmbedder, indexing_embedder
    from ..index.pipeline import build_index
    from ..models import embedding_model
    from ..stores.faiss_store import FaissStore

    say = progress or (lambda _msg: None)
    exclude = exclude or []
    info = embedding_model()
    torch_embedder = SentenceTransformerEmbedder(info)
    torch_embedder.embed(["warm-up"])  # import torch and load the model outside the timings
    model = torch_embedder._load()
    onnx = {
        q: indexing_embedder(info, settings.replace(embed_backend=f"onnx-{q}"))
        for q in ("int8", "fp32")
    }
    for embedder in onnx.values():
        embedder.embed(["warm-up"])
    with tempfile.TemporaryDirectory(prefix="rag-bench-ingest-") as tmp:
        runs: dict[str, list[float]] = {"int8": [], "fp32": [], "torch": [], "command": []}
        command = [sys.executable, "-m", "ragcli", "index", str(docs), "--index",
                   f"{tmp}/command", "--rebuild", "-q"]  # fmt: skip
        for pattern in exclude:
            command += ["--exclude", pattern]
        report = None
        for rep in range(reps):
            for q, embedder in onnx.items():
                s = settings.replace(index_dir=Path(tmp) / q, embed_backend=f"onnx-{q}")
                say(f"indexing {docs} on ONNX Runtime {q} ({rep + 1}/{reps})")
                t0 = time.perf_counter()
                report = build_index([docs], s, rebuild=True, embedder=embedder, exclude=exclude)
                runs[q].append(time.perf_counter() - t0)
            store = FaissStore.open(Path(tmp) / "int8")
            texts = [c.text for c in store.all_chunks()]
            store.close()
            say(f"encoding the same {len(texts)} passages with SentenceTransformer.encode")
            t0 = time.perf_counter()
            model.encode(
                texts, batch_size=torch_embedder.batch_size, normalize_embeddings=True,
                convert_to_numpy=True, show_progress_bar=False,
            )  # fmt: skip
            runs["torch"].append(time.perf_counter() - t0)
            say(f"the whole default `rag index` in a fresh process ({rep + 1}/{reps})")
            runs["command"].append(run_measured(command, dict(os.environ))[0] / 1000)
        say("re-running `rag index` on the unchanged tree in fresh processes")
        args = [sys.executable, "-m", "ragcli", "index", str(docs), "--index", f"{tmp}/int8"]
        args += ["--embed-backend", "onnx-int8"]
        for pattern in exclude:
            args += ["--exclude", pattern]
        reruns = [run_measured(args, dict(os.environ))[0] / 1000 for _ in range(3)]
        say(f"fresh `rag search` processes on each index, {SEARCH_ROUNDS} rounds")
        searches = _fresh_searches(Path(tmp))
    assert report is not None
    search = {
        q: (statistics.median(w for w, _ in v), statistics.median(m for _, m in v))
        for q, v in searches.items()
    }
    med = {k: statistics.median(v) for k, v in runs.items()}
    n = len(texts)
    peak = max(
        resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
        resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss,
    )
    return IngestReport(
        docs=str(docs),
        files=report.added,
        chunks=n,
        index_s=round(med["int8"], 2),
        index_chunks_per_s=round(n / med["int8"], 1),
        index_files_per_s=round(report.added / med["int8"], 1),
        index_fp32_s=round(med["fp32"], 2),
        index_fp32_chunks_per_s=round(n / med["fp32"], 1),
        encode_s=round(med["torch"], 2),
        encode_chunks_per_s=round(n / med["torch"], 1),
        ratio=round(med["torch"] / med["int8"], 3),
        ratio_fp32=round(med["torch"] / med["fp32"], 3),
        command_s=round(med["command"], 2),
        command_ratio=round(med["torch"] / med["command"], 3),
        rerun_s=round(statistics.median(reruns), 2),
        search_int8_ms=round(search["int8"][0], 1),
        search_int8_rss_mb=round(search["int8"][1], 1),
        search_fp32_ms=round(search["fp32"][0], 1),
        search_fp32_rss_mb=round(search["fp32"][1], 1),
        peak_rss_mb=round(peak / 1024, 1),
        threads=settings.threads,
        reps=reps,
    )


@dataclass
class BigFileReport:
    """`rag index` of a folder holding one large text file, in a fresh process."""

    size_mb: float
    seconds: float
    chunks: int
    peak_rss_mb: float  # of the `rag index` process and the children it waited for


def write_big_text(path: Path, size_mb: int, seed: int = 0) -> None:
    """A Markdown file of ``size_mb`` MB: sections of sentences drawn from a small
    vocabulary, each section written several times (so many passages repeat)."""
    import random

    rng = random.Random(seed)
    words = sample_text().split()
    sections = []
    for s in range(4):
        body = "\n\n".join(
            " ".join(rng.choice(words) for _ in range(rng.randint(20, 60))) for _ in range(12)
        )
        sections.append(f"## Section {s}\n\n{body}\n\n")
    target = size_mb << 20
    written = 0
    with path.open("w", encoding="utf-8") as fh:
        fh.write("# A large generated file\n\n")
        while written < target:
            text = rng.choice(sections)
            fh.write(text)
            written += len(text.encode())


def big_file_bench(size_mb: int, progress: Callable[[str], None] | None = None) -> BigFileReport:
    """Peak memory of `rag index` on a folder with one ``size_mb`` MB text file."""
    say = progress or (lambda _msg: None)
    with tempfile.TemporaryDirectory(prefix="rag-bench-big-") as tmp:
        docs = Path(tmp) / "docs"
        docs.mkdir()
        big = docs / "big.md"
        say(f"writing a {size_mb} MB text file")
        write_big_text(big, size_mb)
        say("indexing it in a fresh `rag index` process")
        index_dir = Path(tmp) / "index"
        args = [sys.executable, "-m", "ragcli", "index", str(docs), "--index", str(index_dir)]
        args.append("--json")
        wall, peak, out = run_measured(args, dict(os.environ))
        report = json.loads(out)
        return BigFileReport(
            size_mb=round(big.stat().st_size / (1 << 20), 1),
            seconds=round(wall / 1000, 1),
            chunks=int(report["chunks_total"]),
            peak_rss_mb=round(peak, 1),
        )
