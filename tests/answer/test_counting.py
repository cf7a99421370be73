"""Counts read in code from the page a question names: the noun asked for, its parts, a
number stated, lists that belong to someone else (no model: the sentences are given)."""

from __future__ import annotations

import pytest

from ragcli.answer.copying import Copied
from ragcli.answer.counting import from_page
from ragcli.answer.question import Question, asked_nouns

PAGE = [
    "Ada Wren is a weaver in Kelby.",
    "She has two sisters, Bea Wren and Cat Wren.",
    "Bea's children, Dov, Eli and Fay, often stay with Ada in the summer.",
    "Her closest friends: Gil Orr, Hal Orr, Ivy Sand and Jo Pike.",
    "She has raised two sons, Kai and Lev, and a daughter, Mo.",
    "Family: Husband: Ned Wren; Daughter: Ola; Son: Leo.",
]


def _count(question: str, sentences=PAGE, on_page=None, model=None) -> str | None:
    on_page = [True] * len(sentences) if on_page is None else on_page
    found = from_page(Question.parse(question), sentences, on_page, model)
    return found.text if found else None


@pytest.mark.parametrize(
    ("question", "nouns"),
    [
        ("How many children does Ada Wren have?", ["child"]),
        ("How many close friends does Ada Wren have?", ["friend"]),
        ("How many brothers and sisters does Ada Wren have?", ["brother", "sister"]),
        ("What is the number of landmarks in Kelby?", ["landmark"]),
        ("How many countries co-hosted the Cup?", ["country"]),
        ("Combien la Loire a-t-elle d'affluents principaux ?", ["affluent"]),
        ("Combien de châteaux compte la vallée ?", ["château"]),
        ("How many does she have?", []),
    ],
)
def test_what_a_question_counts(question, nouns):
    assert list(asked_nouns(question)) == nouns


def test_a_list_after_the_noun_is_counted():
    assert _count("How many close friends does Ada Wren have?") == (
        "4 (Gil Orr, Hal Orr, Ivy Sand, Jo Pike)"
    )


def test_the_parts_of_a_whole_add_up_across_sentences():
    # sons + daughter of one sentence, the labelled entries of another, the husband left out
    assert _count("How many children does Ada Wren have?") == "5 (Kai, Lev, Mo, Ola, Leo)"


def test_a_list_that_belongs_to_someone_else_is_not_counted():
    # Bea's children are the nieces and nephews; only Ada's own count.
    page = PAGE[:3]
    assert _count("How many children does Ada Wren have?", page) is None
    other = ["Bea has three children of her own: Dov, Eli and Fay."]
    assert _count("How many children does Ada Wren have?", other) is None
    # A brother who shares her family name is still someone else.
    kin = ["Her children are Ari and Bo.", "Her brother Cal Wren has two children, Di and Em."]
    assert _count("How many children does Ada Wren have?", kin) == "2 (Ari, Bo)"


def test_a_stated_number_is_the_count():
    town = ["Visitors come for four landmarks: the Old Well, the Oak and the Mill."]
    assert _count("How many landmarks does Kelby have?", town).startswith("4 (")
    assert _count("How many sisters does Ada Wren have?") == "2 (Bea Wren, Cat Wren)"
    only = ["Ada's only sibling is her brother, Tom Wren."]
    assert _count("How many siblings does Ada Wren have?", only) == "1 (Tom Wren)"


def test_the_family_someone_is_one_of_is_not_their_count():
    born = ["Ada Wren was the eldest of four children.", "Her children are Ari and Bo."]
    assert _count("How many children does Ada Wren have?", born) == "2 (Ari, Bo)"


def test_two_numbers_for_one_noun_are_left_to_the_sentence_the_model_chose():
    bible = ["About 180 copies were printed.", "Only 49 copies survive today."]
    question = "How many copies of the Bible survive?"
    assert _count(question, bible) is None  # the model's own count stands
    model = Copied("49", False, [1], [])
    assert _count(question, bible, model=model) == "49"


def test_only_the_subjects_page_is_read():
    assert _count("How many close friends does Ada Wren have?", on_page=[False] * 6) is None


def test_the_models_names_join_a_list_a_clause_interrupts():
    loire = [
        "Ses principaux affluents sont l'Allier, qui la rejoint en aval de Nevers, puis "
        "le Cher, l'Indre et la Vienne.",
        "Le dernier de ces grands affluents, la Maine, naît près d'Angers.",
    ]
    model = Copied(
        "4 (Allier, Cher, Indre, Vienne)", False, [0], ["Allier", "Cher", "Indre", "Vienne"]
    )
    question = "Combien la Loire a-t-elle d'affluents principaux ?"
    assert _count(question, loire, model=model) == "5 (Allier, Cher, Indre, Vienne, Maine)"
    assert _count(question, loire) == "2 (Allier, Maine)"  # alone, the tool reads less
    # A label the model took for a name is not a member.
    family = ["Family: Husband: Ned Wren; Daughter: Ola; Son: Leo."]
    model = Copied("3 (Ola, Son, Leo)", False, [0], ["Ola", "Son", "Leo"])
    assert _count("How many children does Ada Wren have?", family, model=model) == "2 (Ola, Leo)"


@pytest.mark.parametrize(
    ("question", "sentence"),
    [
        (
            "Combien de véhicules passent sur le pont de Valmery ?",
            "Il voit passer 48 300 véhicules.",
        ),
        ("How many copies of Orla Venn's books were sold?", "They sold 3.5 million copies."),
        ("How many people live in Quenby?", "Quenby has 12,500 people in all."),
    ],
)
def test_a_quantity_the_page_states_is_no_count(question, sentence):
    # "300" of "48 300" and "5" of "3.5" are parts of one number: the model's copy of the
    # whole number stands, the page gives no count to put in its place.
    assert from_page(Question.parse(question), [sentence], [True]) is None
