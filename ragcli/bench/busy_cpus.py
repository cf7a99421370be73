"""`rag bench contention`: prefill and decode when other processes want the CPU too.

One fixed prompt of about 900 tokens, laid out as `rag ask` lays out its prompts, is read
and answered with 64 greedy tokens (end tokens and stop strings set aside, so every run
decodes all of them) in a fresh process: on a quiet machine, beside one and two busy
processes (pure-Python spin loops, started before the run and killed after it), and as
two processes at once. Each scenario runs with adaptive threads (the default: llama.cpp
on the cores other processes leave free) and with the thread count fixed, so the table
shows what adapting buys. Rates are medians over the repetitions (and over both
processes of "2 at once"); each is set against the quiet rate of its own mode.

The goals are issue #29's: beside one busy process, prefill and decode at 0.45 of their
quiet rates or better; two at once, each decoding at 0.40 of quiet or better.

With ``pairs``, many pairs started together (adaptive threads) replace the scenarios: a
collapse that strikes one pair in three is a worst case a median hides (issue #47). Its
goals are the worst process's, against quiet runs spread among the pairs: decoding at 0.40
of the quiet rate or better, and prefill and decode in at most three times the quiet time.
"""

from __future__ import annotations

import contextlib
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from ..config import Settings
from ..cpus import CpuSampler, allowed_cpus, cpu_name, physical_cores
from ..errors import RagError, UsageError
from .help_numbers import QUICK_MAX_TOKENS, QUICK_PROMPT_TOKENS
from .prefill_cost import rounded, sample_text

if TYPE_CHECKING:
    import numpy as np

    from ..llm.base import Prompt
    from ..llm.llama import LlamaEngine

PROMPT_TOKENS = 900
MAX_TOKENS = 64
QUESTION = "Summarize what the context says, in detail."
# scenario: (busy processes beside, processes of the benchmark at once)
SCENARIOS: dict[str, tuple[int, int]] = {
    "quiet": (0, 1),
    "1 busy": (1, 1),
    "2 busy": (2, 1),
    "2 at once": (0, 2),
}
MODES = ("adaptive", "fixed")
GOALS = (("1 busy", "prefill", 0.45), ("1 busy", "decode", 0.45), ("2 at once", "decode", 0.40))
PAIRS = "pairs"
PAIR_DECODE_GOAL = 0.40  # the worst process's decode rate, at least this share of quiet
PAIR_TOTAL_GOAL = 3.0  # the worst process's prefill and decode time, at most this many quiet
SPIN = "while True: pass"
RUN_TIMEOUT_S = 1800
HERE = Path(__file__).resolve().parents[2]  # the checkout this code runs from


@dataclass
class Cell:
    """One scenario in one mode: every process's figures, their medians, the ratios."""

    scenario: str
    mode: str
    runs: list[dict[str, Any]] = field(default_factory=list)
    prefill_tok_s: float = 0.0
    decode_tok_s: float = 0.0
    prefill_ratio: float = 0.0  # to the quiet run of the same mode
    decode_ratio: float = 0.0
    prefill_threads: float = 0.0  # llama.cpp threads per token, median over the runs
    decode_threads: float = 0.0
    others_cpus: float = 0.0  # CPUs' worth other processes used while a run generated

    def summarize(self) -> None:
        """Medians over the runs (their ratios need the quiet cell: set by the caller)."""
        med = statistics.median
        for name in ("prefill_tok_s", "decode_tok_s", "prefill_threads", "decode_threads"):
            setattr(self, name, med(r[name] for r in self.runs))
        self.others_cpus = med(r["others_cpus"] for r in self.runs)


@dataclass
class Pair:
    """Two fresh processes started together: each one's figures and its ratios to the
    quiet median (decode rate; prefill and decode time, which grows when it is worse)."""

    runs: list[dict[str, Any]]
    decode_ratios: list[float] = field(default_factory=list)
    total_ratios: list[float] = field(default_factory=list)


@dataclass
class Goal:
    """One of issue #29's or #47's goals, against the adaptive runs."""

    scenario: str
    phase: str  # prefill | decode | total
    target: float
    ratio: float
    met: bool
    at_most: bool = False  # the ratio must stay at or under the target (a time)


