"""Generation on an OpenAI-compatible server instead of a model loaded in this process.

When one machine is too small or too busy for the model, ``--llm-url`` sends the
prompt to a server that already has it loaded: llama.cpp's ``llama-server``,
llama-cpp-python's server or vLLM. The client sends the same prompt text the
local engine would read, in the same cache-friendly order (instructions, then
context, then question), so the server's own prefix cache serves the shared part.
It streams the answer from ``POST {url}/completions`` (server-sent events) and
takes the server's figures (usage, llama.cpp's ``timings``) where it gives them;
time to first token is measured here. Only the standard library is used, so the
client needs no extra package.
"""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from http.client import HTTPException, HTTPResponse
from typing import Any

from ..errors import ModelError
from .base import CONTEXT, MAX_TOKENS, Constraint, Generation, OnText, Prompt, StopStream, Timings

# Strings that tokenizers read as control tokens when a server parses special tokens
# in the whole prompt (llama.cpp and llama-cpp-python both do): ChatML/Llama-3 style
# <|...|>, Gemma's turn markers, BOS/EOS spellings, Mistral's [INST].
_CONTROL_RE = re.compile(
    r"<\|[^<>|\s]{1,40}\|>|</?(?:start_of_turn|end_of_turn|bos|eos|s|pad|unk)>|\[/?INST\]"
)
PROBE_TIMEOUT_S = 10.0  # GET /models: a server that does not answer this is not usable
READ_TIMEOUT_S = 300.0  # longest silence accepted while a completion streams


@dataclass(frozen=True)
class RemoteModel:
    """The model a server serves, as its /models list names it."""

    url: str
    id: str

    @property
    def name(self) -> str:
        # llama-cpp-python names a model by the path it was started with.
        return self.id.rstrip("/").rsplit("/", 1)[-1] or self.url


def _sse_events(resp: HTTPResponse) -> Iterator[str]:
    """The data of each server-sent event, ``[DONE]`` included, as it arrives."""
    data: list[str] = []
    for raw in resp:
        line = raw.decode("utf-8").rstrip("\r\n")
        if not line:  # a blank line ends an event
            if data:
                yield "\n".join(data)
                data = []
        elif line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))
        # comments (":...") and other fields (event:, id:, retry:) carry nothing we use
    if data:
        yield "\n".join(data)


def prompt_text(prompt: Prompt) -> str:
    """The prompt as sent: document text cannot spell a control token.

    The local engine tokenizes the context segment with special tokens off; a server
    tokenizes the whole string with them on, so a zero-width space after the opening
    character keeps such a string text. Prompts without one are sent unchanged.
    """
    segments = list(prompt.segments)
    segments[CONTEXT] = _CONTROL_RE.sub(lambda m: m[0][0] + "\u200b" + m[0][1:], segments[CONTEXT])
    return "".join(segments)


def _number(obj: dict[str, Any] | None, key: str) -> float | None:
    value = (obj or {}).get(key)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


