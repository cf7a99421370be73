"""The numbers the `rag bench` help texts show, apart from the benchmarks
themselves: `rag --help` and every other command import the help of `rag bench`, and
must not import the benchmarks (numpy, the engines) to print it."""

from __future__ import annotations

# rag bench prefill
CACHED_SUFFIX = 32  # tokens prefilled after a restored prefix in the "cached" series
SPREAD_LIMIT = 0.10  # a length is noisy when its repetitions' IQR exceeds this share of the median
MIN_AUTO_REPS = 3
MAX_AUTO_REPS = 9

# rag bench contention
QUICK_PROMPT_TOKENS = 64
QUICK_MAX_TOKENS = 4
