"""`rag serve`: a real server process (the small model, a real index) answering the
native API, the unmodified `openai` client, and the `rag` command itself.

One server is started for the module, on its Unix socket and on 127.0.0.1 with a
token, with a queue of one so that a burst of requests shows the 503; the SIGTERM test
starts its own.
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from ragcli.config import load_settings
from ragcli.index.pipeline import build_index

from ..conftest import CORPORA, RAG, rag

CRICKET = "Who won the 2023 Cricket World Cup?"
APOLLO = "When did Apollo 11 land on the Moon?"
UNANSWERABLE = "What is the capital of Peru?"
TOKEN = "test-token-4f1c"
MAX_BODY = 4096
START_TIMEOUT_S = 180
HEAVY = ("torch", "sentence_transformers", "llama_cpp", "typer", "rich", "numpy")

# The `rag ask` fast path in a fresh interpreter: its exit code, and which heavy
# modules it imported.
PROBE = f"""
import json, sys
from ragcli.cli.via_server import through_server
code = through_server(sys.argv[1:])
loaded = sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r}))
print(json.dumps({{"code": code, "loaded": loaded}}))
"""


class UnixConnection(http.client.HTTPConnection):
    """The standard library's HTTP client over a Unix socket: the tests' own raw client."""

    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self._path)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Server:
    proc: subprocess.Popen
    index: Path
    socket: Path
    port: int
    log: Path

    def unix(self, method: str, path: str, body: bytes | None = None, headers=None):
        conn = UnixConnection(str(self.socket), timeout=120)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            reply = conn.getresponse()
            return reply.status, json.loads(reply.read() or b"{}")
        finally:
            conn.close()

    def tcp(self, method: str, path: str, body: bytes | None = None, headers=None):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            reply = conn.getresponse()
            return reply.status, json.loads(reply.read() or b"{}")
        finally:
            conn.close()

    def stats(self) -> dict:
        status, body = self.unix("GET", "/stats")
        assert status == 200
        return body


def start_server(index: Path, log: Path, *args: str, sock: Path | None = None) -> Server:
    """`rag serve` in a new process, returned once /health answers."""
    cmd = [str(RAG), "serve", "--index", str(index), *args]
    if sock is not None:
        cmd += ["--socket", str(sock)]
    port = int(args[args.index("--port") + 1]) if "--port" in args else 0
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
    server = Server(proc, index, sock or index / "serve.sock", port, log)
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        if proc.poll() is not None:
            pytest.fail(f"rag serve exited with {proc.returncode}:\n{log.read_text()[-2000:]}")
        if server.socket.exists():
            try:
                if server.unix("GET", "/health")[0] == 200:
                    return server
            except OSError:
                pass
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"rag serve not ready after {START_TIMEOUT_S} s")
        time.sleep(0.2)


def stop_server(server: Server) -> int:
    server.proc.send_signal(signal.SIGTERM)
    try:
        return server.proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        server.proc.kill()
        server.proc.wait()
        pytest.fail("rag serve did not stop within 60 s of SIGTERM")


@pytest.fixture(scope="module")
def docs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two topics of the demo corpus, in a folder the index-change test may add to."""
    root = tmp_path_factory.mktemp("serve-docs")
    for topic in ("cricket", "space"):
        shutil.copytree(CORPORA / topic, root / topic)
    return root


@pytest.fixture(scope="module")
def server(docs: Path, tmp_path_factory: pytest.TempPathFactory, embedder) -> Iterator[Server]:
    index = tmp_path_factory.mktemp("serve-index") / "index"
    build_index([docs], load_settings({"index_dir": index}), embedder=embedder)
    log = tmp_path_factory.mktemp("serve-log") / "server.log"
    port = _free_port()
    srv = start_server(
        index, log, "--host", "127.0.0.1", "--port", str(port), "--token", TOKEN,
        "--queue", "1", "--max-body", str(MAX_BODY),
    )  # fmt: skip
    try:
        yield srv
    finally:
        code = stop_server(srv)
        assert code == 0, srv.log.read_text()[-2000:]
        assert not srv.socket.exists()  # removed on the way out


def _same(a: dict, b: dict) -> dict:
    keys = ("question", "answer", "answered", "raw_answer", "grounded", "cited", "reason")
    assert {k: a[k] for k in keys} == {k: b[k] for k in keys}
    assert [s["path"] for s in a["sources"]] == [s["path"] for s in b["sources"]]
    return a


