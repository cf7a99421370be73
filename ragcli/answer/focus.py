"""Choose what the model reads: the sentences of the best passages that bear on the question.

A small model copies an answer far better from a few relevant sentences than from whole
200-token passages, and the prompt is shorter, so prefill is faster. The 8 best sentences
of the top 4 passages, each with its neighbours, in document order; best by meaning, by
the question's own words and by their passage's rank together (docs/BENCHMARKS.md,
"Answers on unseen documents"). Headings are not shown: the passage's place is in its citation.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..records import HEADING_SEP
from .grounding import STOP, strip_instructions

if TYPE_CHECKING:
    from ..embed.base import Embedder
    from ..records import Chunk, Hit
    from .question import Question

WINDOW = 1  # neighbours kept either side of a chosen sentence
# Passages far less similar than the best one are not read: on look-alike documents (one
# page per person) their sentences are about someone else, and the model takes them.
# On the Python pages the passage holding the answer was within 0.2 of the best in 89 of 89
# answerable questions (docs/BENCHMARKS.md, "Answers on unseen documents").
PASSAGE_MARGIN = 0.2

# A sentence ends at . ! or ? before a capital, digit or identifier, but not after a Latin
# abbreviation that runs on ("all return 4**2, i.e. 16." is one sentence, and its number
# the answer).
_ABBREVIATIONS = ("e.g.", "i.e.", "cf.", "vs.", "viz.")
_SENT = re.compile(
    r"(?<=[.!?])"
    + "".join(rf"(?<!\b(?i:{re.escape(a)}))" for a in _ABBREVIATIONS)
    + r'["”’)]?\s+(?=["“(]?[A-Z0-9_\-])'
)
_BLOCK_START = re.compile(r"^\s*(#|[-*+]\s|\d+[.)]\s|>>>|\.\.\.|\$ )")
_ENDS_BLOCK = re.compile(r"[.!?:;][\"”’)]?$")


@dataclass(frozen=True)
class Focus:
    """The sentences to show, the rank of the passage each came from, the best similarity."""

    sentences: list[str]
    ranks: list[int]  # parallel to sentences
    best_similarity: float
    # The sentences before each one in its passage: what it is read after when read apart
    # (llm/reading_cache.py), so that "It" still knows what it is.
    leads: list[list[str]] = field(default_factory=list)
    # Indexes of ``sentences``, the most likely to answer first: with the reading cache on,
    # the first of them are read in place, after the sentences before them (answer/prompt.py).
    best: list[int] = field(default_factory=list)
    # The indexes of those read in place (set by the asker from its settings).
    in_place: tuple[int, ...] = ()


def blocks(text: str) -> list[str]:
    """Paragraphs with hard line wrapping undone.

    A newline ends a block at a blank line, a heading or list item, or after end
    punctuation; otherwise it is a wrapped line and joins the next with a space.
    """
    out: list[str] = []
    cur: list[str] = []
    for line in text.split("\n"):
        s = line.strip()
        if not s:
            if cur:
                out.append(" ".join(cur))
                cur = []
            continue
        if cur and (
            _BLOCK_START.match(s) or _BLOCK_START.match(cur[0]) or _ENDS_BLOCK.search(cur[-1])
        ):
            out.append(" ".join(cur))
            cur = []
        cur.append(s)
    if cur:
        out.append(" ".join(cur))
    return out


# A section number left on its own by the split ("9.5.1."): no meaning for the model, and
# a number it answers numeric questions with, which the passage does hold.
_SECTION_NUMBER = re.compile(r"^\d+(?:\.\d+)*\.$")


_LIST_ITEM = re.compile(r"^\s*(?:[-*+•]|\d+[.)])\s+")


def _lists_joined(parts: list[str]) -> list[str]:
    """Each run of short list items as one sentence, led by the heading or the line that
    introduces it: "Landmarks: The Miller's Barn; The Crooked Bridge."

    Alone, an item is too short to be chosen (or to say what it is an item of), and a
    count needs every item shown together."""
    out: list[str] = []
    run: list[str] = []

    def close() -> None:
        if not run:
            return
        lead = ""
        if out and (out[-1].startswith("#") or out[-1].endswith(":")):
            lead = out.pop().lstrip("# ").rstrip(":").strip() + ": "
        out.append(lead + "; ".join(i.rstrip(".;,") for i in run) + ".")
        run.clear()

    for block in parts:
        item = _LIST_ITEM.match(block)
        if item and len(block.split()) <= 12:
            run.append(block[item.end() :].strip())
            continue
        close()
        out.append(block)
    close()
    return out


def sentences(text: str, headings: bool = True) -> list[str]:
    """The sentences of a passage, a list of short items as one; without its Markdown
    headings when ``headings`` is false."""
    out = []
    for block in _lists_joined(blocks(text)):
        if not headings and block.lstrip().startswith("#"):
            continue
        for s in _SENT.split(block):
            s = " ".join(s.split()).lstrip("# ").strip()
            if len(s) >= 3 and not _SECTION_NUMBER.match(s):
                out.append(s)
    return out


def about(text: str, path: str, pages: Mapping[str, str]) -> bool:
    """Whether ``text`` of the document at ``path`` may answer for the ``pages`` asked
    about: it is on one of them or names one in full. With no such page, any text may."""
    return not pages or path in pages or any(t in text.casefold() for t in pages.values())


# Sentences are ranked by three orders fused by reciprocal rank: meaning (the embedder),
# the question's rare words (identifiers, names, numbers, which a 384-d sentence vector
# blurs), and the rank of the passage they sit in (retrieval judged the whole passage, with
# BM25 over the index). On the sets measured (docs/BENCHMARKS.md, "Answers on unseen documents") this
# keeps the answer among the sentences shown where meaning alone lost it, at the same length.
SENTENCE_RRF_K = 10
_TERM = re.compile(r"[\w][\w.\-]*[\w]|\w", re.UNICODE)


def _terms(text: str) -> set[str]:
    """Lower-case words of ``text``, identifiers whole and by part ("utf-8-sig", "utf",
    "sig"), five-letter stems for inflection; stop words dropped."""
    out: set[str] = set()
    for raw in _TERM.findall(text.casefold()):
        for w in {raw, *re.split(r"[._\-]+", raw)}:
            if w and w not in STOP:
                out.add(w)
                if len(w) > 5 and w.isalpha():
                    out.add(w[:5])
    return out


def lexical_scores(question: str, texts: Sequence[str]) -> list[float]:
    """BM25-like weight of the question's words in each text, IDF from ``texts`` alone:
    a word every candidate holds (the corpus's topic) weighs nothing."""
    asked = _terms(question)
    bags = [_terms(t) & asked for t in texts]
    n = len(texts)
    df: dict[str, int] = {}
    for bag in bags:
        for w in bag:
            df[w] = df.get(w, 0) + 1
    idf = {w: math.log(1 + (n - d + 0.5) / (d + 0.5)) for w, d in df.items()}
    return [sum(idf[w] for w in bag) for bag in bags]


def rank_sentences(
    question: str, texts: Sequence[str], sims: Sequence[float], passage_ranks: Sequence[int]
) -> list[int]:
    """Indexes of ``texts`` best first: by meaning, by the question's words and by the rank
    of their passage, fused."""
    n = len(texts)
    lex = lexical_scores(question, texts)
    orders = (
        sorted(range(n), key=lambda i: -float(sims[i])),
        sorted(range(n), key=lambda i: (-lex[i], -float(sims[i]))),
        sorted(range(n), key=lambda i: (passage_ranks[i], -float(sims[i]))),
    )
    score = [0.0] * n
    for order in orders:
        for r, i in enumerate(order):
            score[i] += 1.0 / (SENTENCE_RRF_K + r + 1)
    return sorted(range(n), key=lambda i: -score[i])


_NUMBERING = re.compile(r"^[\d.]+\s+|\s*¶$")


def _plain(text: str) -> str:
    return _NUMBERING.sub("", " ".join(text.split())).strip(" #").casefold()


def headings_of(heading: str) -> set[str]:
    """The headings a passage sits under, as a sentence that repeats one reads."""
    return {_plain(h) for h in heading.split(HEADING_SEP) if h.strip()}


def is_heading(text: str, chunks: Sequence[Chunk]) -> bool:
    """Whether ``text`` is a heading of one of ``chunks`` (one the passage sits under, or a
    Markdown heading line inside it): a section's title names what it is about and answers
    nothing ("L'essentiel en 30 secondes" is no reason)."""
    plain = _plain(text)
    return any(
        plain in headings_of(c.heading)
        or any(
            _plain(line) == plain for line in c.text.split("\n") if line.lstrip().startswith("#")
        )
        for c in chunks
    )


def readable(chunk: Chunk) -> list[tuple[int, str, list[str]]]:
    """The sentences of a passage the model may be shown: each with its place in it and
    the sentences before it there.

    Sentences that try to instruct the model are dropped first: a document cannot change
    the rules. A heading is never an answer (the passage's citation names it).
    """
    heads = headings_of(chunk.heading)
    # In Markdown a line opening with "#" is a heading; elsewhere it is content (a shell
    # prompt or a comment in a configuration example).
    markdown = chunk.path.lower().endswith((".md", ".markdown"))
    found = sentences(strip_instructions(chunk.text), headings=not markdown)
    return [(j, s, found[:j]) for j, s in enumerate(found) if _plain(s) not in heads]


def focus(
    question: Question,
    hits: list[Hit],
    embedder: Embedder,
    passages: int,
    keep: int,
) -> Focus:
    """The ``keep`` best sentences of the top ``passages`` for ``question``, with neighbours.

    When the question names a page (``question.pages``), only sentences of that page or
    naming it are read.
    """
    # path, ordinal, index, sentence, rank, the sentences before it
    cands: list[tuple[str, int, int, str, int, list[str]]] = []
    seen: set[str] = set()
    top = hits[:passages]
    near = max((h.similarity for h in top), default=0.0) - PASSAGE_MARGIN
    pages = question.pages
    kept = {h.chunk.path for h in top if h.similarity >= near}
    for h in top:
        # A passage far behind the best is someone else's page, unless its page is read,
        # or the model chose it (answer/rerank.py): a passage that answers in other words
        # is far from the question, and the model's attention found it there.
        if (
            h.similarity < near
            and h.rerank_score is None
            and h.chunk.path not in pages
            and h.chunk.path not in kept
        ):
            continue
        for j, s, lead in readable(h.chunk):
            if s not in seen and about(s, h.chunk.path, pages):
                seen.add(s)
                cands.append((h.chunk.path, h.chunk.ordinal, j, s, h.rank, lead))
    # Questions (FAQ titles) are not answers; code lines and fragments may be.
    scored = [i for i, c in enumerate(cands) if not c[3].endswith("?")]
    if not scored:
        return Focus([], [], -1.0)
    texts = [cands[i][3] for i in scored]
    vecs = embedder.embed([question.text, *texts])
    sims = vecs[1:] @ vecs[0]
    order = rank_sentences(question.text, texts, sims, [cands[i][4] for i in scored])
    pick: set[int] = set()
    # A count of what the page the question names lists is read from every sentence of
    # that page that mentions it: her brothers in one paragraph, her sisters in the next.
    listing = [
        i
        for i in scored
        if question.mention is not None
        and cands[i][0] in pages
        and question.mention.search(cands[i][3])
    ]
    for i in [*(scored[o] for o in order[:keep]), *listing]:
        pick.update(
            j
            for j in range(i - WINDOW, i + WINDOW + 1)
            if 0 <= j < len(cands) and cands[j][:2] == cands[i][:2]
        )
    # Document order, not score order: the same sentences give the same prompt tokens.
    chosen = sorted(pick, key=lambda i: cands[i][:3])
    place = {scored[o]: r for r, o in enumerate(order)}
    return Focus(
        [cands[i][3] for i in chosen],
        [cands[i][4] for i in chosen],
        float(sims.max()),
        [cands[i][5] for i in chosen],
        sorted(range(len(chosen)), key=lambda k: place.get(chosen[k], len(cands))),
    )
