"""The verdict through the real model (qwen2.5-coder-1.5b): counts made by the tool, spans
of the wrong type withheld, and answers and refusals in the language of the question."""

from __future__ import annotations

import pytest

from ragcli.answer.asker import Asker
from ragcli.config import load_settings
from ragcli.index.pipeline import build_index

ANN = """# Ann Lee

Ann Lee is a potter who was born on 3 March 1961. Her first kiln was fired in the
spring of 1990, and she still sells every bowl she makes herself.

## Family

Ann has one brother, Tom Lee, who fishes off the north coast. She has two sons, Ivo Lee
and Max Lee, and a daughter, Lia Lee. Tom has four children of his own: Ada, Bo, Cy and
Di.
"""

OLA = """# Ola Berg

Ola Berg keeps a bakery on the harbour of Vesk and sings in the town choir.

## Family

- Husband: Ken Berg
- Daughter: Mia Berg
- Son: Leo Berg
"""

LOIRE = """# The Loire

The Loire is the longest river in France. It rises in the Massif Central and flows into
the Atlantic Ocean near Saint-Nazaire.

## Tributaries

The main tributaries of the Loire are the Allier, the Cher and the Indre. The Vienne and
the Maine also join it further downstream.
"""

LYON = """# Lyon

Lyon est une grande ville du sud-est de la France. Elle est située au confluent du Rhône
et de la Saône, deux cours d'eau qui se rejoignent au sud de la presqu'île.

## Fêtes

Chaque année, le 8 décembre, les habitants posent des bougies sur le rebord de leurs
fenêtres. Cette tradition remonte à 1852.
"""

QUILL = """# quill

quill is a small command-line tool that formats Markdown tables in place.

## Exit status

When every table is already tidy, quill exits with a zero status. It exits with status
one when it rewrote a file, and with status two when a file could not be read.

## Settings

The wrap_width setting only takes effect when align_cells is switched on, so a user who
sets wrap_width must turn align_cells on as well.
"""

QUENBY = """# Quenby

Quenby is a market town with a population of 12,500. The Zorblat Park stadium holds
41,000 spectators on match days. Its library holds 1,250,000 books and 3 reading rooms.
"""

ORLA = """# Orla Venn

Orla Venn is a novelist. She was born on 12 March 1948.

## Early life

Her father ran the ferry across the estuary. Orla grew up with two older brothers, Piet
and Joren, who both went to sea as soon as they were old enough.

When Orla was nine, the family moved inland. Her younger sisters, Mette and Kaja, were
born in the new house.
"""


@pytest.fixture(scope="module")
def asker(tmp_path_factory, embedder):
    docs = tmp_path_factory.mktemp("docs")
    pages = (
        ("ann-lee.md", ANN),
        ("ola-berg.md", OLA),
        ("loire.md", LOIRE),
        ("lyon.md", LYON),
        ("quill.md", QUILL),
        ("quenby.md", QUENBY),
        ("orla-venn.md", ORLA),
    )
    for name, text in pages:
        (docs / name).write_text(text)
    index = tmp_path_factory.mktemp("index") / "index"
    settings = load_settings(
        {"index_dir": index, "model": "qwen2.5-coder-1.5b", "answer_cache": False}
    )
    build_index([docs], settings, embedder=embedder)
    with Asker(settings) as a:
        a.retriever._embedder = embedder
        yield a


def test_one_member_is_a_count_of_one(asker):
    a = asker.ask("How many brothers does Ann Lee have?")
    assert (a.answered, a.answer) == (True, "1 (Tom Lee)"), a.raw_answer


def test_members_listed_by_kind_add_up(asker):
    # Her brother's four children, in the next sentence, are not hers.
    a = asker.ask("How many children does Ann Lee have?")
    assert a.answer == "3 (Ivo Lee, Max Lee, Lia Lee)", a.raw_answer


def test_a_count_is_read_from_the_labelled_entries_of_the_subjects_page(asker):
    a = asker.ask("How many children does Ola Berg have?")
    assert a.answer == "2 (Mia Berg, Leo Berg)", a.raw_answer
    assert a.evidence and "Daughter: Mia Berg" in a.evidence[0]["text"]


