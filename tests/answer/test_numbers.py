"""Numbers as the page writes them, without a model: a copied number is widened to the
whole number, a count question answered by a stated quantity gets that quantity, and a
date is never a place."""

from __future__ import annotations

import numpy as np
import pytest

from ragcli.answer.answer_types import fits
from ragcli.answer.copying import read
from ragcli.answer.focus import is_heading
from ragcli.answer.quantities import widen
from ragcli.answer.question import Question
from ragcli.llm.constrain import SpanDecoder, Vocabulary
from ragcli.records import StoredChunk

NBSP, THIN = "\u00a0", "\u202f"
# One token a byte, token 0 ends the answer: the decoder then copies what the test spells.
VOCAB = Vocabulary.build([b""] + [bytes([i]) for i in range(1, 256)], [0])


def copy(context: list[str], spelled: str, question: str) -> str:
    """What :func:`read` makes of a model that writes ``spelled`` byte by byte (list mode
    for a count question, as the asker decodes it)."""
    asked = Question.parse(question)
    dec = SpanDecoder(lambda: VOCAB, " ".join(context), ("I don't know",), lists=asked.counts)
    for byte in [*spelled.encode(), 0]:
        logits = np.full(256, -10.0, dtype=np.float32)
        logits[byte] = 10.0
        token = dec.choose(logits)
        assert token == byte, f"the decoder refused {bytes([byte])!r} of {spelled!r}"
        if token == 0:
            break
        dec.advance(token)
    dec.finish()
    return read(dec, asked, context).text


@pytest.mark.parametrize(
    ("sentence", "spelled", "question", "answer"),
    [
        # Told to list, the model takes the comma of a number for a list's.
        (
            "The Zorblat Park stadium holds 41,000 spectators.",
            "41,000",
            "How many spectators does the Zorblat Park stadium hold?",
            "41,000",
        ),
        (
            "Quenby is a market town with a population of 12,500.",
            "12,500",
            "How many people live in Quenby?",
            "12,500",
        ),
        (
            "Its library holds 1,250,000 books and 3 reading rooms.",
            "1,250,000",
            "How many books does the Quenby library hold?",
            "1,250,000",
        ),
        # Stopped inside the number, or at its scale word: the whole number as written.
        ("The stadium holds 41,000 spectators.", "41", "How many seats are there?", "41,000"),
        ("Its budget is £4.2 million a year.", "£4.2", "What is its budget?", "£4.2 million"),
        (
            "La construction a coûté 312,4 millions d'euros.",
            "312",
            "Combien a coûté la construction ?",
            "312,4 millions d'euros",
        ),
        (
            "Le pont mesure 1 284 mètres.",
            "1",
            "Quelle est la longueur du pont ?",
            "1 284 mètres",
        ),
        (
            f"En moyenne, 48{THIN}300 véhicules le franchissent.",
            f"48{THIN}300",
            "Combien de véhicules le franchissent ?",
            f"48{THIN}300",
        ),
        ("The river is 212.5 km long.", "212", "How long is the river?", "212.5 km"),
        ("It can fall to −32 °C in winter.", "−32", "How cold can it get?", "−32 °C"),
        # A list is still a list, and a range's dash is no minus sign.
        (
            "The line has depots in Fennick, Halloway and Brede.",
            "Fennick, Halloway, Brede",
            "How many depots does the line have?",
            "3 (Fennick, Halloway, Brede)",
        ),
        ("It was built 1820-1835 by masons.", "1835", "When was it finished?", "1835"),
        # A number that opens a range comes with its other end.
        (
            "The town hall was built between 1820 and 1835.",
            "1820",
            "When was the town hall built?",
            "between 1820 and 1835",
        ),
        ("Il fut construit de 1820 à 1835.", "1820", "Quand fut-il construit ?", "de 1820 à 1835"),
    ],
)
def test_a_copied_number_is_the_whole_number(sentence, spelled, question, answer):
    assert copy([sentence, "Nothing else is said."], spelled, question) == answer


def test_widening_leaves_other_numbers_alone():
    text = "en 2019 100\u202f000 visiteurs, et 3 salles"

    def widened(sub: str) -> str:
        a = text.index(sub)
        a, b = widen(text, a, a + len(sub), number_asked=False)
        return text[a:b]

    assert widened("100") == "100\u202f000"  # the year before it is another number
    assert widened("2019") == "2019"
    assert widened("salles") == "salles"


@pytest.mark.parametrize(
    "question",
    [
        "Where was Orla Venn born?",
        "What is the place of birth of Orla Venn?",
        "In which town was Orla Venn born?",
        "Quel est le lieu de naissance d'Orla Venn ?",
        "Où Orla Venn est-elle née ?",
    ],
)
def test_a_date_is_never_the_answer_to_a_place_question(question):
    asked = Question.parse(question)
    assert asked.wants == "place"
    for date in ("12 March 1948", "born on 12 March 1948", "le 12 mars 1948", "in 1948"):
        assert not fits(asked.wants, date), date
    assert fits(asked.wants, "Tarnby")
    assert fits(asked.wants, "Tarnby, in 1948")


def test_a_heading_is_not_an_answer():
    text = "## L'essentiel en 30 secondes\n\nLe phare a été automatisé parce que..."
    chunk = StoredChunk("sorrel.md", 0, 1, 3, text, 20, heading="L'île de Sorrel", id=1)
    assert is_heading("L'essentiel en 30 secondes", [chunk])
    assert is_heading("L'île de Sorrel", [chunk])
    assert not is_heading("parce que plus personne ne voulait vivre seul", [chunk])
