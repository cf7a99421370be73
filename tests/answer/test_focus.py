"""How passages are cut into the sentences the model reads."""

from ragcli.answer.focus import sentences
from ragcli.index.read import html_text


def test_latin_abbreviations_do_not_end_a_sentence():
    text = "At the end x is 4, so they all return 4**2, i.e. 16. Use a tuple, e.g. (1, 2). Done."
    assert sentences(text) == [
        "At the end x is 4, so they all return 4**2, i.e. 16.",
        "Use a tuple, e.g. (1, 2).",
        "Done.",
    ]


def test_sentences_still_end_before_capitals_and_digits():
    assert sentences("It was released in 1991. 3 years later, 1.0 came out. Then 2.0.") == [
        "It was released in 1991.",
        "3 years later, 1.0 came out.",
        "Then 2.0.",
    ]
    # Lower case after a full stop is not a new sentence (a file name, a version).
    assert sentences("Open setup.py. then run it.") == ["Open setup.py. then run it."]


def test_output_of_an_interpreter_session_is_not_read_into_the_next_paragraph():
    page = (
        "<p>Slices can be joined:</p>"
        "<pre>&gt;&gt;&gt; word[:2] + 'py'\n'Pypy'</pre>"
        "<p>The built-in function len() returns the length of a string.</p>"
    )
    lines, _, _ = html_text(page)
    got = sentences("\n".join(lines))
    assert "The built-in function len() returns the length of a string." in got
    assert not any("'Pypy' The" in s for s in got), got
