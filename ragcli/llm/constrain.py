"""Decoding that can only copy: the answer is a span of the shown text or a fixed reply.

Asked to answer "only from the context", a small model still answers from its memory
and mis-copies identifiers (``-O`` for ``-OO``). Here the model chooses, token by token,
only among the tokens that continue some span of the context (or of a fixed reply such
as "I don't know"), and may stop only at a word boundary, so every answer is copied
exactly from the documents by construction (exact-span decoding: arXiv 2108.05857).

The text is matched in bytes, so a span may be tokenized any way the vocabulary allows
(the context's own tokens carry a leading space the answer does not have). A cursor is
a place in a source where the text generated so far ends; the allowed tokens are the
vocabulary pieces that some cursor's source continues with. With ``lists`` on, a comma
may end one span and start another anywhere: the items of a list that the document
spreads over several sentences or bullets.

Besides the tokens, the decoder keeps what the answerability check needs: how much of
the model's probability went to "I don't know" at the first token, and whether the
constraint had to overrule the model's own choice (an answer from memory).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

MAX_PIECE = 24  # bytes of a source tried per cursor; longer pieces have shorter spellings
SEPARATORS = (b",", b", ", b";", b"; ")  # what may join list items in ``lists`` mode
_WORD_BYTES = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")


def _is_word(b: int) -> bool:
    return b in _WORD_BYTES or b >= 0x80  # bytes of non-ASCII letters count as word


@dataclass(frozen=True)
class Vocabulary:
    """A model's token pieces as bytes, indexed by piece for lookups from the text."""

    pieces: tuple[bytes, ...]
    by_piece: dict[bytes, tuple[int, ...]]
    end_ids: tuple[int, ...]  # tokens that end a generation (end of turn, end of text)

    @classmethod
    def build(cls, pieces: Sequence[bytes], end_ids: Sequence[int]) -> Vocabulary:
        index: dict[bytes, list[int]] = {}
        for tok, piece in enumerate(pieces):
            if piece and len(piece) <= MAX_PIECE:
                index.setdefault(piece, []).append(tok)
        return cls(tuple(pieces), {k: tuple(v) for k, v in index.items()}, tuple(end_ids))


@dataclass(frozen=True)
class Span:
    """A copied stretch: ``source`` 0 is the context, others the fixed replies."""

    source: int
    start: int  # byte offsets in the source
    end: int


@dataclass(frozen=True)
class _Cursor:
    source: int
    start: int
    pos: int


def starts(text: bytes) -> list[int]:
    """Where a copied span may begin: at a word start, or at the one space before it."""
    out = []
    for i, b in enumerate(text):
        if b in b" \t\n":
            continue
        prev = text[i - 1] if i else 32
        if not _is_word(prev):
            out.append(i)
            if i and prev == 32:
                out.append(i - 1)
    return out


