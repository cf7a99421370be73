"""`python -m benchmarks semcache`: calibrate the answer cache's threshold, then check it with the model.

A question set (``rag eval`` JSONL) comes with a variant file of the same ids: true
paraphrases of each question, and near-misses, questions about the same page that ask
something else. A variant would be served the cached answer of its question when the two
retrieve the same passages and their vectors' cosine reaches the threshold; for a
near-miss that is a wrong hit. The sweep needs retrieval only (no model), so every
threshold is measured on the whole set. The workload run then asks the set and its
variants with the model, without the answer cache and with it, and compares the answers.
"""

from __future__ import annotations

import json
import statistics
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Annotated

import typer

from ragcli import Answer, Rag
from ragcli.answer.answer_cache import SIMILARITY_SLACK, unit
from ragcli.answer.evaluation import QAItem, is_correct
from ragcli.answer.question import Question
from ragcli.cli.bench.common import QuestionSetArg, exit_on_mismatch, status_line
from ragcli.cli.failures import handle_errors
from ragcli.cli.options import IndexOpt, JsonOpt, ModelOpt, QuietOpt, settings
from ragcli.cli.output import print_json, stdout_console
from ragcli.config import Settings
from ragcli.errors import UsageError

from .prefix_cache_workload import cache_dir_for_pass

SETS = Path(__file__).parent / "sets"  # the paraphrase and near-miss files
KINDS = ("paraphrase", "near_miss")
THRESHOLDS = tuple(round(0.70 + 0.01 * i, 2) for i in range(31))  # 0.70 ... 1.00
MAX_WRONG_HIT_RATE = 0.01  # the bound: rarer than 1 in 100


@dataclass(frozen=True)
class Variant:
    ref: str  # the id of the question it rewords or departs from
    kind: str  # paraphrase | near_miss
    question: str


def load_variants(path: Path, ids: set[str]) -> list[Variant]:
    """The variant file, checked line by line against the question set's ids."""
    out = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read {path}: {exc}") from None
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            v = Variant(str(row["ref"]), str(row["kind"]), str(row["question"]).strip())
        except (ValueError, KeyError, TypeError):
            raise UsageError(f"{path}:{n}: not a JSON object with ref, kind, question") from None
        if v.kind not in KINDS or not v.question:
            raise UsageError(f"{path}:{n}: kind must be paraphrase or near_miss, with a question")
        if v.ref not in ids:
            raise UsageError(f"{path}:{n}: no question with id {v.ref!r} in the question set")
        out.append(v)
    return out


@dataclass(frozen=True)
class Pair:
    """A variant against its question: what the cache would see."""

    ref: str
    kind: str
    question: str
    original: str
    similarity: float
    same_passages: bool
    same_numbers: bool

    @property
    def eligible(self) -> bool:
        """Everything but the similarity allows the cached answer."""
        return self.same_passages and self.same_numbers


def measure_pairs(
    settings: Settings,
    items: list[QAItem],
    variants: list[Variant],
    progress: Callable[[str], None] | None = None,
) -> list[Pair]:
    """Retrieve every question and variant once; cosine and passage identity of each pair."""
    by_id = {i.id: i for i in items}
    with Rag(settings, preload=False) as rag:

        def look(q: str):
            found = rag.search(q)
            return unit(found.vector), {h.chunk.id for h in found.hits}

        seen = {}
        pairs = []
        for n, v in enumerate(variants, 1):
            if progress:
                progress(f"retrieving variant {n}/{len(variants)}")
            original = by_id[v.ref].question
            if original not in seen:
                seen[original] = look(original)
            qv, qids = seen[original]
            vv, vids = look(v.question)
            pairs.append(
                Pair(
                    v.ref,
                    v.kind,
                    v.question,
                    original,
                    float(qv @ vv),
                    qids == vids,
                    Question.parse(original).numbers == Question.parse(v.question).numbers,
                )
            )
    return pairs


@dataclass(frozen=True)
class SweepRow:
    threshold: float
    paraphrases: int
    paraphrase_hits: int
    hit_rate: float
    near_misses: int
    wrong_hits: int
    wrong_hit_rate: float


