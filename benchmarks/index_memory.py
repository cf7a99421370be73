"""Indexing memory by input size: a generated Markdown file of N MB, indexed from scratch
in a fresh process, its peak RSS (and, sampled, its RSS over the run) reported.

The text is made here, not copied: words drawn from a fixed made-up vocabulary with a
Zipf-like frequency, sentences of varied length, paragraphs under headings. The same
size and seed always give the same bytes, so runs on different days index the same
passages.

    python -m benchmarks.index_memory make 20 /tmp/20mb.md
    python -m benchmarks.index_memory index /tmp/20mb.md [/tmp/200mb.md ...]
    python -m benchmarks.index_memory random DOC INDEX STREAM_BYTES FLAT_MAX  (no model)
    python -m benchmarks.index_memory random-peaks STREAM_BYTES FLAT_MAX DOC [DOC ...]
"""

from __future__ import annotations

import bisect
import itertools
import json
import os
import random
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from ragcli.bench.fresh_process import run_measured

SEED = 29
VOCABULARY = 3000
_ONSETS = ["", "b", "br", "c", "ch", "d", "f", "g", "gr", "h", "k", "l", "m", "n", "p", "pr"]
_ONSETS += ["r", "s", "sh", "st", "t", "th", "tr", "v", "w", "z"]
_VOWELS = ["a", "e", "i", "o", "u", "ai", "ea", "io", "ou"]
_CODAS = ["", "", "n", "r", "s", "t", "l", "m", "nd", "st", "ck"]
_COMMON = """the of and to a in is that for it as with on by this be are from or at an which
not have has was were can will each one all their more when there other into only
also than then its time some these may use used data file files index search query
model text line lines page value values number order first new way part system list
set run runs result results change changes read write memory size small large long
short both same different between after before during under over where while because
error errors case cases test tests user users process work works point points without
within every most many much such how what why who make makes made take takes given
give state states start end table tables form field fields word words term terms
question answer answers source sources document documents record records batch
vector vectors store stored load loads build builds call calls input output server
client request response option options default path paths name names type types step
steps block blocks layer layers count counts rate rates level levels report reports
check checks market river city country people school water light power history
science music family health money house story world group company service""".split()


def vocabulary(n: int = VOCABULARY, seed: int = SEED) -> list[str]:
    """``n`` distinct made-up words of one to three syllables, the common ones first."""
    rng = random.Random(seed)
    words: list[str] = list(dict.fromkeys(_COMMON))
    rng.shuffle(words)  # real words spread over the frequency ranks
    seen = set(words)
    while len(words) < n:
        syllables = rng.choice((1, 1, 1, 2, 2, 3))
        word = "".join(
            rng.choice(_ONSETS) + rng.choice(_VOWELS) + rng.choice(_CODAS) for _ in range(syllables)
        )
        if word not in seen:
            seen.add(word)
            words.append(word)
    return words


