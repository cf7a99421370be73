"""Fit the answerability rule on some question sets, report it on questions it was not fit on.

Reads ``rag eval --json`` reports made with the rule and the similarity floor off
(``min_answerable = 0.0`` and ``min_score = 0.0`` in the ``RAG_CONFIG`` file, so every
question reaches the model and every answer it copies is kept with its signals), splits
each set's questions in two by a hash of their id, fits a logistic model on the "fit" half
of the sets named with ``--fit`` and prints it (for :mod:`ragcli.answer.answerable`) and,
per set and half, accuracy, abstention and false abstention with the rule and the floor
(``--min-score``) applied.

    python -m benchmarks.answerability_fit near=near.json facts=facts.json dev=dev.json \\
        --fit near --fit facts [--unchecked]

With ``--leave-out``, each corpus named with ``--fit`` (sets over the same documents joined
by ``--corpus pydocs=dev,near``) is left out in turn: the rule is fit on the whole of the
other fit corpora and scored on the one left out, so a signal that helps only where it was
fit shows as a loss there. Sets not named with ``--fit`` are never fit on.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
from pathlib import Path

from ragcli.answer.answerable import CHECKED, INPUTS, UNCHECKED, Rule
from ragcli.config import Settings


def half(qid: str) -> str:
    """A stable split of a set: "fit" or "test"."""
    return "fit" if hashlib.sha256(qid.encode()).digest()[0] % 2 == 0 else "test"


def fit(x: list[list[float]], y: list[int], l2: float = 1.0, steps: int = 4000):
    """Logistic regression by gradient descent on standardized features."""
    import numpy as np

    xa = np.asarray(x, dtype=np.float64)
    ya = np.asarray(y, dtype=np.float64)
    mean, std = xa.mean(0), xa.std(0) + 1e-9
    z = (xa - mean) / std
    w = np.zeros(z.shape[1])
    b = 0.0
    for _ in range(steps):
        p = 1 / (1 + np.exp(-(z @ w + b)))
        g = p - ya
        w -= 0.1 * (z.T @ g / len(ya) + l2 * w / len(ya))
        b -= 0.1 * g.mean()
    # Back to raw features: weights per unit of each signal.
    raw_w = w / std
    raw_b = b - float((w * mean / std).sum())
    return raw_w.tolist(), raw_b


def score(rows: list[dict], rule: Rule, cut: float, min_score: float) -> dict[str, float | int]:
    """The three figures with the floor and the rule applied to the rows' copied answers."""
    pos = [r for r in rows if r["answerable"]]
    neg = [r for r in rows if not r["answerable"]]

    def kept(r) -> bool:
        if r["reason"] != "answered" or r["signals"].get("similarity", 1.0) < min_score:
            return False
        return rule.probability(r["signals"]) >= cut

    return {
        "n": len(rows),
        "accuracy": round(sum(r["correct"] and kept(r) for r in pos) / max(len(pos), 1), 3),
        "abstention": round(sum(not kept(r) for r in neg) / max(len(neg), 1), 3),
        "false_abstention": round(sum(not kept(r) for r in pos) / max(len(pos), 1), 3),
    }


def fitted(
    rows: list[dict], inputs: tuple[str, ...], min_score: float, slack: float, cut: float | None
) -> tuple[Rule, float]:
    """A rule fit on ``rows`` and its cut: the highest that withholds at most ``slack``
    more of their answerable questions than no rule does."""
    # Right answers against answers to unanswerable questions: a wrong answer to an
    # answerable question is wrong either way, and would teach the rule nothing.
    train = [
        r
        for r in rows
        if r["reason"] == "answered"
        and r["signals"].get("similarity", 1.0) >= min_score
        and (r["correct"] or not r["answerable"])
    ]
    blank = Rule(inputs, (0.0,) * len(inputs), 0.0)
    weights, bias = fit(
        [blank.features(r["signals"]) for r in train], [r["answerable"] for r in train]
    )
    rule = Rule(inputs, tuple(round(w, 4) for w in weights), round(bias, 4))
    if cut is None:
        base = score(rows, rule, 0.0, min_score)["false_abstention"]
        cut = max(
            [0.0]
            + [
                c
                for c in [i / 100 for i in range(1, 96)]
                if score(rows, rule, c, min_score)["false_abstention"] <= base + slack
            ]
        )
    return rule, cut


