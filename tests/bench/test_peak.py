"""Fresh-process measurements count the command's memory, not the benchmark's."""

from __future__ import annotations

import sys

import pytest

from ragcli.bench.fresh_process import run_measured
from ragcli.errors import RagError

ALLOCATE = "import sys; b = bytearray({mb} << 20); sys.stdout.write('made')"
SLEEP = "import sys, time; time.sleep(0.5); sys.stdout.write('slept')"


def test_peak_is_the_commands_own_even_from_a_large_process():
    ballast = bytearray(600 << 20)  # this process: over 600 MB resident
    ballast[::4096] = b"x" * len(ballast[::4096])
    _, small, out = run_measured([sys.executable, "-c", ALLOCATE.format(mb=0)], {})
    _, large, _ = run_measured([sys.executable, "-c", ALLOCATE.format(mb=200)], {})
    assert out == "made"
    assert small < 100  # a bare interpreter, not the 600 MB that started it
    assert 200 <= large < 300
    del ballast


def test_wall_time_is_the_commands_in_milliseconds():
    wall, _, out = run_measured([sys.executable, "-c", SLEEP], {})
    assert out == "slept"
    assert 500 <= wall < 60_000  # at least the sleep; milliseconds, not seconds or ns


def test_a_failing_command_is_an_error():
    with pytest.raises(RagError):
        run_measured([sys.executable, "-c", "raise SystemExit(4)"], {})
