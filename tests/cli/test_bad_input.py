"""Bad input through the real `rag` command: never exit 4, errors are one stderr line,
and a batch on stdin answers every line whatever the others hold."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ..conftest import CORPORA, RAG, rag

LONG = os.environ.get("HYPOTHESIS_PROFILE") == "long"
FUZZ = settings(
    max_examples=int(os.environ.get("RAG_FUZZ_EXAMPLES", 200 if LONG else 5)),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
MARS = "What is the capital of Mars?"  # nothing relevant in the corpus: no model call


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    d = tmp_path_factory.mktemp("bad-input")
    result = rag("index", str(CORPORA), cwd=d)
    assert result.returncode == 0, result.stderr
    return d


def _check(result: subprocess.CompletedProcess) -> None:
    """The contract of every run: a documented code, and an error is one line."""
    assert result.returncode in (0, 1, 2, 3), (result.returncode, result.stderr)
    assert "Traceback" not in result.stderr
    if result.returncode >= 2:
        lines = result.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("rag: error: "), result.stderr


def test_an_empty_question_is_a_usage_error(workdir):
    for question in ("", "   ", "\n"):
        result = rag("ask", question, cwd=workdir)
        assert result.returncode == 2, result.stderr
        assert result.stderr == "rag: error: the question is empty\n"


def test_a_bad_command_line_is_one_line_with_a_hint(workdir):
    result = rag("ask", "--top-k", "0", "x", cwd=workdir)
    _check(result)
    assert result.returncode == 2 and "(see: rag ask -h)" in result.stderr


def test_the_batch_answers_past_blank_undecodable_and_oversized_lines(workdir):
    cricket = "Who won the 2023 Cricket World Cup?"
    data = (
        f"{cricket}\n\n".encode() + b"\xff\xfe bad bytes\n" + b"y" * 5000 + f"\n{MARS}\n".encode()
    )
    result = subprocess.run(
        [str(RAG), "ask", "--json", "-"], input=data, capture_output=True, cwd=workdir, timeout=600
    )
    out = [json.loads(line) for line in result.stdout.decode().splitlines()]
    assert [o["question"][:12] for o in out] == [
        cricket[:12],
        "\ufffd\ufffd bad bytes",
        "y" * 12,
        MARS[:12],
    ]
    assert [o["answered"] for o in out] == [True, False, False, False]
    assert "too long" in out[2]["error"]
    assert result.returncode == 2  # the worst line: a usage error
    assert b"Traceback" not in result.stderr


def _waiting_for_input(pid: int) -> bool:
    """Whether the main thread sleeps in select() or poll(): Linux names the kernel function
    a sleeping task waits in (its wchan; "0" while it runs). True without /proc."""
    try:
        wchan = Path(f"/proc/{pid}/wchan").read_text()
    except FileNotFoundError:
        return True
    return "poll" in wchan or "select" in wchan


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_mid_batch_keeps_the_answers_so_far(workdir, sig, code):
    proc = subprocess.Popen(
        [str(RAG), "ask", "-"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=workdir,
        # A shell running tests in the background ignores SIGINT, and a child would inherit that.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    proc.stdin.write(f"{MARS}\n".encode())
    proc.stdin.flush()
    first = proc.stdout.readline()
    assert json.loads(first)["question"] == MARS
    deadline = time.monotonic() + 60
    while not _waiting_for_input(proc.pid):  # the batch is idle, waiting for the next line
        assert time.monotonic() < deadline, "the batch never went back to reading stdin"
        time.sleep(0.01)
    proc.send_signal(sig)
    rest, err = proc.communicate(timeout=120)
    assert proc.returncode == code, err
    assert rest == b"" and err.decode().splitlines()[-1].startswith("rag: error: ")


# Files as a user's folder may hold them.
CONTENT = st.one_of(
    st.just(b""),
    st.binary(max_size=300),
    st.text(max_size=200).map(lambda t: t.encode("utf-8", "surrogatepass")),
    st.integers(1, 400_000).map(lambda n: b"word " * (n // 5)),  # a huge single line
    st.just(b"%PDF-1.4\n garbage"),
    st.just(b"PK\x03\x04 not a docx"),
)
NAME = st.one_of(
    st.sampled_from(
        ["a.txt", "b c.md", "new\nline.txt", "x.html", "y.pdf", "z.docx", ".hidden.md"]
    ),
    st.text(
        st.characters(blacklist_characters="/\x00", codec="utf-8"), min_size=1, max_size=12
    ).map(lambda n: n + ".txt"),
    st.binary(min_size=1, max_size=8)
    .filter(lambda b: b"/" not in b and b"\x00" not in b)
    .map(lambda b: os.fsdecode(b + b".md")),
)
FILES = st.lists(st.tuples(st.integers(0, 12), NAME, CONTENT), min_size=1, max_size=6)
ARG = st.one_of(
    st.sampled_from(
        ["-k", "3", "0", "-1", "--json", "--retriever", "bm25", "nope", "--top-k", "-"]
    ),
    st.text(st.characters(blacklist_characters="\x00"), max_size=20),  # argv holds no NUL
)


def _write(root: Path, files) -> None:
    for depth, name, data in files:
        folder = root.joinpath(*[f"d{i} x" for i in range(depth)])  # deep, with spaces
        folder.mkdir(parents=True, exist_ok=True)
        if name not in (".", ".."):
            (folder / name).write_bytes(data)


@FUZZ
@given(files=FILES, args=st.lists(ARG, max_size=4))
def test_generated_files_and_arguments(tmp_path_factory, files, args):
    d = tmp_path_factory.mktemp("fuzz")
    _write(d / "docs", files)
    _check(rag("index", "docs", "--index", "idx", cwd=d))
    for command in ("search", "ask"):
        _check(rag(command, "--index", "idx", *args, cwd=d))


def _committed(index_dir: Path) -> bool:
    """Whether a commit of `rag index` has named files in the index yet."""
    try:
        db = sqlite3.connect(f"file:{index_dir / 'index.sqlite'}?mode=ro", uri=True)
    except sqlite3.OperationalError:
        return False  # not created yet
    try:
        return db.execute("SELECT count(*) FROM files").fetchone()[0] > 0
    except sqlite3.OperationalError:
        return False  # no tables yet
    finally:
        db.close()


def test_files_vanishing_mid_run(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    words = (CORPORA / "science" / "photosynthesis.txt").read_text()
    for i in range(60):
        (docs / f"note {i}.md").write_text(f"# Note {i}\n\n{words}\n")
    config = tmp_path / "config.toml"
    config.write_text("commit_seconds = 0\nembed_batch = 4\n")  # a commit after every batch
    proc = subprocess.Popen(
        [str(RAG), "index", str(docs), "--index", str(tmp_path / "idx")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "RAG_CONFIG": str(config)},
    )
    deadline = time.monotonic() + 300
    while proc.poll() is None and not _committed(tmp_path / "idx"):  # mid-run: some files done
        assert time.monotonic() < deadline, "no commit in 300 s"
        time.sleep(0.002)
    assert proc.poll() is None, "the run ended before its files could change under it"
    for i in range(0, 60, 2):
        (docs / f"note {i}.md").unlink()
    for i in range(1, 60, 4):
        (docs / f"note {i}.md").write_text("changed while indexing\n")
    out, err = proc.communicate(timeout=600)
    _check(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
    _check(rag("search", "--index", str(tmp_path / "idx"), "photosynthesis"))
