"""Extreme integers against every `_core` function that takes sizes: each call works or raises a Python exception
(ValueError, TypeError, OverflowError), never a crash. The harness (one table of how each function's arguments
are built) is fuzz/bindings_harness.py; the long run is fuzz/run_bindings_fuzz.py."""
from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from fuzz.bindings_harness import CALLS, EXTREMES, call  # noqa: E402
from onewell._native import _core  # noqa: E402

# _core functions without a size or count argument (nothing to overflow)
WITHOUT_SIZES = {"bandwidth_isa", "cpu_features", "cpu_identity", "executor_info", "kernel_default_path",
                 "kernel_paths", "ops_isa", "ops_set_isa", "pool_set_spin_us", "pool_spin_us", "pool_threads",
                 "type_traits"}

SIZES = st.one_of(st.sampled_from(EXTREMES), st.integers(0, 300), st.integers(-(2**65), 2**65))


def test_every_function_taking_sizes_is_in_the_harness():
    public = {name for name in dir(_core) if not name.startswith("_")}
    assert public - WITHOUT_SIZES == set(CALLS), "add the new _core function to fuzz/bindings_harness.py CALLS"


def test_the_crash_of_the_issue_is_a_value_error():
    """Issue 13: an n_vec of 2^62 wrapped the buffer-size product to 0, then wrote past the buffer; the gather's
    row size wrapped to 0 too and the row count divided by it. Run in a child, so a crash fails this test only."""
    code = textwrap.dedent("""
        import numpy as np
        from onewell._native import _core
        calls = [lambda: _core.quantize_act(0, np.empty(0, np.float32), 1, 2**62, np.empty(0, np.float32), 'generic'),
                 lambda: _core.dequantize_rows(0, b'', 0, 2**62, np.zeros(1, np.int32), np.empty(0, np.float32))]
        for f in calls:
            try:
                f()
                print('accepted')
            except ValueError:
                print('ValueError')
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["ValueError", "ValueError"]


@pytest.mark.parametrize("name", sorted(CALLS))
@settings(max_examples=25, deadline=None, derandomize=True, database=None)
@given(ints=st.lists(SIZES, min_size=13, max_size=13))
@example(ints=[2**62] * 13)
@example(ints=[2**63 - 1] * 13)
@example(ints=[-1] * 13)
@example(ints=[0] * 13)
@example(ints=[2**31] * 13)
def test_extreme_sizes_raise_python_exceptions(name, ints):
    assert call(name, ints) in ("ok", "skipped", "ValueError", "TypeError", "OverflowError")


@pytest.mark.parametrize("ints", [[0, 0, 1, 2**62, 0, 0], [0, 0, 2**61, 2, 0, 0], [0, 0, 1, 2**31, 0, 0]])
def test_quantize_act_products_that_wrap_are_refused(ints):
    assert call("quantize_act", ints) == "ValueError"


@pytest.mark.parametrize("args", [(0, 0, 0, 2**62, 4), (0, 0, 2**62, 1, 4), (1, 0, 2**60, 2**4, 4)])
def test_dequantize_rows_sizes_that_wrap_are_refused(args):
    assert call("dequantize_rows", list(args)) == "ValueError"


@pytest.mark.parametrize("name, ints", [("add_bias", [0, 0, 2**53, 0]), ("softmax", [0, 0, 2**53, 0]),
                                         ("rmsnorm", [0, 0, 0, 2**53, 0])])
def test_empty_rows_of_any_count_are_refused(name, ints):
    """A row length of 0 makes every row count pass the size checks; the row loop would still run 2^53 times (the
    bindings fuzz under the sanitizer hung on add_bias so)."""
    assert call(name, ints) == "ValueError"


def test_size_arithmetic_goes_through_the_one_shared_helper():
    """bind_sizes.h holds the checked multiply/add; no binding does its own (unchecked or duplicated) math."""
    native = REPO / "src" / "onewell" / "_native"
    for path in sorted(native.glob("bind_*.c")):
        text = path.read_text()
        assert "__builtin_mul_overflow" not in text and "__builtin_add_overflow" not in text, path.name
        assert not re.search(r"\(size_t\)\w+ \* \(size_t\)", text), f"{path.name}: an unchecked size product"


def test_a_short_random_run_of_the_bindings_fuzz():
    """The same random calls fuzz/run_bindings_fuzz.py makes at length (also run under the sanitizer)."""
    from fuzz.bindings_harness import run

    outcomes = run(len(CALLS) * 20, seed=3)
    assert set(outcomes) == set(CALLS)
    reached = sum(counts.get("ok", 0) for counts in outcomes.values())
    refused = sum(counts.get("ValueError", 0) for counts in outcomes.values())
    assert reached > 50 and refused > 200  # both valid calls and checked refusals were exercised
