"""The rules of the verdict that need no model: the type a question asks for, the language
it is asked in, the names it gives, and whether the answer's sentences speak of it."""

from __future__ import annotations

import numpy as np
import pytest

from ragcli.answer.answer_cache import AnswerCache, asks_alike
from ragcli.answer.answer_types import fits, kind, wants
from ragcli.answer.language import detect, say
from ragcli.answer.question import Question
from ragcli.answer.retrieval import lowercase_names
from ragcli.answer.verdict import adds_something, code_names_named, numbers_named, same_start

Q = Question.parse


@pytest.mark.parametrize(
    ("question", "wanted"),
    [
        ("When was Ann Lee born?", "date"),
        ("In which year did the bridge open?", "date"),
        ("En quelle année le pont a-t-il ouvert ?", "date"),
        ("Quand l'Institut a-t-il ouvert ses portes ?", "date"),
        ("Where was Ann Lee born?", "place"),
        ("In which city does she live?", "place"),
        ("Où la Loire prend-elle sa source ?", "place"),
        ("Dans quelle ville Pasteur est-il né ?", "place"),
        ("How long is the Loire?", "number"),
        ("Quelle est la hauteur du barrage ?", "number"),
        ("Who won the final?", "person"),
        ("Qui a écrit ce roman ?", "person"),
        ("Is the cache on by default?", "yesno"),
        ("Which option turns colours off?", "other"),
        ("Pourquoi le canal a-t-il été creusé ?", "other"),
    ],
)
def test_what_a_question_asks_for(question, wanted):
    assert wants(question, kind(question)) == wanted
    assert Question.parse(question).wants == wanted


def test_a_span_of_the_wrong_type_does_not_fit():
    assert not fits(Q("Where was Ann Lee born?").wants, "3 March 1961")
    assert not fits(Q("Where was Ann Lee born?").wants, "in 1961")
    assert fits(Q("Where was Ann Lee born?").wants, "Tarnby")
    assert not fits(Q("When was Ann Lee born?").wants, "Tarnby")
    assert fits(Q("When was Ann Lee born?").wants, "3 March 1961")
    assert fits(Q("Quand est-il né ?").wants, "le 27 décembre 1822")
    assert not fits(Q("Who won the final?").wants, "241")
    assert fits(Q("Who won the final?").wants, "Australia")
    assert not fits(Q("Combien de coureurs ont gagné ?").wants, "Anquetil")
    assert fits(Q("Which option turns colours off?").wants, "--no-color")


def test_french_count_and_yes_no_shapes():
    assert kind("Combien d'écluses y a-t-il sur le canal ?") == "count"
    assert kind("Quel est le nombre d'affluents ?") == "count"
    assert kind("Est-ce que le comté est pasteurisé ?") == "yesno"


def test_a_yes_no_question_may_ask_in_its_last_clause():
    assert kind("I rely on luser_relay; do I need to disable local_recipient_maps?") == "yesno"
    assert kind("When the server starts, does it read main.cf again?") == "yesno"
    assert kind("Selon la fiche, est-ce que le comté est pasteurisé ?") == "yesno"
    assert kind("Looking at the ps output, how do I tell the build apart?") == "span"
    assert kind("In Python 3, is it a list or a tuple?") == "span"


def test_the_models_first_token_agrees_in_another_case_or_spelled_out():
    assert same_start("0", "zero")
    assert same_start("3", "three bowls")
    assert same_start("the", "The Miller")
    assert same_start(" Feb", "February 1991")
    assert not same_start("December", "February 1991")
    assert not same_start("3", "2 (Ada, Bo)")
    assert not same_start("", "zero")
    assert not same_start("a", "Apple")
    assert same_start("a", "A")


def test_the_tool_speaks_the_language_of_the_question():
    assert detect("Où la Loire prend-elle sa source ?") == "fr"
    assert detect("Quels cours d'eau se rejoignent à Lyon ?") == "fr"
    assert detect("Where does the Loire rise?") == "en"
    assert detect("Which flag sets le mode?") == "en"
    assert say("I don't know", detect("Qui a écrit ce roman ?")) == "Je ne sais pas"
    assert say("Yes", detect("Est-ce que le lait est cru ?")) == "Oui"
    assert say("I don't know", detect("Who wrote it?")) == "I don't know"
    assert say("Rhône", detect("Qui ?")) == "Rhône"  # the documents' words stay as they are


