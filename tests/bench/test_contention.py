"""`rag bench contention`: quick runs through the command with the small model (every
scenario in both modes; pairs started together), no figures judged, and their tables
written by the lab's report writer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import write_report
from ragcli.bench.busy_cpus import MODES, SCENARIOS, Cell, ContentionRun, Goal, Pair, pair_schedule

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


def test_quick_pairs_report_every_process_and_the_worst(tmp_path: Path):
    out = rag("bench", "contention", "--quick", "--pairs", "2", "--reps", "1",
              "--model", SMALL_MODEL, "--json")  # fmt: skip
    assert out.returncode == 0, out.stderr
    run = json.loads(out.stdout)
    assert [(c["scenario"], c["mode"]) for c in run["cells"]] == [("quiet", "adaptive")]
    assert run["code"] == "this" and len(run["pairs"]) == 2
    for pair in run["pairs"]:
        assert len(pair["runs"]) == len(pair["decode_ratios"]) == len(pair["total_ratios"]) == 2
        assert all(r["completion_tokens"] == run["max_tokens"] for r in pair["runs"])
        assert min(pair["decode_ratios"]) > 0 and min(pair["total_ratios"]) > 0
    goals = {(g["scenario"], g["phase"]): g for g in run["goals"]}
    assert set(goals) == {("pairs", "decode"), ("pairs", "total")}
    worst_decode = min(d for p in run["pairs"] for d in p["decode_ratios"])
    worst_total = max(t for p in run["pairs"] for t in p["total_ratios"])
    assert goals["pairs", "decode"]["ratio"] == pytest.approx(worst_decode, abs=1e-3)
    assert goals["pairs", "total"]["ratio"] == pytest.approx(worst_total, abs=1e-3)
    assert goals["pairs", "total"]["at_most"] and not goals["pairs", "decode"]["at_most"]
    saved = tmp_path / "run.json"
    saved.write_text(out.stdout)
    text = write_report.contention_markdown(write_report.contention_run(json.loads(out.stdout)))
    assert "2 pairs of fresh processes started together" in text and "| 2 |" in text
    assert "pairs, total:" in text and "at most 3.00" in text
    table = rag("bench", "contention", "--quick", "--pairs", "1", "--reps", "1",
                "--model", SMALL_MODEL)  # fmt: skip
    assert table.returncode == 0, table.stderr
    assert "1 pairs started together" in table.stdout and "the worst pair:" in table.stdout


def test_another_checkout_must_hold_the_benchmark(tmp_path: Path):
    out = rag("bench", "contention", "--quick", "--code", str(tmp_path))
    assert out.returncode == 2 and "not a ragcli checkout" in out.stderr


@pytest.mark.parametrize(
    ("reps", "pairs", "order"),
    [
        (1, 3, "Q P P P"),
        (3, 6, "Q P P Q P P Q P P"),
        (3, 20, "Q" + " P" * 7 + " Q" + " P" * 7 + " Q" + " P" * 6),
        (3, 1, "Q P Q Q"),  # more quiet runs than pairs: the rest at the end
    ],
)
def test_quiet_runs_are_spread_among_the_pairs(reps: int, pairs: int, order: str):
    got = pair_schedule(reps, pairs)
    assert " ".join("P" if step == "pairs" else "Q" for step in got) == order


def test_a_worst_process_past_its_goal_is_reported_not_met():
    pairs = [Pair([{}, {}], [0.9, 0.8], [1.1, 1.2]), Pair([{}, {}], [0.35, 0.9], [3.4, 1.0])]
    run = _run(1.0)
    run.pairs = pairs
    assert run.worst_pair() is pairs[1]
    from ragcli.bench.busy_cpus import _goals

    goals = {(g.scenario, g.phase): g for g in _goals({}, pairs)}
    assert goals["pairs", "decode"] == Goal("pairs", "decode", 0.40, 0.35, False)
    assert goals["pairs", "total"] == Goal("pairs", "total", 3.0, 3.4, False, at_most=True)
