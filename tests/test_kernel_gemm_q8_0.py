"""The Q8_0 GEMMs of the AVX2 paths (kernels/gemm_q8_0_f32_avx2.c; with rows in the lanes, gemm_i8_rows.inc)
against their numpy twin and the int8 kernels.

From OW_FLOAT_GEMM_MIN_VECS (32) vectors on, Q8_0 matmuls on the avx2 and avx2-vnni paths dequantize both sides to
float32 (exactly: an int8 times an fp16 scale fits 24 bits) and multiply with FMAs. Its twin is the exact product
dequantize(W) @ dequantize(quantize_act(x)) in float64, the same twin every kernel meets (test_native_kernels.py):
|err| <= 1e-5 * M, M = |W| @ |x_hat|. Against the int8 kernel's one-vector result the only difference is float32
summation order, so the same bound holds between them. What the GEMM promises beyond that, checked bit for bit:
a vector's result does not depend on the other vectors of its batch, and it writes only its own rows.
Shapes: rows around the 16-row panel and the 6-vector micro-kernel, columns around the 256-column pass and a row
too long for the int8 tile's scratch, batches around 32 (the switch) and 128 (the vectors dequantized per pass).
"""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from onewell._native import _core
from onewell.gguf.constants import GGMLType, row_nbytes
from onewell.quant import dequantize
from onewell.quant.repack import Q4_1_R16, Q8_0_R16
from onewell.quant.repack_q4_r8 import IQ4_NL_R8, Q4_0_R8, Q4_1_R8, Q5_0_R8
from onewell.quant.repack_qk_r8 import IQ4_XS_R8, Q4_K_R8, Q5_K_R8, Q6_K_R8
from onewell.quant.repack_r8 import Q8_0_R8
from onewell.quant.act_formats import dequantize_act, quantize_act as twin_quantize_act
from onewell.runtime import native_kernels as nk
from onewell.runtime.native_types import type_traits
from real_weights import real_rows

T = GGMLType
GEMM_PATHS = [p for p in nk.available_paths() if type_traits()[int(T.Q8_0)].float_gemm_from[p] is not None]
MIN_VECS = 32
RTOL = 1e-5
pytestmark = [pytest.mark.skipif(not GEMM_PATHS, reason="no kernel path with a float GEMM on this CPU"),
              pytest.mark.usefixtures("float_gemm_on")]