# -- the rag command through the server ----------------------------------------------


def test_ask_uses_the_server_and_no_server_does_not(server: Server):
    before = server.stats()["questions"]
    served = rag("ask", "--index", str(server.index), "--json", CRICKET)
    assert served.returncode == 0, served.stderr
    assert server.stats()["questions"] == before + 1
    local = rag("ask", "--index", str(server.index), "--json", "--no-server", CRICKET)
    assert local.returncode == 0, local.stderr
    assert server.stats()["questions"] == before + 1  # --no-server answered in-process
    answer = _same(json.loads(served.stdout), json.loads(local.stdout))
    assert "Australia" in answer["answer"]
    # The plain text is the same bytes either way (the timing line on stderr differs).
    text_served = rag("ask", "--index", str(server.index), CRICKET)
    text_local = rag("ask", "--index", str(server.index), "--no-server", CRICKET)
    assert text_served.returncode == text_local.returncode == 0
    assert text_served.stdout == text_local.stdout
    assert text_served.stdout.startswith("Australia")
    assert server.stats()["questions"] == before + 2


def test_exit_codes_and_errors_are_the_commands_own(server: Server):
    for args in ((UNANSWERABLE,), ("   ",), ("x" * 4001,)):
        served = rag("ask", "--index", str(server.index), *args)
        local = rag("ask", "--index", str(server.index), "--no-server", *args)
        assert served.returncode == local.returncode, (args, served.stderr, local.stderr)
        assert served.stdout == local.stdout
        if served.returncode == 2:
            assert served.stderr == local.stderr
            assert served.stderr.startswith("rag: error: the question is")
    assert rag("ask", "--index", str(server.index), UNANSWERABLE).returncode == 1