def test_a_list_that_goes_on_in_the_next_sentence_is_counted_whole(asker):
    a = asker.ask("How many main tributaries does the Loire have?")
    assert a.answer == "5 (Allier, Cher, Indre, Vienne, Maine)", a.raw_answer
    assert len(a.evidence) == 2  # both sentences cited


def test_a_date_is_not_an_answer_to_where(asker):
    a = asker.ask("Where was Ann Lee born?")
    # The page gives the day she was born, not the place.
    assert not a.answered, (a.answer, a.raw_answer, a.reason)
    assert a.answer == "I don't know"


def test_a_number_the_page_spells_out_stands(asker):
    # The model's own first choice is "0", which the page writes "zero": the same answer,
    # not one the copying constraint forced on it.
    a = asker.ask("What exit status does quill return when every table is already tidy?")
    assert (a.answered, a.answer) == (True, "zero"), (a.raw_answer, a.reason)


def test_a_yes_no_question_may_ask_in_its_last_clause(asker):
    a = asker.ask("I set wrap_width in quill; do I need to turn align_cells on too?")
    assert (a.answered, a.answer) == (True, "Yes"), (a.raw_answer, a.reason)


def test_a_yes_no_answer_to_a_question_naming_settings_stands(asker):
    # "Yes" is copied from no one sentence: the names are looked for in all that is shown.
    a = asker.ask("Does wrap_width need align_cells to be switched on?")
    assert (a.answered, a.answer) == (True, "Yes"), (a.raw_answer, a.reason)


def test_a_french_question_is_answered_in_french(asker):
    a = asker.ask("Quels cours d'eau se rejoignent à Lyon ?")
    assert a.answered, a.raw_answer
    assert "Rhône" in a.answer and "Saône" in a.answer


def test_a_french_question_is_refused_in_french(asker):
    a = asker.ask("Quels cours d'eau traversent Marseille ?")  # a city no page names
    assert (a.answered, a.answer) == (False, "Je ne sais pas"), (a.raw_answer, a.reason)
    assert a.as_dict()["answered"] is False


def test_the_question_is_read_once(asker, monkeypatch):
    from ragcli.answer import answer_types, question

    question_text = "How many children does Ann Lee have?"
    reads: list[str] = []

    def counted(read):
        def reader(text, *args):
            if text == question_text:
                reads.append(read.__name__)
            return read(text, *args)

        return reader

    for module, name in ((answer_types, "kind"), (answer_types, "wants"), (question, "names")):
        monkeypatch.setattr(module, name, counted(getattr(module, name)))
    a = asker.ask(question_text)
    assert a.answer == "3 (Ivo Lee, Max Lee, Lia Lee)", a.raw_answer
    assert sorted(reads) == ["kind", "names", "wants"]


@pytest.mark.parametrize(
    ("question", "number"),
    [
        ("How many spectators does the Zorblat Park stadium hold?", "41,000"),
        ("How many people live in Quenby?", "12,500"),
        ("How many books does the Quenby library hold?", "1,250,000"),
    ],
)
def test_how_many_is_answered_with_the_number_the_page_states(asker, question, number):
    # Told to list, the model took the comma of the number for a list's: "2 (41, 000)".
    a = asker.ask(question)
    assert a.answered and a.answer.startswith(number), (a.answer, a.raw_answer, a.reason)


def test_a_place_of_birth_is_not_a_date_however_it_is_asked(asker):
    # The page gives the day she was born, not the place: the date the model copies for
    # "the place of birth" is withheld ("where" was already read as a place).
    for question in ("What is the place of birth of Orla Venn?", "Where was Orla Venn born?"):
        a = asker.ask(question)
        assert "1948" not in a.answer, (question, a.raw_answer)
        if "1948" in a.raw_answer:
            assert (a.answered, a.reason) == (False, "not_answerable"), question


def test_a_count_of_relatives_reads_every_sentence_that_names_them(asker):
    # Her brothers in one paragraph, her sisters in the next.
    a = asker.ask("How many siblings does Orla Venn have?")
    assert a.answer.startswith("4 ("), (a.answer, a.raw_answer)
