"""Answers the model may only copy: what to allow for a question, and what came out.

Three kinds of question get three kinds of answer (see :mod:`ragcli.llm.constrain`):
a span of the shown sentences; for a yes/no question, also "Yes" or "No"; for a
"how many" question, the items the sentences list, which the tool counts itself (a
1.5B model says 2 where one name is listed). "I don't know" is always allowed, at the
first token only.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..llm.constrain import Span, SpanDecoder, Vocabulary
from .prompt import IDK, context_text
from .quantities import widen

if TYPE_CHECKING:
    from ..records import Hit, StoredChunk
    from .question import Question

# Items of a list end at a comma (not one inside a number: "41,000", "2,5"), a semicolon,
# "and", "or".
_ITEM_SPLIT = re.compile(r"\s*(?:,(?!\d)|(?<!\d),|[;&]|\band\b|\bor\b|\bet\b|\bou\b)\s*", re.I)
_NUMBER = re.compile(
    r"\b(\d[\d,.]*|zero|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|"
    r"thirteen|fourteen|fifteen|sixteen|seventeen|eighteen|nineteen|twenty)\b",
    re.I,
)
COUNT_TOKENS = 64  # a list of names needs more room than a span


def decoder(
    question: Question, context: Sequence[str], vocab: Callable[[], Vocabulary]
) -> SpanDecoder:
    """The decoder for ``question`` over the sentences the model is shown."""
    fixed = (IDK, "Yes", "No") if question.shape == "yesno" else (IDK,)
    return SpanDecoder(vocab, context_text(context), fixed, lists=question.counts)


@dataclass(frozen=True)
class Copied:
    """What a constrained generation says: the answer, or that the model abstained."""

    text: str
    abstained: bool
    sentences: list[int]  # indexes into the context sentences the answer was copied from
    items: list[str]


LEADING_ARTICLE = re.compile(r"^(?:(?:the|le|la|les)\s+|l['’]\s*)(?=(?-i:[A-Z]))", re.I)


def list_items(parts: list[str]) -> list[str]:
    """Distinct list items, in order: "A, B and C" is three, "- A" is "A", "La Vienne"
    at the start of a sentence is "Vienne"."""
    seen: dict[str, str] = {}
    for part in parts:
        for item in _ITEM_SPLIT.split(part):
            item = LEADING_ARTICLE.sub("", item.strip(" -*•:.\"'“”"))
            if item:
                seen.setdefault(item.casefold(), item)
    return list(seen.values())


# A list of names goes on past an item: ", B", "; B", " and B", ", or B".
_NAME = r"(?:(?<![\w'’-])|(?<=\b[lLdD]['’]))[A-Z][\w'’-]*(?:\s+(?:of\s+|de\s+|van\s+)?[A-Z][\w'’-]*){0,3}"
_JOIN = r"(?:\s*[,;]\s*(?:(?:and|or|et|ou)\s+)?|\s+(?:and|or|et|ou|&)\s+)"
_ARTICLE = r"(?:the\s+|le\s+|la\s+|les\s+|l['’])?"  # "the Netherlands", "l'Allier"
NAMES = re.compile(rf"{_NAME}(?:{_JOIN}{_ARTICLE}{_NAME})*")
_NEXT_NAME = re.compile(rf"{_JOIN}{_ARTICLE}({_NAME})")
_PREV_NAME = re.compile(rf"({_NAME}){_JOIN}{_ARTICLE}$")
_LOOK_BACK = 80  # characters searched for the name before an item


def enumeration(text: str, start: int, end: int) -> list[str]:
    """The names listed in ``text[start:end]`` (a name, or names joined by commas or
    "and") with the names the same list goes on with either side.

    A small model asked to list stops early ("India, Pakistan" of three co-hosts);
    the names joined to a copied one by commas or "and" belong to the same list."""
    inner = [m.group(0) for m in re.finditer(_NAME, text[start:end])]
    after: list[str] = []
    while m := _NEXT_NAME.match(text, end):
        after.append(m.group(1))
        end = m.end(1)
    before: list[str] = []
    while m := _PREV_NAME.search(text, max(0, start - _LOOK_BACK), start):
        before.insert(0, m.group(1))
        start = m.start(1)
    return before + inner + after


def listed(dec: SpanDecoder, spans: list[Span]) -> list[str]:
    """The copied items; a copied list of names comes with the rest of its list."""
    raw = dec.sources[0]
    text = raw.decode("utf-8", "replace")
    out: list[str] = []
    for span in spans:
        copied = raw[span.start : span.end].decode("utf-8", "replace")
        item = copied.strip()
        if not NAMES.fullmatch(item):
            out.append(item)
            continue
        start = (
            len(raw[: span.start].decode("utf-8", "replace")) + len(copied) - len(copied.lstrip())
        )
        out += enumeration(text, start, start + len(item))
    return out


def sentence_of(offsets: list[tuple[int, int]], start: int, end: int) -> list[int]:
    """The sentences a byte range of the context text overlaps."""
    return [i for i, (a, b) in enumerate(offsets) if a < end and start < b]


def offsets(context: Sequence[str]) -> list[tuple[int, int]]:
    """Byte ranges of each sentence in :func:`context_text`."""
    out, pos = [], 0
    for s in context:
        n = len(context_text([s]).encode("utf-8"))
        out.append((pos, pos + n))
        pos += n + 1
    return out


def one_list(
    dec: SpanDecoder, spans: list[Span], where: list[tuple[int, int]]
) -> tuple[list[str], list[int]]:
    """The items of the one list the copied items come from, and its sentence.

    A count is of one list. Told to list, the model runs on from the list it began with
    into the next sentence's ("Tinker's Hall, Copper Hall" of one town, then another
    town's landmarks): the list counted is the first one copied from (a sentence, or a
    run of list items joined into one, holds one list). When the model began with an item
    taken from elsewhere ("India" of another sentence, then "Pakistan" of the co-hosts),
    a list that holds it and more of what was copied is counted instead."""
    per: dict[int, list[Span]] = {}
    for s in spans:
        for i in sentence_of(where, s.start, s.end)[:1]:
            per.setdefault(i, []).append(s)
    if not per:
        return list_items(listed(dec, spans)), []
    copied = {i.casefold() for i in list_items(_texts(dec.sources[0], spans))}
    lists = {i: list_items(listed(dec, ss)) for i, ss in per.items()}
    folded = {i: {x.casefold() for x in items} for i, items in lists.items()}
    first = next(iter(per))
    best = max(
        (i for i in per if folded[first] <= folded[i]), key=lambda i: len(folded[i] & copied)
    )
    return lists[best], [best]


def _names_asked(item: str, question: str) -> bool:
    """Whether ``item`` is a name the question itself gives: asked how many friends Ann
    has, Ann is not one of them."""
    return bool(NAMES.fullmatch(item)) and bool(
        re.search(rf"(?<!\w){re.escape(item)}(?!\w)", question, re.I)
    )


def whole_numbers(raw: bytes, spans: list[Span], number_asked: bool) -> list[Span]:
    """The copied spans with each number in them whole, as the page writes it
    (answer/quantities.py), and no span that lies inside another: told to list, the
    model copies "41", then takes the comma of "41,000" for a list's and goes on."""
    text = raw.decode("utf-8", "replace")
    out: list[Span] = []
    for s in spans:
        a = len(raw[: s.start].decode("utf-8", "replace"))
        b = a + len(raw[s.start : s.end].decode("utf-8", "replace"))
        a, b = widen(text, a, b, number_asked)
        out.append(Span(s.source, len(text[:a].encode()), len(text[:b].encode())))
    return [
        s
        for i, s in enumerate(out)
        if not any(
            o.start <= s.start and s.end <= o.end and (o != s or j < i)
            for j, o in enumerate(out)
            if j != i
        )
    ]


