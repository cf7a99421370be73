"""Fresh-process measurements count the command's memory, not the benchmark's."""

from __future__ import annotations

import sys

import pytest

from ragcli.bench.fresh import run_measured
from ragcli.errors import RagError

ALLOCATE = "import sys; b = bytearray({mb} << 20); sys.stdout.write('made')"


def test_peak_is_the_commands_own_even_from_a_large_process():
    ballast = bytearray(600 << 20)  # this process: over 600 MB resident
    ballast[::4096] = b"x" * len(ballast[::4096])
    wall, small, out = run_measured([sys.executable, "-c", ALLOCATE.format(mb=0)], {})
    _, large, _ = run_measured([sys.executable, "-c", ALLOCATE.format(mb=200)], {})
    assert out == "made" and wall > 0
    assert small < 100  # a bare interpreter, not the 600 MB that started it
    assert 200 <= large < 300
    del ballast


def test_a_failing_command_is_an_error():
    with pytest.raises(RagError):
        run_measured([sys.executable, "-c", "raise SystemExit(4)"], {})