def sweep(pairs: list[Pair], thresholds: tuple[float, ...] = THRESHOLDS) -> list[SweepRow]:
    para = [p for p in pairs if p.kind == "paraphrase"]
    near = [p for p in pairs if p.kind == "near_miss"]
    rows = []
    for t in thresholds:
        floor = t - SIMILARITY_SLACK  # as the cache compares

        hits = sum(p.eligible and p.similarity >= floor for p in para)
        wrong = sum(p.eligible and p.similarity >= floor for p in near)
        rows.append(
            SweepRow(
                t,
                len(para),
                hits,
                round(hits / len(para), 4) if para else 0.0,
                len(near),
                wrong,
                round(wrong / len(near), 4) if near else 0.0,
            )
        )
    return rows


def pick_threshold(rows: list[SweepRow]) -> float:
    """The lowest threshold whose wrong hits stay below the bound (and at every higher one)."""
    ok = [r.threshold for r in rows if r.wrong_hit_rate < MAX_WRONG_HIT_RATE]
    best = rows[-1].threshold
    for r in reversed(rows):
        if r.threshold not in ok:
            break
        best = r.threshold
    return best


@dataclass
class PairSummary:
    """What the threshold sweep found, for one question set."""

    questions: int
    paraphrases: int
    near_misses: int
    paraphrases_same_passages: float  # share of paraphrases that retrieve the same passages
    near_misses_same_passages: float
    paraphrase_similarity_median: float
    near_miss_similarity_median: float
    # the most similar near-miss that retrieves the same passages and names the same numbers
    # (what the threshold must beat)
    near_miss_eligible_max: float | None
    threshold: float
    rows: list[SweepRow] = field(default_factory=list)
    closest: list[Pair] = field(default_factory=list)  # near-misses nearest the threshold


def summarize_pairs(pairs: list[Pair], questions: int) -> PairSummary:
    para = [p for p in pairs if p.kind == "paraphrase"]
    near = [p for p in pairs if p.kind == "near_miss"]
    rows = sweep(pairs)
    risky = sorted((p for p in near if p.eligible), key=lambda p: -p.similarity)
    return PairSummary(
        questions=questions,
        paraphrases=len(para),
        near_misses=len(near),
        paraphrases_same_passages=round(sum(p.same_passages for p in para) / len(para), 4),
        near_misses_same_passages=round(sum(p.same_passages for p in near) / len(near), 4),
        paraphrase_similarity_median=round(statistics.median(p.similarity for p in para), 4),
        near_miss_similarity_median=round(statistics.median(p.similarity for p in near), 4),
        near_miss_eligible_max=round(risky[0].similarity, 4) if risky else None,
        threshold=pick_threshold(rows),
        rows=rows,
        closest=risky[:3],
    )


# -- the workload, with the model ---------------------------------------------


@dataclass
class WorkloadSummary:
    """The question set and its variants asked without and with the answer cache."""

    model: str
    threshold: float
    asked: int  # questions in the cached pass: originals, variants, originals again
    identical: int  # answers equal to the uncached run's answer for the same question
    model_runs_identical: str  # of the answers the model made in the cached pass: "n/m"
    repeats_served: str  # originals asked again, served from the cache: "n/m" of cacheable
    repeats_identical: str
    paraphrases_served: str
    paraphrases_identical: str  # served paraphrases whose answer equals their uncached one
    paraphrase_correct_uncached: str  # of the served paraphrases, right without the cache
    paraphrase_correct_served: str  # ... and right as served from the cache
    wrong_hits: str  # near-misses served a cached answer
    wall_uncached_s: float
    wall_cached_s: float
    consistent: bool  # repeats and the model's own answers all equal the uncached run's
    served: list[dict] = field(default_factory=list)  # every answer served from the cache


def _fraction(n: int, m: int) -> str:
    return f"{n}/{m}"