class RemoteEngine:
    """Same ``generate`` contract as :class:`ragcli.llm.llama.LlamaEngine`, over HTTP."""

    # The prompt is the plain few-shot completion prompt: a server does not say
    # reliably whether its model has a chat template (llama-server falls back to
    # a generic one), and the completion prompt works with any model.
    chat_template: str | None = None
    bos = ""
    eos = ""
    # A server returns text, not logits: answers are free and judged afterwards.
    can_constrain = False
    can_rank = False  # a server shows no attention weights
    vocabulary = None

    def __init__(self, url: str, read_timeout: float = READ_TIMEOUT_S) -> None:
        self.url = url.rstrip("/")
        self.read_timeout = read_timeout
        self.model = RemoteModel(self.url, self._model_id())

    # -- HTTP ------------------------------------------------------------
    def _open(self, path: str, body: dict | None, timeout: float, base: str | None = None):
        """Open a request; every failure becomes one ModelError line naming the URL."""
        url = f"{base or self.url}{path}"
        data = json.dumps(body).encode("utf-8") if body is not None else None
        req = urllib.request.Request(url, data=data, method="POST" if data else "GET")
        req.add_header("Accept", "text/event-stream" if body and body.get("stream") else "*/*")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            return urllib.request.urlopen(req, timeout=timeout)
        except urllib.error.HTTPError as exc:
            hint = (
                " (the URL should be the server's OpenAI base, e.g. .../v1)"
                if exc.code == 404
                else ""
            )
            raise ModelError(
                f"LLM server {url} answered HTTP {exc.code}: {_error_text(exc)}{hint}"
            ) from None
        except TimeoutError:
            raise ModelError(f"LLM server {url} did not answer within {timeout:.0f} s") from None
        except urllib.error.URLError as exc:
            raise ModelError(f"cannot reach the LLM server at {url}: {exc.reason}") from None
        except (OSError, HTTPException) as exc:
            raise ModelError(f"cannot reach the LLM server at {url}: {exc}") from None

    def _get_json(self, path: str, base: str | None = None, body: dict | None = None) -> Any:
        with self._open(path, body, PROBE_TIMEOUT_S, base) as resp:
            try:
                return json.loads(resp.read())
            except (ValueError, OSError, HTTPException) as exc:
                raise ModelError(f"LLM server {self.url}{path} sent no JSON: {exc}") from None

    def _model_id(self) -> str:
        """The first model the server lists (OpenAI ``GET /models``)."""
        listing = self._get_json("/models")
        models = listing.get("data") if isinstance(listing, dict) else None
        if not models or not isinstance(models[0], dict) or not models[0].get("id"):
            raise ModelError(f"LLM server {self.url}/models lists no model")
        return str(models[0]["id"])

    def _count_tokens(self, text: str) -> int | None:
        """Prompt length from llama-cpp-python's tokenizer endpoint (its stream has no usage)."""
        root = self.url.removesuffix("/v1")
        try:
            reply = self._get_json("/extras/tokenize/count", root, {"input": text})
        except ModelError:
            return None
        count = reply.get("count") if isinstance(reply, dict) else None
        return count if isinstance(count, int) else None

    # -- generation ------------------------------------------------------
    def generate(
        self,
        prompt: Prompt,
        max_tokens: int = MAX_TOKENS,
        on_text: OnText | None = None,
        use_cache: bool = True,
        constraint: Constraint | None = None,
        follow_up: bool = False,
    ) -> Generation:
        """Greedy completion of ``prompt`` on the server; streams text through ``on_text``.
        (``follow_up``: the server's slot keeps its prefix whenever ``use_cache`` is on.)"""
        if constraint is not None:
            raise ModelError("a server's generation cannot be constrained token by token")
        t = Timings(cache_source="unknown")
        started = time.perf_counter()
        text_sent = prompt_text(prompt)
        body = {
            "model": self.model.id,
            "prompt": text_sent,
            "max_tokens": max_tokens,
            "stop": list(prompt.stop),
            "stream": True,
            "stream_options": {"include_usage": True},  # OpenAI and vLLM: usage at the end
            # Greedy, no penalties: the same tokens as the local engine.
            "temperature": 0.0,
            "top_k": 1,
            "top_p": 1.0,
            "min_p": 0.0,
            "repeat_penalty": 1.0,
            "frequency_penalty": 0.0,
            "presence_penalty": 0.0,
            "seed": 0,
            "cache_prompt": use_cache,  # llama-server: reuse the slot's KV prefix
        }
        stream, pieces = StopStream(prompt.stop, on_text), 0
        usage: dict[str, Any] | None = None
        timings: dict[str, Any] | None = None
        t_first: float | None = None
        with self._open("/completions", body, self.read_timeout) as resp:
            try:
                for data in _sse_events(resp):
                    if data.strip() == "[DONE]":
                        break
                    event = json.loads(data)
                    if not isinstance(event, dict):
                        continue
                    if "error" in event:
                        raise ModelError(f"LLM server {self.url}: {_message(event['error'])}")
                    usage = event.get("usage") or usage
                    timings = event.get("timings") or timings
                    choices = event.get("choices") or []
                    piece = (choices[0].get("text") or "") if choices else ""
                    if not piece or stream.stopped:
                        continue
                    if t_first is None:
                        t_first = time.perf_counter()
                    pieces += 1
                    # Servers apply the stop sequences themselves; cut here too, for
                    # one that lets a stop string through.
                    stream.update(stream.text + piece)
            except TimeoutError:
                raise ModelError(
                    f"LLM server {self.url} stopped sending for {self.read_timeout:.0f} s"
                ) from None
            except (ValueError, OSError, HTTPException) as exc:
                raise ModelError(f"LLM server {self.url} sent a broken stream: {exc}") from None
        text = stream.finish()
        ended = time.perf_counter()
        t.ttft_ms = ((t_first or ended) - started) * 1000
        t.total_ms = (ended - started) * 1000
        self._fill(t, usage, timings, pieces, text_sent)
        if not timings:  # no server figures: decode as seen from here
            t.decode_ms = (ended - (t_first or ended)) * 1000
            t.decode_tok_s = t.completion_tokens / max(t.decode_ms / 1000, 1e-9)
        return Generation(text=text, timings=t)

    def _fill(
        self,
        t: Timings,
        usage: dict[str, Any] | None,
        timings: dict[str, Any] | None,
        pieces: int,
        prompt_text: str,
    ) -> None:
        """Token counts and prefill figures from whatever the server reported."""
        details = (usage or {}).get("prompt_tokens_details")
        prompt_n = _number(usage, "prompt_tokens")
        cached = _number(details if isinstance(details, dict) else None, "cached_tokens")
        completion_n = _number(usage, "completion_tokens")
        if timings:  # llama-server: prompt_n tokens evaluated, cache_n reused
            cache_n = _number(timings, "cache_n")
            evaluated = _number(timings, "prompt_n")
            if cache_n is not None:
                cached = cache_n
            if prompt_n is None and evaluated is not None:
                prompt_n = evaluated + (cache_n or 0)
            if evaluated is not None:
                t.prefill_tokens = int(evaluated)
            t.prefill_ms = _number(timings, "prompt_ms") or 0.0
            t.prefill_tok_s = t.prefill_tokens / max(t.prefill_ms / 1000, 1e-9)
            completion_n = _number(timings, "predicted_n") or completion_n
            t.decode_ms = _number(timings, "predicted_ms") or 0.0
            t.decode_tok_s = (completion_n or 0) / max(t.decode_ms / 1000, 1e-9)
        if prompt_n is None:
            prompt_n = self._count_tokens(prompt_text)
        t.prompt_tokens = int(prompt_n or 0)
        t.completion_tokens = int(completion_n if completion_n is not None else pieces)
        if cached is not None:
            t.cached_tokens, t.cache_source = int(cached), "server"
            if not timings:
                t.prefill_tokens = t.prompt_tokens - t.cached_tokens

    def close(self) -> None:
        """Nothing to free: each request is its own connection."""


def _message(error: Any) -> str:
    if isinstance(error, dict):
        return str(error.get("message") or error)
    return str(error)


def _error_text(exc: urllib.error.HTTPError) -> str:
    """The server's own error message, on one line."""
    try:
        raw = exc.read().decode("utf-8", "replace")
    except (OSError, HTTPException):
        raw = ""
    try:
        payload = json.loads(raw)
        text = _message(payload.get("error", payload.get("detail", payload)))
    except (ValueError, AttributeError):
        text = raw or exc.reason
    return " ".join(str(text).split())[:300]
