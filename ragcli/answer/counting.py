"""Counts read in code from the subject's own page: the model points, the tool counts.

Asked how many children someone has, a 1.5B model copies the wrong list (her sisters, a
brother's children), stops inside one ("two sons, A and B, and two daughters, C" is
three), or gives a year. The question's noun ("children", "close friends",
"affluents") says what is counted; the sentences shown from the page the question names
say it: a list after the noun ("Her children are A, B and C", "Friends: A; B"), a number
before it ("four landmarks"), or the noun's parts ("two sons ... a daughter",
"Daughter: A"). Lists of the same thing in several sentences add up, each member once.
A list that belongs to someone else ("Jolvette's children", "Bonnas has five children")
is not counted.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .copying import LEADING_ARTICLE, NAMES, Copied, list_items
from .quantities import NUMBER
from .question import singular

if TYPE_CHECKING:
    from ..records import Hit
    from .focus import Focus
    from .question import Question

_NUMBERS = {
    w: n
    for n, ws in enumerate(
        (
            (),
            ("a", "an", "one", "only", "single", "un", "une", "seul", "seule"),
            ("two", "deux", "both"),
            ("three", "trois"),
            ("four", "quatre"),
            ("five", "cinq"),
            ("six",),
            ("seven", "sept"),
            ("eight", "huit"),
            ("nine", "neuf"),
            ("ten", "dix"),
            ("eleven", "onze"),
            ("twelve", "douze"),
        )
    )
    for w in ws
}


@dataclass(frozen=True)
class Group:
    """One mention of what is counted: the sentence, the number stated, the names listed."""

    sentence: int
    noun: str  # singular: the noun asked for, or one of its parts
    stated: int | None
    items: tuple[str, ...]


_LEAD = re.compile(
    r"(?:\s+of\s+(?:his|her|their|its)\s+own)?\s*"
    r"(?:[,:]|(?:are|were|is|was|include|includes|sont|est)\b)?\s*:?\s*"
    r"(?:(?:namely|called|named)\s+)?"
)
# A list of labelled entries ("Wife: A; Daughter: B") ends where the next label begins.
_NEXT_LABEL = re.compile(r"\s*[;,]\s*[A-Z][\w-]*\s*:.*")
_POSSESSOR = re.compile(r"([A-Z][\w-]+)['’]s?\s+(?:\w+\s+){0,2}$")
# "Bonnas has five children", "her brother Damir Osk has two children": whose they are
_OTHER_SUBJECT = re.compile(
    r"(?<![\w'’-])([A-Z][\w-]+(?:\s+[A-Z][\w-]+)*)\s+(?:has|had|have|owns|a|avait)\s+(?:\S+\s+){0,2}$"
)
_CLAUSE = re.compile(r"[;!?]|\.(?!\d)")  # not the point of "3.5"
# A quantity the page states before the noun, written with separators, decimals or a scale
# word ("48 300 véhicules", "3.5 million copies"): the model copies it whole, and no part
# of it is a count ("300").
_QUANTITY = re.compile(
    rf"(?P<n>{NUMBER.pattern})(?P<scale>\s+(?:thousand|million|billion|mille|millions?|"
    r"milliards?))?\s+(?:\S+\s+)?$",
    re.I,
)
_ONE_OF = re.compile(
    r"\b(?:of|among|de|d['’]entre|parmi)\s+(?:the\s+|les\s+)?(\w+)\s+(?:\S+\s+)?$", re.I
)
# who a clause may be about besides the question's subject: its pronouns (French possessives too)
_PRONOUNS = frozenset("he she they it his her their its il elle ils elles son sa ses".split())


def _groups(question: Question, sentences: Sequence[str]) -> list[Group]:
    """Each mention in ``sentences`` of what the question counts, or of its parts, with a
    number before it or names after it, that belongs to no one but the question's subject."""
    asked = {w.casefold() for w in re.findall(r"\w+", question.text)}
    noun = question.mention
    if noun is None:
        return []
    out = []
    for i, sentence in enumerate(sentences):
        for m in noun.finditer(sentence):
            clause = _CLAUSE.split(sentence[: m.start()])[-1]
            if (p := _POSSESSOR.search(clause)) and p.group(1).casefold() not in asked:
                continue  # "Jolvette's children"
            subject = _OTHER_SUBJECT.search(clause)
            who = {w.casefold() for w in subject.group(1).split()} if subject else set()
            if who and not (who <= asked or who & _PRONOUNS):
                continue  # "Bonnas has five children"
            if (one := _ONE_OF.search(clause)) and _number(one.group(1)) is not None:
                continue  # "the eldest of four children": the family she is one of
            if (q := _QUANTITY.search(clause)) and (q["scale"] or not q["n"].isdigit()):
                continue  # a quantity, not a count: the model's copy of it stands
            stated = _stated(clause)
            rest = sentence[m.end() :]
            lead = _LEAD.match(rest)
            listed = _NEXT_LABEL.sub("", LEADING_ARTICLE.sub("", rest[lead.end() :]))
            found = NAMES.match(listed) if lead.group(0) else None
            items = tuple(list_items([found.group(0)])) if found else ()
            if stated is not None or items:
                out.append(Group(i, singular(m.group(0)), stated, items))
    return out


