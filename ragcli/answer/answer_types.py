"""What a question asks for, and whether an answer is of that type.

Two readings of a question. Its *shape* decides how the model may answer: a span of the
shown sentences, "Yes"/"No", or a list the tool counts. Its *type* (a person, a place,
a date, a number) is checked against the span copied: asked where someone was born, a
small model copies the year the page does give, and that span is withheld, not shown.
English and French questions are read.
"""

from __future__ import annotations

import re

_COUNT = re.compile(r"\bhow\s+many\b|\bnumber\s+of\b|\bcombien\b|\bnombre\s+(?:de|d['’])", re.I)
_YES_NO = re.compile(
    r"^\s*(is|are|was|were|can|could|does|do|did|will|would|should|has|have|had|may|must|"
    r"est-ce\s+que?|est-ce\s+qu['’])\b",
    re.I,
)
# A question that offers alternatives ("A or B?") is answered by one of them.
ALTERNATIVES = re.compile(r"\b(?:or|ou)\b", re.I)
# A question may open with what it is about and ask in its last clause ("I rely on
# luser_relay; do I need to ...?", "When the server starts, does it ...?").
_CLAUSE = re.compile(r"[;:,]\s+")


def kind(question: str) -> str:
    """The shape of answer: ``count``, ``yesno`` or ``span``."""
    if _COUNT.search(question):
        return "count"
    asks = _CLAUSE.split(question)[-1]
    if (_YES_NO.match(question) or _YES_NO.match(asks)) and not ALTERNATIVES.search(question):
        return "yesno"
    return "span"


_MONTHS = (
    "january|february|march|april|may|june|july|august|september|october|november|december|"
    "janvier|février|fevrier|mars|avril|mai|juin|juillet|août|aout|septembre|octobre|"
    "novembre|décembre|decembre"
)
_NUMBER_WORDS = (
    "zero|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|thirty|"
    "forty|fifty|hundred|thousand|million|billion|dozen|half|"
    "un|une|deux|trois|quatre|cinq|six|sept|huit|neuf|dix|onze|douze|vingt|trente|"
    "quarante|cinquante|cent|cents|mille|million|millions|milliard|milliards|moitié"
)
_HAS_NUMBER = re.compile(rf"\d|\b(?:{_NUMBER_WORDS})\b", re.I)
_HAS_DATE = re.compile(
    rf"\d|\b(?:{_MONTHS}|spring|summer|autumn|fall|winter|century|decade|printemps|été|"
    rf"automne|hiver|siècle|décennie|{_NUMBER_WORDS})\b",
    re.I,
)
# A date alone: a year, a day and month, a month and year; nothing else in the span.
_ONLY_DATE = re.compile(
    rf"^\W*(?:(?:in|on|en|le|du|since|depuis|around|about|vers)\s+)?"
    rf"(?:\d{{1,2}}(?:st|nd|rd|th|er)?\s+)?(?:(?:{_MONTHS})\s+)?(?:\d{{1,2}},?\s+)?"
    rf"\d{{1,4}}(?:\s*(?:BC|AD|BCE|CE|av\.\s*J\.-C\.))?\W*$|"
    rf"^\W*(?:{_MONTHS})\s+\d{{1,2}}(?:,?\s+\d{{4}})?\W*$",
    re.I,
)
_ONLY_NUMBER = re.compile(r"^\W*[\d][\d\s,.%]*\W*$")

