"""The question, read once: what it asks for and what it names.

Every stage after retrieval needs something of the question: its shape (a span, yes/no,
a count) decides what the model may copy, the type it asks for (a date, a place) what
the verdict accepts, the names, versions and names from code it gives what the answer's
sentences must hold, the noun a count question counts what the tool counts, and its
language the words the tool answers in. :meth:`Question.parse` reads all of it once, at
the start of :meth:`ragcli.answer.asker.Asker.ask`; the pages it names are added once the
passages are known (:meth:`Question.naming`). The stages take the value, never the text
alone, so no stage parses the question again.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING

from . import answer_types
from .grounding import NAME, bare_words, content_words, names
from .language import detect

if TYPE_CHECKING:
    from ..records import Hit

# A version ("3.11") or a year, standing alone: a number inside a name ("IEEE-754",
# "UTF-8") names the subject, which the answer's own sentence need not repeat.
_VERSION = re.compile(r"(?<![\w.-])(?:\d+(?:\.\d+)+|(?:1[5-9]|20)\d\d)(?![\w-]|\.\d)")
# Every number written in the question: two questions that name different ones do not
# share a cached answer.
_NUMBER = re.compile(r"\d+(?:[.,:]\d+)*")
# A name from code: with an underscore in it (relay_domains, __next__, PyRun_SimpleString)
# or dotted between words (str.split, concurrent.futures.ThreadPoolExecutor), a call's
# brackets aside. A file's name (requirements.txt, main.cf) says where, not what is asked.
_CODE_NAME = re.compile(
    r"(?<![\w.])(?:\w*[A-Za-z]\w*_\w*|_\w+|[A-Za-z_]\w+(?:\.[A-Za-z_]\w+)+)(?:\(\))?(?![\w])"
)
_FILE_SUFFIX = re.compile(
    r"\.(?:txt|cf|cfg|conf|ini|toml|json|ya?ml|py|pyc|md|rst|html?|sh|c|h|db|log)$", re.I
)

# -- the noun a count question counts ------------------------------------------------
IRREGULAR = {
    "children": "child",
    "people": "person",
    "men": "man",
    "women": "woman",
    "fils": "fils",
}
# Words that end the noun phrase of "how many ...": the verb or a preposition after it.
_NP_END = frozenset(
    "does do did has have had is are was were will would can could should may might "
    "in on at for of to from with by that which who live lived there here "
    "the a an this these those his her their its my your".split()
)
_EN = re.compile(r"\b(?:how\s+many|(?:the\s+)?number\s+of)\s+((?:[\w'’-]+\s*){1,4})", re.I)
_FR = re.compile(r"\b(?:combien|nombre)\b.*?\b(?:de|d['’])\s*([\w'’-]+)", re.I)


def singular(word: str) -> str:
    """The singular of an English or French noun, lower case ("children" -> "child",
    "affluents" -> "affluent", "chevaux" -> "cheval")."""
    w = word.casefold()
    if w in IRREGULAR:
        return IRREGULAR[w]
    if w.endswith("people"):
        return w[: -len("people")] + "person"
    if w.endswith("ies") and len(w) > 4:
        return w[:-3] + "y"
    if w.endswith(("eaux", "eux")):
        return w[:-1]
    if w.endswith("aux") and len(w) > 4:
        return w[:-3] + "al"
    if w.endswith(("s", "x")) and not w.endswith("ss") and len(w) > 3:
        return w[:-1]
    return w


def asked_nouns(text: str) -> tuple[str, ...]:
    """What a count question counts, singular: ("child",) of "How many children does Ann
    have?", ("brother", "sister") of "How many brothers and sisters...", ("affluent",) of
    "Combien la Loire a-t-elle d'affluents principaux ?"; () when none is read."""
    if m := _EN.search(text):
        words = []
        for w in m.group(1).split():
            if w.casefold() in _NP_END or w[:1].isupper():
                break
            words.append(w.strip("'’"))
        if "and" in words:  # "brothers and sisters"
            return tuple(singular(w) for w in words if w != "and")[-2:]
        # The head is the plural noun ("close friends", "countries co-hosted").
        plural = [w for w in words if singular(w) != w.casefold()]
        return (singular((plural or words)[-1]),) if words else ()
    if m := _FR.search(text):
        return (singular(m.group(1)),)
    return ()


# The wholes a question may count, and the parts a page may list them by.
_PARTS = {
    "child": ("son", "daughter"),
    "sibling": ("brother", "sister"),
    "parent": ("mother", "father"),
    "enfant": ("fils", "fille"),
}
_PLURAL = {v: k for k, v in IRREGULAR.items()}


def _word_pattern(noun: str) -> str:
    forms = {noun, _PLURAL.get(noun, ""), noun + "s", noun + "es", noun + "x"}
    if noun.endswith("y"):
        forms.add(noun[:-1] + "ies")
    if noun.endswith("al"):
        forms.add(noun[:-2] + "aux")
    if noun.endswith("person"):
        forms.add(noun[: -len("person")] + "people")
    return "|".join(sorted((re.escape(f) for f in forms if f), key=len, reverse=True))


def mentions(nouns: Sequence[str]) -> re.Pattern[str]:
    """A mention of ``nouns`` (singular) or of their parts, singular or plural: "children",
    "a son", "daughters" for ("child",)."""
    forms = list(nouns)
    for n in nouns:
        forms += _PARTS.get(n, ())
    words = "|".join(_word_pattern(n) for n in dict.fromkeys(forms))
    return re.compile(rf"(?<![\w-])(?:{words})(?![\w-])", re.I)


def _code_names(text: str) -> frozenset[str]:
    found = {m.group(0).removesuffix("()") for m in _CODE_NAME.finditer(text)}
    return frozenset(n.rsplit(".", 1)[-1] for n in found if not _FILE_SUFFIX.search(n))


@dataclass(frozen=True)
class Question:
    """One question as every stage reads it. Made by :meth:`parse`; immutable."""

    text: str
    language: str  # "en" or "fr": the tool's own words follow it
    shape: str  # how the model may answer: "span", "yesno" or "count"
    wants: str  # the type asked for: date, place, number, person, yesno or other
    names: frozenset[str]  # capitalized words after the first, lower case, without 's
    capitalized: frozenset[str]  # the same words as written, lower case, 's kept
    words: frozenset[str]  # content words without a final 's
    content: tuple[str, ...]  # content words in order, once each
    versions: frozenset[str]  # versions and years standing alone ("3.11", "1999")
    numbers: frozenset[str]  # every number written in it
    code_names: frozenset[str]  # names from code (their last dotted part)
    counted: tuple[str, ...]  # what a count question counts, singular
    mention: re.Pattern[str] | None  # a sentence's mention of it or of its parts
    # The pages among the passages read whose title the question names: path -> title.
    pages: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    @classmethod
    def parse(cls, text: str) -> Question:
        shape = answer_types.kind(text)
        counted = asked_nouns(text) if shape == "count" else ()
        return cls(
            text=text,
            language=detect(text),
            shape=shape,
            wants=answer_types.wants(text, shape),
            names=frozenset(names(text)),
            capitalized=frozenset(m.group(0).lower() for m in NAME.finditer(text.strip())),
            words=frozenset(bare_words(text)),
            content=tuple(dict.fromkeys(content_words(text))),
            versions=frozenset(_VERSION.findall(text)),
            numbers=frozenset(_NUMBER.findall(text)),
            code_names=_code_names(text),
            counted=counted,
            mention=mentions(counted) if counted else None,
        )

    @property
    def counts(self) -> bool:
        """A "how many" question: the model lists, the tool counts."""
        return self.shape == "count"

    def pages_among(self, hits: Sequence[Hit]) -> dict[str, str]:
        """The pages among ``hits`` titled with a name the question gives: path -> title.

        A page titled "Ann Lee" is where the facts of "Who is Ann Lee married to?" are; the
        other passages are someone else's, and their sentences are what a small model
        copies when the page is silent or says it in other words (a neighbour's spouse, a
        sibling's children). The title must be named whole, and hold a capitalized word of
        the question."""
        pages = {}
        for h in hits:
            title = bare_words(h.chunk.title)
            if title and title <= self.words and title & self.names:
                pages[h.chunk.path] = h.chunk.title.casefold()
        return pages

    def naming(self, pages: Mapping[str, str]) -> Question:
        """This question with the pages it names among the passages read."""
        return dataclasses.replace(self, pages=MappingProxyType(dict(pages)))