def run_workload(
    settings: Settings,
    items: list[QAItem],
    variants: list[Variant],
    threshold: float,
    progress: Callable[[str], None] | None = None,
) -> WorkloadSummary:
    """Ask every question and variant without the answer cache, then with a fresh one.

    The prompt (KV) cache stays off in both passes: a reused prefix can shift llama.cpp's
    arithmetic enough to flip a close token, and then the comparison would measure that."""
    import time

    by_id = {i.id: i for i in items}
    sequence = [(i.id, "original", i.question) for i in items]
    sequence += [(v.ref, v.kind, v.question) for v in variants]
    with tempfile.TemporaryDirectory(prefix="rag-semcache-") as tmp:
        cache_dir = cache_dir_for_pass(Path(tmp), "cache", settings.cache_dir)
        base = settings.replace(
            cache_dir=cache_dir, answer_cache_threshold=threshold, use_cache=False
        )
        uncached: dict[str, Answer] = {}
        t0 = time.perf_counter()
        with Rag(base.replace(answer_cache=False)) as rag:
            for n, (_, _, q) in enumerate(sequence, 1):
                if progress:
                    progress(f"without the answer cache {n}/{len(sequence)}")
                uncached[q] = rag.ask(q)
        wall_uncached = time.perf_counter() - t0
        t0 = time.perf_counter()
        cached: list[tuple[str, str, str, Answer]] = []
        again = [(ref, "repeat", q) for ref, _, q in sequence[: len(items)]]
        with Rag(base.replace(answer_cache=True)) as rag:
            for n, (ref, kind, q) in enumerate(sequence + again, 1):
                if progress:
                    progress(f"with the answer cache {n}/{len(sequence) + len(again)}")
                cached.append((ref, kind, q, rag.ask(q)))
        wall_cached = time.perf_counter() - t0
        model = next(iter(uncached.values())).model if uncached else ""

    def same(q: str, a: Answer) -> bool:
        return a.answer == uncached[q].answer

    def served(a: Answer) -> bool:
        return a.timings.cache_source == "answer"

    model_runs = [(q, a) for _, _, q, a in cached if not served(a) and a.timings.prompt_tokens]
    repeats = [(q, a) for _, kind, q, a in cached if kind == "repeat"]
    cacheable = [(q, a) for q, a in repeats if uncached[q].reason != "no_relevant_passages"]
    paras = [(r, q, a) for r, kind, q, a in cached if kind == "paraphrase" and served(a)]
    n_para = sum(v.kind == "paraphrase" for v in variants)
    near = [(q, a) for _, kind, q, a in cached if kind == "near_miss"]
    return WorkloadSummary(
        model=model,
        threshold=threshold,
        asked=len(cached),
        identical=sum(same(q, a) for _, _, q, a in cached),
        model_runs_identical=_fraction(sum(same(q, a) for q, a in model_runs), len(model_runs)),
        repeats_served=_fraction(sum(served(a) for _, a in cacheable), len(cacheable)),
        repeats_identical=_fraction(sum(same(q, a) for q, a in repeats), len(repeats)),
        paraphrases_served=_fraction(len(paras), n_para),
        paraphrases_identical=_fraction(sum(same(q, a) for _, q, a in paras), len(paras)),
        paraphrase_correct_uncached=_fraction(
            sum(is_correct(by_id[r], uncached[q]) for r, q, _ in paras), len(paras)
        ),
        paraphrase_correct_served=_fraction(
            sum(is_correct(by_id[r], a) for r, _, a in paras), len(paras)
        ),
        wrong_hits=_fraction(sum(served(a) for _, a in near), len(near)),
        wall_uncached_s=round(wall_uncached, 1),
        wall_cached_s=round(wall_cached, 1),
        consistent=all(same(q, a) for q, a in model_runs + repeats),
        served=[
            {
                "ref": r,
                "kind": kind,
                "question": q,
                "cached_question": a.cached_question,
                "similarity": a.cache_similarity,
                "answer": a.answer,
                "uncached_answer": uncached[q].answer,
            }
            for r, kind, q, a in cached
            if served(a) and kind != "repeat"
        ],
    )


