"""`rag bench prefill`: what reading the prompt costs, by length, with its noise shown.

Each length is prefilled three ways, interleaved so that a burst of load hits all
three alike: cold through ragcli's engine, bare ``llama_decode`` with no ragcli code
in the loop, and a saved prefix state restored plus the last few tokens. Every
series keeps all its repetitions (median, min, max); the cold medians are fitted to
``t = a + b·L + c·L²`` with every coefficient held non-negative, since a fixed cost,
the weights' matrix products and attention can only add time. ``L* = b/c`` is the
length where attention's share overtakes the weights'. A run that disagrees with
itself (spread repetitions, or longer prompts measured faster) says so.

This module is long because it is one benchmark end to end around the record a saved
``--json`` run is redrawn from (:class:`PrefillRun`): the sweep, the fit and noise
verdict over its repetitions, and the plot and the table drawn from them.
"""

from __future__ import annotations

import ctypes
import itertools
import os
import re
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..config import Settings
from ..cpus import cpu_name
from ..errors import ModelError, UsageError
from .help_numbers import CACHED_SUFFIX, MAX_AUTO_REPS, MIN_AUTO_REPS, SPREAD_LIMIT

if TYPE_CHECKING:
    from ..llm.base import Prompt
    from ..llm.llama import LlamaEngine

MIN_LENGTH = 64
CTX_MARGIN = 16  # the context holds the longest prompt and this many positions more
SERIES = ("cold", "bare", "cached")
# With the reading cache warm: the prompt's sentences loaded and moved into place, only the
# question read. Not judged for noise or growth: loading is file reads, not arithmetic.
READING = "reading"
MONOTONE_SERIES = ("cold", "bare")  # cached is mostly a state load: flat by design
TERMS = ("fixed", "weights", "attention")  # a, b·L, c·L²


# -- statistics of one series at one length -----------------------------------
def spread(samples: Sequence[float]) -> float:
    """Interquartile range over median: how far the middle half of the repetitions lie
    apart. With 3 repetitions it is half the range; from 5 on, one outlier no longer
    moves it, so more repetitions can settle a noisy length."""
    if len(samples) < 2:
        return 0.0
    q1, _, q3 = statistics.quantiles(samples, n=4, method="inclusive")
    med = statistics.median(samples)
    return (q3 - q1) / med if med > 0 else 0.0


@dataclass
class Stat:
    """All repetitions of one way of prefilling L tokens, and what they imply."""

    samples_ms: list[float]
    tokens: int
    ms: float = 0.0  # median
    min_ms: float = 0.0
    max_ms: float = 0.0
    spread: float = 0.0
    tok_s: float = 0.0
    ms_per_token: float = 0.0

    def __post_init__(self) -> None:
        s = self.samples_ms = [round(v, 3) for v in self.samples_ms]
        self.ms, self.min_ms, self.max_ms = statistics.median(s), min(s), max(s)
        self.spread = spread(s)
        self.tok_s = self.tokens / max(self.ms / 1000, 1e-9)
        self.ms_per_token = self.ms / self.tokens


@dataclass
class PrefillRow:
    """One prompt length: cold (engine), bare llama_decode, and cached prefix + suffix."""

    tokens: int
    cold: Stat
    bare: Stat
    cached: Stat  # rates are effective: all L tokens over load + suffix prefill
    cached_load_ms: float
    cached_prefix_tokens: int
    dominant: str = ""  # the fit's largest term at this length
    reading: Stat | None = None  # every sentence from the reading cache (none: not measured)
    reading_reused_tokens: int = 0  # of the prompt's tokens: from the reading cache
    reading_read_tokens: int = 0  # read: the question and the text around the context

    @property
    def overhead_pct(self) -> float:
        """What ragcli's batch filling adds over bare llama_decode."""
        return (self.cold.ms / self.bare.ms - 1) * 100 if self.bare.ms > 0 else 0.0

    def series(self, name: str) -> Stat | None:
        return getattr(self, name)


