"""Benchmarks behind `rag bench` (the prefill sweep is in ``prefill.py``).

``run_workload`` answers a question file in fresh processes with
the prefix cache off and on, as a user would, and checks the answers agree.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..config import Settings
from ..errors import RagError, UsageError
from .prefill import rounded, sample_text


# -- workload ----------------------------------------------------------------
def read_questions(path: Path) -> list[str]:
    """Questions from a text file (one a line; # comments) or JSONL with a ``question`` field."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read questions from {path}: {exc}") from None
    lines = [(i, ln.strip()) for i, ln in enumerate(text.splitlines(), 1) if ln.strip()]
    jsonl = path.suffix.lower() in (".jsonl", ".ndjson") or (
        bool(lines) and lines[0][1].startswith("{")
    )
    out = []
    for i, line in lines:
        if jsonl:
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise UsageError(f"{path}:{i}: not JSON ({exc.msg})") from None
            q = obj.get("question") if isinstance(obj, dict) else None
            if not isinstance(q, str) or not q.strip():
                raise UsageError(f'{path}:{i}: no "question" string')
            out.append(q.strip())
        elif not line.startswith("#"):
            out.append(line)
    if not out:
        raise UsageError(f"no questions in {path}")
    return out


TIMING_KEYS = (
    "ttft_ms",
    "prompt_tokens",
    "cached_tokens",
    "prefill_ms",
    "cache_source",
    "total_ms",
)


@dataclass
class QuestionRun:
    """One `rag ask --json` process."""

    answer: str
    raw_answer: str
    reason: str
    wall_ms: float
    timings: dict[str, Any]

    @property
    def used_model(self) -> bool:
        return int(self.timings.get("prompt_tokens") or 0) > 0


@dataclass
class PassSummary:
    """One pass over the questions (cache off or on)."""

    name: str
    questions: int
    model_questions: int  # prompt_tokens > 0
    no_model_questions: int  # answered "I don't know" before the model
    ttft_mean_ms: float
    ttft_median_ms: float
    wall_mean_ms: float  # whole process, as the user waits for it
    total_mean_ms: float  # ask's own total_ms
    prompt_tokens: int
    cached_tokens: int
    cached_share: float


@dataclass
class WorkloadReport:
    index_dir: str
    questions: list[str]
    off: PassSummary
    on: PassSummary
    answers_differ: int
    per_question: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return rounded(asdict(self))


def summarize(name: str, runs: list[QuestionRun]) -> PassSummary:
    """Means and medians over one pass; TTFT and cache share only where the model ran."""
    model = [r for r in runs if r.used_model]
    ttft = [float(r.timings["ttft_ms"]) for r in model]
    prompt = sum(int(r.timings["prompt_tokens"]) for r in model)
    cached = sum(int(r.timings.get("cached_tokens") or 0) for r in model)
    return PassSummary(
        name=name,
        questions=len(runs),
        model_questions=len(model),
        no_model_questions=len(runs) - len(model),
        ttft_mean_ms=statistics.fmean(ttft) if ttft else 0.0,
        ttft_median_ms=statistics.median(ttft) if ttft else 0.0,
        wall_mean_ms=statistics.fmean(r.wall_ms for r in runs) if runs else 0.0,
        total_mean_ms=statistics.fmean(float(r.timings["total_ms"]) for r in runs) if runs else 0.0,
        prompt_tokens=prompt,
        cached_tokens=cached,
        cached_share=cached / prompt if prompt else 0.0,
    )


def _cache_dir_for_pass(root: Path, name: str, shared: Path) -> Path:
    """A fresh cache folder that still sees the assembled model and file digests.

    Without them every pass would first rebuild the default GGUF, and the
    first question would pay for it.
    """
    d = root / name
    d.mkdir()
    for sub in ("models", "digests"):
        src = shared / sub
        if src.is_dir():
            (d / sub).symlink_to(src, target_is_directory=True)
    return d


def ask_in_process(question: str, index_dir: Path, cache_dir: Path, use_cache: bool) -> QuestionRun:
    """Run `python -m ragcli ask --json` as a new process, as a script would."""
    cmd = [sys.executable, "-m", "ragcli", "ask", "--json", "--index", str(index_dir)]
    # The KV cache is what is measured: the answer cache stays out of both passes.
    cmd.append("--no-cache" if not use_cache else "--no-answer-cache")
    cmd += ["--", question]
    env = {**os.environ, "RAG_CACHE_DIR": str(cache_dir)}
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    wall = (time.perf_counter() - t0) * 1000
    if proc.returncode not in (0, 1):  # 1 is "I don't know", still an answer
        last = (proc.stderr.strip().splitlines() or ["no message"])[-1]
        raise RagError(f"rag ask failed (exit {proc.returncode}) on {question!r}: {last}")
    try:
        data = json.loads(proc.stdout.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        raise RagError(f"rag ask printed no JSON for {question!r}") from None
    return QuestionRun(
        answer=data["answer"],
        raw_answer=data.get("raw_answer", ""),
        reason=data.get("reason", ""),
        wall_ms=wall,
        timings={k: data["timings"].get(k) for k in TIMING_KEYS},
    )


def run_workload(
    questions: list[str],
    settings: Settings,
    docs: Path | None = None,
    progress: Callable[[str], None] | None = None,
) -> WorkloadReport:
    """Answer each question in a fresh process with the prefix cache off, then on.

    The two runs of a question are back to back so background load hits both
    alike; the "on" pass starts from an empty cache folder, so it includes
    the cost of filling it.
    """
    from ..models import generation_model
    from ..stores.url import open_store

    index_dir = settings.index_dir
    if docs is not None:
        from ..index.pipeline import build_index

        if progress:
            progress(f"indexing {docs}")
        build_index([docs], settings)
    open_store(settings).close()  # a clear error now, not one per process
    generation_model(settings.model, settings.cache_dir)  # assembled once, outside the timing
    qs = [q for q in questions if q != "-"]
    off_runs, on_runs, per_q = [], [], []
    with tempfile.TemporaryDirectory(prefix="rag-bench-") as tmp:
        root = Path(tmp)
        off_dir = _cache_dir_for_pass(root, "off", settings.cache_dir)
        on_dir = _cache_dir_for_pass(root, "on", settings.cache_dir)
        for i, q in enumerate(qs, 1):
            if progress:
                progress(f"question {i}/{len(qs)}")
            off = ask_in_process(q, index_dir, off_dir, use_cache=False)
            on = ask_in_process(q, index_dir, on_dir, use_cache=True)
            off_runs.append(off)
            on_runs.append(on)
            per_q.append(
                {
                    "question": q,
                    "answer_off": off.answer,
                    "answer_on": on.answer,
                    "same": off.answer == on.answer,
                    "off": off.timings,
                    "on": on.timings,
                }
            )
    return WorkloadReport(
        index_dir=str(index_dir),
        questions=qs,
        off=summarize("off", off_runs),
        on=summarize("on", on_runs),
        answers_differ=sum(not p["same"] for p in per_q),
        per_question=per_q,
    )


# -- start-up ------------------------------------------------------------------
@dataclass
class StartupRow:
    """One command in fresh processes: medians over the runs."""

    command: str
    runs: int
    wall_ms: float
    max_rss_mb: float
    ttft_outside_prefill_ms: float | None = None
    process_ttft_ms: float | None = None
    prefill_ms: float | None = None


def run_measured(args: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    """Wall ms, peak RSS in MB and stdout of one fresh process, started through
    ``peak.py`` so that this process's own size does not count as the command's."""
    read, write = os.pipe()
    wrapper = [sys.executable, str(Path(__file__).with_name("peak.py")), str(write)]
    proc = subprocess.Popen(
        [*wrapper, *args], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
        pass_fds=(write,),
    )  # fmt: skip
    os.close(write)
    with os.fdopen(read) as report:
        out = proc.stdout.read() if proc.stdout else b""
        proc.wait()
        measured = json.loads(report.read() or "{}")  # nothing: the launcher itself failed
    if measured.get("code") not in (0, 1):
        raise RagError(f"{' '.join(args[:3])}... failed with exit code {proc.returncode}")
    return measured["wall_ms"], measured["peak_mb"], out.decode("utf-8", "replace")


def startup_bench(index_dir: Path, question: str, runs: int = 5) -> list[StartupRow]:
    """`rag --help`, `rag search` and `rag ask` (cache off) in fresh processes, as scripts run them."""
    rag = [sys.executable, "-m", "ragcli"]
    env = dict(os.environ)
    rows = []
    for name, args in (
        ("rag --help", [*rag, "--help"]),
        ("rag search", [*rag, "search", "--index", str(index_dir), question]),
        ("rag ask --no-cache", [*rag, "ask", "--json", "--profile", "--no-cache",
                                "--index", str(index_dir), question]),
    ):  # fmt: skip
        walls, rss, outside, ttft, prefill = [], [], [], [], []
        for _ in range(runs):
            wall, peak, out = run_measured(args, env)
            walls.append(wall)
            rss.append(peak)
            if name.startswith("rag ask"):
                prof = json.loads(out).get("profile", {})
                if "ttft_outside_prefill_ms" in prof:
                    outside.append(prof["ttft_outside_prefill_ms"])
                    ttft.append(prof["process_ttft_ms"])
                    prefill.append(prof["prefill_ms"])
        med = statistics.median
        rows.append(
            StartupRow(
                command=name,
                runs=runs,
                wall_ms=round(med(walls), 1),
                max_rss_mb=round(med(rss), 1),
                ttft_outside_prefill_ms=round(med(outside), 1) if outside else None,
                process_ttft_ms=round(med(ttft), 1) if ttft else None,
                prefill_ms=round(med(prefill), 1) if prefill else None,
            )
        )
    return rows


# -- index types at scale ----------------------------------------------------
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
    """Build each type at each size through :class:`ragcli.stores.folder.VectorIndex`
    (stage flat, then ``finalize`` trains and fills the wanted type, as a commit
    does), save it, map it back as a reader does, and time single queries.

    ``types`` may hold "auto". Recall is against exact inner-product search.
    ``nprobes`` adds search-only rows for IVF types at other nprobe values.
    Without ``vectors``, clustered synthetic 384-d vectors (:func:`clustered_vectors`).
    """
    import faiss
    import numpy as np

    from ..stores.base import IndexInfo
    from ..stores.faiss_index import VectorIndex

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


# -- ingestion throughput ------------------------------------------------------
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
    from ..stores.folder import IndexStore

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
        runs: dict[str, list[float]] = {"int8": [], "fp32": [], "torch": []}
        report = None
        for rep in range(reps):
            for q, embedder in onnx.items():
                s = settings.replace(index_dir=Path(tmp) / q, embed_backend=f"onnx-{q}")
                say(f"indexing {docs} on ONNX Runtime {q} ({rep + 1}/{reps})")
                t0 = time.perf_counter()
                report = build_index([docs], s, rebuild=True, embedder=embedder, exclude=exclude)
                runs[q].append(time.perf_counter() - t0)
            store = IndexStore.open(Path(tmp) / "int8")
            texts = [c.text for c in store.all_chunks()]
            store.close()
            say(f"encoding the same {len(texts)} passages with SentenceTransformer.encode")
            t0 = time.perf_counter()
            model.encode(
                texts, batch_size=torch_embedder.batch_size, normalize_embeddings=True,
                convert_to_numpy=True, show_progress_bar=False,
            )  # fmt: skip
            runs["torch"].append(time.perf_counter() - t0)
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


def indexed_vectors(index_dir: Path, questions: Path) -> tuple[np.ndarray, np.ndarray]:
    """The stored vectors of an existing index, and its embedding model's vectors of the
    questions in a `rag eval` file: real passages and real questions, for a sanity check
    of what the synthetic vectors show."""
    import numpy as np

    from ..config import load_settings
    from ..embed.base import query_embedder
    from ..models import embedding_model
    from ..stores.folder import IndexStore

    store = IndexStore.open(index_dir)
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
