"""What every generation engine shares: the prompt it reads, the figures it reports,
the protocol it follows, and the streaming rule for stop strings.

Two engines implement :class:`Engine`: :class:`ragcli.llm.llama.LlamaEngine` (llama.cpp
in this process) and :class:`ragcli.llm.remote.RemoteEngine` (an OpenAI-compatible
server).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    import numpy as np

    from .constrain import Vocabulary

OnText = Callable[[str], None]
CONTEXT = 1  # index of the document-text segment in Prompt.segments
MAX_TOKENS = 48  # tokens an engine generates when its caller names no limit


@dataclass(frozen=True)
class Prompt:
    """Prompt text in reuse order; ``segments`` join to the full prompt.

    ``pieces``: the context segment cut into units (sentences) that join to it; an engine
    with a reading cache encodes each apart, after the first segment, and keeps its keys
    and values for any later prompt that shows it (llm/reading_cache.py). ``leads``, one a
    piece: the pieces of text read just before it when it is encoded apart, and not kept
    (the sentences before it in its passage), so that it reads in context. ``frame``: the
    context segment's text before and after its pieces (a label, a newline), read with the
    segments around them when pieces are read apart. ``fresh``: indices of pieces read in
    place, after everything before them in this prompt, even when the others are read
    apart: the sentences most likely to hold the answer, so that what the model copies
    from was read as it would be whole.
    """

    segments: tuple[str, str, str]
    stop: tuple[str, ...]
    pieces: tuple[str, ...] = ()
    leads: tuple[tuple[str, ...], ...] = ()
    frame: tuple[str, str] = ("", "")
    fresh: tuple[int, ...] = ()

    @property
    def text(self) -> str:
        return "".join(self.segments)


@dataclass
class Timings:
    """Where the time of one answer went (milliseconds unless named otherwise)."""

    prompt_tokens: int = 0
    cached_tokens: int = 0
    cache_source: str = "none"  # live (this process), disk (prefix cache) or none
    # Context tokens whose keys and values came from the reading cache, and the time to place
    # them; the sentences it did not hold are encoded apart and counted in prefill_tokens.
    reading_tokens: int = 0
    reading_ms: float = 0.0
    # Tokens read only as the lead of a sentence encoded apart (the passage before it).
    lead_tokens: int = 0
    prefill_tokens: int = 0
    prefill_ms: float = 0.0
    prefill_tok_s: float = 0.0
    state_load_ms: float = 0.0
    state_save_ms: float = 0.0
    ttft_ms: float = 0.0
    completion_tokens: int = 0
    decode_ms: float = 0.0
    decode_tok_s: float = 0.0
    constrain_ms: float = 0.0  # of decode_ms: choosing tokens that keep the answer a copy
    total_ms: float = 0.0
    # llama.cpp threads per evaluated token: fewer than configured while other processes
    # keep cores busy (llm/threads.py); 0 where the engine does not say
    prefill_threads: float = 0.0
    decode_threads: float = 0.0

    def as_dict(self) -> dict[str, float | int | str]:
        return {k: round(v, 2) if isinstance(v, float) else v for k, v in asdict(self).items()}


@dataclass
class Generation:
    text: str
    timings: Timings


class Constraint(Protocol):
    """Chooses each token from the model's logits (:mod:`ragcli.llm.constrain`)."""

    def choose(self, logits: np.ndarray) -> int: ...

    def advance(self, token: int) -> None: ...

    def finish(self) -> None: ...


class Engine(Protocol):
    """A loaded model that completes prompts, one at a time."""

    model: Any  # has .name
    chat_template: str | None
    bos: str
    eos: str
    can_constrain: bool  # whether generate() takes a constraint
    can_rank: bool  # whether it is a Ranker too

    @property
    def vocabulary(self) -> Vocabulary | None:
        """The token pieces a :class:`Constraint` needs (may wait for them to be built);
        None where logits are out of reach."""
        ...

    def generate(
        self,
        prompt: Prompt,
        max_tokens: int = MAX_TOKENS,
        on_text: OnText | None = None,
        use_cache: bool = True,
        constraint: Constraint | None = None,
        follow_up: bool = False,
    ) -> Generation:
        """``follow_up``: the prompt goes on from the last one (a question about the answer
        just given), so the state still held for it is reused even with ``use_cache`` off;
        the disk cache is still left alone then."""
        ...

    def close(self) -> None: ...


class StopStream:
    """Generated text cut at the first stop string, streamed as it grows.

    The last ``hold`` characters are kept back until more text shows they do not
    begin a stop string, so a stop string never reaches ``on_text``.
    """

    def __init__(self, stop: tuple[str, ...], on_text: OnText | None) -> None:
        self.stop = stop
        self.on_text = on_text
        self.hold = max((len(s) for s in stop), default=0)
        self.text = ""
        self.emitted = 0
        self.stopped = False

    def update(self, text: str) -> bool:
        """Take the text so far; True once a stop string has ended it."""
        cut = min((i for s in self.stop if (i := text.find(s)) >= 0), default=-1)
        if cut >= 0:
            self.text, self.stopped = text[:cut], True
            return True
        self.text = text
        if self.on_text and len(text) - self.hold > self.emitted:
            self.on_text(text[self.emitted : len(text) - self.hold])
            self.emitted = len(text) - self.hold
        return False

    def finish(self) -> str:
        """Stream what was held back; returns the whole text."""
        if self.on_text and len(self.text) > self.emitted:
            self.on_text(self.text[self.emitted :])
            self.emitted = len(self.text)
        return self.text


class Ranker(Protocol):
    """An engine that shows where its attention goes (answer/rerank.py, llm/attention.py)."""

    chat_template: str | None
    bos: str
    eos: str

    def passage_attention(
        self,
        head: str,
        passages: Sequence[str],
        between: str,
        queries: Sequence[str],
        depth: float = 1.0,
    ) -> tuple[np.ndarray, int]:
        """[query, layer, passage]: the attention each query, read after ``head``, the
        ``passages`` and ``between``, pays each passage (summed over the passage's tokens,
        the query's tokens and the heads) in the first ``depth`` share of the layers (the
        rest are not computed), and how many tokens were read. Passages past what the
        context holds are left out: the array then has fewer."""
        ...


@runtime_checkable
class ReadingEngine(Protocol):
    """An engine with a reading cache (llm/reading_cache.py): what the asker asks of it to
    choose between reading a prompt apart and reading it whole."""

    def unread(self, prompt: Prompt) -> tuple[int, int]:
        """Tokens reading the context apart would still encode, and its tokens."""
        ...

    def holds_whole(self, prompt: Prompt) -> bool:
        """Whether the state after the context read whole is at hand."""
        ...

    def warm(self, prompt: Prompt) -> int:
        """Keep the sentences the reading cache lacks; the tokens read."""
        ...


class StatefulEngine(Protocol):
    """An engine whose KV state can be saved and restored (what the prefix cache needs)."""

    model: Any  # has .name and .digest (sha256 of the model file)
    n_ctx: int
    n_batch: int
    kv_type: str  # f16 or q8_0: a state of one type cannot be loaded into the other

    def save_state(self) -> bytes: ...

    def load_state(self, data: bytes, tokens: list[int]) -> bool: ...