def _is_label(item: str, sentence: str) -> bool:
    return bool(re.search(rf"(?<![\w-]){re.escape(item)}\s*:", sentence))


def _number(word: str) -> int | None:
    w = word.casefold()
    return int(w) if w.isdigit() else _NUMBERS.get(w)


def _stated(before: str) -> int | None:
    """The number right before the noun, or one word before it ("two younger brothers")."""
    for word in before.split()[-1:-3:-1]:
        if (n := _number(word)) is not None:
            return n
    return None


def _same(a: str, b: str) -> bool:
    """One member named twice: "Oreldin" and "Oreldin Wendton"."""
    x, y = a.casefold().split(), b.casefold().split()
    return x[: len(y)] == y or y[: len(x)] == x


def from_page(
    question: Question,
    sentences: Sequence[str],
    on_subject_page: Sequence[bool],
    model: Copied | None = None,
) -> Copied | None:
    """The count of what ``question`` asks for in the ``sentences`` shown from the page
    it names (``on_subject_page``, parallel), or None when they state none.

    The members named in every mention are counted once; a number the page states counts
    when it is more than the names given ("four landmarks" of which three are named).
    Names the ``model`` copied from a sentence that mentions the noun join that mention (a
    list a relative clause interrupts: "l'Allier, qui la rejoint ..., puis le Cher,
    l'Indre et la Vienne")."""
    nouns = question.counted
    if not nouns or not any(on_subject_page):
        return None
    shown = [s if on else "" for s, on in zip(sentences, on_subject_page, strict=True)]
    groups = _groups(question, shown)
    if not groups:
        return None
    members: list[str] = []
    named = question.names
    for g in groups:
        items = list(g.items)
        if model is not None and not model.abstained and g.sentence in model.sentences:
            # what the model ran on into from the next sentence stays out, and so do
            # labels ("Son" of "Daughter: Mia; Son: Leo")
            said = sentences[g.sentence]
            items += [x for x in model.items if x in said and not _is_label(x, said)]
        items = [x for x in list_items(items) if x.casefold() not in named]
        for x in items:
            if not any(_same(x, y) for y in members):
                members.append(x)
    # A number stated for the whole ("four children") is the count; else the numbers of
    # its parts add up ("two sons ... a daughter"). A mention repeated counts once; two
    # numbers for one noun ("180 copies were printed", "49 copies survive") say two things:
    # the one in the sentence the model chose counts, else the model's own answer stands.
    numbers: dict[str, set[int]] = {}
    for g in groups:
        if g.stated is not None:
            numbers.setdefault(g.noun, set()).add(g.stated)
    chose = set(model.sentences) if model is not None else set()
    by_noun: dict[str, int] = {}
    for noun, said in numbers.items():
        if len(said) > 1:
            said = {g.stated for g in groups if g.noun == noun and g.sentence in chose} - {None}
            if len(said) != 1:
                return None
        by_noun[noun] = said.pop()
    whole = [by_noun[n] for n in nouns if n in by_noun]
    stated = max(whole) if whole else sum(by_noun.values())
    total = max(len(members), stated)
    if total == 0:
        return None
    used = sorted({g.sentence for g in groups})
    text = f"{total} ({', '.join(members)})" if members else str(total)
    return Copied(text, False, used, members)


def recount(question: Question, chosen: Focus, hits: Sequence[Hit], copied: Copied) -> Copied:
    """``copied`` (the model's answer), or for a count question the count the shown
    sentences of the page it names state."""
    if not question.counts:
        return copied
    pages = question.pages
    path = {h.rank: h.chunk.path for h in hits}
    on_page = [path.get(rank) in pages for rank in chosen.ranks]
    return from_page(question, chosen.sentences, on_page, copied) or copied
