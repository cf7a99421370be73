"""`rag bench serve`: what a resident `rag serve` saves against a fresh `rag ask` process,
and how it holds up under concurrent clients, measured side by side in one run.

A server is started for the run on its own socket and its own (empty) prompt cache, so
nothing a user's server or earlier runs left behind takes part. Then:

1. the first answerable question in cold fresh processes (`--no-server --no-cache`) and
   through the server once it has been asked there (its prompt prefix in the server's
   memory); time to first token, medians;
2. new questions in fresh processes (prompt cache on, as users run) and through the
   server: the time to first token outside prefill, i.e. start-up and retrieval;
3. fresh `rag ask --json` client processes whose question the server answers from its
   cache: wall time from exec to exit and peak RSS;
4. clients at once, each asking its list (new, repeated, reworded and unanswerable
   questions) one after another: latency percentiles, throughput, and every reply compared
   with the answer the same question gets alone afterwards, one at a time, from a second
   server with no prompt or answer cache (the model reading each prompt whole). A reworded
   question that the answer cache served another wording's answer counts as right when that
   answer is what the other wording gets alone: that reuse is the cache's purpose.
"""

from __future__ import annotations

import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from ..answer.evaluation import load_questions
from ..config import Settings
from ..errors import RagError, UsageError
from ..server.client import Client, ServerError
from ..server.locate import Endpoint
from .fresh_process import run_measured

START_TIMEOUT_S = 600


@dataclass
class LoadReport:
    clients: int
    per_client: int
    requests: int
    ok: int
    lost: int  # no answer: an error or a refusal
    wrong: int  # an answer other than the same question's when asked alone (see below)
    p50_ms: float
    p99_ms: float
    wall_s: float
    throughput_qps: float
    kinds: dict[str, int] = field(default_factory=dict)  # new, repeated, reworded, unanswerable
    cache_sources: dict[str, int] = field(default_factory=dict)
    mismatches: list[dict] = field(default_factory=list)
    # right because the answer cache served the answer another wording gets alone
    from_answer_cache: int = 0


@dataclass
class ServeReport:
    model: str
    index: str
    runs: int
    loadavg_start: str
    loadavg_end: str = ""
    # 1. repeated question
    cold_process_ttft_ms: float = 0.0
    served_repeat_ttft_ms: float = 0.0  # the server's own figure: question in to first token
    served_repeat_roundtrip_ms: float = 0.0  # request sent to whole answer back, client side
    repeat_ratio: float = 0.0  # served_repeat_ttft_ms / cold_process_ttft_ms
    repeat_cache_source: str = ""
    # 2. new questions
    fresh_new_ttft_outside_prefill_ms: float = 0.0
    served_new_ttft_outside_prefill_ms: float = 0.0
    startup_saved_ms: float = 0.0
    # 3. client process
    client_wall_ms: float = 0.0
    client_peak_rss_mb: float = 0.0
    client_server_total_ms: float = 0.0  # of that wall, the server's own answer time
    client_overhead_ms: float = 0.0  # wall minus the server's answer time
    load: LoadReport | None = None


def _loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "n/a"


def reworded(question: str) -> str:
    """A light rewording: the same question after "Tell me, " (not a true paraphrase)."""
    return f"Tell me, {question[0].lower()}{question[1:]}"