@dataclass
class ContentionRun:
    """A whole benchmark: the machine, the prompt, every cell and the goals."""

    model: str
    started: str
    seconds: float
    cpus: int
    physical_cores: int
    threads: int
    cpu: str
    prompt_tokens: int
    max_tokens: int
    reps: int
    command: str
    cells: list[Cell]
    goals: list[Goal]
    pairs: list[Pair] = field(default_factory=list)
    code: str = "this"  # "this", or the checkout whose processes ran (``--code``)

    def cell(self, scenario: str, mode: str) -> Cell:
        return next(c for c in self.cells if c.scenario == scenario and c.mode == mode)

    def worst_pair(self) -> Pair | None:
        """The pair with the slowest decoding process; None without pairs."""
        return min(self.pairs, key=lambda p: min(p.decode_ratios), default=None)

    def as_dict(self) -> dict[str, Any]:
        return rounded(asdict(self), 4)


# -- the worker: one fresh process, one run ------------------------------------
def bench_prompt(engine: LlamaEngine, target: int, as_asked: bool = True) -> Prompt:
    """A question over sentences of the demo corpus, grown to ``target`` tokens or just
    past, with no stop strings. ``as_asked``: laid out as `rag ask` lays out its prompt
    for this model (instructions and examples first: some 250 tokens at least); else
    the sentences and the question alone, for a quick check."""
    from ..answer.prompt import context_text, engine_prompt
    from ..llm.base import Prompt

    def build(context: list[str]) -> Prompt:
        if not as_asked:
            return Prompt(("Context: ", context_text(context), f"\nQuestion: {QUESTION}\n"), ())
        return Prompt(engine_prompt(QUESTION, context, engine).segments, stop=())

    text = " ".join(sample_text().split())
    sentences = [s for s in re.split(r"(?<=[.!?])\s+", text) if len(s.split()) >= 4]
    context: list[str] = []
    prompt = build(context)
    for sentence in sentences:
        if len(engine.tokenize(prompt)) >= target:
            return prompt
        context.append(sentence)
        prompt = build(context)
    raise UsageError(f"not enough text for a prompt of {target} tokens")


class _NoEnd:
    """Greedy choice among every token but the end ones: a run decodes all it may."""

    def __init__(self, engine: LlamaEngine) -> None:
        import numpy as np

        self.ends = np.array(engine.vocabulary.end_ids, dtype=np.int64)

    def choose(self, logits: np.ndarray) -> int:
        import numpy as np

        masked = logits.copy()
        masked[self.ends] = -np.inf
        return int(masked.argmax())

    def advance(self, token: int) -> None:
        pass

    def finish(self) -> None:
        pass


def run_worker(spec: dict[str, Any], ready: IO[str], go: IO[str]) -> dict[str, Any]:
    """Load, build the prompt, say ready, wait for go, generate: the run's figures."""
    from ..llm.llama import LlamaEngine
    from ..models import GenerationModel

    model = GenerationModel(path=Path(spec["model"]), digest=spec["digest"])
    claims = Path(spec["claims"]) if spec.get("claims") else None
    engine = LlamaEngine(
        model, spec["n_ctx"], spec["n_batch"], spec["threads"], adaptive_threads=spec["adaptive"],
        claims=claims,
    )  # fmt: skip
    try:
        prompt = bench_prompt(engine, spec["prompt_tokens"], as_asked=not spec["quick"])
        no_end = _NoEnd(engine)
        print("ready", file=ready, flush=True)
        go.readline()
        others = CpuSampler(min_window_s=0.0)
        gen = engine.generate(
            prompt, max_tokens=spec["max_tokens"], use_cache=False, constraint=no_end
        )
        others.sample()
    finally:
        engine.close()
    t = gen.timings
    keys = ("prompt_tokens", "completion_tokens", "prefill_tok_s", "decode_tok_s",
            "prefill_threads", "decode_threads", "prefill_ms", "decode_ms")  # fmt: skip
    return {**{k: getattr(t, k) for k in keys}, "others_cpus": others.others or 0.0}


