"""`rag bench contention`: one quick run through the command with the small model (every
scenario in both modes, no figures judged), and its table written by the lab's report writer."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks import write_report
from ragcli.bench.busy_cpus import MODES, SCENARIOS, Cell, ContentionRun

from ..conftest import SMALL_MODEL, rag


def test_quick_run_covers_every_scenario_in_both_modes(tmp_path: Path):
    out = rag("bench", "contention", "--quick", "--model", SMALL_MODEL, "--json")
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
    start, end = write_report.CONTENTION_MARKS
    doc, saved = tmp_path / "BENCHMARKS.md", tmp_path / "run.json"
    doc.write_text(f"# Benchmarks\n{start}\n{end}\n")
    saved.write_text(out.stdout)
    assert write_report.main(["contention", str(saved), str(doc)]) == 0
    text = doc.read_text()
    assert text.startswith("# Benchmarks\n") and text.count(start) == 1
    assert "| 2 at once | adaptive |" in text and text.rstrip().endswith(end)


def _run(rate: float) -> ContentionRun:
    cells = [Cell(s, m, [], rate, rate / 5, 1.0, 1.0, 2.0, 2.0) for s in SCENARIOS for m in MODES]
    return ContentionRun("m", "today", 60.0, 2, 2, 2, "cpu", 900, 64, 3, "", cells, [])


def test_markdown_replaces_its_section_and_keeps_the_rest(tmp_path: Path):
    start, end = write_report.CONTENTION_MARKS
    doc = tmp_path / "B.md"
    doc.write_text(f"before\n{start}\nold\n{end}\nafter\n")
    body = write_report.contention_markdown(_run(123.0))
    write_report.replace_section(doc, write_report.CONTENTION_MARKS, body)
    text = doc.read_text()
    assert text.startswith(f"before\n{start}\n") and text.endswith(f"{end}\nafter\n")
    assert "old" not in text and "| quiet | fixed | 123.0 |" in text


def test_report_needs_its_section_and_a_run(tmp_path: Path, capsys):
    doc, run = tmp_path / "B.md", tmp_path / "run.json"
    doc.write_text("no markers\n")
    run.write_text(json.dumps(_run(1.0).as_dict()))
    assert write_report.main(["contention", str(run), str(doc)]) == 2
    assert "section" in capsys.readouterr().err and doc.read_text() == "no markers\n"
    run.write_text('{"model": "m"}')
    assert write_report.main(["contention", str(run), str(doc)]) == 2
    assert "rag bench contention --json" in capsys.readouterr().err