@contextmanager
def bench_server(
    settings: Settings,
    workdir: Path,
    env: dict[str, str],
    queue: int,
    name: str = "bench",
    flags: tuple[str, ...] = (),
    cwd: Path | None = None,
) -> Iterator[Endpoint]:
    """`rag serve` in a new process on a socket of its own; stopped with SIGTERM after.
    ``cwd``: where `python -m ragcli` finds the code to run."""
    sock = workdir / f"{name}.sock"
    log = workdir / f"{name}.log"
    cmd = [sys.executable, "-m", "ragcli", "serve", "--index", str(settings.index_dir)]
    cmd += ["--socket", str(sock), "--queue", str(queue), *flags]
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=cwd)
    endpoint = Endpoint(unix=sock)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                tail = log.read_text(errors="replace")[-1000:]
                raise RagError(f"rag serve exited with {proc.returncode}: {tail}")
            if sock.exists():
                try:
                    with Client(endpoint) as c:
                        if c.call("GET", "/health", timeout=5)[0] == 200:
                            break
                except ServerError:
                    pass
            if time.monotonic() > deadline:
                raise RagError(f"rag serve not ready after {START_TIMEOUT_S} s")
            time.sleep(0.2)
        yield endpoint
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _ask_args(question: str, index: Path, *flags: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "ragcli",
        "ask",
        "--json",
        *flags,
        "--index",
        str(index),
        question,
    ]


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def client_lists(
    answerable: list[str], unanswerable: list[str], clients: int, per_client: int, seed: int = 0
) -> list[list[tuple[str, str]]]:
    """Each client's (kind, question) list: its own new questions, reworded ones, the
    unanswerable ones, and repeats of what it or others asked, in a shuffled order."""
    rng = random.Random(seed)
    own = max(1, len(answerable) // clients)
    lists = []
    for c in range(clients):
        mine = answerable[c * own : (c + 1) * own] or answerable[:1]
        items = [("new", q) for q in mine]
        items += [("reworded", reworded(q)) for q in mine[:2]]
        items += [("unanswerable", q) for q in unanswerable[:2]]
        while len(items) < per_client:
            items.append(("repeated", rng.choice(answerable[: (c + 1) * own])))
        rng.shuffle(items)
        lists.append(items[:per_client])
    return lists


def _run_load(endpoint: Endpoint, lists: list[list[tuple[str, str]]]) -> tuple[list[dict], float]:
    """Every client on its own thread and connection; returns one record per request."""
    records: list[dict] = []
    lock = threading.Lock()

    def client(items: list[tuple[str, str]]) -> None:
        with Client(endpoint) as c:
            for kind, q in items:
                t0 = time.perf_counter()
                try:
                    out, error = c.ask(q), None
                except RagError as exc:
                    out, error = None, str(exc)
                ms = (time.perf_counter() - t0) * 1000
                with lock:
                    records.append(
                        {"kind": kind, "question": q, "ms": ms, "out": out, "error": error}
                    )

    threads = [threading.Thread(target=client, args=(items,)) for items in lists]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return records, time.perf_counter() - t0


def serve_bench(
    settings: Settings,
    questions: Path,
    runs: int = 3,
    clients: int = 4,
    per_client: int = 25,
    progress: Callable[[str], None] | None = None,
) -> ServeReport:
    """The four measurements of the module docstring, in one run."""
    say = progress or (lambda _msg: None)
    items = load_questions(questions)
    answerable = [i.question for i in items if i.answerable]
    unanswerable = [i.question for i in items if not i.answerable]
    if len(answerable) < 2 * runs + 2 or not unanswerable:
        raise UsageError(f"{questions}: needs {2 * runs + 2} answerable and 1 unanswerable")
    first, fresh_new = answerable[0], answerable[1 : 1 + runs]
    served_new = answerable[1 + runs : 1 + 2 * runs]
    pool = answerable[1 + 2 * runs :]
    if len(pool) < clients:
        raise UsageError(f"{questions}: too few questions for {clients} clients")
    index = settings.index_dir.resolve()
    report = ServeReport(model="", index=str(index), runs=runs, loadavg_start=_loadavg())
    with tempfile.TemporaryDirectory(prefix="rag-bench-serve-") as tmp:
        work = Path(tmp)
        cache = work / "cache"  # an empty prompt cache, models shared
        cache.mkdir()
        (cache / "models").symlink_to(settings.cache_dir / "models")
        env = {**os.environ, "RAG_CACHE_DIR": str(cache)}
        if settings.model:  # the server and every fresh process run the model asked for
            env["RAG_MODEL"] = settings.model
        env.pop("RAG_SERVER", None)
        med = statistics.median

        say("cold fresh processes")
        cold = []
        for _ in range(runs):
            _, _, out = run_measured(
                _ask_args(first, index, "--profile", "--no-cache", "--no-server"), env
            )
            cold.append(json.loads(out)["profile"]["process_ttft_ms"])
        report.cold_process_ttft_ms = round(med(cold), 1)

        say("new questions in fresh processes")
        outside = []
        for q in fresh_new:
            _, _, out = run_measured(_ask_args(q, index, "--profile", "--no-server"), env)
            prof = json.loads(out)["profile"]
            if "ttft_outside_prefill_ms" in prof:
                outside.append(prof["ttft_outside_prefill_ms"])
        report.fresh_new_ttft_outside_prefill_ms = round(med(outside), 1) if outside else 0.0

        say("starting rag serve")
        with bench_server(settings, work, env, queue=max(16, clients)) as endpoint:
            with Client(endpoint) as c:
                report.model = c.checked("GET", "/health")["model"]
                say("repeated question through the server")
                c.ask(first)  # its prefix now in the server's memory
                ttft, trip, sources = [], [], []
                for _ in range(runs):
                    t0 = time.perf_counter()
                    out = c.ask(first)
                    trip.append((time.perf_counter() - t0) * 1000)
                    ttft.append(out["timings"]["ttft_ms"])
                    sources.append(out["timings"]["cache_source"])
                report.served_repeat_ttft_ms = round(med(ttft), 1)
                report.served_repeat_roundtrip_ms = round(med(trip), 1)
                report.repeat_ratio = round(med(ttft) / med(cold), 4)
                report.repeat_cache_source = ",".join(sorted(set(sources)))

                say("new questions through the server")
                outside = []
                for q in served_new:
                    t = c.ask(q)["timings"]
                    if t["prompt_tokens"]:
                        outside.append(t["ttft_ms"] - t["prefill_ms"])
                report.served_new_ttft_outside_prefill_ms = (
                    round(med(outside), 1) if outside else 0.0
                )
                report.startup_saved_ms = round(
                    report.fresh_new_ttft_outside_prefill_ms
                    - report.served_new_ttft_outside_prefill_ms,
                    1,
                )

            say("client processes")
            client_env = {**env, "RAG_SERVER": str(endpoint.unix)}
            walls, rss, server_ms = [], [], []
            for _ in range(max(runs, 5)):
                wall, peak, out = run_measured(_ask_args(first, index), client_env)
                walls.append(wall)
                rss.append(peak)
                server_ms.append(json.loads(out)["timings"]["total_ms"])
            report.client_wall_ms = round(med(walls), 1)
            report.client_peak_rss_mb = round(med(rss), 1)
            report.client_server_total_ms = round(med(server_ms), 1)
            report.client_overhead_ms = round(
                med([w - s for w, s in zip(walls, server_ms, strict=True)]), 1
            )

            say(f"{clients} clients x {per_client} questions")
            lists = client_lists(pool, unanswerable, clients, per_client)
            records, wall_s = _run_load(endpoint, lists)
        say("the same questions one at a time, no caches")
        alone: dict[str, dict] = {}
        with (
            bench_server(settings, work, env, 2, "reference", ("--no-cache",)) as reference,
            Client(reference) as c,
        ):
            for q in dict.fromkeys(r["question"] for r in records):
                alone[q] = c.ask(q)
        report.load = _load_report(records, alone, clients, per_client, wall_s)
    report.loadavg_end = _loadavg()
    return report


def _load_report(
    records: list[dict], alone: dict[str, dict], clients: int, per_client: int, wall_s: float
) -> LoadReport:
    ok = [r for r in records if r["out"] is not None]
    mismatches = []
    reused = 0

    def same(out: dict, ref: dict | None) -> bool:
        return ref is not None and (out["answer"], out["answered"]) == (
            ref["answer"],
            ref["answered"],
        )

    for r in ok:
        out, ref = r["out"], alone[r["question"]]
        if same(out, ref):
            continue
        if out["timings"].get("cache_source") == "answer" and same(
            out, alone.get(out.get("cached_question") or "")
        ):
            reused += 1
            continue
        mismatches.append(
            {"question": r["question"], "loaded": out["answer"], "alone": ref["answer"]}
        )
    ms = [r["ms"] for r in ok] or [0.0]
    kinds: dict[str, int] = {}
    sources: dict[str, int] = {}
    for r in records:
        kinds[r["kind"]] = kinds.get(r["kind"], 0) + 1
    for r in ok:
        s = r["out"]["timings"]["cache_source"]
        sources[s] = sources.get(s, 0) + 1
    return LoadReport(
        clients=clients,
        per_client=per_client,
        requests=len(records),
        ok=len(ok),
        lost=len(records) - len(ok),
        wrong=len(mismatches),
        from_answer_cache=reused,
        p50_ms=round(_pct(ms, 0.5), 1),
        p99_ms=round(_pct(ms, 0.99), 1),
        wall_s=round(wall_s, 1),
        throughput_qps=round(len(ok) / wall_s, 3) if wall_s else 0.0,
        kinds=kinds,
        cache_sources=sources,
        mismatches=mismatches,
    )