def test_client_process_loads_nothing_heavy(server: Server):
    out = subprocess.run(
        [sys.executable, "-c", PROBE, "ask", "--index", str(server.index), "--json", CRICKET],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    probe = json.loads(out.stdout.splitlines()[-1])
    assert probe == {"code": 0, "loaded": []}


def test_search_through_the_server_matches_in_process(server: Server):
    for extra in ((), ("--json",), ("-k", "2", "--retriever", "bm25")):
        before = server.stats()["searches"]
        served = rag("search", "--index", str(server.index), *extra, "world cup final")
        local = rag(
            "search", "--index", str(server.index), "--no-server", *extra, "world cup final"
        )
        assert served.returncode == local.returncode == 0, served.stderr
        assert server.stats()["searches"] == before + 1
        if "--json" in extra:
            a, b = json.loads(served.stdout), json.loads(local.stdout)
            assert a["results"] == b["results"] and a["query"] == b["query"]
        else:
            assert served.stdout == local.stdout
            assert served.stdout.count("\n[") + 1 == (2 if "-k" in extra else 4)


def test_batch_and_chat_go_through_the_server(server: Server):
    before = server.stats()["questions"]
    batch = rag("ask", "--index", str(server.index), "-", input=f"{CRICKET}\n\n{'y' * 4001}\n")
    assert batch.returncode == 2, batch.stderr  # the worst line: too long
    lines = [json.loads(line) for line in batch.stdout.splitlines()]
    assert "Australia" in lines[0]["answer"]
    assert lines[1]["answered"] is False and "too long" in lines[1]["error"]
    chat = rag("chat", "--index", str(server.index), input=f"{CRICKET}\n")
    assert chat.returncode == 0, chat.stderr
    assert chat.stdout.startswith("Australia")
    assert server.stats()["questions"] == before + 2


def test_other_settings_are_answered_in_process_with_a_note(server: Server):
    before = server.stats()["questions"]
    result = rag("ask", "--index", str(server.index), "--top-k", "2", "--json", CRICKET)
    assert result.returncode == 0, result.stderr
    assert "another settings (top_k)" in result.stderr
    assert len(json.loads(result.stdout)["sources"]) == 2
    assert server.stats()["questions"] == before


# -- the native API -------------------------------------------------------------------


def test_health_stats_and_socket_permissions(server: Server):
    mode = stat.S_IMODE(os.stat(server.socket).st_mode)
    assert mode == 0o600
    status, health = server.unix("GET", "/health")
    assert status == 200 and health["status"] == "ok"
    assert health["identity"]["index"] == str(server.index.resolve())
    stats = server.stats()
    assert stats["model"] == "gemma-3-270m-q4_k_m.gguf"
    assert stats["index_generation"].startswith("vectors-")
    assert stats["queue_size"] == 1 and stats["queue_length"] == 0
    status, answer = server.unix("POST", "/ask", json.dumps({"question": APOLLO}).encode())
    assert status == 200 and answer["question"] == APOLLO
    after = server.stats()
    assert after["questions"] == stats["questions"] + 1
    assert sum(after["cache_sources"].values()) == after["questions"]
    kind = answer["timings"]["cache_source"]
    assert after["cache_sources"][kind] == stats["cache_sources"].get(kind, 0) + 1


def test_bad_requests_are_refused_with_a_reason(server: Server):
    status, body = server.unix("POST", "/ask", b"{not json")
    assert status == 400 and "not valid JSON" in body["error"]
    status, body = server.unix("POST", "/ask", json.dumps({"question": 3}).encode())
    assert status == 400 and body["exit_code"] == 2
    status, body = server.unix("POST", "/search", json.dumps({"query": "x", "top_k": 0}).encode())
    assert status == 400 and "top_k" in body["error"]
    status, body = server.unix("GET", "/nowhere")
    assert status == 404 and "/nowhere" in body["error"]
    status, body = server.unix("GET", "/ask")
    assert status == 405


def test_body_size_is_limited(server: Server):
    big = json.dumps({"question": "a" * MAX_BODY}).encode()
    status, body = server.unix("POST", "/ask", big)
    assert status == 413 and "limit" in body["error"]

    def chunks():  # no Content-Length: the limit holds while reading
        for _ in range(8):
            yield b" " * 1024

    conn = UnixConnection(str(server.socket), timeout=60)
    try:
        conn.request("POST", "/ask", body=chunks(), encode_chunked=True)
        assert conn.getresponse().status == 413
    finally:
        conn.close()
    assert server.unix("GET", "/health")[0] == 200


def test_tcp_needs_the_token_and_the_socket_does_not(server: Server):
    assert server.tcp("GET", "/health")[0] == 401
    assert server.tcp("GET", "/stats", headers={"Authorization": "Bearer wrong"})[0] == 401
    status, body = server.tcp("GET", "/health", headers={"Authorization": f"Bearer {TOKEN}"})
    assert status == 200 and body["status"] == "ok"
    assert server.unix("GET", "/health")[0] == 200  # owner-only socket: no token


def test_full_queue_answers_503_and_loses_nothing(server: Server):
    questions = [f"How many runs did the winner of final number {i} score?" for i in range(6)]

    def ask(q: str):
        return server.unix("POST", "/ask", json.dumps({"question": q}).encode())

    with ThreadPoolExecutor(len(questions)) as pool:
        replies = list(pool.map(ask, questions))
    statuses = [s for s, _ in replies]
    assert set(statuses) <= {200, 503}
    assert 503 in statuses and statuses.count(200) >= 1
    for status, body in replies:
        if status == 503:
            assert "busy" in body["error"]
        else:
            assert body["question"] in questions
    assert server.stats()["rejected_busy"] >= statuses.count(503)


def test_a_client_that_leaves_does_not_wedge_the_server(server: Server):
    body = json.dumps({"question": "Which team did Australia beat in the 2023 final?"}).encode()
    for _ in range(3):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(str(server.socket))
        s.sendall(
            b"POST /ask HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        s.close()  # gone before the answer
    deadline = time.monotonic() + 120
    while (stats := server.stats())["running"] or stats["queue_length"]:
        assert time.monotonic() < deadline, "requests of gone clients still hold the queue"
        time.sleep(0.1)
    status, answer = server.unix("POST", "/ask", json.dumps({"question": CRICKET}).encode())
    assert status == 200 and "Australia" in answer["answer"]


# -- the OpenAI-compatible API, through the official client ---------------------------


def _openai(server: Server, token: str = TOKEN):
    import openai

    return openai.OpenAI(base_url=f"http://127.0.0.1:{server.port}/v1", api_key=token)


def test_openai_client_lists_the_model_and_answers(server: Server):
    client = _openai(server)
    assert [m.id for m in client.models.list()] == ["gemma-3-270m-q4_k_m.gguf"]
    reply = client.chat.completions.create(
        model="anything",
        messages=[
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Hello"},
            {"role": "assistant", "content": "Hi."},
            {"role": "user", "content": CRICKET},
        ],
    )
    text = reply.choices[0].message.content
    assert reply.choices[0].message.role == "assistant"
    assert reply.choices[0].finish_reason == "stop"
    assert text.startswith("Australia [")  # numbered citations in the text ...
    extra = reply.model_extra
    assert [s["rank"] for s in extra["sources"]] == [1, 2, 3, 4]  # ... and the sources
    for rank in extra["ragcli"]["cited"]:
        assert f"[{rank}] " in text.split("Sources:")[1]
    timings = extra["ragcli"]["timings"]
    assert reply.usage.prompt_tokens == timings["prompt_tokens"]
    # Asked before in this module: the answer cache serves it, else the model reads a prompt.
    assert timings["cache_source"] == "answer" or timings["prompt_tokens"] > 100


def test_openai_client_streams(server: Server):
    client = _openai(server)
    stream = client.chat.completions.create(
        model="anything", messages=[{"role": "user", "content": CRICKET}], stream=True
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks)
    assert text.startswith("Australia [")
    assert chunks[0].choices[0].delta.role == "assistant"
    assert chunks[-1].choices[0].finish_reason == "stop"
    assert len(chunks[-1].model_extra["sources"]) == 4


def test_openai_client_without_the_token_is_refused(server: Server):
    import openai

    with pytest.raises(openai.AuthenticationError):
        _openai(server, token="wrong").models.list()
    with pytest.raises(openai.BadRequestError):
        _openai(server).chat.completions.create(
            model="x", messages=[{"role": "assistant", "content": "no question"}]
        )


# -- the index moves under the server --------------------------------------------------


def test_index_change_is_seen_by_the_next_request(server: Server, docs: Path, embedder):
    query = "Which festival is held in Quenvale every spring?"
    before = server.stats()
    old = rag("search", "--index", str(server.index), "--json", query)
    assert "quenvale.txt" not in old.stdout
    (docs / "quenvale.txt").write_text(
        "The Lantern Festival of Quenvale is held every spring on the shores of Lake Ormis.\n"
    )
    build_index([docs], load_settings({"index_dir": server.index}), embedder=embedder)
    new = rag("search", "--index", str(server.index), "--json", query)
    assert new.returncode == 0, new.stderr
    assert json.loads(new.stdout)["results"][0]["path"].endswith("quenvale.txt")
    after = server.stats()
    assert after["index_generation"] != before["index_generation"]
    assert after["index_reloads"] == before["index_reloads"] + 1
    answer = json.loads(rag("ask", "--index", str(server.index), "--json", query).stdout)
    assert any(s["path"].endswith("quenvale.txt") for s in answer["sources"])


# -- stale sockets and shutdown ---------------------------------------------------------


def test_a_stale_socket_means_in_process(corpus_index: Path, tmp_path: Path):
    index = tmp_path / "index"
    shutil.copytree(corpus_index, index)
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(str(index / "serve.sock"))
    dead.close()  # the file stays, nothing listens: a server that was killed
    result = rag("search", "--index", str(index), "world cup final")
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert result.stdout.startswith("[1] ")


def test_sigterm_drains_in_flight_requests(server: Server, tmp_path: Path):
    sock = tmp_path / "drain.sock"
    other = start_server(server.index, tmp_path / "drain.log", "--no-cache", sock=sock)
    replies: list[tuple[int, dict]] = []
    question = "Who was the captain of the team that won the 2023 final?"
    worker = threading.Thread(
        target=lambda: replies.append(
            other.unix("POST", "/ask", json.dumps({"question": question}).encode())
        )
    )
    worker.start()
    deadline = time.monotonic() + 60
    while not other.stats()["running"]:
        assert time.monotonic() < deadline, "the request never started"
        time.sleep(0.05)
    assert stop_server(other) == 0, other.log.read_text()[-2000:]
    worker.join(timeout=60)
    assert len(replies) == 1
    status, answer = replies[0]
    assert status == 200 and answer["question"] == question  # answered, not cut off
    assert not sock.exists()
    with pytest.raises(OSError):
        UnixConnection(str(sock), timeout=5).connect()
