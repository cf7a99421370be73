"""The HTTP face of `rag serve` (Starlette on uvicorn): the native API, whose replies
are exactly what `rag ask --json` and `rag search --json` print, and an OpenAI-compatible
chat API over the same answers.

Nothing here touches the model: every request becomes a job of :class:`Service`, which
runs one at a time; this layer checks the token and the body size, refuses what the
queue cannot hold, and notices clients that leave.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from .. import __version__
from ..answer.question_batch import MAX_QUESTION_CHARS, check_question
from ..citations import citation
from ..config import RETRIEVERS
from ..errors import ExitCode, RagError
from .locate import identity
from .worker import Busy, Gone, Job, Service

log = logging.getLogger(__name__)

DEFAULT_MAX_BODY = 256 * 1024  # a question is at most 4,000 characters; chat histories more
POLL_S = 0.2  # how often a waiting request looks whether its client is still there

_STATUS = {ExitCode.USAGE: 400, ExitCode.NOT_FOUND: 404}


class HTTPError(Exception):
    """A refusal with its HTTP status, message and the exit code a `rag` client uses."""

    def __init__(self, status: int, message: str, code: int = ExitCode.USAGE) -> None:
        super().__init__(message)
        self.status = status
        self.code = code


def _error_body(exc: HTTPError, openai: bool) -> dict[str, Any]:
    if openai:  # the shape the openai client reads its message from
        kind = "invalid_request_error" if exc.status < 500 else "server_error"
        return {"error": {"message": str(exc), "type": kind, "code": exc.status}}
    return {"error": str(exc), "exit_code": int(exc.code)}


def _as_http(exc: BaseException) -> HTTPError:
    if isinstance(exc, HTTPError):
        return exc
    if isinstance(exc, Busy):
        return HTTPError(503, str(exc), ExitCode.INDEX_OR_MODEL)
    if isinstance(exc, RagError):
        return HTTPError(_STATUS.get(exc.exit_code, 500), str(exc), exc.exit_code)
    log.exception("unexpected error while serving a request")
    return HTTPError(500, f"unexpected {type(exc).__name__}: {exc}", ExitCode.FAILURE)


async def read_json(request: Request, limit: int) -> dict[str, Any]:
    """The request body as a JSON object, refused (413) past ``limit`` bytes before it
    is all read, so a huge body costs the server nothing."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise HTTPError(413, f"request body of {declared} bytes is over the limit of {limit}")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise HTTPError(413, f"request body is over the limit of {limit} bytes")
    try:
        obj = json.loads(body)
    except ValueError:
        raise HTTPError(400, "request body is not valid JSON") from None
    if not isinstance(obj, dict):
        raise HTTPError(400, "request body must be a JSON object")
    return obj


async def wait_for(service: Service, request: Request, job: Job) -> Any:
    """The job's result; a client that disconnects meanwhile cancels it (it then never
    runs, or stops decoding), so it does not hold the queue."""
    future = asyncio.wrap_future(job.future)
    try:
        while True:
            done, _ = await asyncio.wait({future}, timeout=POLL_S)
            if done:
                if future.cancelled():
                    raise Gone
                return future.result()
            if await request.is_disconnected():
                service.cancel(job)
                raise Gone
    except asyncio.CancelledError:
        service.cancel(job)
        raise


def _text_field(body: dict[str, Any], name: str) -> str:
    value = body.get(name)
    if not isinstance(value, str):
        raise HTTPError(400, f"field {name!r} must be a string")
    return value


def _message_text(content: Any) -> str:
    """An OpenAI message's content: a string, or a list of parts of which the text ones count."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [p.get("text") for p in content if isinstance(p, dict) and p.get("type") == "text"]
        return " ".join(t for t in texts if isinstance(t, str))
    raise HTTPError(400, "a message's content must be a string or a list of text parts")


def last_user_message(body: dict[str, Any]) -> str:
    """The question of a chat request: its last user message."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise HTTPError(400, "field 'messages' must be a non-empty list")
    for m in reversed(messages):
        if isinstance(m, dict) and m.get("role") == "user":
            return _message_text(m.get("content"))
    raise HTTPError(400, "no message with role 'user' to answer")


def cited_text(answer: dict[str, Any]) -> str:
    """The assistant message: the answer with the numbers of its sources, then those sources."""
    by_rank = {s["rank"]: s for s in answer["sources"]}
    cited = [r for r in answer.get("cited", []) if r in by_rank]
    text = answer["answer"] + "".join(f" [{r}]" for r in cited)
    if cited:
        text += "\n\nSources:\n" + "\n".join(f"[{r}] {citation(by_rank[r])}" for r in cited)
    return text


