"""docs/example.py, the library example, runs as written."""

from __future__ import annotations

import shutil
import subprocess
import sys

from .conftest import CORPORA, ROOT


def test_example_script_answers(tmp_path, corpus_index):
    index_dir = tmp_path / "index"
    shutil.copytree(corpus_index, index_dir)  # unchanged files: nothing is embedded again
    proc = subprocess.run(
        [sys.executable, str(ROOT / "docs" / "example.py"), str(CORPORA), str(index_dir),
         "Who won the 2023 Cricket World Cup?"],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "answer: " in proc.stdout and "Australia" in proc.stdout
    assert "[1] " in proc.stdout