# -- the fit -------------------------------------------------------------------
@dataclass
class Fit:
    """``t_ms = a + b·L + c·L²`` by non-negative least squares over the cold medians."""

    a: float
    b: float
    c: float
    r2: float
    l_star: float | None  # b/c: where c·L² equals b·L; None without an attention term
    note: str

    def terms(self, length: float) -> tuple[float, float, float]:
        return self.a, self.b * length, self.c * length * length

    def dominant(self, length: float) -> str:
        parts = self.terms(length)
        return TERMS[max(range(3), key=parts.__getitem__)]


def nnls(columns: Sequence[Sequence[float]], y: Sequence[float]) -> list[float]:
    """Least squares with every coefficient >= 0, exactly, for a handful of columns.

    The optimum is the unconstrained least-squares solution on some subset of the
    columns with all its coefficients non-negative; with three columns there are
    seven subsets, so trying them all is exact and simpler than an active-set loop.
    Columns are scaled to unit norm first (L² reaches 10⁷ next to a column of ones).
    """
    import numpy as np

    x = np.asarray(columns, dtype=float).T
    t = np.asarray(y, dtype=float)
    norms = np.linalg.norm(x, axis=0)
    norms[norms == 0] = 1.0
    xs = x / norms
    best, best_err = np.zeros(x.shape[1]), float(t @ t)
    for k in range(1, x.shape[1] + 1):
        for subset in itertools.combinations(range(x.shape[1]), k):
            cols = list(subset)
            coef, *_ = np.linalg.lstsq(xs[:, cols], t, rcond=None)
            if (coef < 0).any():
                continue
            full = np.zeros(x.shape[1])
            full[cols] = coef
            err = float(((xs @ full - t) ** 2).sum())
            if err < best_err - 1e-12 * max(best_err, 1.0):
                best, best_err = full, err
    return [float(v) for v in best / norms]


def fit_prefill(lengths: Sequence[int], ms: Sequence[float]) -> Fit:
    """Fit the cold medians; say which term the data supports and where attention wins."""
    if len(set(lengths)) < 3:
        raise UsageError("the fit needs at least three prompt lengths: raise --max-len")
    a, b, c = nnls([[1.0] * len(lengths), list(lengths), [n * n for n in lengths]], ms)
    pred = [a + b * n + c * n * n for n in lengths]
    mean = statistics.fmean(ms)
    ss_tot = sum((v - mean) ** 2 for v in ms)
    r2 = 1 - sum((v - p) ** 2 for v, p in zip(ms, pred, strict=True)) / ss_tot if ss_tot else 1.0
    top = max(lengths)
    if c <= 0:
        return Fit(a, b, c, r2, None, f"no attention term measured up to {top} tokens")
    if b <= 0:
        return Fit(a, b, c, r2, 0.0, "no linear term measured: attention dominates throughout")
    l_star = b / c
    if l_star > top:
        note = (
            f"L* = {l_star:,.0f} lies beyond the longest prompt measured ({top}): "
            "the weights' matrix products dominate every measured length"
        )
    else:
        note = f"attention (c·L²) overtakes the weights (b·L) above {l_star:,.0f} tokens"
    return Fit(a, b, c, r2, l_star, note)


# -- noise ---------------------------------------------------------------------
@dataclass
class Verdict:
    """Whether a run agrees with itself; ``problems`` name each length that does not."""

    ok: bool
    spread_limit: float
    problems: list[str]
    message: str


def judge(rows: Sequence[PrefillRow], limit: float = SPREAD_LIMIT) -> Verdict:
    """Flag spread repetitions and medians that fall as prompts grow.

    Spread alone makes some medians uncertain; a median that does not grow with the
    length contradicts the physics, and then the fit is not to be trusted either.
    """
    spread_out = []
    for row in rows:
        for name in SERIES:
            s = row.series(name).spread
            if s > limit:
                spread_out.append(f"{name} at {row.tokens} tokens: spread {s:.0%}")
    falling = []
    for name in MONOTONE_SERIES:
        for prev, row in itertools.pairwise(rows):
            if row.series(name).ms <= prev.series(name).ms:
                falling.append(f"{name}: {row.tokens} tokens measured no slower than {prev.tokens}")
    problems = falling + spread_out
    if not problems:
        msg = f"repetitions agree (spread <= {limit:.0%}) and time grows with length"
        return Verdict(True, limit, [], msg)
    shown = "; ".join(problems[:4]) + (
        f"; and {len(problems) - 4} more" if len(problems) > 4 else ""
    )
    if falling:
        msg = f"noisy run, medians do not grow with length, do not trust the fit: {shown}"
    else:
        cells = len(rows) * len(SERIES)
        msg = (
            f"noisy at {len(spread_out)} of {cells} measurements (spread over {limit:.0%}, "
            f"their medians are less certain): {shown}"
        )
    return Verdict(False, limit, problems, msg)