@dataclass
class SpanDecoder:
    """Chooses each token among those that keep the answer a span of ``context`` or of a
    ``fixed`` reply; what it copied is in ``spans`` (and ``items`` in list mode)."""

    vocab_of: Callable[[], Vocabulary]  # the engine's, when it is first needed (it may be building)
    context: str
    fixed: tuple[str, ...] = ()
    lists: bool = False
    sources: list[bytes] = field(init=False)
    spans: list[Span] = field(default_factory=list, init=False)
    text: bytes = field(default=b"", init=False)
    steps: int = field(default=0, init=False)
    overruled: int = field(default=0, init=False)  # steps where the model wanted another token
    first_overruled: bool = field(default=False, init=False)
    first_wanted: str = field(default="", init=False)  # the model's own first token, if overruled
    first_fixed_prob: list[float] = field(default_factory=list, init=False)
    logprob: float = field(default=0.0, init=False)  # of the chosen tokens, whole vocabulary
    # The narrowest lead, in logits, of a chosen token over another allowed one that would
    # have copied something else: how close the answer came to being another.
    margin: float = field(default=math.inf, init=False)

    @functools.cached_property
    def vocab(self) -> Vocabulary:
        return self.vocab_of()

    def __post_init__(self) -> None:
        self.sources = [self.context.encode("utf-8"), *(f.encode("utf-8") for f in self.fixed)]
        self._starts = [_Cursor(0, p, p) for p in starts(self.sources[0])]
        self._cursors = self._starts + [_Cursor(s, 0, 0) for s in range(1, len(self.sources))]
        self._done: list[_Cursor] = []  # list mode: the item spans already closed

    # -- what may come next ----------------------------------------------
    def _continuations(self) -> dict[int, list[_Cursor]]:
        """Allowed token -> the cursors it continues."""
        out: dict[int, list[_Cursor]] = {}
        by_piece = self.vocab.by_piece
        for c in self._cursors:
            src = self.sources[c.source]
            end = min(len(src), c.pos + MAX_PIECE)
            for stop in range(c.pos + 1, end + 1):
                for tok in by_piece.get(src[c.pos : stop], ()):
                    out.setdefault(tok, []).append(c)
        return out

    def _can_end(self, c: _Cursor) -> bool:
        src = self.sources[c.source]
        if c.pos == c.start:
            return False
        if c.source:  # a fixed reply ends only where it ends
            return c.pos == len(src)
        if src[c.pos - 1] in b" \t\n":
            return False
        return c.pos == len(src) or not (_is_word(src[c.pos]) and _is_word(src[c.pos - 1]))

    def choose(self, logits: np.ndarray) -> int:
        """The most likely allowed token; an end token when stopping is best."""
        import numpy as np

        allowed = self._continuations()
        ending = [c for c in self._cursors if self._can_end(c)]
        ids = list(allowed)
        if ending:
            ids += self.vocab.end_ids
            if self.lists and any(c.source == 0 for c in ending):
                ids += [t for sep in SEPARATORS for t in self.vocab.by_piece.get(sep, ())]
        if not ids:  # nothing can follow (the budget ran out mid-span): stop here
            return self.vocab.end_ids[0]
        cand = np.fromiter(ids, dtype=np.int64, count=len(ids))
        scores = logits[cand]
        best = int(cand[int(np.argmax(scores))])
        top = float(logits.max())
        norm = top + math.log(float(np.exp(logits - top).sum()))
        if self.steps == 0 and len(self.sources) > 1:
            # The model's own belief in each fixed reply, before any constraint.
            for s in range(1, len(self.sources)):
                toks = [t for t, cs in allowed.items() if any(c.source == s for c in cs)]
                mass = float(np.exp(logits[toks] - norm).sum()) if toks else 0.0
                self.first_fixed_prob.append(mass)
        self.margin = min(self.margin, self._lead(best, cand, scores))
        wanted = int(np.argmax(logits))
        if wanted != best:
            self.overruled += 1
            if self.steps == 0:
                self.first_overruled = True
                self.first_wanted = self.vocab.pieces[wanted].decode("utf-8", "replace")
        self.logprob += float(logits[best]) - norm
        self.steps += 1
        self._allowed = allowed
        return best

    def _lead(self, best: int, cand: np.ndarray, scores: np.ndarray) -> float:
        """How far ``best`` scores above the best token that would go another way: not the
        same text cut into other tokens (one piece a prefix of the other), nor another end
        token."""
        import numpy as np

        pieces, ends = self.vocab.pieces, set(self.vocab.end_ids)
        chosen, top = pieces[best], float(scores.max())
        for j in np.argsort(-scores):
            tok = int(cand[j])
            if tok == best or (tok in ends and best in ends):
                continue
            other = pieces[tok]
            both = tok not in ends and best not in ends
            if both and (chosen.startswith(other) or other.startswith(chosen)):
                continue
            return top - float(scores[j])
        return math.inf

    def advance(self, token: int) -> None:
        """Take the chosen token: move the cursors it continues, or close an item."""
        piece = self.vocab.pieces[token]
        self.text += piece
        moved = [
            _Cursor(c.source, c.start, c.pos + len(piece)) for c in self._allowed.get(token, ())
        ]
        if self.lists and piece in SEPARATORS:
            # An item ends here; the next may go on in the same run of text or start anew.
            ending = [c for c in self._cursors if self._can_end(c) and c.source == 0]
            if ending:
                self._done.append(ending[0])
                moved += self._starts
        # The same place reached by two tokenizations is one cursor.
        self._cursors = list(dict.fromkeys(moved))

    def finish(self) -> None:
        """Record the spans copied (called once generation has ended)."""
        # Cut short by the token budget, the span ends where the text does.
        ends = [c for c in self._cursors if self._can_end(c)] or [
            c for c in self._cursors if c.pos > c.start
        ]
        closed = [*self._done, *ends[:1]]
        self.spans = [Span(c.source, c.start, c.pos) for c in closed]

    # -- what came out -----------------------------------------------------
    @property
    def fixed_reply(self) -> int | None:
        """Which fixed reply the answer is (1-based, as ``fixed``), or None for a span."""
        if len(self.spans) == 1 and self.spans[0].source:
            return self.spans[0].source
        return None

    def items(self) -> list[str]:
        """The copied spans as text, leading spaces dropped."""
        out = []
        for s in self.spans:
            text = self.sources[s.source][s.start : s.end].decode("utf-8", "replace").strip()
            if text:
                out.append(text)
        return out


@dataclass
class Choice:
    """One token among a few replies ("Yes", "No"), with the model's probability of each.

    Used for a question put to the model about its own answer: only the first token
    matters, so a reply is known by the tokens that begin it."""

    vocab_of: Callable[[], Vocabulary]
    replies: tuple[str, ...]
    probs: list[float] = field(default_factory=list, init=False)

    def _first_tokens(self, reply: str) -> list[int]:
        vocab = self.vocab_of()
        out = []
        for form in (reply, " " + reply, reply.lower(), " " + reply.lower()):
            out += vocab.by_piece.get(form.encode("utf-8"), ())
        return list(dict.fromkeys(out))

    def choose(self, logits: np.ndarray) -> int:
        import numpy as np

        top = float(logits.max())
        weights = np.exp(logits - top)
        total = float(weights.sum())
        firsts = [self._first_tokens(r) for r in self.replies]
        self.probs = [float(weights[t].sum()) / total if t else 0.0 for t in firsts]
        best = max(range(len(firsts)), key=lambda i: self.probs[i])
        if not firsts[best]:
            return self.vocab_of().end_ids[0]
        return max(firsts[best], key=lambda t: float(logits[t]))

    def advance(self, token: int) -> None:
        pass

    def finish(self) -> None:
        pass