# -- the parent: scenarios of fresh processes ----------------------------------
def _stop(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait()
        for pipe in (p.stdin, p.stdout):
            if pipe is not None:
                pipe.close()


def _failed(proc: subprocess.Popen, log: IO[bytes], what: str) -> RagError:
    log.seek(0)
    tail = log.read().decode("utf-8", "replace").strip().splitlines()[-5:]
    return RagError(f"{what} (exit code {proc.poll()}): " + " | ".join(tail))


def run_cell(
    spec: dict[str, Any], busy: int, procs: int, code: Path = HERE
) -> list[dict[str, Any]]:
    """``procs`` workers beside ``busy`` spinning processes; their figures, in order.

    The spinners start first; the workers load, say ready, and start generating at one
    signal, so the runs of "2 at once" overlap from their first token on. ``code``: the
    checkout whose ragcli the workers run (`python -m` finds it first there).
    """
    args = [sys.executable, "-m", "ragcli.bench.busy_cpus", json.dumps(spec)]
    with contextlib.ExitStack() as stack:
        logs = [stack.enter_context(tempfile.TemporaryFile()) for _ in range(procs)]
        spinners = [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(busy)]
        stack.callback(_stop, spinners)
        pipes = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "text": True}
        workers = [subprocess.Popen(args, stderr=log, cwd=code, **pipes) for log in logs]
        stack.callback(_stop, workers)
        for w, log in zip(workers, logs, strict=True):
            assert w.stdout is not None
            if w.stdout.readline().strip() != "ready":
                w.wait()
                raise _failed(w, log, "a benchmark process failed before its run")
        for w in workers:
            assert w.stdin is not None
            w.stdin.write("go\n")
            w.stdin.close()
        results = []
        for w, log in zip(workers, logs, strict=True):
            assert w.stdout is not None
            out = w.stdout.read()
            if w.wait(timeout=RUN_TIMEOUT_S) != 0 or not out.strip():
                raise _failed(w, log, "a benchmark process failed")
            results.append(json.loads(out.strip().splitlines()[-1]))
        return results


def contention_bench(
    settings: Settings,
    reps: int = 3,
    quick: bool = False,
    progress: Callable[[str], None] | None = None,
    command: str = "",
    pairs: int = 0,
    code: Path | None = None,
) -> ContentionRun:
    """Every scenario in both modes, ``reps`` times, interleaved so that a drift of the
    machine's load falls on all cells alike. ``pairs``: instead, ``reps`` quiet runs and
    ``pairs`` pairs started together, adaptive threads only. ``code``: another checkout
    whose processes run (to compare versions); the engines claim cores in the settings'
    cache folder, as `rag ask` does."""
    from ..llm.cpu_claims import FOLDER
    from ..models import generation_model

    if reps < 1:
        raise UsageError("--reps must be at least 1")
    if code is not None and not (code / "ragcli" / "bench" / "busy_cpus.py").is_file():
        raise UsageError(f"{code} is not a ragcli checkout with `rag bench contention`")
    model = generation_model(settings.model, settings.cache_dir)  # assembled before any clock
    label = settings.model if settings.model and "/" not in settings.model else model.path.stem
    spec = {
        "model": str(model.path),
        "digest": model.digest,
        "n_ctx": settings.n_ctx,
        "n_batch": settings.n_batch,
        "threads": settings.threads,
        "prompt_tokens": QUICK_PROMPT_TOKENS if quick else PROMPT_TOKENS,
        "max_tokens": QUICK_MAX_TOKENS if quick else MAX_TOKENS,
        "quick": quick,
        "claims": str(settings.cache_dir / FOLDER),
    }
    where = (code or HERE).resolve()
    started = datetime.now(UTC)
    t0 = time.perf_counter()
    if pairs:
        cells, run_pairs = _pairs(spec, reps, pairs, where, label, progress)
    else:
        cells, run_pairs = _scenarios(spec, reps, where, label, progress), []
    first = next(iter(cells.values())).runs[0]
    return ContentionRun(
        model=label,
        started=started.strftime("%Y-%m-%d %H:%M UTC"),
        seconds=time.perf_counter() - t0,
        cpus=len(allowed_cpus()),
        physical_cores=physical_cores(),
        threads=settings.threads,
        cpu=cpu_name(),
        prompt_tokens=first["prompt_tokens"],
        max_tokens=spec["max_tokens"],
        reps=reps,
        command=command,
        cells=list(cells.values()),
        goals=_goals(cells, run_pairs),
        pairs=run_pairs,
        code="this" if code is None else str(where),
    )