# -- reports -------------------------------------------------------------------
@dataclass
class PrefillReport:
    """One model's sweep."""

    model: str
    n_ctx: int
    n_batch: int
    n_threads: int
    reps: str  # "3", or "auto (3-9)"
    rows: list[PrefillRow]
    fit: Fit
    verdict: Verdict
    load_before: float
    load_after: float
    load_max: float  # the highest 1-minute load average seen between lengths

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for row, out in zip(self.rows, d["rows"], strict=True):
            out["overhead_pct"] = round(row.overhead_pct, 2)
        return d


@dataclass
class PrefillRun:
    """Every model of one invocation, with when and under what load it ran."""

    reports: list[PrefillReport]
    started: str
    seconds: float
    cores: int
    cpu: str
    spread_limit: float = SPREAD_LIMIT
    command: str = ""

    @property
    def ok(self) -> bool:
        return all(r.verdict.ok for r in self.reports)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> PrefillRun:
        """A run back from its ``--json`` output: the repetitions as measured, the fit
        and the verdicts worked out again from them (so a redraw cannot disagree)."""
        try:
            reports = []
            for r in d["reports"]:
                rows = [
                    PrefillRow(
                        row["tokens"],
                        *(Stat(row[name]["samples_ms"], row["tokens"]) for name in SERIES),
                        row["cached_load_ms"],
                        row["cached_prefix_tokens"],
                        reading=Stat(row[READING]["samples_ms"], row["tokens"])
                        if row.get(READING)
                        else None,
                        reading_reused_tokens=row.get("reading_reused_tokens", 0),
                        reading_read_tokens=row.get("reading_read_tokens", 0),
                    )
                    for row in r["rows"]
                ]
                fit = fit_prefill([row.tokens for row in rows], [row.cold.ms for row in rows])
                for row in rows:
                    row.dominant = fit.dominant(row.tokens)
                fields = ("model", "n_ctx", "n_batch", "n_threads", "reps")
                loads = ("load_before", "load_after", "load_max")
                reports.append(
                    PrefillReport(
                        **{k: r[k] for k in fields},
                        rows=rows,
                        fit=fit,
                        verdict=judge(rows),
                        **{k: r[k] for k in loads},
                    )
                )
            keys = ("started", "seconds", "cores", "cpu", "command")
            return cls(reports=reports, **{k: d[k] for k in keys})
        except (KeyError, TypeError, ValueError, statistics.StatisticsError) as exc:
            raise UsageError(f"not the JSON of `rag bench prefill --json` ({exc!r})") from None

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["ok"] = self.ok
        d["reports"] = [r.as_dict() for r in self.reports]
        # Samples are kept to the microsecond and written whole, so --replot reproduces
        # the medians and the fit of the run exactly.
        return rounded(d, 10)


def rounded(obj: Any, digits: int = 6) -> Any:
    """Floats to ``digits`` significant digits, all through dicts and lists, for JSON."""
    if isinstance(obj, float):
        return float(f"{obj:.{digits}g}")
    if isinstance(obj, dict):
        return {k: rounded(v, digits) for k, v in obj.items()}
    if isinstance(obj, list):
        return [rounded(v, digits) for v in obj]
    return obj


def _load() -> float:
    try:
        return os.getloadavg()[0]
    except OSError:
        return float("nan")


