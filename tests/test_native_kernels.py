"""Native quantized matvec kernels vs their numpy twins, on every kernel path this CPU can run.

Tolerances (stated relative to the magnitude M = |W| @ |x_hat|, the sum of absolute products):
- activation quantization: bit-exact on every path and vs onewell.quant.act_formats.
- native vs the exact twin dequantize(W) @ dequantize(quantize_act(x)) in float64: |err| <= 1e-5 * M. Integer block
  dots are exact; what remains is float32 scaling/summation order (measured ~1e-8 * M).
- native vs the float product dequantize(W) @ x: a rigorous bound on activation quantization error. An 8-bit
  activation element is off by at most half a step plus the fp16 rounding of its block scale,
  <= (0.5/127 + 2^-11) * block amax < amax / 200; F16 activations by 2^-11 relative; Q8_1's s = fp16(d * sum q)
  adds 2^-11 * |m| * |sum of the block|.
- generic vs SIMD paths: |diff| <= 2e-5 * M.
"""
from __future__ import annotations

import numpy as np
import pytest

from onewell._native import _core
from onewell.errors import UnsupportedError
from onewell.gguf.constants import BLOCK_LAYOUTS, GGMLType, row_nbytes
from onewell.quant import dequantize
from onewell.quant.act_formats import act_type_for as twin_act_type_for
from onewell.quant.act_formats import dequantize_act, quantize_act as twin_quantize_act
from onewell.quant.floats import round_to_bf16
from onewell.runtime import native_kernels as nk

T = GGMLType
PATHS = nk.available_paths()
WEIGHT_TYPES = [T.Q8_0, T.Q4_K, T.Q5_0, T.Q6_K, T.Q4_1, T.Q4_0, T.Q5_1, T.Q5_K, T.F16, T.F32,
                T.Q2_K, T.Q3_K, T.IQ4_NL, T.IQ4_XS, T.BF16]
FLOAT_TYPES = (T.F32, T.F16, T.BF16)
ACT_TYPES = [T.Q8_0, T.Q8_1, T.Q8_K, T.F16, T.F32]
WEIGHT_FOR_ACT = {T.Q8_0: T.Q8_0, T.Q8_1: T.Q4_1, T.Q8_K: T.Q4_K, T.F16: T.F16, T.F32: T.F32}

# byte offsets of the fp16 scales (d, and m / dmin) inside one block: random bytes there could be inf/nan
SCALE_OFFSETS = {T.Q4_0: (0,), T.Q5_0: (0,), T.Q8_0: (0,), T.Q4_1: (0, 2), T.Q5_1: (0, 2),
                 T.Q4_K: (0, 2), T.Q5_K: (0, 2), T.Q6_K: (208,), T.Q2_K: (80, 82), T.Q3_K: (108,),
                 T.IQ4_NL: (0,), T.IQ4_XS: (0,)}
EXACT_RTOL = 1e-5
PATH_RTOL = 2e-5


def random_weight(rng: np.random.Generator, wt: GGMLType, rows: int, cols: int) -> np.ndarray:
    """Raw bytes of a rows x cols tensor: every quant bit pattern (incl. Q8_0's -128), modest signed scales."""
    if wt == T.F32:
        return rng.standard_normal(rows * cols).astype("<f4").view(np.uint8)
    if wt == T.F16:
        return rng.standard_normal(rows * cols).astype("<f2").view(np.uint8)
    if wt == T.BF16:   # the top halves of random float32s: every bf16 mantissa pattern
        return (rng.standard_normal(rows * cols).astype("<f4").view("<u4") >> 16).astype("<u2").view(np.uint8)
    raw = rng.integers(0, 256, rows * row_nbytes(wt, cols), dtype=np.uint8)
    blocks = raw.reshape(-1, BLOCK_LAYOUTS[wt].type_size)
    for off in SCALE_OFFSETS[wt]:
        scale = rng.uniform(1e-3, 1e-2, len(blocks)) * rng.choice([-1.0, 1.0], len(blocks))
        blocks[:, off:off + 2] = scale.astype("<f2").view(np.uint8).reshape(-1, 2)
    return raw


