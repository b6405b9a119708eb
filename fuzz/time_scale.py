"""How many times slower than a native run this one is expected to be (ONEWELL_TEST_TIME_SCALE, default 1), and
wall-time budgets stretched by it. scripts/test_aarch64.sh sets it under qemu (10-20x slower for Python,
100-150x for the kernels); the tests (tests/conftest.py) and the server load harness (fuzz/serve_load.py) multiply
their client timeouts, waits and the delays they race against by it, so what they assert is unchanged natively."""
from __future__ import annotations

import os


def time_scale() -> float:
    raw = os.environ.get("ONEWELL_TEST_TIME_SCALE", "1")
    try:
        scale = float(raw)
    except ValueError:
        scale = float("nan")
    if not scale >= 1:   # also rejects nan
        raise ValueError(f"ONEWELL_TEST_TIME_SCALE must be a number >= 1, got {raw!r}")
    return scale


TIME_SCALE = time_scale()


def scaled(seconds: float) -> float:
    """A wall-time budget or delay of a native run, stretched by ONEWELL_TEST_TIME_SCALE."""
    return seconds * TIME_SCALE