def as_dict(pairs: PairSummary, workload: WorkloadSummary | None = None) -> dict:
    return {"pairs": asdict(pairs), "workload": asdict(workload) if workload else None}


@handle_errors
def semcache_command(
    questions: QuestionSetArg,
    variants: Annotated[
        Path,
        typer.Argument(
            help="Paraphrases and near-misses of those questions (JSONL: ref, kind, question); "
            "ragcli ships ragcli/bench/data/pydocs-paraphrases.jsonl and demo-paraphrases.jsonl."
        ),
    ],
    index: IndexOpt = None,
    model: ModelOpt = None,
    with_model: Annotated[
        bool,
        typer.Option(
            "--with-model",
            help="Also ask everything with the model, without and with the answer cache.",
        ),
    ] = False,
    threshold: Annotated[
        float | None,
        typer.Option(
            "--threshold",
            min=0.0,
            max=1.0,
            help="Threshold of the model run (default: the setting answer_cache_threshold).",
            show_default=False,
        ),
    ] = None,
    limit: Annotated[
        int | None,
        typer.Option(
            "--limit",
            min=1,
            help="Only the first N questions (and their variants).",
            show_default=False,
        ),
    ] = None,
    json_out: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Hit rate on paraphrases and wrong-hit rate on near-misses by threshold; picks one."""
    from ragcli.answer.evaluation import load_questions

    items = load_questions(questions)
    vs = load_variants(variants, {i.id for i in items})
    if limit is not None:
        items = items[:limit]
        vs = [v for v in vs if v.ref in {i.id for i in items}]
    s = settings(index_dir=index, model=model)
    with status_line(json_out, quiet) as say:
        pairs = summarize_pairs(measure_pairs(s, items, vs, progress=say), len(items))
        work = None
        if with_model:
            t = threshold if threshold is not None else s.answer_cache_threshold
            work = run_workload(s, items, vs, t, progress=say)
    bad = work is not None and not work.consistent  # the cache changed an answer: a bug
    if json_out:
        print_json(as_dict(pairs, work))
        exit_on_mismatch(int(bad))
        return
    from rich.table import Table

    out = stdout_console()
    table = Table(
        "threshold",
        "paraphrase hits",
        "hit rate",
        "near-miss hits",
        "wrong-hit rate",
        title=f"{len(items)} questions, {pairs.paraphrases} paraphrases, "
        f"{pairs.near_misses} near-misses (hit: same passages and numbers, cosine >= threshold)",
    )
    for r in pairs.rows:
        mark = " <-" if r.threshold == pairs.threshold else ""
        table.add_row(
            f"{r.threshold:.2f}{mark}",
            f"{r.paraphrase_hits}/{r.paraphrases}",
            f"{r.hit_rate:.3f}",
            f"{r.wrong_hits}/{r.near_misses}",
            f"{r.wrong_hit_rate:.3f}",
        )
    out.print(table)
    out.print(
        f"same passages: {pairs.paraphrases_same_passages:.0%} of paraphrases, "
        f"{pairs.near_misses_same_passages:.0%} of near-misses; median cosine "
        f"{pairs.paraphrase_similarity_median:.3f} / {pairs.near_miss_similarity_median:.3f}; "
        f"closest near-miss with the same passages and numbers: {pairs.near_miss_eligible_max}"
    )
    out.print(
        f"picked threshold (lowest with wrong-hit rate < {MAX_WRONG_HIT_RATE}): {pairs.threshold}"
    )
    if work is not None:
        out.print(
            f"with {work.model} at threshold {work.threshold}: {work.asked} questions asked, "
            f"{work.identical} answers identical to the uncached run; model runs identical "
            f"{work.model_runs_identical}; repeats served {work.repeats_served} (identical "
            f"{work.repeats_identical}); paraphrases served {work.paraphrases_served} (identical "
            f"{work.paraphrases_identical}, right {work.paraphrase_correct_served} served vs "
            f"{work.paraphrase_correct_uncached} uncached); wrong hits {work.wrong_hits}"
        )
    exit_on_mismatch(int(bad))