Say = Callable[[str], None] | None


def _scenarios(
    spec: dict[str, Any], reps: int, code: Path, label: str, progress: Say
) -> dict[tuple[str, str], Cell]:
    cells = {(s, m): Cell(s, m) for s in SCENARIOS for m in MODES}
    for rep in range(reps):
        for scenario, (busy, procs) in SCENARIOS.items():
            for mode in MODES:
                if progress:
                    progress(f"{label}: {scenario}, {mode} threads, {rep + 1} of {reps}")
                runs = run_cell({**spec, "adaptive": mode == "adaptive"}, busy, procs, code)
                cells[scenario, mode].runs += runs
    for cell in cells.values():
        cell.summarize()
    for (_, mode), cell in cells.items():
        quiet = cells["quiet", mode]
        cell.prefill_ratio = cell.prefill_tok_s / quiet.prefill_tok_s
        cell.decode_ratio = cell.decode_tok_s / quiet.decode_tok_s
    return cells


def pair_schedule(reps: int, pairs: int) -> list[str]:
    """The order of the quiet runs and the pairs: the quiet ones spread among the pairs,
    so that a drift of the machine's load falls on both."""
    order = [PAIRS] * pairs
    for q in reversed(range(reps)):  # the q-th quiet run before pair ceil(q * pairs / reps)
        order.insert(min(pairs, -(-q * pairs // reps)), "quiet")
    return order


def _pairs(
    spec: dict[str, Any], reps: int, pairs: int, code: Path, label: str, progress: Say
) -> tuple[dict[tuple[str, str], Cell], list[Pair]]:
    adaptive = {**spec, "adaptive": True}
    quiet = Cell("quiet", "adaptive")
    done: list[Pair] = []
    for step in pair_schedule(reps, pairs):
        if progress:
            n, of = (len(done) + 1, pairs) if step == PAIRS else (len(quiet.runs) + 1, reps)
            progress(f"{label}: {step}, {n} of {of}")
        if step == PAIRS:
            done.append(Pair(run_cell(adaptive, 0, 2, code)))
        else:
            quiet.runs += run_cell(adaptive, 0, 1, code)
    quiet.summarize()
    quiet.prefill_ratio = quiet.decode_ratio = 1.0
    quiet_ms = statistics.median(r["prefill_ms"] + r["decode_ms"] for r in quiet.runs)
    for pair in done:
        pair.decode_ratios = [r["decode_tok_s"] / quiet.decode_tok_s for r in pair.runs]
        pair.total_ratios = [(r["prefill_ms"] + r["decode_ms"]) / quiet_ms for r in pair.runs]
    return {("quiet", "adaptive"): quiet}, done


def _goals(cells: dict[tuple[str, str], Cell], pairs: list[Pair]) -> list[Goal]:
    goals = []
    for scenario, phase, target in GOALS:
        if (scenario, "adaptive") in cells:
            ratio = getattr(cells[scenario, "adaptive"], f"{phase}_ratio")
            goals.append(Goal(scenario, phase, target, ratio, ratio >= target))
    if pairs:
        decode = min(r for p in pairs for r in p.decode_ratios)  # the worst process's
        total = max(r for p in pairs for r in p.total_ratios)
        goals.append(Goal(PAIRS, "decode", PAIR_DECODE_GOAL, decode, decode >= PAIR_DECODE_GOAL))
        goals.append(Goal(PAIRS, "total", PAIR_TOTAL_GOAL, total, total <= PAIR_TOTAL_GOAL, True))
    return goals


if __name__ == "__main__":  # one run, for run_cell: python -m ragcli.bench.busy_cpus SPEC
    figures = run_worker(json.loads(sys.argv[1]), sys.stdout, sys.stdin)
    print(json.dumps(figures), flush=True)
