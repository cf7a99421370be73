"""The answerability fit, left out one corpus at a time, on rows shaped as `rag eval` writes."""

from __future__ import annotations

import random

from benchmarks.answerability_fit import fitted, leave_out, score


def _rows(n: int, seed: int, spread: float) -> list[dict]:
    """Right answers with a high "supported", answers to unanswerable questions with a low one."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        answerable = i % 2 == 0
        centre = 0.8 if answerable else 0.2
        rows.append(
            {
                "id": f"{seed}-{i}",
                "answerable": answerable,
                "correct": answerable,
                "reason": "answered",
                "signals": {"supported": centre + rng.uniform(-spread, spread), "asked": 0.5},
            }
        )
    return rows


def test_a_signal_that_separates_everywhere_holds_on_the_corpus_left_out(capsys):
    sets = {"a": _rows(40, 1, 0.15), "b": _rows(40, 2, 0.15), "c": _rows(40, 3, 0.15)}
    rule, cut = fitted(sets["a"] + sets["b"], ("supported",), 0.0, 0.05, None)
    held = score(sets["c"], rule, cut, 0.0)
    assert held["abstention"] == 1.0 and held["false_abstention"] <= 0.05
    leave_out(sets, {"a": ["a"], "bc": ["b", "c"]}, ("supported",), 0.0, 0.05)
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[2] for line in lines] == ["a", "bc"]


def test_a_signal_that_separates_only_where_it_was_fit_fails_where_it_was_not():
    fit_on = _rows(40, 4, 0.1)
    flipped = [
        {**r, "signals": {"supported": 1.0 - r["signals"]["supported"], "asked": 0.5}}
        for r in _rows(40, 5, 0.1)
    ]
    rule, cut = fitted(fit_on, ("supported",), 0.0, 0.05, None)
    assert score(flipped, rule, cut, 0.0)["abstention"] < 0.5
