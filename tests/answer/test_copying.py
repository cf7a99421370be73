"""Answers copied from the documents, through the default model: exact spans, counts
made by the tool, citations of the sentence that holds the answer, and refusals."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragcli.answer.answer_types import kind
from ragcli.answer.asker import Asker
from ragcli.answer.copying import offsets, read
from ragcli.answer.question import Question
from ragcli.config import load_settings
from ragcli.index.pipeline import build_index
from ragcli.llm.constrain import Span, SpanDecoder, Vocabulary

from ..conftest import CORPORA

TOOL = """# The tern command

## Output

tern prints a coloured table by default. Pass --no-color-output to print plain text
instead, which suits log files. The older switch --no-color only dims the header.

## Workers

The environment variable TERN_MAX_WORKERS sets how many files are read at once; it
defaults to four. Each worker keeps its own cache of parsed headers.
"""

FAMILY = """# Mirela Osk

Mirela Osk is a glassblower in the harbour town of Tarnby, where she moved in 1998.
She is married to Ivo Brandt, a ferry pilot.

## Family

Her children are Petra, Luka and Ana. Her brother Damir Osk has two children of his
own, Sven and Iris, who often visit the workshop.
"""


NEIGHBOUR = """# Tomas Vek

Tomas Vek repairs clocks in a workshop on the quay in Tarnby. He keeps bees on the roof
and sells their honey at the Saturday market.
"""


@pytest.fixture(scope="module")
def asker(tmp_path_factory, embedder):
    docs = tmp_path_factory.mktemp("docs")
    (docs / "tern.md").write_text(TOOL)
    (docs / "mirela-osk.md").write_text(FAMILY)
    (docs / "tomas-vek.md").write_text(NEIGHBOUR)
    index = tmp_path_factory.mktemp("index") / "index"
    settings = load_settings(
        {"index_dir": index, "model": "qwen2.5-coder-1.5b", "answer_cache": False}
    )
    build_index([docs], settings, embedder=embedder)
    with Asker(settings, preload=False) as a:
        yield a


def test_question_shapes():
    assert kind("How many children does Mirela Osk have?") == "count"
    assert kind("What is the number of workers?") == "count"
    assert kind("Can items be added to a frozen set?") == "yesno"
    assert kind("Is it red or green?") == "span"
    assert kind("Which switch prints plain text?") == "span"


def test_an_identifier_with_a_prefix_and_a_leading_sign_is_copied_whole(asker):
    a = asker.ask("Which switch makes tern print plain text without colours?")
    assert a.answered, a.raw_answer
    assert "--no-color-output" in a.answer
    # Copied: the answer is a stretch of the document, not the model's own spelling.
    assert a.answer in " ".join(TOOL.split())
    [e] = a.evidence
    assert e["line"] == 5 and "--no-color-output" in e["text"]


def test_a_listed_set_is_counted_by_the_tool(asker):
    a = asker.ask("How many children does Mirela Osk have?")
    assert a.answered, a.raw_answer
    assert a.answer.startswith("3 ("), a.answer
    assert {"Petra", "Luka", "Ana"} <= set(a.answer[3:-1].split(", "))


def test_an_on_topic_question_the_documents_do_not_answer_is_refused(asker):
    # The ferry, its pilot and his name are all there: what it carries is not. (Its name,
    # asked the same way, is answered with the pilot's, and the year he became a pilot
    # with the year she moved: see docs/BENCHMARKS.md, "Answers on unseen documents".)
    a = asker.ask("What does the ferry Ivo Brandt pilots carry?")
    assert not a.answered, (a.answer, a.signals)
    assert a.reason in ("model_abstained", "not_answerable")


def test_a_fact_about_a_neighbour_is_not_given_as_the_subjects(asker):
    # Only Mirela's page says who someone is married to: that is not Tomas's answer.
    a = asker.ask("Who is Tomas Vek married to?")
    assert not a.answered, (a.answer, a.signals)


def test_the_demo_question_cites_only_the_passage_that_holds_the_answer(
    corpus_index, embedder, tmp_path
):
    settings = load_settings(
        {"index_dir": corpus_index, "model": "qwen2.5-coder-1.5b", "answer_cache": False}
    )
    with Asker(settings, preload=False) as a:
        a.retriever._embedder = embedder
        answer = a.ask("Who won the 2023 Cricket World Cup?")
    assert answer.answer == "Australia"
    by_rank = {h.rank: h for h in answer.sources}
    assert answer.cited and all(
        by_rank[r].chunk.path.endswith("cricket-world-cup-2023.md") for r in answer.cited
    )
    # The line printed is the one that says so.
    for e in answer.evidence:
        path = Path(by_rank[e["rank"]].chunk.path)
        path = path if path.is_absolute() else CORPORA.parent / path
        line = path.read_text().splitlines()[e["line"] - 1]
        assert "Australia" in line and "2023" in line


def test_counted_items_are_distinct_and_split_at_and():
    pieces = [b""] + [bytes([i]) for i in range(1, 256)]
    vocab = Vocabulary.build(pieces, [0])
    context = ["The orchard grows apples, pears and quinces.", "Apples ripen first."]
    dec = SpanDecoder(lambda: vocab, " ".join(context), ("I don't know",), lists=True)
    start = dec.sources[0].index(b"apples")
    dec.spans = [Span(0, start, start + len(b"apples, pears and quinces")), Span(0, 45, 51)]
    out = read(dec, Question.parse("How many fruits does the orchard grow?"), context)
    assert out.text == "3 (apples, pears, quinces)"  # "Apples" again is not a fourth
    assert out.sentences == [0]  # and the sentence it came from is not cited
    assert offsets(context) == [(0, 44), (45, 64)]


def _read(context: list[str], copied: list[str], question: str):
    pieces = [b""] + [bytes([i]) for i in range(1, 256)]
    vocab = Vocabulary.build(pieces, [0])
    dec = SpanDecoder(lambda: vocab, " ".join(context), ("I don't know",), lists=True)
    spans = []
    for text in copied:
        start = dec.sources[0].index(text.encode())
        spans.append(Span(0, start, start + len(text.encode())))
    dec.spans = spans
    return read(dec, Question.parse(question), context)


def test_a_list_of_names_cut_short_is_counted_whole():
    context = ["The 1996 Cup was co-hosted by India, Pakistan and Sri Lanka.", "It rained."]
    question = "How many countries co-hosted the 1996 Cup?"
    assert _read(context, ["India, Pakistan"], question).text == "3 (India, Pakistan, Sri Lanka)"
    assert _read(context, ["Pakistan"], question).text == "3 (India, Pakistan, Sri Lanka)"
    river = ["The river flows through Austria, Germany, France and the Netherlands."]
    assert _read(river, ["Austria"], "How many countries does it flow through?").text == (
        "4 (Austria, Germany, France, Netherlands)"
    )
    friends = ["Her friends are Ann Lee, Bo Park and Cy Ode; she met them at school."]
    out = _read(friends, ["Bo Park"], "How many friends does she have?")
    assert out.text == "3 (Ann Lee, Bo Park, Cy Ode)"


def test_a_list_goes_no_further_than_its_names():
    # "a brother" is not a name: the list of sisters ends before it.
    context = ["She has a sister, Isa Pell, and a brother, Wil Pell. Ona has a dog."]
    assert _read(context, ["Isa Pell"], "How many sisters does she have?").text == "1 (Isa Pell)"
    # Items that are not names are counted as the model listed them.
    fruit = ["The orchard grows apples, pears and quinces."]
    assert _read(fruit, ["apples", "pears"], "How many fruits are grown?").text == (
        "2 (apples, pears)"
    )


def test_a_count_is_of_one_list():
    # The model runs on from one town's landmarks into the next sentence's.
    context = [
        "Landmarks of Aldmere: Tinker's Hall; Copper Hall.",
        "Landmarks of Fennick Cross: Hollow Well; Crooked Oak; Widow's Chapel.",
    ]
    question = "How many landmarks does Aldmere have?"
    out = _read(context, ["Tinker's Hall", "Copper Hall", "Hollow Well"], question)
    assert (out.text, out.sentences) == ("2 (Tinker's Hall, Copper Hall)", [0])
    # The list the model began with is the one counted, however far it ran on.
    out = _read(
        context, ["Tinker's Hall", "Hollow Well", "Crooked Oak", "Widow's Chapel"], question
    )
    assert out.text == "2 (Tinker's Hall, Copper Hall)"
    # A first item taken from elsewhere gives way to a list that holds it and more.
    cup = ["India won in 2011.", "India, Pakistan and Sri Lanka co-hosted the 1996 Cup."]
    out = _read(cup, ["India", "Pakistan"], "How many countries co-hosted the 1996 Cup?")
    assert (out.text, out.sentences) == ("3 (India, Pakistan, Sri Lanka)", [1])


def test_the_one_asked_about_is_not_counted_in_their_own_list():
    context = ["Ann Lee, Bo Park and Cy Ode met at school."]
    out = _read(context, ["Ann Lee, Bo Park and Cy Ode"], "How many friends does Ann Lee have?")
    assert out.text == "2 (Bo Park, Cy Ode)"
    out = _read(["Ann, Bo and Cy met at school."], ["Ann, Bo"], "How many friends has Anna?")
    assert out.text == "3 (Ann, Bo, Cy)"  # Ann is not Anna