def create_app(
    service: Service, token: str | None = None, max_body: int = DEFAULT_MAX_BODY
) -> Callable[..., Awaitable[None]]:
    """The ASGI application over a started :class:`Service`.

    With ``token``, TCP requests must carry ``Authorization: Bearer TOKEN`` (401 without);
    the Unix socket is already owner-only, so requests on it need none.
    """

    def handler(
        fn: Callable[[Request], Awaitable[Response]], openai: bool = False
    ) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            try:
                return await fn(request)
            except Gone:
                return Response(status_code=499)  # nobody reads it
            except Exception as exc:
                err = _as_http(exc)
                return JSONResponse(_error_body(err, openai), status_code=err.status)

        return endpoint

    async def run(request: Request, work) -> Any:
        return await wait_for(service, request, service.submit(work))

    async def health(request: Request) -> Response:
        return JSONResponse(
            {
                "status": "ok",
                "version": __version__,
                "model": service.model,
                "index_generation": service.generation,
                "identity": identity(service.settings),
            }
        )

    async def stats(request: Request) -> Response:
        return JSONResponse(service.snapshot())

    async def ask(request: Request) -> Response:
        body = await read_json(request, max_body)
        question = check_question(_text_field(body, "question"))
        return JSONResponse(await run(request, service.ask(question)))

    async def search(request: Request) -> Response:
        body = await read_json(request, max_body)
        query = _text_field(body, "query")
        if not query.strip() or len(query) > MAX_QUESTION_CHARS:
            raise HTTPError(400, f"the query must have 1 to {MAX_QUESTION_CHARS} characters")
        top_k = body.get("top_k", service.settings.top_k)
        if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
            raise HTTPError(400, "field 'top_k' must be a positive integer")
        mode = body.get("retriever", service.settings.retriever)
        if mode not in RETRIEVERS:
            raise HTTPError(400, f"field 'retriever' must be one of {', '.join(RETRIEVERS)}")
        return JSONResponse(await run(request, service.search(query, top_k, mode)))

    async def models(request: Request) -> Response:
        return JSONResponse(
            {
                "object": "list",
                "data": [
                    {
                        "id": service.model,
                        "object": "model",
                        "created": int(service.stats.started),
                        "owned_by": "ragcli",
                    }
                ],
            }
        )

    async def chat_completions(request: Request) -> Response:
        body = await read_json(request, max_body)
        question = check_question(last_user_message(body))
        job = service.submit(service.ask(question))  # a full queue is a 503 before any stream
        reply_id = f"chatcmpl-{uuid.uuid4().hex}"
        created = int(time.time())
        if not body.get("stream"):
            answer = await wait_for(service, request, job)
            return JSONResponse(_completion(answer, reply_id, created, service.model))
        return StreamingResponse(
            _chunks(service, request, job, reply_id, created, service.model),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache"},
        )

    routes = [
        Route("/health", handler(health), methods=["GET"]),
        Route("/stats", handler(stats), methods=["GET"]),
        Route("/ask", handler(ask), methods=["POST"]),
        Route("/search", handler(search), methods=["POST"]),
        Route("/v1/models", handler(models, openai=True), methods=["GET"]),
        Route("/v1/chat/completions", handler(chat_completions, openai=True), methods=["POST"]),
    ]

    async def not_found(request: Request, exc: Exception) -> Response:
        status = getattr(exc, "status_code", 404)
        err = HTTPError(status, f"no {request.method} {request.url.path} here")
        return JSONResponse(_error_body(err, request.url.path.startswith("/v1/")), status)

    app = Starlette(routes=routes, exception_handlers={404: not_found, 405: not_found})
    return _token_gate(app, token) if token else app


def _token_gate(app: Starlette, token: str) -> Callable[..., Awaitable[None]]:
    """Refuse TCP requests without the bearer token. Requests on the Unix socket (whose
    server address uvicorn gives as ``(path, None)``) pass: the socket is owner-only."""
    expected = f"Bearer {token}".encode()

    async def gate(scope: dict, receive: Callable, send: Callable) -> None:
        server = scope.get("server")
        unix = bool(server) and server[1] is None
        if scope["type"] == "http" and not unix:
            given = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not hmac.compare_digest(given, expected):
                openai = scope.get("path", "").startswith("/v1/")
                err = HTTPError(401, "missing or wrong bearer token", ExitCode.INDEX_OR_MODEL)
                response = JSONResponse(
                    _error_body(err, openai),
                    status_code=401,
                    headers={"WWW-Authenticate": "Bearer"},
                )
                await response(scope, receive, send)
                return
        await app(scope, receive, send)

    return gate


def _usage(answer: dict[str, Any]) -> dict[str, int]:
    t = answer.get("timings", {})
    prompt, completion = int(t.get("prompt_tokens", 0)), int(t.get("completion_tokens", 0))
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def _extra(answer: dict[str, Any]) -> dict[str, Any]:
    """What an OpenAI reply carries beyond the standard fields: the sources, and the rest
    of the answer as `rag ask --json` has it."""
    rest = {k: v for k, v in answer.items() if k != "sources"}
    return {"sources": answer["sources"], "ragcli": rest}


def _completion(answer: dict[str, Any], reply_id: str, created: int, model: str) -> dict:
    return {
        "id": reply_id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": cited_text(answer)},
                "finish_reason": "stop",
            }
        ],
        "usage": _usage(answer),
        **_extra(answer),
    }


def _event(obj: dict[str, Any]) -> str:
    return f"data: {json.dumps(obj, ensure_ascii=False)}\n\n"


async def _chunks(
    service: Service, request: Request, job: Job, reply_id: str, created: int, model: str
) -> AsyncIterator[str]:
    """The streamed reply. The text is sent once the rules have passed it: a small model's
    raw words may still become "I don't know", and a stream cannot take words back."""

    def chunk(delta: dict[str, Any], finish: str | None = None, **more: Any) -> dict[str, Any]:
        return {
            "id": reply_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            **more,
        }

    yield _event(chunk({"role": "assistant", "content": ""}))
    try:
        answer = await wait_for(service, request, job)
    except Gone:
        return
    except Exception as exc:
        err = _as_http(exc)
        yield _event(_error_body(err, openai=True))
        return
    yield _event(chunk({"content": cited_text(answer)}))
    yield _event(chunk({}, "stop", usage=_usage(answer), **_extra(answer)))
    yield "data: [DONE]\n\n"
