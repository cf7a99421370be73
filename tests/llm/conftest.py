"""The engines' shared fixture: one llama-cpp-python server for the package's tests."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from ragcli.config import load_settings

START_TIMEOUT_S = 180


# llama-cpp-python's server, loading with llama.cpp's weight repacking off as ragcli does by
# default: on CPUs with AMX, repacking routes matrix products to llama.cpp's AMX kernels, and
# in some virtual machines those crash the process at the first prompt (a general
# protection fault in ggml_backend_amx_mul_mat), which is not what these tests are about.
_SERVER_WITHOUT_REPACK = (
    "import runpy, llama_cpp; from ragcli.llm.loading import without_repack; "
    "llama_cpp.Llama = without_repack(llama_cpp.Llama); "
    "runpy.run_module('llama_cpp.server', run_name='__main__', alter_sys=True)"
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="package")
def server_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("llm-server") / "server.log"


@pytest.fixture(scope="package")
def llm_url(server_log: Path) -> Iterator[str]:
    """llama-cpp-python's server with the default model, on a free loopback port."""
    import importlib.util

    from ragcli.models import generation_model

    if any(importlib.util.find_spec(m) is None for m in ("uvicorn", "fastapi", "sse_starlette")):
        pytest.fail("llama-cpp-python's server is not installed: pip install 'ragcli[server]'")
    model = generation_model("gemma-3-270m", load_settings().cache_dir).path
    port = _free_port()
    threads = str(os.cpu_count() or 1)
    cmd = [
        sys.executable, "-c", _SERVER_WITHOUT_REPACK, "--model", str(model),
        "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "4096",
        "--n_threads", threads, "--n_threads_batch", threads,
        "--verbose", "true",  # its prefix-match lines are checked below
    ]  # fmt: skip
    url = f"http://127.0.0.1:{port}/v1"
    with server_log.open("wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                tail = server_log.read_text(errors="replace")[-2000:]
                pytest.fail(f"llama_cpp.server exited with {proc.returncode}:\n{tail}")
            try:
                with urllib.request.urlopen(f"{url}/models", timeout=2) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"llama_cpp.server not ready after {START_TIMEOUT_S} s")
            time.sleep(0.3)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