def block_minimums(raw: np.ndarray, wt: GGMLType, rows: int, cols: int) -> np.ndarray:
    """The m field of each Q4_1/Q5_1 block, float64 (rows, blocks)."""
    blocks = raw.reshape(rows * cols // 32, BLOCK_LAYOUTS[wt].type_size)
    return np.ascontiguousarray(blocks[:, 2:4]).view("<f2").astype(np.float64).reshape(rows, -1)


def twin_product(raw, wt, rows, cols, x, path=None):
    """(exact value the kernels compute, float64 [n_vec, rows]; magnitude M; dequantized W; x_hat). path: the
    kernel path, where the activations depend on it (BF16 on AVX512-BF16 CPUs: rounded to bf16)."""
    at = twin_act_type_for(wt)
    xq = twin_quantize_act(at, x)
    x_hat = dequantize_act(at, xq, cols).astype(np.float64).reshape(-1, cols)
    if wt == T.BF16 and path is not None and nk.rounds_bf16_activations(path):
        x_hat = round_to_bf16(x).astype(np.float64).reshape(-1, cols)
    w = dequantize(wt, raw, (rows, cols)).astype(np.float64)
    exact = x_hat @ w.T
    magnitude = np.abs(x_hat) @ np.abs(w).T
    if at == T.Q8_1:
        # the kernels use m * s with s = fp16(d * sum q) instead of m * sum(x_hat) over the block
        s = np.ascontiguousarray(xq.reshape(-1, 36)[:, 2:4]).view("<f2").astype(np.float64).reshape(len(x_hat), -1)
        block_sums = x_hat.reshape(len(x_hat), -1, 32).sum(axis=2)
        m = block_minimums(raw, wt, rows, cols)
        exact += (s - block_sums) @ m.T
        magnitude += np.abs(s) @ np.abs(m).T
    return exact, magnitude, w, x_hat


def activation_error_bound(wt, raw, rows, cols, x, w, path=None):
    """Rigorous bound of |dequantize(W) @ x_hat - dequantize(W) @ x| (see the module docstring)."""
    at = twin_act_type_for(wt)
    x = x.reshape(-1, cols).astype(np.float64)
    if wt == T.BF16 and path is not None and nk.rounds_bf16_activations(path):
        # round to nearest bf16 (8 significant bits): at most 2^-9 relative; denormals (< 2^-126) to zero
        return 2.0 ** -9 * (np.abs(x) @ np.abs(w).T) + 2.0 ** -126 * np.abs(w).sum(axis=1)
    if at == T.F32:
        return np.zeros((len(x), rows))
    if at == T.F16:
        return 2.0 ** -11 * (np.abs(x) @ np.abs(w).T)
    block = BLOCK_LAYOUTS[at].block_size
    amax = np.repeat(np.abs(x).reshape(len(x), -1, block).max(axis=2), block, axis=1)
    bound = (amax / 200) @ np.abs(w).T
    if at == T.Q8_1:
        m = block_minimums(raw, wt, rows, cols)
        bound += 2.0 ** -10 * np.abs(x).reshape(len(x), -1, 32).sum(axis=2) @ np.abs(m).T
    return bound


def check_within(actual, expected, tolerance, what):
    err = np.abs(np.asarray(actual, dtype=np.float64) - expected)
    bad = err > tolerance
    assert not bad.any(), f"{what}: {bad.sum()} of {bad.size} outside tolerance, worst excess " \
                          f"{(err - tolerance).max():.3g} (err {err[bad].max():.3g})"


# --- activation quantization -------------------------------------------------------------------------------------

def edge_activations(n_cols: int) -> np.ndarray:
    """Rows that stress rounding and scaling: ties, zero blocks, +/- max ties, tiny and huge magnitudes."""
    rng = np.random.default_rng(7)
    rows = [rng.standard_normal(n_cols)]
    ties = np.tile(np.arange(-16, 16, dtype=np.float64) + 0.5, n_cols // 32)
    ties[::32] = 127.0   # amax 127 -> multiplier exactly 1, so every x.5 is a rounding tie
    rows.append(ties)
    zero_blocks = rng.standard_normal(n_cols)
    zero_blocks[: min(n_cols, 256)] = 0.0
    rows.append(zero_blocks)
    signed_ties = rng.uniform(-1, 1, n_cols)
    signed_ties[3], signed_ties[5] = 2.0, -2.0   # equal magnitudes: the first sets the sign (Q8_K)
    rows.append(signed_ties)
    rows.append(rng.standard_normal(n_cols) * 1e-30)   # fp16 scales underflow to subnormals / zero
    rows.append(rng.standard_normal(n_cols) * 3e6)     # large scales (F16 activations overflow to inf)
    return np.array(rows, dtype=np.float32)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("at", ACT_TYPES, ids=lambda t: t.name)
def test_activation_quantization_matches_twin(at, path):
    for n_cols in (256, 512, 768):
        x = edge_activations(n_cols)
        native = nk.quantize_act(x, WEIGHT_FOR_ACT[at], path)
        twin = twin_quantize_act(at, x)
        assert native.shape == twin.shape
        np.testing.assert_array_equal(native, twin, err_msg=f"{at.name} on {path}, {n_cols} columns")


def test_q8_0_activation_known_answer():
    x = np.zeros(32, np.float32)
    x[0], x[1], x[2], x[3], x[4] = 127.0, 2.5, 3.5, -2.5, -0.5   # ties round to even (ggml's x86 path)
    block = nk.quantize_act(x, T.Q8_0)
    assert block[:2].view("<f2")[0] == np.float16(1.0)
    assert list(block[2:8].view(np.int8)) == [127, 2, 4, -2, 0, 0]


def test_q8_k_activation_known_answer():
    x = np.zeros(256, np.float32)
    x[0], x[1], x[17] = -2.0, 1.0, 2.0   # first of the largest magnitude is -2: it maps to -127, iscale = 63.5
    block = nk.quantize_act(x, T.Q4_K)
    d = block[:4].view("<f4")[0]
    qs = block[4:260].view(np.int8)
    bsums = block[260:292].view("<i2")
    assert d == np.float32(1) / np.float32(63.5)
    assert (qs[0], qs[1], qs[17]) == (-127, 64, 127)   # 63.5 rounds to even
    assert list(bsums[:2]) == [-127 + 64, 127] and not bsums[2:].any()


def test_q8_1_sum_field():
    x = np.linspace(-1, 3, 64, dtype=np.float32)
    blocks = nk.quantize_act(x, T.Q4_1).reshape(2, 36)
    for xb, blk in zip(x.reshape(2, 32), blocks):
        d = np.abs(xb).max() / np.float32(127)   # float32 d, before its fp16 rounding
        q = blk[4:].view(np.int8)
        assert blk[:2].view("<f2")[0] == np.float16(d)
        assert blk[2:4].view("<f2")[0] == np.float16(d * np.float32(q.sum(dtype=np.int32)))


# --- matmul vs twins ---------------------------------------------------------------------------------------------

def shapes_for(wt):
    block = BLOCK_LAYOUTS[wt].block_size
    if block == 1:
        return [(1, 16, 1), (5, 37, 3), (9, 100, 2), (4, 512, 5), (3, 7, 4)]   # F16/F32: tails, any width
    one = max(block, 32)
    return [(1, one, 1), (3, one, 2), (4, one * 3, 5), (5, one * 8, 3), (9, one * 2, 4), (13, one * 5, 1)]


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("wt", WEIGHT_TYPES, ids=lambda t: t.name)
def test_matmul_matches_twins(wt, path):
    rng = np.random.default_rng(int(wt) * 10 + PATHS.index(path))
    for rows, cols, n_vec in shapes_for(wt):
        raw = random_weight(rng, wt, rows, cols)
        x = rng.standard_normal((n_vec, cols)).astype(np.float32)
        y = nk.matmul(raw, wt, rows, cols, x, path)
        assert y.shape == (n_vec, rows) and y.dtype == np.float32
        exact, magnitude, w, _ = twin_product(raw, wt, rows, cols, x, path)
        what = f"{wt.name} {rows}x{cols} n_vec={n_vec} on {path}"
        check_within(y, exact, EXACT_RTOL * magnitude + 1e-30, what + " vs exact twin")
        float_product = x.astype(np.float64) @ w.T
        bound = activation_error_bound(wt, raw, rows, cols, x, w, path) + EXACT_RTOL * magnitude
        check_within(y, float_product, bound, what + " vs float product")


@pytest.mark.parametrize("path", [p for p in PATHS if p != "generic"])
@pytest.mark.parametrize("wt", WEIGHT_TYPES, ids=lambda t: t.name)
def test_simd_paths_agree_with_generic(wt, path):
    rng = np.random.default_rng(99 + int(wt))
    rows, cols = 11, 4 * max(BLOCK_LAYOUTS[wt].block_size, 32) + (3 if wt in FLOAT_TYPES else 0)
    raw = random_weight(rng, wt, rows, cols)
    x = rng.standard_normal((2, cols)).astype(np.float32)
    generic = nk.matmul(raw, wt, rows, cols, x, "generic")
    simd = nk.matmul(raw, wt, rows, cols, x, path)
    _, magnitude, w, _ = twin_product(raw, wt, rows, cols, x)
    rounding = activation_error_bound(wt, raw, rows, cols, x, w, path) if wt == T.BF16 else 0.0   # AVX512-BF16
    check_within(simd, generic.astype(np.float64), PATH_RTOL * magnitude + rounding, f"{wt.name} {path} vs generic")


@pytest.mark.parametrize("wt", [T.Q8_0, T.Q4_K, T.Q6_K, T.F32, T.Q2_K, T.Q3_K, T.IQ4_NL, T.IQ4_XS, T.BF16],
                         ids=lambda t: t.name)
def test_unaligned_weights_and_single_vector(wt):
    rng = np.random.default_rng(5)
    rows, cols = 6, 512
    raw = random_weight(rng, wt, rows, cols)
    storage = np.zeros(raw.size + 3, np.uint8)
    storage[3:] = raw
    shifted = storage[3:]   # odd address, as a tensor inside a GGUF mapping may be
    assert shifted.ctypes.data % 2 == 1
    x = rng.standard_normal(cols).astype(np.float32)
    for path in PATHS:
        y = nk.matmul(shifted, wt, rows, cols, x, path)
        assert y.shape == (rows,)
        np.testing.assert_array_equal(y, nk.matmul(raw, wt, rows, cols, x[None], path)[0])


@pytest.mark.parametrize("wt", [T.Q4_0, T.Q5_0, T.F16], ids=lambda t: t.name)
def test_wide_avx512_tiles_equal_the_narrow_ones(wt):
    """The AVX-512 Q4_0/Q5_0/F16 tiles hold two rows per zmm register where the CPU runs 512-bit work at full width
    (_core.wide_tiles): bit for bit the one-row-per-ymm tile and the decode kernel, for row counts that leave 0-7
    rows to the narrow tile, vector counts that leave 0-5 to the last pass and (F16) column tails. (On a CPU without
    AVX-512 only the knob is left to check: it reads, sets and refuses bad values.)"""
    rng = np.random.default_rng(31 + int(wt))
    before = _core.wide_tiles(-1)
    try:
        shapes = [(8, 28, 2), (17, 28, 5), (12, 3, 9), (16, 152, 3), (9, 512, 4), (23, 1, 7), (10, 7, 17), (3, 4, 6)]
        for rows, blocks, n_vec in shapes if "avx512" in PATHS else []:
            cols = 32 * blocks + (13 if wt == T.F16 else 0)
            raw = random_weight(rng, wt, rows, cols)
            x = rng.standard_normal((n_vec, cols)).astype(np.float32)
            _core.wide_tiles(0)
            narrow = nk.matmul(raw, wt, rows, cols, x, "avx512")
            _core.wide_tiles(1)
            wide = nk.matmul(raw, wt, rows, cols, x, "avx512")
            np.testing.assert_array_equal(wide, narrow, err_msg=f"{wt.name} {rows}x{cols}, {n_vec} vectors")
            for v in range(n_vec):
                np.testing.assert_array_equal(wide[v], nk.matmul(raw, wt, rows, cols, x[v:v + 1], "avx512")[0])
        _core.wide_tiles(1 - before)
        assert _core.wide_tiles(-1) == 1 - before
    finally:
        _core.wide_tiles(before)
    assert _core.wide_tiles(-1) == before
    with pytest.raises(ValueError, match="wide_tiles"):
        _core.wide_tiles(2)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("wt", WEIGHT_TYPES, ids=lambda t: t.name)
def test_batched_matmul_equals_one_vector_at_a_time(wt, path):
    """Prefill tiles (several vectors per weight pass, e.g. vec_dot_tile_avx2.c) give each vector exactly what the
    decode kernel gives it alone: batched and token-by-token runs of a model agree bit for bit. 16,416 columns
    exceed the AVX2 32-element tiles' row scratch (512 blocks) and 20,736 the K-quant tiles' (80 blocks), so their
    fallbacks are covered too; 17 vectors of 512 blocks take two groups of the 32-element tiles' float scales."""
    rng = np.random.default_rng(7 + int(wt))
    block = max(BLOCK_LAYOUTS[wt].block_size, 32)
    long_row = 16416 if block == 32 else 81 * 256
    for rows, cols, n_vec in [(7, block * 3, 2), (5, block * 5, 4), (9, block * 2, 5), (4, block, 9),
                              (3, long_row, 3), (6, long_row, 2), (5, 80 * block, 3), (3, 512 * block, 17)]:
        raw = random_weight(rng, wt, rows, cols)
        x = rng.standard_normal((n_vec, cols)).astype(np.float32)
        batched = nk.matmul(raw, wt, rows, cols, x, path)
        for v in range(n_vec):
            np.testing.assert_array_equal(batched[v], nk.matmul(raw, wt, rows, cols, x[v:v + 1], path)[0],
                                          err_msg=f"{wt.name} {rows}x{cols} vector {v} of {n_vec} on {path}")


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("wt", FLOAT_TYPES, ids=lambda t: t.name)
def test_float_batched_matmul_equals_one_vector_at_a_time_with_tails(wt, path):
    """The float types take any width: the AVX2 F16 dot sums four 8-column phases of each 32 columns, then
    8-column steps, then single columns, and its prefill tile must follow that order exactly. Widths below 32,
    with 8-column steps and with single-column tails, for 1-7 vectors."""
    rng = np.random.default_rng(29 + int(wt))
    # 1011 and 4877 columns: the prefill tile's 512-column groups (rows and vectors beyond 16 KiB), a partial last
    for rows, cols, n_vec in [(5, 45, 4), (4, 77, 3), (3, 8, 5), (6, 1011, 7), (2, 5, 2), (4, 32 * 9 + 24, 3),
                              (5, 4864 + 13, 4)]:
        raw = random_weight(rng, wt, rows, cols)
        x = rng.standard_normal((n_vec, cols)).astype(np.float32)
        batched = nk.matmul(raw, wt, rows, cols, x, path)
        for v in range(n_vec):
            np.testing.assert_array_equal(batched[v], nk.matmul(raw, wt, rows, cols, x[v:v + 1], path)[0],
                                          err_msg=f"{wt.name} {rows}x{cols} vector {v} of {n_vec} on {path}")
        exact, magnitude, _, _ = twin_product(raw, wt, rows, cols, x, path)
        check_within(batched, exact, EXACT_RTOL * magnitude, f"{wt.name} {rows}x{cols} on {path}")


@pytest.mark.parametrize("wt", [T.Q8_0, T.Q4_0, T.Q5_0, T.Q4_1, T.Q5_1], ids=lambda t: t.name)
def test_rows_longer_than_the_scale_buffer(wt):
    """The AVX2 decode kernels convert the activation scales once per call for rows up to 2,048 blocks and per
    block beyond: both sides of that limit match the exact twin on every path."""
    rng = np.random.default_rng(11 + int(wt))
    for cols in (2048 * 32, 2049 * 32):
        raw = random_weight(rng, wt, 3, cols)
        x = rng.standard_normal((1, cols)).astype(np.float32)
        exact, magnitude, _, _ = twin_product(raw, wt, 3, cols, x)
        for path in PATHS:
            check_within(nk.matmul(raw, wt, 3, cols, x, path), exact, EXACT_RTOL * magnitude,
                         f"{wt.name} 3x{cols} on {path}")


def test_row_range_and_strides_in_c_api():
    """_core.matmul writes exactly rows [r0, r1) of each output row, at y_stride apart."""
    rng = np.random.default_rng(11)
    wt, rows, cols, n_vec = T.Q4_K, 10, 512, 3
    raw = random_weight(rng, wt, rows, cols)
    x = rng.standard_normal((n_vec, cols)).astype(np.float32)
    xq = nk.quantize_act(x, wt)
    for path in PATHS:
        full = nk.matmul(raw, wt, rows, cols, x, path)
        y = np.full((n_vec, 16), -7.0, np.float32)
        _core.matmul(int(wt), raw, row_nbytes(wt, cols), cols, xq, xq.shape[1], n_vec, y, 16, 3, 9, path)
        np.testing.assert_array_equal(y[:, 3:9], full[:, 3:9])
        assert (y[:, :3] == -7).all() and (y[:, 9:] == -7).all()


# --- validation ----------------------------------------------------------------------------------------------------

def test_wrappers_reject_bad_input():
    rng = np.random.default_rng(3)
    raw = random_weight(rng, T.Q8_0, 4, 64)
    x = rng.standard_normal((2, 64)).astype(np.float32)
    with pytest.raises(ValueError, match="float32"):
        nk.matmul(raw, T.Q8_0, 4, 64, x.astype(np.float64))
    with pytest.raises(ValueError, match="contiguous"):
        nk.matmul(raw, T.Q8_0, 4, 64, np.ones((2, 128), np.float32)[:, ::2])
    with pytest.raises(ValueError, match="bytes"):
        nk.matmul(raw[:-1], T.Q8_0, 4, 64, x)
    with pytest.raises(ValueError, match="multiple"):
        nk.matmul(raw, T.Q8_0, 8, 32 + 16, x)
    with pytest.raises(ValueError, match="columns"):
        nk.matmul(raw, T.Q8_0, 4, 64, np.ascontiguousarray(x[:, :32]))
    with pytest.raises(ValueError, match="NaN"):
        nk.matmul(raw, T.Q8_0, 4, 64, np.full((1, 64), np.nan, np.float32))
    with pytest.raises(ValueError, match="uint8"):
        nk.matmul(raw.view(np.int8), T.Q8_0, 4, 64, x)
    with pytest.raises(UnsupportedError, match="IQ2_XXS"):
        nk.matmul(np.zeros(66, np.uint8), T.IQ2_XXS, 1, 256, np.ones(256, np.float32))
    with pytest.raises(ValueError, match="unknown kernel path"):
        nk.matmul(raw, T.Q8_0, 4, 64, x, isa="sse9")
    other = "neon" if "avx2" in nk.available_paths() or "neon" not in nk.available_paths() else "avx2"
    with pytest.raises(UnsupportedError, match="lacks"):   # a known path of the other CPU family
        nk.matmul(raw, T.Q8_0, 4, 64, x, isa=other)


def test_c_entry_rejects_out_of_bounds_calls():
    raw = np.zeros(4 * 34, np.uint8)
    xq = nk.quantize_act(np.ones(32, np.float32), T.Q8_0)
    y = np.zeros(4, np.float32)
    with pytest.raises(ValueError):   # r1 beyond the weight buffer
        _core.matmul(int(T.Q8_0), raw, 34, 32, xq, 34, 1, y, 4, 0, 5, "generic")
    with pytest.raises(ValueError):   # output too small
        _core.matmul(int(T.Q8_0), raw, 34, 32, xq, 34, 1, y[:2], 4, 0, 4, "generic")
    with pytest.raises(ValueError):   # activation buffer shorter than n_vec vectors
        _core.matmul(int(T.Q8_0), raw, 34, 32, xq, 34, 2, np.zeros(8, np.float32), 4, 0, 4, "generic")
    with pytest.raises(ValueError):   # row_bytes inconsistent with n_cols
        _core.matmul(int(T.Q8_0), raw, 33, 32, xq, 34, 1, y, 4, 0, 4, "generic")
    with pytest.raises(ValueError):
        _core.quantize_act(int(T.Q4_K), np.ones(32, np.float32), 32, 1, np.zeros(64, np.uint8), "generic")


def test_default_path_follows_onewell_isa(monkeypatch):
    best_avx2 = "avx2-vnni" if "avx2-vnni" in PATHS else "avx2"
    monkeypatch.setenv("ONEWELL_ISA", "generic")
    assert nk.default_path() == "generic"
    x86_widest = "avx512" if "avx512" in PATHS else best_avx2 if "avx2" in PATHS else None
    arm_widest = "neon-dotprod" if "neon-dotprod" in PATHS else "neon" if "neon" in PATHS else None
    # avx2 means plain AVX2, as an AVX2-only CPU runs, even where AVX-VNNI is there; avxvnni adds it where it is
    monkeypatch.setenv("ONEWELL_ISA", "avx2")
    assert nk.default_path() == ("avx2" if "avx2" in PATHS else arm_widest or "generic")  # other family: no cap
    monkeypatch.setenv("ONEWELL_ISA", "avxvnni")
    assert nk.default_path() == (best_avx2 if "avx2" in PATHS else arm_widest or "generic")
    assert _core.cpu_features()["isa"] == ({"avx2-vnni": "avxvnni", "avx2": "avx2"}[best_avx2]
                                           if "avx2" in PATHS else _core.cpu_features()["isa"])
    monkeypatch.setenv("ONEWELL_ISA", "neon")
    assert nk.default_path() == ("neon" if "neon" in PATHS else x86_widest or "generic")
    monkeypatch.setenv("ONEWELL_ISA", "dotprod")
    assert nk.default_path() == (arm_widest or x86_widest or "generic")
    monkeypatch.delenv("ONEWELL_ISA")
    assert nk.default_path() == (x86_widest or arm_widest or "generic")


def test_bench_helper_times_runs():
    rng = np.random.default_rng(2)
    raw = random_weight(rng, T.Q8_0, 8, 256)
    seconds = nk.matmul_bench(raw, T.Q8_0, 8, 256, rng.standard_normal(256).astype(np.float32), n_iter=3)
    assert 0.0 < seconds < 5.0


# --- real tensors --------------------------------------------------------------------------------------------------

def sample_rows(path, max_tensors_per_type=2):
    """A few first and last rows of real 2-D tensors of each type in a GGUF file."""
    from onewell.gguf.reader import GGUFReader

    samples = []
    with GGUFReader(path) as reader:
        seen: dict[GGMLType, int] = {}
        for name, info in reader.tensors.items():
            if len(info.shape) != 2 or info.ggml_type not in nk.WEIGHT_TYPES:
                continue
            if seen.get(info.ggml_type, 0) >= max_tensors_per_type:
                continue
            seen[info.ggml_type] = seen.get(info.ggml_type, 0) + 1
            rows, cols = info.shape
            data = reader.tensor_data(name).reshape(rows, -1)
            picked = np.concatenate([data[:5], data[-3:]])   # a copy: the reader closes below
            samples.append((name, info.ggml_type, cols, picked.reshape(-1)))
    return samples


def check_real_samples(samples, expected_types):
    assert {wt for _, wt, _, _ in samples} >= expected_types
    rng = np.random.default_rng(0)
    for name, wt, cols, raw in samples:
        rows = raw.size // row_nbytes(wt, cols)
        x = rng.standard_normal((2, cols)).astype(np.float32)
        for path in PATHS:
            exact, magnitude, w, _ = twin_product(raw, wt, rows, cols, x, path)
            bound = activation_error_bound(wt, raw, rows, cols, x, w, path) + EXACT_RTOL * magnitude
            y = nk.matmul(raw, wt, rows, cols, x, path)
            check_within(y, exact, EXACT_RTOL * magnitude, f"{name} ({wt.name}) on {path} vs exact twin")
            check_within(y, x.astype(np.float64) @ w.T, bound, f"{name} ({wt.name}) on {path} vs float product")


@pytest.mark.model
def test_real_qwen_tensors(qwen_q4km_path):
    check_real_samples(sample_rows(qwen_q4km_path), {T.Q8_0, T.Q5_0, T.Q4_K, T.Q6_K})


@pytest.mark.model
def test_real_smollm_tensors(smollm_path):
    check_real_samples(sample_rows(smollm_path), {T.Q8_0, T.Q4_1})


def streamed_and_tiled(raw, wt, rows, cols, x, path):
    """The single-vector matmul as decode runs it (rows streamed) and with the r16_row_stream knob off (4-row
    tiles)."""
    streamed = nk.matmul(raw, wt, rows, cols, x, path)
    before = _core.r16_row_stream(0)
    try:
        return streamed, nk.matmul(raw, wt, rows, cols, x, path)
    finally:
        _core.r16_row_stream(before)


@pytest.mark.parametrize("wt", [T.F32, T.F16, T.BF16, T.Q2_K, T.Q3_K, T.IQ4_NL, T.IQ4_XS, T.Q4_K, T.Q5_K, T.Q6_K],
                         ids=lambda t: t.name)
def test_streamed_rows_and_row_tiles_agree(wt):
    """Types without a whole-chunk tile get 4 rows per decode call; the decode entries stream them one at a time
    (4 adjacent rows read in lockstep halve the read speed on Zen 4: docs/perf-log.md, entry 22), and the
    r16_row_stream knob off brings the 4-row tiles back. Each row's arithmetic is the same either way."""
    rng = np.random.default_rng(31 + int(wt))
    block = max(BLOCK_LAYOUTS[wt].block_size, 32)
    for rows, cols in [(4, block * 3), (9, block * 2), (5, block + (5 if wt in FLOAT_TYPES else 0))]:
        raw = random_weight(rng, wt, rows, cols)
        x = rng.standard_normal((1, cols)).astype(np.float32)
        for path in PATHS:
            streamed, tiled = streamed_and_tiled(raw, wt, rows, cols, x, path)
            np.testing.assert_array_equal(streamed, tiled, err_msg=f"{wt.name} {rows}x{cols} on {path}")


@pytest.mark.parametrize("wt", [T.Q8_0, T.Q4_0, T.Q5_0, T.Q4_1, T.Q5_1], ids=lambda t: t.name)
def test_whole_chunk_decode_calls_and_row_tiles_agree(wt):
    """The AVX2 tiles of the 32-element types take a whole matmul chunk in one call (any_rows) and their decode
    kernels stream every row of it (Q8_0 and Q4_0 two rows at a time, from the chunk's two halves, and an odd
    row alone); with the r16_row_stream knob off they run 4-row tiles, which compute Q5_0's fifth bit another
    way (added to the nibbles, not folded into the offset seed). All give the same integers, so the same floats,
    bit for bit, for row counts that are and are not multiples of 4 or 2 (1-3 rows: no pair, one, one and a
    lone row), and match the exact twin."""
    rng = np.random.default_rng(23 + int(wt))
    for rows, cols in [(1, 64), (2, 64), (3, 96), (37, 96), (300, 64), (8, 32 * 41)]:
        raw = random_weight(rng, wt, rows, cols)
        x = rng.standard_normal((1, cols)).astype(np.float32)
        exact, magnitude, _, _ = twin_product(raw, wt, rows, cols, x)
        for path in PATHS:
            streamed, tiled = streamed_and_tiled(raw, wt, rows, cols, x, path)
            np.testing.assert_array_equal(streamed, tiled, err_msg=f"{wt.name} {rows}x{cols} on {path}")
            check_within(streamed, exact, EXACT_RTOL * magnitude, f"{wt.name} {rows}x{cols} on {path}")
