"""Calls every `_core` function that takes sizes with fuzzed integers and fuzzed buffer lengths.

The contract of the bindings: whatever integers and buffers Python passes, a call either works or raises a
Python exception (ValueError, TypeError, OverflowError for ints that do not fit the C type) — never a crash,
a sanitizer report, a hang, or an allocation beyond the machine. One table, CALLS, says for every function how
its arguments are made from a list of integers; the same code serves the hypothesis test
(tests/test_bindings_sizes.py) and the long run (fuzz/run_bindings_fuzz.py, also under scripts/sanitize.sh).

Work is bounded by the functions themselves (diagnostics cap jobs x items x steps); the harness skips only
the few calls that are valid and merely slow (a bandwidth probe of gigabytes), named in `too_slow`.
"""
from __future__ import annotations

import functools
import random
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from onewell._native import _core

# Integers that break unchecked size arithmetic: zero, signs, the edges of int32 / int64, and what a product
# of two of them overflows into.
EXTREMES = (0, 1, 2, 3, 4, 8, 16, 32, 64, 255, 256, -1, -2, 2**31 - 1, 2**31, -(2**31), 2**32, 2**32 + 1,
            2**62, 2**63 - 1, -(2**63), 2**64, 2**64 + 1, 2**40, 2**53)
ALLOWED = (ValueError, TypeError, OverflowError)  # what a bad call may raise; anything else is a finding
MAX_BUFFER = 4096  # bytes of a fuzzed buffer: sizes far above it must be refused, not read past


def buffer_len(v: int) -> int:
    """A fuzzed integer as a buffer length in [0, MAX_BUFFER]."""
    return abs(v) % (MAX_BUFFER + 1)