# -- measuring -----------------------------------------------------------------
def sweep_lengths(max_len: int, n_ctx: int) -> list[int]:
    """64, 128, 256, ... up to min(max_len, n_ctx - 16), ending on that limit."""
    limit = min(max_len, n_ctx - CTX_MARGIN)
    if limit < MIN_LENGTH:
        raise UsageError(
            f"the sweep needs prompts of at least {MIN_LENGTH} tokens "
            f"(max length {max_len}, context {n_ctx})"
        )
    out, n = [], MIN_LENGTH
    while n <= limit:
        out.append(n)
        n *= 2
    if out[-1] < limit and max_len >= n_ctx - CTX_MARGIN:
        out.append(limit)  # the longest prompt the context takes
    return out


def sample_text() -> str:
    """Real prose to tokenize: the demo corpus in a checkout, else ragcli's own source."""
    root = Path(__file__).resolve().parent
    corpus = root.parent.parent / "corpora"
    files = sorted(p for p in corpus.rglob("*") if p.is_file()) if corpus.is_dir() else []
    if not files:
        files = sorted(root.parent.rglob("*.py"))
    return "\n\n".join(p.read_text(encoding="utf-8", errors="replace") for p in files)


def bench_tokens(engine: LlamaEngine, n: int, text: str | None = None) -> list[int]:
    """``n`` token ids of real text, BOS first, the text repeated as needed."""
    body = engine.llm.tokenize((text or sample_text()).encode("utf-8"), add_bos=False)
    if not body:
        raise UsageError("no text to build benchmark prompts from")
    bos = engine.llm.token_bos()
    tokens = [bos] if bos >= 0 else []
    while len(tokens) < n:
        tokens += body
    return tokens[:n]


def _timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1000


def _bare_prefill(engine: LlamaEngine, arr: ctypes.Array, n: int) -> float:
    """Clear the KV memory, then time plain llama_decode over batches of n_batch.

    ``llama_batch_get_one`` lets llama.cpp number positions and output logits
    for the last token of each batch (one row per batch more than the engine
    computes: negligible next to the batch itself).
    """
    import llama_cpp as lib

    mem = lib.llama_get_memory(engine.ctx)
    lib.llama_memory_clear(mem, True)
    engine.kv_tokens = []  # the engine's record must match the memory we cleared
    size = ctypes.sizeof(lib.llama_token)
    ptr_type = ctypes.POINTER(lib.llama_token)
    base = ctypes.addressof(arr)
    ctx, step = engine.ctx, engine.n_batch
    parts = [
        (ctypes.cast(base + off * size, ptr_type), min(step, n - off)) for off in range(0, n, step)
    ]
    t0 = time.perf_counter()
    for ptr, k in parts:
        rc = lib.llama_decode(ctx, lib.llama_batch_get_one(ptr, k))
        if rc != 0:
            raise ModelError(f"llama_decode failed with code {rc}")
    ms = (time.perf_counter() - t0) * 1000
    lib.llama_memory_clear(mem, True)
    return ms


