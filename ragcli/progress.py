"""Progress reports from long work, for the command line to render.

The library never writes to the terminal: long jobs (indexing, evaluation,
benchmarks, model pulls) call an ``OnStep`` callback with a :class:`Step`, and
``ragcli.cli`` decides whether and how to show it (only on a terminal, on stderr).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Step:
    """Where a long job is: its phase and, when countable, how far through it.

    ``total`` is None while unknown; ``approx`` marks a total that is an estimate
    (passages to embed before all files are parsed). ``detail`` is a short note
    for humans on the side ("12/20 files parsed", "accuracy 80%").
    """

    phase: str
    done: int = 0
    total: int | None = None
    unit: str = ""
    approx: bool = False
    detail: str = ""


OnStep = Callable[[Step], None]

# An encoder's report of the number of texts it has just finished: embedding is a step of
# indexing, so the encoders and the pipeline that counts their work share this type.
Progress = Callable[[int], None]
