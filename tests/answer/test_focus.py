"""How passages are cut into the sentences the model reads."""

from ragcli.answer.focus import focus, sentences
from ragcli.answer.prompt import completion_prompt, in_place
from ragcli.answer.question import Question
from ragcli.index.formats.html import html_text
from ragcli.records import Hit, StoredChunk


def _hit(rank: int, path: str, heading: str, text: str, similarity: float) -> Hit:
    chunk = StoredChunk(path, 0, 1, 3, text, 40, heading=heading, id=rank)
    return Hit(chunk, 1.0 / rank, rank, similarity)


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


def test_a_list_is_one_sentence_led_by_its_heading():
    text = (
        "# Saltreth\n\nMarket day is Saturday.\n\n## Landmarks\n\n- The Miller's Barn\n"
        "- The Crooked Bridge\n- The Cinder Steps\n\nThe options are:\n\n1. fast\n2. safe\n"
    )
    assert sentences(text) == [
        "Saltreth",
        "Market day is Saturday.",
        "Landmarks: The Miller's Barn; The Crooked Bridge; The Cinder Steps.",
        "The options are: fast; safe.",
    ]


def _asked(text: str, hits: list[Hit]) -> Question:
    """The question with the pages it names among the top four, as the asker reads it."""
    question = Question.parse(text)
    return question.naming(question.pages_among(hits[:4]))


def test_sentences_far_from_the_best_passage_are_not_read(embedder):
    hits = [
        _hit(1, "ann.md", "Ann Lee", "Ann Lee is a potter. In 1990 Ann married Bo Park.", 0.70),
        _hit(2, "cy.md", "Cy Ode", "Cy Ode is a baker. Her husband is Dan Ode.", 0.45),
        _hit(3, "eve.md", "Eve Orr › Family", "Eve Orr is a weaver. She married Finn Orr.", 0.60),
    ]
    chosen = focus(_asked("Who is the potter's husband?", hits), hits, embedder, passages=4, keep=8)
    assert "Her husband is Dan Ode." not in chosen.sentences  # 0.25 below the best
    assert "She married Finn Orr." in chosen.sentences  # 0.10 below: still read
    assert "In 1990 Ann married Bo Park." in chosen.sentences


def test_a_question_that_names_a_page_is_answered_from_it(embedder):
    hits = [
        _hit(1, "cy.md", "Cy Ode", "Cy Ode is a baker. Her husband is Dan Ode.", 0.70),
        _hit(2, "ann.md", "Ann Lee › Family", "Ann Lee is a potter. She is single.", 0.60),
        _hit(3, "bo.md", "Bo Park", "Bo Park was born in 1950. He often visits Ann Lee.", 0.60),
        _hit(4, "ann.md", "Ann Lee › Friends", "Her friends are Cy and Bo.", 0.55),
    ]
    chosen = focus(_asked("Who is Ann Lee's husband?", hits), hits, embedder, passages=4, keep=8)
    # Her page, and the sentence of another page that names her; not Cy's husband, nor
    # Bo's birth year.
    assert sorted(chosen.sentences) == [
        "Ann Lee is a potter.",
        "He often visits Ann Lee.",
        "Her friends are Cy and Bo.",
        "She is single.",
    ]
    # A name without a page of its own, or a title the question does not give whole,
    # keeps every sentence.
    for question in ("Who is Dan's wife?", "Who is Ann's husband?"):
        assert len(focus(_asked(question, hits), hits, embedder, 4, 8).sentences) == 7


def test_the_sentence_most_likely_to_answer_comes_first_and_is_read_in_place(embedder):
    hits = [
        _hit(1, "ann.md", "Ann Lee", "Ann Lee is a potter. In 1990 Ann married Bo Park.", 0.70),
        _hit(2, "eve.md", "Eve Orr", "Eve Orr is a weaver. She married Finn Orr in 1985.", 0.60),
    ]
    asked = _asked("In which year did Ann Lee marry Bo Park?", hits)
    chosen = focus(asked, hits, embedder, passages=4, keep=8)
    assert sorted(chosen.best) == list(range(len(chosen.sentences)))
    assert chosen.sentences[chosen.best[0]] == "In 1990 Ann married Bo Park."
    # A fifth of the characters: the best sentence alone; all of them: every one.
    assert in_place(chosen.sentences, chosen.best, 0.2) == (chosen.best[0],)
    assert in_place(chosen.sentences, chosen.best, 1.0) == tuple(range(len(chosen.sentences)))
    assert in_place(chosen.sentences, chosen.best, 0.0) == ()


def test_sentences_read_in_place_are_named_by_their_piece():
    # An empty line is no piece: the indexes after it move down by one.
    prompt = completion_prompt("Q?", ["One.", "  ", "Two.", "Three."], fresh=(2, 3))
    assert prompt.pieces == (" One.", " Two.", " Three.")
    assert prompt.fresh == (1, 2)