def leave_out(
    sets: dict[str, list[dict]],
    corpora: dict[str, list[str]],
    inputs: tuple[str, ...],
    min_score: float,
    slack: float,
) -> None:
    """Each corpus left out of the fit in turn, scored with the rule the others gave."""
    for left, names in corpora.items():
        rows = [r for c, ns in corpora.items() if c != left for n in ns for r in sets[n]]
        rule, cut = fitted(rows, inputs, min_score, slack, None)
        held = [r for n in names for r in sets[n]]
        print("left out", left, score(held, rule, cut, min_score), "cut", cut)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("reports", nargs="+", help="NAME=rag-eval-report.json")
    ap.add_argument("--fit", action="append", default=[], help="sets whose fit half trains")
    ap.add_argument("--cut", type=float, default=None, help="probability cut (default: chosen)")
    ap.add_argument("--unchecked", action="store_true", help="the rule for check_answers = false")
    ap.add_argument("--min-score", type=float, default=Settings().min_score)
    ap.add_argument("--slack", type=float, default=0.05, help="false abstention the cut may add")
    ap.add_argument("--inputs", help="comma-separated inputs to fit (default: the rule's own)")
    ap.add_argument(
        "--leave-out", action="store_true", help="leave each --fit corpus out in turn; fit on all"
    )
    ap.add_argument(
        "--corpus", action="append", default=[], help="NAME=SET,SET: sets over one corpus"
    )
    args = ap.parse_args(argv)
    inputs = (UNCHECKED if args.unchecked else CHECKED).inputs
    if args.inputs:
        inputs = tuple(args.inputs.split(","))
        if unknown := [i for i in inputs if i not in INPUTS]:
            ap.error(f"no such input: {', '.join(unknown)} (there are {', '.join(INPUTS)})")
    sets = {}
    for spec in args.reports:
        name, path = spec.split("=", 1)
        sets[name] = json.loads(Path(path).read_text())["rows"]
    if args.leave_out:
        corpora = {n: [n] for n in args.fit}
        for spec in args.corpus:
            name, members = spec.split("=", 1)
            for m in members.split(","):
                corpora.pop(m, None)
            corpora[name] = members.split(",")
        leave_out(sets, corpora, inputs, args.min_score, args.slack)
        fit_rows = [r for ns in corpora.values() for n in ns for r in sets[n]]
    else:
        fit_rows = [r for name in args.fit for r in sets[name] if half(r["id"]) == "fit"]
    rule, cut = fitted(fit_rows, inputs, args.min_score, args.slack, args.cut)
    # The rule as ragcli keeps it: the bias moved so that the cut falls at 0.5, where
    # `min_answerable` puts it for either rule.
    centred = round(rule.bias - math.log(cut / (1 - cut)), 4) if 0 < cut < 1 else rule.bias
    summary = {"inputs": rule.inputs, "weights": rule.weights, "bias": rule.bias, "cut": cut}
    print(json.dumps(summary | {"bias_for_cut_0.5": centred}))
    for name, rows in sets.items():
        for part in ("fit", "test"):
            chosen = [r for r in rows if half(r["id"]) == part]
            fit_on = name in args.fit and (args.leave_out or part == "fit")
            tag = "fit" if fit_on else "not fit"
            print(name, part, tag, score(chosen, rule, cut, args.min_score))
        print(name, "all", score(rows, rule, cut, args.min_score))


if __name__ == "__main__":
    main()