def _texts(raw: bytes, spans: list[Span]) -> list[str]:
    """The spans as text, leading spaces dropped, empty ones left out."""
    texts = (raw[s.start : s.end].decode("utf-8", "replace").strip() for s in spans)
    return [t for t in texts if t]


def read(dec: SpanDecoder, question: Question, context: Sequence[str]) -> Copied:
    """The answer a finished decoder copied, counted for a "how many" question."""
    reply = dec.fixed_reply
    if reply is not None:
        text = dec.fixed[reply - 1]
        return Copied(text, text == IDK, [], [])
    raw = dec.sources[0]
    number_asked = question.wants == "number" or question.counts
    spans = whole_numbers(raw, [s for s in dec.spans if s.source == 0], number_asked)
    where = offsets(context)
    sentences = sorted({i for s in spans for i in sentence_of(where, s.start, s.end)})
    parts = _texts(raw, spans)
    text = ", ".join(parts)
    if not parts:
        return Copied("", True, [], [])
    if question.counts:
        return counted(dec, spans, where, question, context)
    return Copied(text, False, sentences, [])


def counted(
    dec: SpanDecoder,
    spans: list[Span],
    where: list[tuple[int, int]],
    question: Question,
    context: Sequence[str],
) -> Copied:
    """The count of the one list the model copied from, whole: continued into the next
    sentence when that sentence names only more of it, narrowed to the kind the question
    asks for ("sisters" of "a sister, A, and a brother, B") or summed over the kinds it
    holds ("children" of "two sons, A and B, and a daughter, C"). One member is a count
    of one: "1 (Name)"."""
    items, sentences = one_list(dec, spans, where)
    if sentences:
        more, sentences = _continued(dec, spans, where, items, sentences, context)
        items = list_items(items + more)
        items = _of_kind(items, context[sentences[0]], question.text)
    items = [i for i in items if not _names_asked(i, question.text)]
    named = [i for i in items if _CAPITAL.search(i)]
    if named and len(named) < len(items):  # "one brother", "a daughter" describe, not name
        items = named
    if not items:
        return Copied("", True, [], [])
    if len(items) == 1 and _NUMBER.search(items[0]) and not _CAPITAL.search(items[0]):
        return Copied(items[0], False, sentences, [])  # the count is written out
    return Copied(f"{len(items)} ({', '.join(items)})", False, sentences, items)