_TYPES: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "date",
        re.compile(
            r"^\s*(?:when\s+(?:did|was|were|is|are|will|does|do|has|had|can|could|would)\b|"
            r"since\s+when\b|"
            r"(?:in|on|by|from|until)\s+(?:what|which)\s+(?:year|month|date|day|decade|century)\b|"
            r"(?:what|which)\s+(?:year|month|date|day|decade|century)\b|"
            r"quand\b|depuis\s+quand\b|"
            r"(?:en|dans|à|a|de|depuis)\s+(?:quelle|quel)\s+(?:année|annee|date|mois|siècle|"
            r"siecle|époque|epoque|jour)\b|"
            r"(?:quelle|quel)\s+(?:année|annee|date|mois|siècle|siecle|jour)\b|"
            r"(?:quelle|quel)\s+est\s+(?:la\s+)?(?:date|année|annee)\b)",
            re.I,
        ),
    ),
    (
        "place",
        re.compile(
            r"^\s*(?:where\b|from\s+where\b|"
            r"(?:in|at|to|from|on|near)\s+(?:what|which)\s+(?:city|town|country|village|"
            r"place|region|state|county|province|island|continent|river)\b|"
            r"(?:what|which)\s+(?:city|town|country|village|region|island|continent)\b|"
            r"où\b|d['’]où\b|"
            r"(?:dans|à|a|en|de|vers|sur)\s+(?:quelle|quel)\s+(?:ville|pays|village|région|"
            r"region|lieu|île|ile|continent|département|departement|fleuve)\b|"
            r"(?:quelle|quel)\s+(?:ville|pays|village|région|region|lieu|île|ile)\b|"
            r"(?:what|which)\s+(?:is|was|were|are)\s+(?:the\s+|his\s+|her\s+|their\s+|its\s+)?"
            r"(?:place|birthplace|hometown|home\s+town|venue)\b|"
            r"(?:quel|quelle)\s+est\s+(?:le\s+|la\s+|l['’]\s*|son\s+|sa\s+)?"
            r"(?:lieu|ville|pays|région|region|endroit)\b)|"
            # however it is put: "the place of birth of", "lieu de naissance"
            r"\b(?:place|city|town|country)\s+of\s+(?:birth|death|residence|origin)\b|"
            r"\bbirthplace\b|\blieu\s+de\s+(?:naissance|décès|deces|résidence|residence)\b",
            re.I,
        ),
    ),
    (
        "number",
        re.compile(
            r"^\s*(?:how\s+(?:much|long|old|far|big|large|tall|high|often|many|deep|wide|heavy)\b|"
            r"(?:what|which)\s+(?:percentage|proportion|share|fraction)\b|"
            r"what\s+is\s+the\s+(?:population|length|height|depth|area|age|distance)\b|"
            r"combien\b|(?:quelle|quel)\s+(?:est\s+(?:la\s+|le\s+|l['’]\s*)?)?"
            r"(?:âge|age|hauteur|longueur|distance|durée|duree|altitude|superficie|population|"
            r"pourcentage|proportion)\b)",
            re.I,
        ),
    ),
    ("person", re.compile(r"^\s*(?:who|whom|qui)\b", re.I)),
)


def wants(question: str, shape: str) -> str:
    """The type of answer asked for: ``date``, ``place``, ``number``, ``person``,
    ``yesno`` or ``other`` (no check); ``shape`` is the question's :func:`kind`."""
    if shape == "yesno":
        return "yesno"
    for name, pattern in _TYPES:
        if pattern.search(question):
            return name
    return "other"


def fits(want: str, answer: str) -> bool:
    """Whether the answer is of the type ``want`` a question asks for (:func:`wants`).

    A "when" question is answered by something with a date in it, a "how much" one by a
    number; a "where" or "who" question is not answered by a date or a number alone, and a
    place never by a date, however the date is put (asked for someone's place of birth,
    the model copies the day the page gives instead)."""
    if want == "date":
        return bool(_HAS_DATE.search(answer))
    if want == "number":
        return bool(_HAS_NUMBER.search(answer))
    if want == "place" and _dated(answer):
        return False
    if want in ("place", "person"):
        return not (_ONLY_DATE.match(answer) or _ONLY_NUMBER.match(answer))
    return True


_YEAR_OR_MONTH = re.compile(rf"\b(?:1\d{{3}}|20\d{{2}}|{_MONTHS})\b", re.I)
_MONTH = re.compile(rf"^(?:{_MONTHS})$", re.I)
_CAPITALIZED = re.compile(r"(?<![\w'’-])[A-Z][\w'’-]+")
# Words that open a date as a sentence may ("Born on ...", "Le 3 mai ..."): not names.
_DATE_WORDS = frozenset(
    "born died on in at the since around about from until le la les en né née mort morte "
    "depuis vers du au".split()
)


def _dated(answer: str) -> bool:
    """Whether ``answer`` is a date however it is put ("born on 12 March 1948", "le 3 mai
    1961"): a year or a month, and no name beside the months'."""
    if not _YEAR_OR_MONTH.search(answer):
        return False
    return all(_MONTH.match(w) or w.casefold() in _DATE_WORDS for w in _CAPITALIZED.findall(answer))
