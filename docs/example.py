"""Use ragcli from a program, without the `rag` command.

    python docs/example.py corpora .rag "Who won the 2023 Cricket World Cup?"

Indexes the folder (only new and changed files are embedded again), shows the
passages a search finds, then answers the question with the local model.
"""

from __future__ import annotations

import sys
from pathlib import Path

from ragcli import Rag, RagError, build_index, load_settings


def main(docs: Path, index_dir: Path, question: str) -> int:
    settings = load_settings({"index_dir": index_dir})
    report = build_index([docs], settings)
    print(f"index: {report.files_total} files, {report.chunks_total} passages")

    with Rag(settings) as rag:  # the model starts loading now, on a thread
        for hit in rag.search(question).hits:
            print(f"  [{hit.rank}] {hit.citation}  similarity {hit.similarity:.2f}")
        answer = rag.ask(question)
    print(f"answer: {answer.answer} ({answer.reason})")
    for e in answer.evidence:  # the sentences the answer was copied from
        print(f"  from [{e['rank']}] line {e['line']}: {e['text']}")
    t = answer.timings  # typed: AnswerTimings
    print(f"prompt {t.prompt_tokens} tokens, first token after {t.ttft_ms:.0f} ms")
    return 0 if answer.answered else 1


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    try:
        sys.exit(main(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]))
    except RagError as exc:
        sys.exit(f"error: {exc}")