def test_lower_case_words_that_read_as_names():
    assert lowercase_names("How do I set up fail2ban for SASL?") == ["fail2ban"]
    assert lowercase_names("Which attrs package helper makes classes?") == ["attrs"]
    assert lowercase_names("Quelle fonction de la bibliothèque pandas lit un fichier ?") == [
        "pandas"
    ]
    assert lowercase_names("How is pyproject.toml read?") == ["pyproject.toml"]
    # Describing words and paraphrases are not names.
    assert lowercase_names("What is in the standard library?") == []
    assert lowercase_names("Which stopwatch tool times code, e.g. a loop?") == []


def test_a_number_the_question_gives_must_be_in_the_evidence():
    assert not numbers_named(Q("When was Python 3.12 released?"), ["Python 3.11 came out in 2022."])
    assert numbers_named(
        Q("When was Python 3.11 released?"), ["What's new 3.11", "It came in 2022."]
    )
    assert numbers_named(Q("When was it released?"), ["It came out in 2022."])


def test_a_name_from_code_the_question_gives_must_be_in_the_evidence():
    asked = "What is the default smtp_connection_cache_time_limit?"
    other = "smtpd_policy_service_timeout (default: 100s): The time limit to connect."
    assert not code_names_named(Q(asked), [other])
    assert code_names_named(Q(asked), ["smtp_connection_cache_time_limit (default: 2s): ..."])
    assert code_names_named(Q("What does __next__() raise at the end?"), ["__next__() raises it."])
    # Of a dotted name, its last part: a method under its class's heading.
    method = "Which argument of shutil.rmtree() makes it ignore errors?"
    assert code_names_named(Q(method), ["rmtree(path, ignore_errors=False)"])
    assert not code_names_named(Q(method), ["copytree(src, dst, dirs_exist_ok=False)"])
    # A file's name says where, not what: the answer's sentence need not repeat it.
    assert code_names_named(Q("Which setting in main.cf turns it off?"), ["Set x = no."])
    assert code_names_named(Q("Where was it released?"), ["e.g. in 2022"])  # no name asked


def test_an_answer_must_say_more_than_the_question():
    assert not adds_something(Q("What punctured the tyre of the plane?"), "tyre")
    assert not adds_something(
        Q("Pourquoi les vaches n'ont-elles pas droit à l'ensilage ?"), "ensilage"
    )
    assert not adds_something(
        Q("The json module handles a format; what does its name stand for?"), "JSON"
    )
    assert adds_something(Q("What punctured the tyre of the plane?"), "a strip of metal")
    # Offered alternatives are answered with one of them; counts and yes/no are their own.
    assert adds_something(Q("Which is faster, a list or a tuple?"), "tuple")
    assert adds_something(Q("Is the tyre punctured?"), "Yes")
    assert adds_something(Q("How many tyres does it have?"), "tyres")


def test_an_answer_is_reused_only_for_a_question_of_the_same_type(tmp_path):
    assert not asks_alike(Q("Who is Ann Lee's brother?"), Q("How many brothers does Ann Lee have?"))
    assert not asks_alike(Q("When was Ann Lee born?"), Q("Where was Ann Lee born?"))
    assert asks_alike(Q("Where was Ann Lee born?"), Q("Where is Ann Lee from?"))
    cache = AnswerCache(tmp_path / "answers.sqlite", 1 << 20, 0.9)
    vector = np.ones(4, dtype=np.float32)
    fields = {
        "answer": "Tom Lee",
        "raw_answer": "Tom Lee",
        "reason": "answered",
        "grounded": True,
        "support": 1.0,
        "cited": [],
        "model": "m",
        "evidence": [],
    }
    cache.store("scope", "key", "Who is Ann Lee's brother?", vector, fields)
    assert cache.lookup("key", Q("Who is Ann Lee's brother?"), vector) is not None
    # The same passages and a vector just as close: still not the answer to a count.
    assert cache.lookup("key", Q("How many brothers does Ann Lee have?"), vector) is None
    cache.close()