def f32(v: int) -> np.ndarray:
    return np.zeros(buffer_len(v) // 4, np.float32)


def u8(v: int) -> np.ndarray:
    return np.zeros(buffer_len(v), np.uint8)


def i32_values(vs: list[int], n_vs: int) -> np.ndarray:
    """An int32 buffer of fuzzed length whose values are fuzzed too (wrapped into int32)."""
    n = buffer_len(n_vs) // 4
    vals = [((v + 2**31) % 2**32) - 2**31 for v in vs] or [0]
    return np.array([vals[i % len(vals)] for i in range(n)], np.int32)


@dataclass
class Ctx:
    pool: object       # a 2-thread pool capsule
    executor: object   # an executor of a tiny model (n_ctx 16, max_batch 4)
    native_args: tuple  # (config, tensors, layers) of that model, for executor_create


@functools.lru_cache(maxsize=1)
def context() -> Ctx:
    from fuzz.seeds import LLAMA_TINY, tiny_model
    from onewell.gguf import GGUFReader
    from onewell.models.registry import load_spec
    from onewell.runtime.plan import build_plan

    path = Path(tempfile.mkdtemp(prefix="onewell-bindfuzz-")) / "tiny.gguf"
    path.write_bytes(tiny_model(LLAMA_TINY, None, seed=1))
    reader = GGUFReader(path)  # kept open: the executor's weights are views of its mapping
    spec = load_spec(reader)
    args = build_plan(spec, repack=False).native_args()
    ex = _core.executor_create(*args, 1, 16, 4)
    return Ctx(pool=_core.pool_create(2), executor=ex, native_args=args)


def _kpath(v: int) -> str:
    paths = ["generic", "avx2", "avx2-vnni", "avx512", "nonsense"]
    return paths[abs(v) % len(paths)]


def _pool(c: Ctx, v: int):
    return None if v % 2 else c.pool


# name -> (how many integers, args from (ctx, ints)). Every function of _core that takes a size or a count.
Build = Callable[[Ctx, list[int]], tuple]
CALLS: dict[str, tuple[int, Build]] = {
    "pool_create": (1, lambda c, v: (v[0],)),
    "pool_stress": (7, lambda c, v: (v[0], v[1], v[2], v[3], v[4] % 2, v[5] % 2, v[6])),
    "pool_chunks_by_worker": (4, lambda c, v: (_pool(c, v[0]), v[1], v[2], v[3])),
    "pool_overhead": (5, lambda c, v: (_pool(c, v[0]), v[1], v[2], v[3], v[4] % 2)),
    "bandwidth_run": (4, lambda c, v: (_pool(c, v[0]), v[1], v[2], v[3])),
    "bandwidth_read_sum": (3, lambda c, v: (_pool(c, v[0]), u8(v[1]), v[2])),
    "rmsnorm": (5, lambda c, v: (f32(v[0]), f32(v[1]), f32(v[2]), v[3], v[4], 1e-5)),
    "rope_table": (5, lambda c, v: (f32(v[0]), i32_values(v, v[1]), v[2], v[3], 10000.0,
                                    f32(v[4]) if v[4] % 2 else None)),
    "rope_apply": (7, lambda c, v: (f32(v[0]), f32(v[1]), v[2], v[3], v[4], v[5], v[6])),
    "swiglu": (4, lambda c, v: (f32(v[0]), f32(v[1]), f32(v[2]), v[3])),
    "add": (4, lambda c, v: (f32(v[0]), f32(v[1]), f32(v[2]), v[3])),
    "geglu": (4, lambda c, v: (f32(v[0]), f32(v[1]), f32(v[2]), v[3])),
    "softcap": (3, lambda c, v: (f32(v[0]), f32(v[1]), v[2], 30.0)),
    "add_bias": (4, lambda c, v: (f32(v[0]), f32(v[1]), v[2], v[3])),
    "softmax": (4, lambda c, v: (f32(v[0]), f32(v[1]), v[2], v[3])),
    "argmax": (2, lambda c, v: (f32(v[0]), v[1])),
    "f32_to_f16": (3, lambda c, v: (u8(v[0]), f32(v[1]), v[2])),
    "f16_to_f32": (3, lambda c, v: (f32(v[0]), u8(v[1]), v[2])),
    "attention": (11, lambda c, v: (_pool(c, v[0]), f32(v[1]), f32(v[2]), f32(v[3]), f32(v[4]), f32(v[5]),
                                    v[6], v[7], v[8], v[9], 0.125, v[10])),
    "act_type_for": (1, lambda c, v: (v[0],)),
    "quantize_act": (6, lambda c, v: (v[0], f32(v[1]), v[2], v[3], u8(v[4]), _kpath(v[5]))),
    "kv_store": (6, lambda c, v: (v[0], f32(v[1]), v[2], v[3], u8(v[4]), _kpath(v[5]))),
    "matmul": (12, lambda c, v: (v[0], u8(v[1]), v[2], v[3], u8(v[4]), v[5], v[6], f32(v[7]), v[8], v[9],
                                 v[10], _kpath(v[11]))),
    "matmul_bench": (13, lambda c, v: (v[0], u8(v[1]), v[2], v[3], u8(v[4]), v[5], v[6], f32(v[7]), v[8], v[9],
                                       v[10], _kpath(v[11]), v[12])),
    "repack_r16": (8, lambda c, v: (v[0], u8(v[1]), v[2], v[3], v[4], u8(v[5]), v[6],
                                    (-1, 1008, 1010, 1011, 1012, 1013, 1014, 1015, 1016,
                                     1017, 1018, 1019, v[7])[abs(v[7]) % 13])),   # dst_type: a layout or junk
    "r16_row_stride": (1, lambda c, v: (v[0],)),
    "r16_prefetch": (1, lambda c, v: (v[0],)),
    "default_prefetch": (3, lambda c, v: (("amd", "intel", "")[abs(v[0]) % 3], v[1], v[2])),
    "r16_row_stream": (1, lambda c, v: (v[0],)),
    "wide_tiles": (1, lambda c, v: (v[0],)),
    "float_gemm": (1, lambda c, v: (v[0],)),
    "gemm_overlap": (1, lambda c, v: (v[0],)),
    "rows_gemm": (1, lambda c, v: (v[0],)),
    "rows_gemm_runs": (1, lambda c, v: (_kpath(v[0]),)),
    "r16_act_bytes": (1, lambda c, v: (v[0],)),
    "executor_create": (5, lambda c, v: (*c.native_args, v[0], v[1], v[2], v[3], v[4])),
    "executor_forward": (4, lambda c, v: (c.executor, i32_values(v, v[0]), v[1],
                                          f32(v[2]) if v[2] % 3 else None, v[3])),
    "executor_forward_batch": (6, lambda c, v: (c.executor, i32_values(v[3:], v[0]), i32_values(v[4:], v[1]),
                                                i32_values(v[5:], v[2]), f32(v[3]) if v[3] % 3 else None,
                                                v[4])),
    "executor_encode": (4, lambda c, v: (c.executor, i32_values(v, v[0]), i32_values(v[2:], v[1]), f32(v[3]))),
    "layernorm": (7, lambda c, v: (f32(v[0]), f32(v[1]), f32(v[2]), f32(v[3]), v[4], v[5], 1e-5, v[6])),
    "executor_configure": (3, lambda c, v: (c.executor, _kpath(v[0]) if v[0] % 2 else None, v[1], v[2])),
    "executor_profile": (1, lambda c, v: (c.executor, v[0] % 2)),
    "dequantize_rows": (5, lambda c, v: (v[0], u8(v[1]), v[2], v[3], i32_values(v, v[4]), f32(v[4]))),
}


def too_slow(name: str, args: tuple) -> bool:
    """Valid calls that would only take long: skipped, so the fuzz exercises checks rather than memory speed."""
    if name == "bandwidth_run":
        total, reps = args[2], args[3]
        return 0 < total and 0 < reps and total * reps > 1 << 26 and total <= 1 << 42 and reps <= 100000
    if name == "pool_create":
        return 64 < args[0] <= 1024  # valid, but hundreds of threads per call
    if name == "executor_create":
        return 64 < args[3] <= 1024  # n_threads, as above
    return False


def call(name: str, ints: list[int]) -> str:
    """Runs one call; 'ok', the name of an allowed exception, or 'skipped'. Anything else propagates."""
    n, build = CALLS[name]
    if len(ints) < n:
        ints = list(ints) + [0] * (n - len(ints))
    args = build(context(), list(ints[:n]))
    if too_slow(name, args):
        return "skipped"
    state = _knobs()
    try:
        getattr(_core, name)(*args)
        return "ok"
    except ALLOWED as e:
        return type(e).__name__
    finally:
        _restore_knobs(state)


def _knobs() -> tuple:
    return (_core.r16_prefetch(-1), _core.r16_row_stream(-1), _core.wide_tiles(-1), _core.float_gemm(-1),
            _core.r16_act_bytes(-1), _core.gemm_overlap(-1), _core.rows_gemm(-1))


def _restore_knobs(state: tuple) -> None:  # the process-wide tuning knobs the fuzz may flip
    default = _core.cpu_identity()["default_prefetch"]
    _core.r16_prefetch(-2 if state[0] == default else state[0])   # -2: unset, each stream's own default again
    _core.r16_row_stream(state[1])
    _core.wide_tiles(state[2])
    _core.float_gemm(state[3])
    _core.r16_act_bytes(state[4])
    _core.gemm_overlap(state[5])
    _core.rows_gemm(state[6])


COMMON = (0, 1, 2, 3, 4, 8, 16, 32, 64, 128, 256)


def random_ints(rng: random.Random, n: int) -> list[int]:
    """Plausible small sizes, then up to three of them replaced by extremes: a call gets past the parsing of
    the other arguments and reaches the checks of the one that is extreme."""
    out = [rng.choice(COMMON) if rng.random() < 0.8 else rng.randint(0, 300) for _ in range(n)]
    for _ in range(rng.choice((0, 1, 1, 2, 3))):
        i = rng.randrange(n)
        out[i] = rng.choice(EXTREMES) if rng.random() < 0.8 else rng.randint(-(2**65), 2**65)
    return out


def run(n_calls: int, seed: int = 0) -> dict[str, dict[str, int]]:
    """n_calls random calls over CALLS; per function, a histogram of outcomes."""
    rng = random.Random(seed)
    names = sorted(CALLS)
    outcomes: dict[str, dict[str, int]] = {name: {} for name in names}
    for i in range(n_calls):
        name = names[i % len(names)]
        result = call(name, random_ints(rng, CALLS[name][0]))
        outcomes[name][result] = outcomes[name].get(result, 0) + 1
    return outcomes
