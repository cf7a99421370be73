"""Numbers as the page writes them: a copied number is the whole number.

Copying stops at a word boundary, and a comma, a point or a space inside a number is one:
asked how many spectators a stadium holds, the model may stop at "41" of "41,000", or,
told to list, take the comma for a list's and copy "41" and "000". A span that ends or
begins inside a number is widened to all of it as written (``41,000``, ``1,250,000``,
``48 300`` with a no-break or thin space, ``212.5``, ``2,5``), with the scale word that
follows ("4.2 million", "2,5 millions d'euros"); an answer that is a number alone also
keeps its currency sign and the unit the page gives ("£4.2 million", "780 mm").
"""

from __future__ import annotations

import re

# A number as written: digit groups of three after thousands separators (comma, space,
# no-break space, narrow no-break space), or plain digits; then a decimal part.
NUMBER = re.compile(
    r"(?<![\d.,])(?:\d{1,3}(?:[,\u00a0\u202f ]\d{3})+(?![\d])|\d+)(?:[.,]\d+)?(?![\d])"
)
_AROUND = 40  # characters either side searched for the number a copy begins or ends in
_SCALE = re.compile(
    r"[ \u00a0](?:thousand|million|billion|trillion|mille|millions?|milliards?)"
    r"(?:[ \u00a0](?:d['’]|de\s+)(?:euros|dollars|livres|habitants))?(?!\w)",
    re.I,
)
_UNIT = re.compile(
    r"[ \u00a0\u202f]?(?:%|°\s?[CF]|km²|m²|km/h|mph|"
    r"(?:km|cm|mm|kg|ha|m)(?![\w/'’])|"
    r"(?:kilo)?(?:met(?:re|er)s?|mètres?)|kilomètres?|miles?|feet|foot|tonnes?|tons?|"
    r"euros?|dollars?|pounds?|minutes?|hours?|seconds?|heures?|secondes?)(?![\w])",
    re.I,
)
# A range: "between 1820 and 1835", "from 12 to 15", "de 1820 à 1835", "1820-1835".
_RANGE_OPEN = re.compile(r"\b(?:between|from|entre|de|du)\s+$", re.I)
_RANGE_JOIN = re.compile(r"\s+(?:and|to|et|à|au)\s+|\s?[-–—]\s?")
_CURRENCY = re.compile(r"[£$€][ \u00a0]?$")
_MINUS = re.compile(r"(?:−|(?<!\w)-)$")  # a sign, not the dash of a range ("1820-1835")
_NUMBER_ALONE = re.compile(
    r"^(?:about|around|over|more than|less than|nearly|almost|environ|plus de|près de)?\s*"
    r"[£$€]?\s?[−-]?\d[\d,.\u00a0\u202f ]*$",
    re.I,
)


def widen(text: str, start: int, end: int, number_asked: bool) -> tuple[int, int]:
    """The range ``text[start:end]`` (a copied answer) widened to the whole numbers at
    its ends, and the scale word after; ``number_asked`` (the question wants a number)
    or an answer that is a number alone also takes the unit after it and the currency
    sign or minus before it."""
    lo = max(0, start - _AROUND)
    for m in NUMBER.finditer(text, lo, min(len(text), end + _AROUND)):
        if m.start() < start < m.end():
            start = m.start()
        if m.start() < end < m.end():
            end = m.end()
    if end > start and text[end - 1].isdigit():
        start, end = _range(text, start, end)
        alone = bool(_NUMBER_ALONE.match(text[start:end]))
        if m := _SCALE.match(text, end):
            end = m.end()
        if number_asked or alone:
            if m := _UNIT.match(text, end):
                end = m.end()
            if m := _CURRENCY.search(text, max(0, start - 2), start):
                start = m.start()
            elif _MINUS.search(text, max(0, start - 1), start):
                start -= 1
    return start, end


def _range(text: str, start: int, end: int) -> tuple[int, int]:
    """A copied number that opens a range, with the range's other end: "1820" of "between
    1820 and 1835" is "between 1820 and 1835"; a dash joins a range by itself."""
    last = [m for m in NUMBER.finditer(text, start, end) if m.end() == end]
    if not last:
        return start, end
    at = last[0].start()
    opener = _RANGE_OPEN.search(text, max(0, at - 10), at)
    join = _RANGE_JOIN.match(text, end)
    if join is None or (opener is None and join.group(0).strip() not in "-–—"):
        return start, end
    upto = NUMBER.match(text, join.end())
    if upto is None:
        return start, end
    return (min(start, opener.start()) if opener else start), upto.end()
