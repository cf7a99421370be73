"""Where the commands write, written once for the in-process and the served paths: JSON
lines and text on stdout, the error line and the timing line on stderr, rich tables.

An answer printed in-process and one a server sent are the same dicts through the same
functions, so the two ways give the same bytes. Standard library only at import (rich is
imported by the functions that draw with it): the served path (:mod:`.via_server`) prints
through this module before any framework is loaded.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from ..citations import citation

UNLIMITED_WIDTH = 1 << 16  # columns: wider than any line a command prints


def print_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def error_line(message: str) -> None:
    """A failure as the one stderr line every command writes."""
    sys.stderr.write(f"rag: error: {message}\n")
    sys.stderr.flush()


def warning_line(message: str) -> None:
    sys.stderr.write(f"rag: warning: {message}\n")


def print_timing(answer: dict[str, Any]) -> None:
    """The figures under an answer, on stderr."""
    line = timing_line(answer["timings"], answer["reason"], answer.get("cache_similarity"))
    sys.stderr.write(line + "\n")


def print_answer(answer: dict[str, Any]) -> None:
    """An answer as `rag ask` prints it when it does not stream; figures on stderr."""
    sys.stdout.write(answer_text(answer))
    sys.stdout.flush()
    print_timing(answer)


def print_search(result: dict[str, Any]) -> None:
    sys.stdout.write(search_text(result))
    sys.stdout.flush()


def stderr_console():
    from rich.console import Console

    return Console(stderr=True, highlight=False)


def stdout_console():
    """Rich output on stdout. Piped or redirected it is as wide as its longest line: rich
    would otherwise fold tables to 80 columns and cut values short with "…"."""
    from rich.console import Console

    console = Console(highlight=False)
    if not console.is_terminal:
        console = Console(highlight=False, width=UNLIMITED_WIDTH)
    return console


def display_path(path: str | Path) -> str:
    """A path relative to the working folder when it lies below it."""
    p = Path(path)
    try:
        return str(p.relative_to(Path.cwd()))
    except ValueError:
        return str(p)


def marks(answer: dict[str, Any]) -> str:
    """`` [1] [3]``: the numbers of the sources that hold the answer."""
    return "".join(f" [{rank}]" for rank in answer["cited"])


def source_lines(answer: dict[str, Any]) -> str:
    return "".join(
        f"[{s['rank']}] {display_path(citation(s))}  similarity {s['similarity']:.2f}\n"
        for s in answer["sources"]
    )


def evidence_lines(answer: dict[str, Any]) -> str:
    """Under the answer, the sentences it was copied from, each at its file line."""
    by_rank = {s["rank"]: s for s in answer["sources"]}
    out = []
    for e in answer.get("evidence") or ():
        src = by_rank.get(e["rank"])
        if src is None:
            continue
        where = f"{src['path']}:{e['line']}" if e.get("line") else citation(src)
        text = e["text"] if len(e["text"]) <= 200 else e["text"][:199] + "…"
        out.append(f"  [{e['rank']}] {display_path(where)}: {text}\n")
    return "".join(out)


def answer_text(answer: dict[str, Any]) -> str:
    """What `rag ask` prints on stdout when it does not stream: answer, marks, the
    sentences it came from, sources."""
    return answer["answer"] + marks(answer) + "\n" + evidence_lines(answer) + source_lines(answer)


def timing_line(t: dict[str, Any], reason: str, cache_similarity: float | None = None) -> str:
    """The stderr line of figures under an answer (``timings`` of the JSON)."""
    if t.get("cache_source") == "answer":
        retrieval = t["embed_ms"] + t["search_ms"]
        return (
            f"no model call (answer cache, question similarity {cache_similarity or 0:.3f}); "
            f"retrieval {retrieval:.0f} ms · total {t['total_ms']:.0f} ms"
        )
    if not t["prompt_tokens"]:
        retrieval = t["embed_ms"] + t["search_ms"]
        return f"no model call ({reason.replace('_', ' ')}); retrieval {retrieval:.0f} ms"
    reading = t.get("reading_tokens", 0)
    read = f", {reading} from the reading cache" if reading else ""
    head = (
        f"prompt {t['prompt_tokens']} tok ({t['cached_tokens']} cached, {t['cache_source']}"
        f"{read}) · prefill {t['prefill_tokens']} tok in {t['prefill_ms']:.0f} ms "
        f"({t['prefill_tok_s']:.0f} tok/s)"
    )
    if t.get("reread_ms"):  # the answer read apart was too close to call (reading_margin)
        head += f" · read apart {t['reread_ms']:.0f} ms, then whole"
    if t.get("keep_tokens"):  # read whole, its sentences then kept for later questions
        head += f" · {t['keep_tokens']} tok kept in the reading cache in {t['keep_ms']:.0f} ms"
    if t["cache_source"] == "unknown":  # an LLM server that reports neither
        head = f"prompt {t['prompt_tokens']} tok (server reports no cache or prefill figures)"
    return head + (
        f" · first token {t['ttft_ms']:.0f} ms · {t['completion_tokens']} tok at "
        f"{t['decode_tok_s']:.1f} tok/s · total {t['total_ms'] / 1000:.1f} s"
    )


def search_text(result: dict[str, Any]) -> str:
    """What `rag search` prints: each passage's citation, similarity (and the model's score,
    re-ranked) and opening words."""
    out = []
    for s in result["results"]:
        line = f"[{s['rank']}] {display_path(citation(s))}  similarity {s['similarity']:.3f}"
        if s.get("rerank_score") is not None:
            line += f"  model {s['rerank_score']:.1f}"
        out.append(line)
        out.append("    " + " ".join(s["text"].split())[:300])
    return "".join(line + "\n" for line in out)
