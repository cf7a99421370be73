"""`rag bench contention`: one quick run through the command with the small model (every
scenario in both modes, no figures judged), and where its table goes in a Markdown file."""

from __future__ import annotations

import json
from pathlib import Path

from ragcli.bench.contention import (
    MARK_END,
    MARK_START,
    MODES,
    SCENARIOS,
    Cell,
    ContentionRun,
    write_markdown,
)

from ..conftest import SMALL_MODEL, rag


def test_quick_run_covers_every_scenario_in_both_modes(tmp_path: Path):
    doc = tmp_path / "BENCHMARKS.md"
    doc.write_text("# Benchmarks\n")
    out = rag("bench", "contention", "--quick", "--model", SMALL_MODEL, "--json",
              "--markdown", str(doc))  # fmt: skip
    assert out.returncode == 0, out.stderr
    run = json.loads(out.stdout)
    assert run["model"] == SMALL_MODEL and run["reps"] == 1
    cells = {(c["scenario"], c["mode"]): c for c in run["cells"]}
    assert set(cells) == {(s, m) for s in SCENARIOS for m in MODES}
    for (scenario, mode), c in cells.items():
        assert len(c["runs"]) == SCENARIOS[scenario][1]  # "2 at once": both processes
        assert c["prefill_tok_s"] > 0 and c["decode_tok_s"] > 0
        for r in c["runs"]:
            assert r["completion_tokens"] == run["max_tokens"]  # end tokens set aside
            assert 1 <= r["prefill_threads"] <= run["threads"]
            if mode == "fixed":
                assert r["prefill_threads"] == r["decode_threads"] == run["threads"]
        if scenario == "quiet":
            assert c["prefill_ratio"] == c["decode_ratio"] == 1
    assert [(g["scenario"], g["phase"]) for g in run["goals"]] == [
        ("1 busy", "prefill"), ("1 busy", "decode"), ("2 at once", "decode"),
    ]  # fmt: skip
    text = doc.read_text()
    assert text.startswith("# Benchmarks\n") and text.count(MARK_START) == 1
    assert "| 2 at once | adaptive |" in text and text.rstrip().endswith(MARK_END)


def _run(rate: float) -> ContentionRun:
    cells = [Cell(s, m, [], rate, rate / 5, 1.0, 1.0, 2.0, 2.0) for s in SCENARIOS for m in MODES]
    return ContentionRun("m", "today", 60.0, 2, 2, 2, "cpu", 900, 64, 3, "", cells, [])


def test_markdown_replaces_its_section_and_keeps_the_rest(tmp_path: Path):
    doc = tmp_path / "B.md"
    doc.write_text(f"before\n{MARK_START}\nold\n{MARK_END}\nafter\n")
    write_markdown(_run(123.0), doc)
    text = doc.read_text()
    assert text.startswith(f"before\n{MARK_START}\n") and text.endswith(f"{MARK_END}\nafter\n")
    assert "old" not in text and "| quiet | fixed | 123.0 |" in text


def test_markdown_file_is_checked_before_the_run(tmp_path: Path):
    out = rag("bench", "contention", "--quick", "--markdown", str(tmp_path / "missing.md"))
    assert out.returncode == 2 and "cannot read" in out.stderr
