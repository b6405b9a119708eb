"""Q4_0, Q5_0, IQ4_NL, Q4_1 and Q5_1 prefill on the x86 paths (AVX2, AVX-VNNI, AVX-512 with the EVEX vpdpbusd) as
an int8 GEMM with the weight rows in the vector lanes (kernels/gemm_i8_rows.inc;
docs/perf-log.md, entries 29, 33, 35) against the numpy twin and the exact tiles (where a path has none: the decode
kernel). (Q8_0's: test_kernel_gemm_q8_0.py.)

From OW_FLOAT_GEMM_MIN_VECS (32) vectors on, while _core.float_gemm and _core.rows_gemm are on, each block's exact
integer sum of quants (unsigned q, seeded by -8 / -16 x the activation quants' sum for Q4_0 / Q5_0; for Q4_1 / Q5_1
plus m x s; IQ4_NL's signed codebook values as Q8_0's) is scaled and added into one float chain per (row, vector): the twin's bound |err| <= 1e-5 * M (M = |W| @ |x_hat|) holds, a vector's result
does not depend on its batch, and every path gives the same floats. With rows_gemm off the slot runs the exact tile
again: every vector bit for bit its one-vector result. Shapes around the 8-row panel, the 6-vector micro-kernel,
the 32-block pass and the 128-vector group. With rows_gemm 3 the AVX2 path runs IQ4_NL, signed as Q8_0, as Q8_0's
float GEMM (kernels/gemm_iq4_nl_f32_avx2.c, perf-log entry 45): the same bound, each vector to itself.
"""
from __future__ import annotations

import numpy as np
import pytest

from conftest import DATA, with_knob
from onewell._native import _core
from onewell.gguf.constants import GGMLType, row_nbytes
from onewell.runtime import native_kernels as nk
from onewell.runtime.native_types import type_traits
from real_weights import real_rows
from test_native_kernels import twin_product

T = GGMLType
TYPES = (T.Q4_0, T.Q5_0, T.Q4_1, T.Q5_1, T.IQ4_NL)
X86 = [p for p in nk.available_paths() if p in ("avx2", "avx2-vnni", "avx512")]
ACT = {T.Q4_0: T.Q8_0, T.Q5_0: T.Q8_0, T.Q4_1: T.Q8_1, T.Q5_1: T.Q8_1, T.IQ4_NL: T.Q8_0}
MIN_VECS = 32
RTOL = 1e-5
pytestmark = pytest.mark.usefixtures("float_gemm_on")