_CAPITAL = re.compile(r"(?<![\w'’-])[A-Z]")


# A sentence that says it goes on with a list: "The Vienne and the Maine also join it."
_GOES_ON = re.compile(
    r"\b(?:also|too|as well|besides|further|aussi|également|egalement|de plus|en outre)\b", re.I
)


def _continued(
    dec: SpanDecoder,
    spans: list[Span],
    where: list[tuple[int, int]],
    items: list[str],
    sentences: list[int],
    context: Sequence[str],
) -> tuple[list[str], list[int]]:
    """The items of the sentences right after the list's that go on with it: one the
    model copied every name of, or one that opens with more names and says it goes on
    ("Its tributaries are A, B and C. D and E also join it."). A sentence that names
    anyone else (a brother, then his children) ends the list."""
    more: list[str] = []
    copied_in = {i for s in spans for i in sentence_of(where, s.start, s.end)[:1]}
    last = sentences[-1]
    while last + 1 < len(context):
        nxt = last + 1
        groups = list(NAMES.finditer(context[nxt]))
        named = list_items([m.group(0) for m in groups])
        have = {i.casefold() for i in items + more}
        new = [n for n in named if n.casefold() not in have]
        if not new:
            break
        if nxt in copied_in:
            from_it = [s for s in spans if sentence_of(where, s.start, s.end)[:1] == [nxt]]
            copied = {i.casefold() for i in list_items(listed(dec, from_it))}
            goes_on = {n.casefold() for n in named} <= copied | have
        else:
            goes_on = (
                len(groups) == 1
                and not context[nxt][: groups[0].start()].strip(" ")
                and bool(_GOES_ON.search(context[nxt]))
            )
        if not goes_on:
            break
        more += new
        sentences = [*sentences, nxt]
        last = nxt
    return more, sentences


# "two sons, Tom and Ben", "a daughter, Lia", "her brother Damir Osk"
_GROUP = re.compile(
    rf"\b(?:a|an|one|two|three|four|five|six|seven|eight|nine|ten|\d+|his|her|their|its|"
    rf"un|une|deux|trois|quatre|cinq|six|sept|huit|neuf|dix|son|sa|ses|leur|leurs)\s+"
    rf"(?:[a-z]+\s+)?([a-zé]+),?\s+({NAMES.pattern})"
)


def _of_kind(items: list[str], sentence: str, question: str) -> list[str]:
    """The items of the groups the question asks for, when the sentence sorts its names
    into groups by kind: the group named like the question's word ("sister" for
    "sisters"), else every group ("children" are the sons and the daughter)."""
    groups = [(m.group(1), list_items([m.group(2)])) for m in _GROUP.finditer(sentence)]
    if len(groups) < 2:
        return items
    if not {i.casefold() for i in items} & {i.casefold() for _, g in groups for i in g}:
        return items  # the list copied is not one of these groups
    asked = {w[:5] for w in re.findall(r"[a-zé]+", question.casefold()) if len(w) > 3}
    chosen = [g for noun, g in groups if noun[:5] in asked] or [g for _, g in groups]
    return list_items([i for g in chosen for i in g])


def line_of(chunk: StoredChunk, sentence: str) -> int | None:
    """The file line where ``sentence`` starts in ``chunk``, when the chunk's text lines
    are its file lines (text, Markdown, reST); None where a reader reflowed them (HTML)."""
    lines = chunk.text.split("\n")
    if chunk.page or len(lines) != chunk.end_line - chunk.start_line + 1:
        return None
    # Whitespace collapsed, as the sentence splitter did, with each character's line kept.
    flat: list[str] = []
    line_at: list[int] = []
    for n, line in enumerate(lines):
        for word in line.split():
            if flat:
                flat.append(" ")
                line_at.append(n)
            flat.extend(word)
            line_at.extend([n] * len(word))
    head = " ".join(sentence.split()[:6])
    at = "".join(flat).find(head)
    return chunk.start_line + line_at[at] if at >= 0 else None


def evidence(
    copied: Copied, context: Sequence[str], ranks: Sequence[int], hits: Sequence[Hit]
) -> list[dict]:
    """Each sentence the answer was copied from: its source's rank, file line and text."""
    by_rank = {h.rank: h for h in hits}
    out = []
    for i in copied.sentences:
        hit = by_rank.get(ranks[i])
        if hit is None:
            continue
        out.append({"rank": hit.rank, "line": line_of(hit.chunk, context[i]), "text": context[i]})
    return out
