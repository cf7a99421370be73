"""The language a question is asked in, and the tool's own words in it.

A question in French over French pages is answered with the pages' own words, so the
answer is French already; what the tool says itself ("I don't know", "Yes") must follow
the question. The model is still prompted in English: its fixed replies are read as
English and shown in the asker's language. JSON keeps ``answered`` as the signal that
does not depend on the language.
"""

from __future__ import annotations

import re

# Words frequent in French questions and rare in English ones (no "a", "du", "de" that
# English names and loan words share).
FRENCH = frozenset(
    "le la les un une des est sont quel quelle quels quelles qui que quoi où combien "
    "pourquoi comment quand dans sur avec pour par au aux ce cette ces son sa ses leur "
    "leurs il elle ils elles été était fut a-t-il a-t-elle est-ce qu ne pas plus "
    "et ou mais donc".split()
)
ENGLISH = frozenset(
    "the a an is are was were what which who whom whose where when why how does do did "
    "of in on for with to and or not can could has have had by from this that".split()
)
_WORD = re.compile(r"[^\W\d_]+(?:-[^\W\d_]+)*", re.UNICODE)

WORDS: dict[str, dict[str, str]] = {
    "en": {"idk": "I don't know", "yes": "Yes", "no": "No"},
    "fr": {"idk": "Je ne sais pas", "yes": "Oui", "no": "Non"},
}


def detect(question: str) -> str:
    """``fr`` when French function words outnumber English ones, else ``en``."""
    words = [w.casefold() for w in _WORD.findall(question.replace("’", "'").replace("'", " "))]
    fr = sum(w in FRENCH for w in words)
    en = sum(w in ENGLISH for w in words)
    return "fr" if fr > en else "en"


def say(text: str, lang: str) -> str:
    """``text`` (one of the tool's own replies, in English) in the language ``lang`` (a
    question's :func:`detect`); any other text as it is."""
    if lang == "en":
        return text
    for key, english in WORDS["en"].items():
        if text == english:
            return WORDS[lang][key]
    return text
