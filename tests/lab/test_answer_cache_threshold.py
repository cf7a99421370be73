"""`python -m benchmarks semcache`: the paraphrase sets of the lab, the sweep and the model run."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from benchmarks.answer_cache_threshold import (
    MAX_WRONG_HIT_RATE,
    SETS,
    SweepRow,
    load_variants,
    measure_pairs,
    pick_threshold,
    run_workload,
    summarize_pairs,
)
from ragcli.answer.evaluation import load_questions
from ragcli.config import Settings, load_settings
from ragcli.errors import UsageError
from tests.conftest import CORPORA, ROOT

DEV = ROOT.parent / "shared" / "eval" / "pydocs-dev.jsonl"
PAIRS = [
    (CORPORA / "questions.jsonl", SETS / "demo-paraphrases.jsonl"),
    (DEV, SETS / "pydocs-paraphrases.jsonl"),
]


@pytest.mark.parametrize(("questions", "variants"), PAIRS, ids=["demo", "dev"])
def test_every_question_has_paraphrases_and_near_misses(questions: Path, variants: Path):
    if not questions.is_file():
        pytest.skip(f"{questions} is not here")
    items = load_questions(questions)
    vs = load_variants(variants, {i.id for i in items})
    kinds = Counter((v.ref, v.kind) for v in vs)
    for item in items:
        assert 1 <= kinds[(item.id, "paraphrase")] <= 2, item.id
        assert 1 <= kinds[(item.id, "near_miss")] <= 2, item.id
    asked = {i.question for i in items}
    assert not asked & {v.question for v in vs}
    assert len({v.question for v in vs}) == len(vs)


def test_a_variant_of_an_unknown_question_is_an_error(tmp_path):
    bad = tmp_path / "v.jsonl"
    bad.write_text('{"ref": "nope", "kind": "paraphrase", "question": "Who?"}\n')
    with pytest.raises(UsageError, match="no question with id 'nope'"):
        load_variants(bad, {"q1"})
    bad.write_text('{"ref": "q1", "kind": "synonym", "question": "Who?"}\n')
    with pytest.raises(UsageError, match="kind must be"):
        load_variants(bad, {"q1"})


def test_the_pick_is_the_lowest_threshold_safe_from_there_up():
    def row(t, wrong):
        return SweepRow(t, 10, 0, 0.0, 100, wrong, wrong / 100)

    rows = [row(0.8, 3), row(0.85, 0), row(0.9, 2), row(0.95, 0), row(1.0, 0)]
    assert pick_threshold(rows) == 0.95


def test_the_default_threshold_keeps_wrong_hits_rare_on_the_demo_set(corpus_index):
    s = load_settings({"index_dir": corpus_index})
    items = load_questions(CORPORA / "questions.jsonl")
    vs = load_variants(SETS / "demo-paraphrases.jsonl", {i.id for i in items})
    summary = summarize_pairs(measure_pairs(s, items, vs), len(items))
    at = {r.threshold: r for r in summary.rows}
    default = at[round(Settings().answer_cache_threshold, 2)]
    assert default.wrong_hit_rate < MAX_WRONG_HIT_RATE and default.paraphrase_hits > 0
    hits = [r.paraphrase_hits for r in summary.rows]
    assert hits == sorted(hits, reverse=True)  # a higher threshold never serves more
    assert summary.threshold <= Settings().answer_cache_threshold


def test_the_model_run_serves_repeats_unchanged(corpus_index):
    every = load_questions(CORPORA / "questions.jsonl")
    items = every[12:13]  # RuBisCO
    keep = {i.id for i in items}
    vs = [
        v
        for v in load_variants(SETS / "demo-paraphrases.jsonl", {i.id for i in every})
        if v.ref in keep
    ]
    work = run_workload(load_settings({"index_dir": corpus_index}), items, vs, 0.9)
    assert work.consistent
    served, cacheable = map(int, work.repeats_served.split("/"))
    assert served == cacheable > 0
    assert work.wrong_hits == "0/1"