def markdown_blocks(seed: int = SEED) -> Iterator[str]:
    """An endless document: headings, paragraphs of 2-9 sentences of 3-40 words, lists."""
    rng = random.Random(seed)
    words = vocabulary(seed=seed)
    weights = list(itertools.accumulate(1.0 / (rank + 1) for rank in range(len(words))))
    total = weights[-1]

    def word() -> str:
        return words[min(bisect.bisect(weights, rng.random() * total), len(words) - 1)]

    def sentence() -> str:
        n = max(3, min(40, int(rng.lognormvariate(2.6, 0.5))))
        text = " ".join(word() for _ in range(n))
        if n > 12 and rng.random() < 0.5:  # a clause
            cut = text.find(" ", len(text) // 2)
            text = text[:cut] + "," + text[cut:] if cut > 0 else text
        return text[0].upper() + text[1:] + rng.choice(".....?!")

    section = 0
    while True:
        section += 1
        yield f"# {sentence().rstrip('.?!').title()} {section}\n"
        for sub in range(rng.randint(2, 6)):
            yield f"## {section}.{sub + 1} {' '.join(word() for _ in range(rng.randint(2, 6)))}\n"
            for _ in range(rng.randint(1, 5)):
                if rng.random() < 0.15:
                    yield "\n".join(f"- {sentence()}" for _ in range(rng.randint(2, 6))) + "\n"
                else:
                    yield " ".join(sentence() for _ in range(rng.randint(2, 9))) + "\n"


def make_markdown(path: Path, size_mb: float, seed: int = SEED) -> Path:
    """Write ``size_mb`` MB (10**6 bytes, to the end of a block) of generated Markdown."""
    limit = int(size_mb * 1_000_000)
    written = 0
    with path.open("w", encoding="utf-8") as out:
        for block in markdown_blocks(seed):
            out.write(block + "\n")
            written += len(block) + 1
            if written >= limit:
                break
    return path


def _descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            children = Path(f"/proc/{p}/task/{p}/children").read_text().split()
        except OSError:
            continue
        out += [int(c) for c in children]
        todo += [int(c) for c in children]
    return out


def _rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def measure_index(
    doc: Path,
    index: Path,
    extra: list[str] = (),
    env: dict[str, str] | None = None,
    every: float = 5.0,
) -> dict:
    """Index ``doc`` into a fresh ``index`` in a fresh process: its peak RSS (MB), the
    passages stored and the largest RSS seen at each ``every`` seconds of the run."""  # fmt: skip
    import sqlite3

    args = [sys.executable, "-m", "ragcli", "index", str(doc), "--index", str(index), "-q"]
    args += ["--rebuild", *extra]
    samples: list[tuple[float, float]] = []
    done = threading.Event()

    def sample() -> None:
        me, t0 = os.getpid(), time.monotonic()
        while not done.wait(every):
            kids = _descendants(me)
            if kids:
                samples.append((round(time.monotonic() - t0), max(map(_rss_mb, kids))))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        _wall, peak, _out = run_measured(args, dict(env or os.environ))
    finally:
        done.set()
    with sqlite3.connect(index / "index.sqlite") as db:
        passages = db.execute("SELECT count(*) FROM chunks").fetchone()[0]
    return {
        "file": str(doc),
        "mb": round(doc.stat().st_size / 1e6, 1),
        "passages": passages,
        "peak_mb": round(peak),
        "vectors_mb": round(passages * 384 * 4 / 2**20),
        "rss": samples,
    }


class RandomEmbedder:
    """Unit vectors from a seeded generator, at no cost: what the store and the pipeline
    around the model hold is measured without the model's own memory and time."""

    backend, quantization, loaded = "onnx", "fp32", True

    def __init__(self, dim: int = 384) -> None:
        import numpy as np

        from ragcli.models import EmbeddingModelInfo

        self.info = EmbeddingModelInfo(name="random", path=Path("."), dim=dim)
        self.rng = np.random.default_rng(SEED)

    def embed(self, texts: list[str], progress=None):
        import numpy as np

        vectors = self.rng.standard_normal((len(texts), self.info.dim), dtype=np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        if progress:
            progress(len(texts))
        return vectors


def index_random(doc: Path, index: Path, stream_bytes: int, flat_max: int) -> int:
    """Index ``doc`` with :class:`RandomEmbedder` (IVF from ``flat_max`` passages on);
    run in a fresh process to measure the pipeline's and the store's peak RSS."""
    from ragcli.config import Settings
    from ragcli.index.pipeline import build_index
    from ragcli.stores import faiss_index

    faiss_index.FLAT_MAX = flat_max
    settings = Settings(index_dir=index)
    report = build_index(
        [doc], settings, rebuild=True, embedder=RandomEmbedder(), stream_bytes=stream_bytes
    )
    return report.chunks_embedded


def measure_random(doc: Path, stream_bytes: int, flat_max: int) -> dict:
    """Peak RSS (MB) and passages of :func:`index_random` on ``doc``, in a fresh process
    and a fresh index."""
    with tempfile.TemporaryDirectory(prefix="rag-mem-") as tmp:
        args = [sys.executable, "-m", "benchmarks.index_memory", "random", str(doc), f"{tmp}/idx"]
        _, peak, out = run_measured([*args, str(stream_bytes), str(flat_max)], dict(os.environ))
    return {
        "file": str(doc),
        "mb": round(doc.stat().st_size / 1e6, 1),
        "passages": int(out.strip()),
        "peak_mb": round(peak),
    }


def main(argv: list[str]) -> int:
    if len(argv) == 3 and argv[0] == "make":
        make_markdown(Path(argv[2]), float(argv[1]))
        return 0
    if len(argv) == 5 and argv[0] == "random":  # DOC INDEX STREAM_BYTES FLAT_MAX
        print(index_random(Path(argv[1]), Path(argv[2]), int(argv[3]), int(argv[4])))
        return 0
    if len(argv) >= 4 and argv[0] == "random-peaks":  # STREAM_BYTES FLAT_MAX DOC...
        for doc in argv[3:]:
            print(json.dumps(measure_random(Path(doc), int(argv[1]), int(argv[2]))), flush=True)
        return 0
    if len(argv) >= 2 and argv[0] == "index":
        for doc in argv[1:]:
            with tempfile.TemporaryDirectory(prefix="rag-mem-") as tmp:
                print(json.dumps(measure_index(Path(doc), Path(tmp) / "idx")), flush=True)
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