def matrix(rng: np.random.Generator, wt: GGMLType, rows: int, cols: int) -> np.ndarray:
    """Raw blocks: every quant and high-bit pattern, scales (and the _1 types' mins) of both signs"""
    block_bytes = row_nbytes(wt, 32)
    blocks = rng.integers(0, 256, (rows * cols // 32, block_bytes), dtype=np.uint8)
    for at in ((0, 2) if wt in (T.Q4_1, T.Q5_1) else (0,)):
        scale = rng.uniform(1e-3, 1e-2, len(blocks)) * rng.choice([-1.0, 1.0], len(blocks))
        blocks[:, at:at + 2] = scale.astype("<f2").view(np.uint8).reshape(-1, 2)
    return blocks.reshape(-1)


def twin(raw, wt, rows, cols, x):
    """(exact product in float64 [n_vec, rows], magnitude M): test_native_kernels' twin, which also accounts for
    Q8_1's s = fp16(d x sum q), the value the kernels multiply the mins by"""
    exact, magnitude, _, _ = twin_product(raw, wt, rows, cols, x)
    return exact, magnitude


def with_rows_gemm(mode: int, fn):
    return with_knob(_core.rows_gemm, mode, fn)


def test_the_x86_slots_run_the_gemm_from_32_vectors():
    for wt in TYPES:
        traits = type_traits()[int(wt)]
        for path in X86:
            assert traits.float_gemm_from[path] == MIN_VECS
            act = ACT[wt].name.lower()
            assert traits.kernels[path] == f"vec_dot_{wt.name.lower()}_{act}_gemm_{path.replace('-', '_')}"
            assert not nk.batch_exact(wt, MIN_VECS, path) and nk.batch_exact(wt, MIN_VECS - 1, path)
        assert traits.float_gemm_from.get("generic") is None


@pytest.mark.parametrize("wt", TYPES, ids=lambda t: t.name)
@pytest.mark.parametrize("rows, cols, n_vec", [(37, 896, 33), (8, 1056, 64), (130, 4896, 47), (19, 96, 129),
                                               (7, 32, 200), (3, 16416, 32)])
def test_int8_gemm_meets_the_twin_and_keeps_each_vector_to_itself(wt, rows, cols, n_vec):
    rng = np.random.default_rng(rows * 7 + cols + n_vec)
    raw = matrix(rng, wt, rows, cols)
    x = rng.standard_normal((n_vec, cols)).astype(np.float32)
    exact, magnitude = twin(raw, wt, rows, cols, x)
    results = {}
    for path in X86:
        full = with_rows_gemm(1, lambda: nk.matmul(raw, wt, rows, cols, x, path))
        assert np.all(np.abs(full - exact) <= RTOL * magnitude), f"{wt.name} {rows}x{cols}x{n_vec} on {path}"
        tail = with_rows_gemm(1, lambda: nk.matmul(raw, wt, rows, cols, x[n_vec - MIN_VECS:], path))
        np.testing.assert_array_equal(tail, full[n_vec - MIN_VECS:])
        results[path] = full
    for path in X86[1:]:   # vpdpbusd (VEX, EVEX) and vpmaddubsw: the same integers, the same float chain
        np.testing.assert_array_equal(results[path], results[X86[0]])


@pytest.mark.skipif("avx2" not in X86, reason="the float GEMM of IQ4_NL is the AVX2 path's")
@pytest.mark.parametrize("rows, cols, n_vec", [(37, 896, 33), (8, 1056, 64), (130, 4896, 47), (19, 96, 129),
                                               (7, 32, 200), (3, 16416, 32)])
def test_iq4_nl_float_gemm_meets_the_twin_and_keeps_each_vector_to_itself(rows, cols, n_vec):
    rng = np.random.default_rng(rows * 5 + cols + n_vec)
    raw = matrix(rng, T.IQ4_NL, rows, cols)
    x = rng.standard_normal((n_vec, cols)).astype(np.float32)
    x[:, rng.integers(0, cols, 2)] *= 50.0   # massive channels: activations at +-127
    exact, magnitude = twin(raw, T.IQ4_NL, rows, cols, x)
    full = with_rows_gemm(3, lambda: nk.matmul(raw, T.IQ4_NL, rows, cols, x, "avx2"))
    assert np.all(np.abs(full - exact) <= RTOL * magnitude), f"{rows}x{cols}x{n_vec}"
    tail = with_rows_gemm(3, lambda: nk.matmul(raw, T.IQ4_NL, rows, cols, x[n_vec - MIN_VECS:], "avx2"))
    np.testing.assert_array_equal(tail, full[n_vec - MIN_VECS:])


@pytest.mark.parametrize("wt", TYPES, ids=lambda t: t.name)
def test_rows_gemm_off_gives_back_the_exact_tile(wt):
    rng = np.random.default_rng(int(wt))
    rows, cols, n_vec = 29, 800, 70
    raw = matrix(rng, wt, rows, cols)
    x = rng.standard_normal((n_vec, cols)).astype(np.float32)
    exact, magnitude = twin(raw, wt, rows, cols, x)
    for path in X86:
        alone = np.stack([nk.matmul(raw, wt, rows, cols, x[v:v + 1], path)[0] for v in range(n_vec)])
        np.testing.assert_array_equal(with_rows_gemm(0, lambda: nk.matmul(raw, wt, rows, cols, x, path)), alone)
        gemm = with_rows_gemm(1, lambda: nk.matmul(raw, wt, rows, cols, x, path))
        floats = with_rows_gemm(3, lambda: nk.matmul(raw, wt, rows, cols, x, path))
        if wt == T.IQ4_NL and path == "avx2":   # 3 runs the AVX2 path's signed types (Q8_0, IQ4_NL) in floats
            assert not np.array_equal(floats, gemm) and np.all(np.abs(floats - exact) <= RTOL * magnitude)
        else:   # ... and leaves the unsigned types, and every type on the other paths, to the int8 GEMM
            np.testing.assert_array_equal(floats, gemm)
        assert not np.array_equal(gemm, alone)
        assert np.all(np.abs(gemm - exact) <= RTOL * magnitude)
    # with no x86 path here the slots are not reached; the knob still reads and sets
    assert with_rows_gemm(0, lambda: _core.rows_gemm(-1)) == 0


def test_rows_gemm_runs_reports_the_setting_else_each_paths_default():
    """What `onewell bench` prints: the knob where set, else this CPU's default for the path; never on generic/NEON"""
    paths = _core.kernel_paths()
    ident = _core.cpu_identity()
    default = {"avx2": ident["default_rows_gemm_avx2"], "avx2-vnni": ident["default_rows_gemm"],
               "avx512": ident["default_rows_gemm_avx512"]}
    for path in paths:
        assert with_rows_gemm(0, lambda: _core.rows_gemm_runs(path)) is False
        assert with_rows_gemm(1, lambda: _core.rows_gemm_runs(path)) is (path in default)
        assert with_rows_gemm(3, lambda: _core.rows_gemm_runs(path)) is (path in default)
        assert with_rows_gemm(-2, lambda: _core.rows_gemm_runs(path)) is bool(default.get(path, 0))
    with pytest.raises(ValueError, match="unknown kernel path"):
        _core.rows_gemm_runs("sse9")


@pytest.mark.parametrize("wt", TYPES, ids=lambda t: t.name)
@pytest.mark.parametrize("r0, r1", [(0, 1), (3, 19), (5, 37), (16, 48), (40, 41)])
def test_the_gemm_writes_only_its_rows(wt, r0, r1):
    rng = np.random.default_rng(r0 * 100 + r1)
    rows, cols, n_vec, y_stride = 48, 320, 35, 53
    raw = matrix(rng, wt, rows, cols)
    x = rng.standard_normal((n_vec, cols)).astype(np.float32)
    exact, magnitude = twin(raw, wt, rows, cols, x)
    for path in X86:
        xq = nk.quantize_act(x, wt, path)
        y = np.full((n_vec, y_stride), np.nan, np.float32)
        with_rows_gemm(1, lambda: _core.matmul(int(wt), raw, row_nbytes(wt, cols), cols, xq, xq.shape[1], n_vec, y,
                                                y_stride, r0, r1, path))
        assert np.isnan(y[:, :r0]).all() and np.isnan(y[:, r1:]).all()
        assert np.all(np.abs(y[:, r0:r1] - exact[:, r0:r1]) <= RTOL * magnitude[:, r0:r1])


@pytest.mark.parametrize("wt", TYPES, ids=lambda t: t.name)
@pytest.mark.parametrize("rows, cols, n_vec", [(37, 896, 33), (16, 1056, 64), (130, 4896, 47), (17, 96, 129)])
def test_the_avx512_gemm_gives_the_same_floats_on_ymm_and_zmm(wt, rows, cols, n_vec):
    """On the AVX-512 path the GEMM holds 16 rows per zmm panel where _core.wide_tiles, else 8 per ymm: the same
    integers and float chain per (row, vector), so the same floats (shapes around 8 and 16 rows)"""
    rng = np.random.default_rng(rows + cols)
    raw = matrix(rng, wt, rows, cols)
    x = rng.standard_normal((n_vec, cols)).astype(np.float32)
    before = _core.wide_tiles(-1)
    try:
        out = {}
        for wide in (0, 1):
            _core.wide_tiles(wide)
            out[wide] = with_rows_gemm(1, lambda: nk.matmul(raw, wt, rows, cols, x, "avx512")) \
                if "avx512" in X86 else wide
    finally:
        _core.wide_tiles(before)
    if "avx512" in X86:
        np.testing.assert_array_equal(out[1], out[0])
        exact, magnitude = twin(raw, wt, rows, cols, x)
        assert np.all(np.abs(out[1] - exact) <= RTOL * magnitude)
    else:   # no AVX-512 here: the knob alone
        assert out == {0: 0, 1: 1}


@pytest.mark.model
def test_the_gemm_on_real_q5_0_weights(qwen_q4km_path):
    """Qwen Q4_K_M's Q5_0 matrices (ffn_gate/up of every layer, the token embedding) against 40 vectors with a few
    massive channels, as Qwen's hidden states have: the twin bound on every path, and the same floats on each"""
    samples = real_rows(qwen_q4km_path, T.Q5_0)
    assert len(samples) >= 48
    rng = np.random.default_rng(4)
    for name, cols, raw in samples[::4]:
        rows = raw.size // row_nbytes(T.Q5_0, cols)
        x = rng.standard_normal((40, cols)).astype(np.float32)
        x[:, rng.integers(0, cols, 3)] *= 50.0
        exact, magnitude = twin(raw, T.Q5_0, rows, cols, x)
        results = [with_rows_gemm(1, lambda: nk.matmul(raw, T.Q5_0, rows, cols, x, path)) for path in X86]
        for path, got in zip(X86, results):
            assert np.all(np.abs(got - exact) <= RTOL * magnitude), f"{name} on {path}"
            np.testing.assert_array_equal(got, results[0])


@pytest.mark.parametrize("index, sign", [(0, 1.0), (0, -1.0), (15, 1.0), (15, -1.0)])
def test_iq4_nl_codebook_extremes_stay_exact(index, sign):
    """Every index at the codebook's ends (-127, +113) against activation quants of +127 or -128: vpmaddubsw's pairs
    of |v| |a| at 2 x 127 x 128 on AVX2, VNNI's value + 128 with its seed at its largest; still on the twin"""
    rows, cols, n_vec = 11, 2048, 40
    blocks = np.zeros((rows * cols // 32, row_nbytes(T.IQ4_NL, 32)), np.uint8)
    blocks[:, 0:2] = np.array([0.01], "<f2").view(np.uint8)
    blocks[:, 2:] = index * 0x11
    raw = blocks.reshape(-1)
    x = np.full((n_vec, cols), sign, np.float32)
    exact, magnitude = twin(raw, T.IQ4_NL, rows, cols, x)
    assert np.all(magnitude > 0)
    for path in X86:
        got = with_rows_gemm(1, lambda: nk.matmul(raw, T.IQ4_NL, rows, cols, x, path))
        assert np.all(np.abs(got - exact) <= RTOL * magnitude), f"index {index} x {sign} on {path}"


@pytest.mark.parametrize("wt", (T.Q4_0, T.Q5_0, T.Q5_1, T.IQ4_NL), ids=lambda t: t.name)
def test_the_gemm_on_ggml_encoded_real_weights(wt):
    """Real weights (SmolLM2's blk.0.ffn_down, 8 x 1536) as llama.cpp 11434's quantizer wrote them in each type
    (tests/data/ggml_codecs.npz), against 48 vectors with a few massive channels: the twin bound on every path, and
    the same floats on each"""
    record = np.load(DATA / "ggml_codecs.npz")
    rows, cols = record["input_real"].shape
    raw = record[f"{wt.name}_real_bytes"]
    rng = np.random.default_rng(7)
    x = rng.standard_normal((48, cols)).astype(np.float32)
    x[:, rng.integers(0, cols, 3)] *= 50.0
    exact, magnitude = twin(raw, wt, rows, cols, x)
    results = [with_rows_gemm(1, lambda: nk.matmul(raw, wt, rows, cols, x, path)) for path in X86]
    for path, got in zip(X86, results):
        assert np.all(np.abs(got - exact) <= RTOL * magnitude), f"{wt.name} on {path}"
        np.testing.assert_array_equal(got, results[0])
    if wt == T.IQ4_NL and "avx2" in X86:   # ... and as the AVX2 path's float GEMM (rows_gemm 3)
        floats = with_rows_gemm(3, lambda: nk.matmul(raw, wt, rows, cols, x, "avx2"))
        assert np.all(np.abs(floats - exact) <= RTOL * magnitude)
