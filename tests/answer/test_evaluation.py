"""`rag eval --retrieval-only`: retrieval and the sentences chosen, scored without the model."""

import json

import pytest

from ragcli.answer.asker import Asker
from ragcli.answer.evaluation import evaluate, load_questions
from ragcli.config import load_settings

from ..conftest import CORPORA


def test_context_recall_counts_aliases_in_the_sentences_the_model_would_read(
    corpus_index, tmp_path
):
    demo = load_questions(CORPORA / "questions.jsonl")
    first = next(q for q in demo if q.answerable)
    lines = [
        {
            "id": "real",
            "question": first.question,
            "answers": list(first.answers),
            "source": first.sources[0],
        },
        # The same question with an alias no document holds: retrieval still hits the page.
        {
            "id": "absent",
            "question": first.question,
            "answers": ["Zyxwvut Qrst"],
            # An answer spread over two pages names both; either one retrieved is a hit.
            "source": ["no/such-page.md", first.sources[0]],
        },
        {
            "id": "none",
            "question": "Who painted the ceiling of the Sistine Chapel?",
            "answerable": False,
        },
    ]
    path = tmp_path / "q.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    with Asker(load_settings({"index_dir": corpus_index}), preload=False) as asker:
        report = evaluate(asker, load_questions(path), retrieval_only=True)
    rows = {r.id: r for r in report.rows}
    assert rows["real"].context_hit is True
    assert rows["absent"].context_hit is False
    assert rows["absent"].hit_rank is not None
    assert rows["none"].context_hit is None  # nothing to find for an unanswerable question
    assert report.summary.context_recall == 0.5
    assert report.summary.answer_accuracy is None  # no model ran


def test_aliases_match_whole_words_and_a_bad_source_is_one_line(tmp_path):
    from ragcli.answer.evaluation import names_an_alias
    from ragcli.errors import UsageError

    item = load_questions(CORPORA / "questions.jsonl")[0]
    item = type(item)("x", "How many?", ("1", "one", "__new__"), True, ())
    assert names_an_alias(item, "1 (Ann Lee)")
    assert not names_an_alias(item, "1999") and not names_an_alias(item, "none")
    assert names_an_alias(item, "override __new__()")
    path = tmp_path / "bad.jsonl"
    path.write_text('{"question": "q", "answers": ["a"], "source": [3]}\n')
    with pytest.raises(UsageError, match=r"bad.jsonl:1: not a question line \(source must be"):
        load_questions(path)
