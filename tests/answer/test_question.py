"""The question is read once: one module holds the readers, every stage takes the value."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from ragcli.answer.question import Question

PACKAGE = Path(__file__).resolve().parents[2] / "ragcli"
# The readers of a question's text; only answer/question.py may call them.
READERS = {"kind", "wants", "names", "bare_words", "asked_nouns", "detect", "lowercase_names"}


def _calls(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call):
            f = node.func
            found.add(f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", ""))
    return found


def test_only_the_question_module_reads_the_question():
    readers = {
        str(path.relative_to(PACKAGE)): sorted(_calls(path) & READERS)
        for path in PACKAGE.rglob("*.py")
        if path.name != "question.py"
    }
    # Retrieval reads lower-case names of the text it is given (rag search has no Question).
    assert {k: v for k, v in readers.items() if v} == {"answer/retrieval.py": ["lowercase_names"]}


@pytest.mark.parametrize(
    ("text", "shape", "wants", "counted"),
    [
        ("How many children does Ann Lee have?", "count", "number", ("child",)),
        ("How many brothers and sisters does Ann have?", "count", "number", ("brother", "sister")),
        ("Combien la Loire a-t-elle d'affluents ?", "count", "number", ("affluent",)),
        ("Is the cache on by default?", "yesno", "yesno", ()),
        ("What is the place of birth of Orla Venn?", "span", "place", ()),
        ("When did Python 3.11 come out?", "span", "date", ()),
    ],
)
def test_what_a_question_asks_for(text, shape, wants, counted):
    q = Question.parse(text)
    assert (q.shape, q.wants, q.counted) == (shape, wants, counted)
    assert q.counts == (shape == "count") and (q.mention is not None) == bool(counted)


def test_what_a_question_names():
    q = Question.parse("Does shutil.rmtree() in Python 3.11 honour relay_domains for Ann's files?")
    assert q.names == {"python", "ann"}
    assert q.versions == {"3.11"} and q.numbers == {"3.11"}
    assert q.code_names == {"rmtree", "relay_domains"}
    assert q.language == "en" and Question.parse("Où est née Ann ?").language == "fr"
    assert q.pages == {} and q.naming({"ann.md": "ann lee"}).pages == {"ann.md": "ann lee"}