def q8_0_matrix(rng: np.random.Generator, rows: int, cols: int) -> np.ndarray:
    """Raw Q8_0 bytes: every quant byte (incl. -128), signed scales of both signs and magnitudes"""
    blocks = rng.integers(0, 256, (rows * cols // 32, 34), dtype=np.uint8)
    scale = rng.uniform(1e-3, 1e-2, len(blocks)) * rng.choice([-1.0, 1.0], len(blocks))
    blocks[:, :2] = scale.astype("<f2").view(np.uint8).reshape(-1, 2)
    return blocks.reshape(-1)


def twin(raw: np.ndarray, rows: int, cols: int, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(exact product in float64 [n_vec, rows], magnitude M)"""
    x_hat = dequantize_act(T.Q8_0, twin_quantize_act(T.Q8_0, x), cols).astype(np.float64).reshape(-1, cols)
    w = dequantize(T.Q8_0, raw, (rows, cols)).astype(np.float64)
    return x_hat @ w.T, np.abs(x_hat) @ np.abs(w).T


def test_the_table_names_the_gemm_and_where_it_starts():
    q8_0 = type_traits()[int(T.Q8_0)]
    for path in GEMM_PATHS:
        assert q8_0.float_gemm_from[path] == MIN_VECS
        assert q8_0.kernels[path].startswith("vec_dot_q8_0_q8_0_gemm_")
        assert not nk.batch_exact(T.Q8_0, MIN_VECS, path) and nk.batch_exact(T.Q8_0, MIN_VECS - 1, path)
    # every other type and path keeps batched = one vector at a time, but F16's and BF16's on the AVX2 and AVX-512
    # paths (test_kernel_gemm_f16_bf16.py), Q4_0's, Q5_0's, IQ4_NL's, Q4_1's and Q5_1's on those
    # (test_kernel_gemm_i8_rows.py), the K-quants' and IQ4_XS's on all three (test_kernel_gemm_k_rows.py),
    # Q4_1 R16's and Q8_0 R16's on the AVX-512 path (test_repack_q4_1.py, test_repack.py), and the R8 layouts',
    # whose AVX2 tiles every x86 path falls back to (test_repack_q8_0_r8.py, test_repack_q4_r8.py, test_repack_qk_r8.py)
    k_quants = (int(T.Q4_K), int(T.Q5_K), int(T.Q6_K), int(T.Q2_K), int(T.Q3_K), int(T.IQ4_XS))
    gemms = (int(T.Q8_0), int(T.F16), int(T.BF16), int(T.Q4_0), int(T.Q5_0), int(T.Q4_1), int(T.Q5_1),
             int(T.IQ4_NL), Q8_0_R8, Q4_1_R8, Q5_0_R8, Q4_0_R8, IQ4_NL_R8, Q4_K_R8, Q5_K_R8, Q6_K_R8,
             IQ4_XS_R8) + k_quants
    on_avx512 = (int(T.F16), int(T.BF16), int(T.Q4_0), int(T.Q5_0), int(T.IQ4_NL), int(T.Q4_1), int(T.Q5_1),
                 Q4_1_R16, Q8_0_R16, Q8_0_R8, Q4_1_R8, Q5_0_R8, Q4_0_R8, IQ4_NL_R8, Q4_K_R8, Q5_K_R8, Q6_K_R8,
                 IQ4_XS_R8) + k_quants
    others = [(t.name, p) for t in type_traits().values() for p, start in t.float_gemm_from.items()
              if start is not None and not (t.id in gemms and p in ("avx2", "avx2-vnni"))
              and not (t.id in on_avx512 and p == "avx512")]
    assert others == []


@pytest.mark.parametrize("path", GEMM_PATHS)
@pytest.mark.parametrize("rows, cols, n_vec", [(16, 256, 32), (37, 896, 33), (5, 288, 38), (130, 32, 64),
                                               (21, 4896, 47), (3, 16416, 32), (19, 96, 129), (7, 544, 200)])
def test_gemm_matches_the_twin_and_the_one_vector_kernel(path, rows, cols, n_vec):
    rng = np.random.default_rng(rows * 1000 + n_vec)
    raw = q8_0_matrix(rng, rows, cols)
    x = rng.standard_normal((n_vec, cols)).astype(np.float32)
    batched = nk.matmul(raw, T.Q8_0, rows, cols, x, path)
    exact, magnitude = twin(raw, rows, cols, x)
    bound = RTOL * magnitude
    assert np.all(np.abs(batched - exact) <= bound), f"{rows}x{cols}, {n_vec} vectors on {path} vs the exact twin"
    alone = np.stack([nk.matmul(raw, T.Q8_0, rows, cols, x[v:v + 1], path)[0] for v in range(n_vec)])
    assert np.all(np.abs(alone - exact) <= bound)
    assert np.all(np.abs(batched - alone) <= 2 * bound)


@pytest.mark.parametrize("path", GEMM_PATHS)
def test_a_vectors_result_does_not_depend_on_its_batch(path):
    rng = np.random.default_rng(5)
    rows, cols, n_vec = 45, 800, 140
    raw = q8_0_matrix(rng, rows, cols)
    x = rng.standard_normal((n_vec, cols)).astype(np.float32)
    full = nk.matmul(raw, T.Q8_0, rows, cols, x, path)
    np.testing.assert_array_equal(nk.matmul(raw, T.Q8_0, rows, cols, x[:MIN_VECS], path), full[:MIN_VECS])
    np.testing.assert_array_equal(nk.matmul(raw, T.Q8_0, rows, cols, x[::-1].copy(), path), full[::-1])
    np.testing.assert_array_equal(nk.matmul(raw, T.Q8_0, rows, cols, x[7:7 + 61], path), full[7:7 + 61])


@pytest.mark.parametrize("path", GEMM_PATHS)
@pytest.mark.parametrize("r0, r1", [(0, 1), (3, 19), (5, 37), (16, 48), (40, 41)])
def test_gemm_writes_only_its_rows(path, r0, r1):
    """A matmul chunk (rows r0..r1 of y, y_stride apart per vector): every other float of y keeps its sentinel."""
    rng = np.random.default_rng(r0 * 100 + r1)
    rows, cols, n_vec, y_stride = 48, 320, 35, 53
    raw = q8_0_matrix(rng, rows, cols)
    x = rng.standard_normal((n_vec, cols)).astype(np.float32)
    xq = nk.quantize_act(x, T.Q8_0, path)
    y = np.full((n_vec, y_stride), np.nan, np.float32)
    _core.matmul(int(T.Q8_0), raw, row_nbytes(T.Q8_0, cols), cols, xq, xq.shape[1], n_vec, y, y_stride, r0, r1, path)
    assert np.isnan(y[:, :r0]).all() and np.isnan(y[:, r1:]).all()
    exact, magnitude = twin(raw, rows, cols, x)
    assert np.all(np.abs(y[:, r0:r1] - exact[:, r0:r1]) <= RTOL * magnitude[:, r0:r1])


@pytest.mark.parametrize("path", GEMM_PATHS)
def test_below_the_switch_batches_stay_bit_identical(path):
    """31 vectors run the int8 tile: each gets exactly its one-vector (decode) result"""
    rng = np.random.default_rng(31)
    rows, cols = 23, 640
    raw = q8_0_matrix(rng, rows, cols)
    x = rng.standard_normal((MIN_VECS - 1, cols)).astype(np.float32)
    batched = nk.matmul(raw, T.Q8_0, rows, cols, x, path)
    for v in range(MIN_VECS - 1):
        np.testing.assert_array_equal(batched[v], nk.matmul(raw, T.Q8_0, rows, cols, x[v:v + 1], path)[0])


@pytest.mark.parametrize("path", GEMM_PATHS)
def test_the_knob_off_gives_the_exact_int8_tile(path):
    """_core.float_gemm(0): every batch runs the int8 tile, each vector bit for bit its one-vector result, and
    batch_exact says so; on again, the GEMM is back (its results differ from the tile's in float rounding)"""
    rng = np.random.default_rng(77)
    rows, cols, n_vec = 29, 800, 70
    raw = q8_0_matrix(rng, rows, cols)
    x = rng.standard_normal((n_vec, cols)).astype(np.float32)
    alone = np.stack([nk.matmul(raw, T.Q8_0, rows, cols, x[v:v + 1], path)[0] for v in range(n_vec)])
    _core.float_gemm(0)
    assert _core.float_gemm(-1) == 0 and nk.batch_exact(T.Q8_0, n_vec, path)
    np.testing.assert_array_equal(nk.matmul(raw, T.Q8_0, rows, cols, x, path), alone)
    assert _core.float_gemm(1) == 0 and not nk.batch_exact(T.Q8_0, n_vec, path)
    gemm = nk.matmul(raw, T.Q8_0, rows, cols, x, path)
    assert not np.array_equal(gemm, alone)
    exact, magnitude = twin(raw, rows, cols, x)
    assert np.all(np.abs(gemm - exact) <= RTOL * magnitude)


def test_the_knob_takes_0_1_or_minus_1_and_defaults_to_the_cpus_choice():
    with pytest.raises(ValueError, match="float_gemm"):
        _core.float_gemm(2)
    with pytest.raises(ValueError, match="float_gemm"):
        _core.float_gemm(-2)
    assert _core.float_gemm(-1) == 1   # the fixture's
    assert _core.cpu_identity()["default_float_gemm"] in (0, 1)


@pytest.mark.parametrize("path", GEMM_PATHS)
@pytest.mark.parametrize("rows, cols, n_vec", [(16, 256, 32), (37, 896, 33), (130, 288, 128), (21, 4896, 47),
                                               (19, 96, 129), (7, 544, 200), (3, 16416, 32)])
def test_panels_built_in_turn_or_between_the_micro_calls_give_the_same_floats(path, rows, cols, n_vec):
    """_core.gemm_overlap only moves where the next weight panel is built (perf-log 28): bit for bit the same
    results, with fewer micro-kernel calls than panel parts (32 vectors), several passes and vector groups"""
    rng = np.random.default_rng(rows + cols + n_vec)
    raw = q8_0_matrix(rng, rows, cols)
    x = rng.standard_normal((n_vec, cols)).astype(np.float32)
    before = _core.gemm_overlap(0)
    try:
        in_turn = nk.matmul(raw, T.Q8_0, rows, cols, x, path)
        assert _core.gemm_overlap(1) == 0
        overlapped = nk.matmul(raw, T.Q8_0, rows, cols, x, path)
    finally:
        _core.gemm_overlap(before)
    np.testing.assert_array_equal(overlapped, in_turn)
    exact, magnitude = twin(raw, rows, cols, x)
    assert np.all(np.abs(overlapped - exact) <= RTOL * magnitude)


def test_the_overlap_knob_takes_0_1_or_minus_1_and_defaults_to_a_48_kib_l1():
    for bad in (2, -2):
        with pytest.raises(ValueError, match="gemm_overlap"):
            _core.gemm_overlap(bad)
    ident = _core.cpu_identity()
    assert ident["default_gemm_overlap"] == int(ident["l1d_kib"] >= 48)
    fresh = subprocess.run([sys.executable, "-c", "from onewell._native import _core; print(_core.gemm_overlap(-1))"],
                           capture_output=True, text=True, check=True)
    assert int(fresh.stdout) == ident["default_gemm_overlap"]


@pytest.mark.parametrize("path", GEMM_PATHS)
@pytest.mark.parametrize("rows, cols, n_vec", [(37, 896, 33), (8, 1056, 64), (130, 4896, 47), (19, 96, 129),
                                               (7, 32, 200)])
def test_the_int8_gemm_with_rows_in_lanes_and_the_float_gemm(path, rows, cols, n_vec):
    """With _core.rows_gemm(1) the AVX2 paths run Q8_0 batches from 32 vectors as an int8 GEMM with 8 rows in the
    lanes (gemm_i8_rows.inc, perf-log 29; 2: AVX2's weight signs by xor + sub), with 0 and 3 the float GEMM: each
    meets the twin bound, each vector's result is independent of its batch, the int8 variants give the same floats
    as each other and on both paths (vpdpbusd or vpmaddubsw: the same exact block sums and float chain), and not
    the float GEMM's. Shapes around the 8-row panel, the 6-vector micro-kernel, the 32-block pass and the
    128-vector group."""
    rng = np.random.default_rng(rows + cols + n_vec)
    raw = q8_0_matrix(rng, rows, cols)
    x = rng.standard_normal((n_vec, cols)).astype(np.float32)
    exact, magnitude = twin(raw, rows, cols, x)
    before = _core.rows_gemm(-1)
    results = {}
    try:
        for on in (0, 1, 2, 3):
            _core.rows_gemm(on)
            full = nk.matmul(raw, T.Q8_0, rows, cols, x, path)
            assert np.all(np.abs(full - exact) <= RTOL * magnitude), f"rows_gemm {on}, {rows}x{cols}x{n_vec}"
            part = nk.matmul(raw, T.Q8_0, rows, cols, x[n_vec - MIN_VECS:], path)
            np.testing.assert_array_equal(part, full[n_vec - MIN_VECS:])
            results[on] = full
        other = "avx2" if path == "avx2-vnni" else "avx2-vnni"
        if other in GEMM_PATHS:
            _core.rows_gemm(1)
            np.testing.assert_array_equal(nk.matmul(raw, T.Q8_0, rows, cols, x, other), results[1])
    finally:
        _core.rows_gemm(before)
    np.testing.assert_array_equal(results[2], results[1])
    np.testing.assert_array_equal(results[3], results[0])   # 3: Q8_0 in floats, the other types in int8
    assert not np.array_equal(results[0], results[1])


def test_the_rows_knob_reports_its_setting_and_defaults_per_path():
    for bad in (4, -3):
        with pytest.raises(ValueError, match="rows_gemm"):
            _core.rows_gemm(bad)
    ident = _core.cpu_identity()
    assert all(ident[k] in (0, 1, 2, 3) for k in ("default_rows_gemm", "default_rows_gemm_avx2", "default_rows_gemm_avx512"))
    fresh = subprocess.run([sys.executable, "-c", "from onewell._native import _core; print(_core.rows_gemm(-1))"],
                           capture_output=True, text=True, check=True)
    assert int(fresh.stdout) == -2   # unset: each path's default
    before = _core.rows_gemm(0)
    try:
        assert _core.rows_gemm(-1) == 0 and _core.rows_gemm(2) == 0 and _core.rows_gemm(3) == 2
        assert _core.rows_gemm(1) == 3
        assert _core.rows_gemm(-2) == 1
        assert _core.rows_gemm(-1) == -2
    finally:
        _core.rows_gemm(before)


@pytest.mark.model
@pytest.mark.parametrize("model", ["qwen_q8_0_path", "qwen_q4km_path", "smollm_path"])
def test_gemm_on_real_weights(model, request):
    """Real Q8_0 matrices (Qwen Q8_0: every layer; Qwen Q4_K_M: attn_v and the tied embedding; SmolLM2: the tied
    embedding) against 40 activation vectors with real-looking outliers: the twin bound, and the one-vector kernel's"""
    samples = real_rows(request.getfixturevalue(model), T.Q8_0)
    assert samples
    rng = np.random.default_rng(3)
    for name, cols, raw in samples[:12]:
        rows = raw.size // row_nbytes(T.Q8_0, cols)
        x = rng.standard_normal((40, cols)).astype(np.float32)
        x[:, rng.integers(0, cols, 3)] *= 50.0   # a few massive channels, as Qwen's hidden states have
        exact, magnitude = twin(raw, rows, cols, x)
        for path in GEMM_PATHS:
            batched = nk.matmul(raw, T.Q8_0, rows, cols, x, path)
            assert np.all(np.abs(batched - exact) <= RTOL * magnitude), f"{name} on {path}"
            alone = nk.matmul(raw, T.Q8_0, rows, cols, x[5:6], path)[0]
            assert np.all(np.abs(batched[5] - alone) <= 2 * RTOL * magnitude[5]), f"{name} on {path}, vector 5"