def reading_prompt(engine: LlamaEngine, n: int) -> tuple[Prompt, int]:
    """A prompt of about ``n`` tokens laid out as `rag ask` lays out its context: a short
    head, sentences of real text as pieces (each read apart), and a question of about
    ``CACHED_SUFFIX`` tokens; and the head's length in tokens."""
    from ..llm.base import Prompt

    def count(text: str) -> int:
        return len(engine.llm.tokenize(text.encode("utf-8"), add_bos=False, special=False))

    head = "Answer the question from the context only.\n\nContext:"
    words = sample_text().split()
    question, k = "\n\nQuestion:", 0
    while count(question) < CACHED_SUFFIX:
        question += " " + words[k % len(words)]
        k += 1
    sentences = [" " + t.strip() for t in re.split(r"(?<=[.!?])\s+", " ".join(words)) if t.strip()]
    budget = n - count(head) - count(question) - 1
    pieces: list[str] = []
    while budget > 0:
        piece = sentences[len(pieces) % len(sentences)]
        words = piece.split()
        while len(words) > 1 and count(" " + " ".join(words)) > budget:
            words = words[: len(words) * 3 // 4]  # the last piece is cut to what is left
        piece = " " + " ".join(words)
        pieces.append(piece)
        budget -= count(piece)
    prompt = Prompt((head, "".join(pieces), question), (), pieces=tuple(pieces))
    return prompt, count(head) + 1


def _reading(reader: LlamaEngine, prompt: Prompt, head: int) -> tuple[float, int, int]:
    """ms to place every sentence from the reading cache and read the rest, with the
    head live as between two questions; tokens reused and tokens read."""
    reader.trim(head)
    t = reader.generate(prompt, max_tokens=1).timings
    return t.reading_ms + t.prefill_ms, t.reading_tokens, t.prefill_tokens


def _measure_length(
    engine: LlamaEngine,
    tokens: list[int],
    arr: ctypes.Array,
    n: int,
    reps: int | None,
    reader: LlamaEngine | None = None,
) -> PrefillRow:
    """Repeat the ways at one length, rotating their order every round.

    ``reps=None`` (auto): at least 3 rounds, then more until every series' spread is
    under the limit or 9 rounds have run. ``reader``: an engine with a reading cache,
    for the reading series.
    """
    prefix, suffix = tokens[: n - CACHED_SUFFIX], tokens[n - CACHED_SUFFIX : n]
    engine.trim(0)
    engine.evaluate(prefix, 0)
    state = engine.save_state()
    samples: dict[str, list[float]] = {name: [] for name in SERIES}
    loads: list[float] = []

    def cold() -> None:
        engine.trim(0)
        samples["cold"].append(_timed(lambda: engine.evaluate(tokens[:n], 0)))

    def bare() -> None:
        samples["bare"].append(_bare_prefill(engine, arr, n))

    def cached() -> None:
        engine.trim(0)
        t0 = time.perf_counter()
        if not engine.load_state(state, prefix):
            raise ModelError("llama.cpp refused a state it had just saved")
        t1 = time.perf_counter()
        engine.evaluate(suffix, len(prefix))
        loads.append((t1 - t0) * 1000)
        samples["cached"].append((time.perf_counter() - t0) * 1000)

    ways = [cold, bare, cached]
    reused = read = 0
    if reader is not None:
        prompt, head = reading_prompt(reader, n)
        reader.warm(prompt)
        samples[READING] = []

        def reading() -> None:
            nonlocal reused, read
            ms, reused, read = _reading(reader, prompt, head)
            samples[READING].append(ms)

        ways.append(reading)
    target, cap = (reps, reps) if reps else (MIN_AUTO_REPS, MAX_AUTO_REPS)
    done = 0
    while done < cap:
        for i in range(len(ways)):
            ways[(done + i) % len(ways)]()
        done += 1
        if done >= target and all(spread(samples[s]) <= SPREAD_LIMIT for s in SERIES):
            break
    return PrefillRow(
        n,
        Stat(samples["cold"], n),
        Stat(samples["bare"], n),
        Stat(samples["cached"], n),
        statistics.median(loads),
        len(prefix),
        reading=Stat(samples[READING], n) if reader is not None else None,
        reading_reused_tokens=reused,
        reading_read_tokens=read,
    )


def prefill_sweep(
    settings: Settings,
    max_len: int = 2048,
    reps: int | None = 3,
    progress: Callable[[str], None] | None = None,
    reading: bool = True,
) -> PrefillReport:
    """Time prefill of growing prompts for the settings' model (``reps=None``: auto);
    ``reading``: the reading-cache series too."""
    from ..llm.llama import LlamaEngine
    from ..llm.loading import import_llama_cpp
    from ..models import generation_model

    if reps is not None and reps < 1:
        raise UsageError("--reps must be at least 1, or auto")
    model = generation_model(settings.model, settings.cache_dir)
    label = settings.model if settings.model and "/" not in settings.model else model.path.stem
    # The context is sized for the sweep, not for answering: the longest prompt fits.
    n_ctx = max(settings.n_ctx, max_len + CTX_MARGIN)
    load_before = _load()
    llama_cpp = import_llama_cpp()  # as the engine loads it, waiting threads and all
    engine = LlamaEngine(
        model,
        n_ctx,
        settings.n_batch,
        settings.threads,
        repack=settings.repack_weights,
        adaptive_threads=settings.adaptive_threads,
    )
    folder = tempfile.TemporaryDirectory(prefix="rag-bench-reading-")
    reader = None
    try:
        if reading:  # a second context on the same mapped weights, its own reading cache
            from ..llm.reading_cache import ReadingCache

            reader = LlamaEngine(
                model, n_ctx, settings.n_batch, settings.threads,
                repack=settings.repack_weights, adaptive_threads=settings.adaptive_threads,
                reading=ReadingCache(Path(folder.name), 1 << 40), kv_type=settings.kv_type,
            )  # fmt: skip
        lengths = sweep_lengths(max_len, engine.n_ctx)
        tokens = bench_tokens(engine, lengths[-1])
        arr = (llama_cpp.llama_token * len(tokens))(*tokens)
        engine.evaluate(tokens[:MIN_LENGTH], 0)  # warm-up: first-call allocations are not prefill
        rows, loads = [], [load_before]
        for n in lengths:
            if progress:
                progress(f"{label}: {n} tokens")
            rows.append(_measure_length(engine, tokens, arr, n, reps, reader))
            loads.append(_load())
        fit = fit_prefill(lengths, [r.cold.ms for r in rows])
        for row in rows:
            row.dominant = fit.dominant(row.tokens)
        reps_label = str(reps) if reps else f"auto ({MIN_AUTO_REPS}-{MAX_AUTO_REPS})"
        return PrefillReport(
            model=label,
            n_ctx=engine.n_ctx,
            n_batch=engine.n_batch,
            n_threads=settings.threads,
            reps=reps_label,
            rows=rows,
            fit=fit,
            verdict=judge(rows),
            load_before=load_before,
            load_after=loads[-1],
            load_max=max(loads),
        )
    finally:
        engine.close()
        if reader is not None:
            reader.close()
        folder.cleanup()


def prefill_run(
    settings: Settings,
    models: Sequence[str | None],
    max_len: int = 2048,
    reps: int | None = 3,
    progress: Callable[[str], None] | None = None,
    command: str = "",
    reading: bool = True,
) -> PrefillRun:
    """One sweep per model, one after the other, in one process and one record."""
    import dataclasses

    started = datetime.now(UTC)
    t0 = time.perf_counter()
    reports = [
        prefill_sweep(dataclasses.replace(settings, model=m), max_len, reps, progress, reading)
        for m in (models or [settings.model])
    ]
    return PrefillRun(
        reports=reports,
        started=started.strftime("%Y-%m-%d %H:%M UTC"),
        seconds=time.perf_counter() - t0,
        cores=os.cpu_count() or 1,
        cpu=cpu_name(),
        command=command,
    )


# -- the picture ---------------------------------------------------------------
def check_plotting() -> None:
    """Fail before a long run when the plot could not be drawn."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise UsageError("--plot needs matplotlib: pip install 'ragcli[plot]'") from None


def plot_prefill(run: PrefillRun, path: Path) -> Path:
    """Two panels: ms against L, and ms per token against L (where attention shows as
    the rising slope); error bars from min to max, the fit over the measured range and
    L* where it falls inside it; one colour per model, one line style per series."""
    check_plotting()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    styles = {
        "cold": ("o", "-", "cold (ragcli engine)"),
        "bare": ("s", "--", "bare llama_decode"),
        "cached": ("^", ":", f"cached prefix + last {CACHED_SUFFIX}"),
        READING: ("D", "-.", f"reading cache: sentences placed + last {CACHED_SUFFIX}"),
    }
    colours = plt.get_cmap("tab10").colors
    fig, (ax_ms, ax_tok) = plt.subplots(1, 2, figsize=(13, 7))
    legend: list[tuple[Any, str]] = []  # per model, in one column: fit, series, L*
    for colour, report in zip(itertools.cycle(colours), run.reports):
        x = np.array([r.tokens for r in report.rows], dtype=float)
        f = report.fit
        xs = np.geomspace(x.min(), x.max(), 200)
        curve = f.a + f.b * xs + f.c * xs**2
        (line,) = ax_ms.plot(xs, curve, "-", color=colour, alpha=0.35, linewidth=5)
        ax_tok.plot(xs, curve / xs, "-", color=colour, alpha=0.35, linewidth=5)
        legend.append(
            (line, f"{report.model}: fit {f.a:.0f} + {f.b:.3g}·L + {f.c:.3g}·L² (R² {f.r2:.3f})")
        )
        for name, (marker, style, label) in styles.items():
            stats = [r.series(name) for r in report.rows]
            if any(st is None for st in stats):
                continue
            med = np.array([s.ms for s in stats])
            err = np.array([[s.ms - s.min_ms for s in stats], [s.max_ms - s.ms for s in stats]])
            for ax, scale in ((ax_ms, 1.0), (ax_tok, x)):
                bars = ax.errorbar(
                    x, med / scale, yerr=err / scale, marker=marker, linestyle=style,
                    color=colour, capsize=3, markersize=4,
                )  # fmt: skip
            legend.append((bars, f"{report.model}: {label}"))
        # An answer read apart too close to call is read again whole (reading_margin): what
        # that question costs, from the same medians.
        both = [(r.series(READING), r.series("cold")) for r in report.rows]
        if all(rd is not None and cd is not None for rd, cd in both):
            again = np.array([rd.ms + cd.ms for rd, cd in both])  # type: ignore[union-attr]
            for ax, scale in ((ax_ms, 1.0), (ax_tok, x)):
                (mark,) = ax.plot(x, again / scale, marker="x", linestyle=(0, (1, 3)), color=colour)
            legend.append((mark, f"{report.model}: reading cache, then read again whole (sum)"))
        if f.l_star is not None and x.min() <= f.l_star <= x.max():
            for ax in (ax_ms, ax_tok):
                mark = ax.axvline(f.l_star, color=colour, linestyle="-.", alpha=0.7)
            ax_tok.annotate(
                f"L* = {f.l_star:,.0f}", (f.l_star, f.b + f.a / f.l_star + f.c * f.l_star),
                textcoords="offset points", xytext=(6, 8), color=colour,
                bbox={"facecolor": "white", "alpha": 0.8, "edgecolor": "none"},
            )  # fmt: skip
            legend.append((mark, f"{report.model}: L* = b/c = {f.l_star:,.0f} tokens"))
        else:
            where = "no attention term measured"
            if f.l_star is not None:
                side = "above" if f.l_star > x.max() else "below"
                where = f"L* = b/c = {f.l_star:,.0f}, {side} the measured range"
            legend.append((plt.Line2D([], [], linestyle="none"), f"{report.model}: {where}"))
    ax_ms.set_xscale("log", base=2)
    ax_ms.set_yscale("log")
    ax_ms.set_ylabel("prefill time, ms (median; bars: min-max)")
    ax_ms.set_title("time to read the prompt")
    ax_tok.set_xscale("log", base=2)
    ax_tok.set_ylabel("ms per prompt token")
    ax_tok.set_ylim(bottom=0)
    ax_tok.set_title("cost per token: a rising slope is attention (c·L)")
    for ax in (ax_ms, ax_tok):
        ax.set_xlabel("prompt length L (tokens)")
        ax.grid(True, which="both", alpha=0.3)
    per_model = len(legend) // len(run.reports)
    noisy = [f"{r.model}: {r.verdict.message}" for r in run.reports if not r.verdict.ok]
    fig.legend(
        [h for h, _ in legend], [t for _, t in legend], loc="lower center",
        bbox_to_anchor=(0.5, 0.035 if noisy else 0.0), ncol=len(run.reports), fontsize=8,
        frameon=False,
    )  # fmt: skip
    first = run.reports[0]
    loads = "; ".join(f"{r.model} {r.load_before:.2f} to {r.load_max:.2f}" for r in run.reports)
    fig.suptitle(
        f"Prefill against prompt length, {run.started}: {run.cores} cores, "
        f"n_batch {first.n_batch}, {first.n_threads} threads, reps {first.reps}\n"
        f"1-minute load average during the run (its own threads included): {loads}",
        fontsize=10,
    )
    bottom = 0.034 * per_model + (0.06 if noisy else 0.01)
    if noisy:
        text = "noise: " + " | ".join(noisy)
        fig.text(0.5, 0.005, text[:220] + ("..." if len(text) > 220 else ""),
                 color="red", fontsize=8, ha="center")  # fmt: skip
    fig.tight_layout(rect=(0, bottom, 1, 0.94))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
