"""The F16 and BF16 float GEMMs of the AVX2 paths (kernels/gemm_f16_bf16_avx2.c, on gemm_f32_avx2.h) against their
numpy twin and the dots.

From OW_FLOAT_GEMM_MIN_VECS (32) vectors on, F16 and BF16 matmuls on the avx2 and avx2-vnni paths convert the weights
(and F16's fp16 activations; BF16's are f32) to float32, exactly, and multiply with FMAs in 16-row panels. Twin: the
exact product W @ x_hat in float64 (x_hat: the activations as the kernels read them, fp16-rounded for F16),
|err| <= 1e-5 * M with M = |W| @ |x_hat| (the bound of every kernel). Against the dot's one-vector result only the
summation order differs, so the same bound holds between them. Checked bit for bit: a vector's result does not
depend on its batch, the GEMM writes only its rows, smaller batches and rows not a multiple of 32 long keep the
tile (= the dot), and the panel overlap knob changes nothing.
"""
from __future__ import annotations

import numpy as np
import pytest

from onewell._native import _core
from onewell.gguf.constants import GGMLType
from onewell.quant.floats import round_to_bf16
from onewell.runtime import native_kernels as nk
from onewell.runtime.native_types import type_traits

T = GGMLType
TYPES = (T.F16, T.BF16)
def gemm_paths(t: GGMLType) -> list[str]:
    return [p for p in nk.available_paths() if type_traits()[int(t)].float_gemm_from[p] is not None]


GEMM_PATHS = gemm_paths(T.F16)   # the AVX2 paths and the AVX-512 path
CASES = [(t, p) for t in TYPES for p in gemm_paths(t)]
MIN_VECS = 32
RTOL = 1e-5
pytestmark = [pytest.mark.skipif(not GEMM_PATHS, reason="no kernel path with a float GEMM on this CPU"),
              pytest.mark.usefixtures("float_gemm_on")]


def half_matrix(rng: np.random.Generator, t: GGMLType, rows: int, cols: int) -> tuple[np.ndarray, np.ndarray]:
    """(weights as float64, raw F16 / BF16 bytes) over a wide range of magnitudes, both signs, a few exact zeros"""
    w = rng.standard_normal((rows, cols)) * np.exp(rng.uniform(-6, 3, (rows, cols)))
    w[rng.random((rows, cols)) < 0.01] = 0.0
    return raw_of(t, w.astype(np.float32))


def raw_of(t: GGMLType, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the values t stores, as float64; raw bytes): fp16, or bf16 (the top half of a float32, rounded to nearest
    even as ggml converts)"""
    if t == T.F16:
        h = w.astype(np.float16)
        return h.astype(np.float64), np.frombuffer(h.tobytes(), np.uint8).copy()
    bits = np.ascontiguousarray(w, np.float32).view(np.uint32).astype(np.uint64)
    top = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    values = (top.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return values, np.frombuffer(top.tobytes(), np.uint8).copy()


def twin(t: GGMLType, w: np.ndarray, x: np.ndarray, path: str) -> tuple[np.ndarray, np.ndarray]:
    """(exact product in float64 [n_vec, rows], magnitude M) of the stored weights w and the activations as the
    kernels of `path` read them: fp16-rounded for F16; for BF16 f32, or bf16-rounded where the path rounds them
    (AVX512-BF16 CPUs on the avx512 path, as llama.cpp)"""
    if t == T.F16:
        x_hat = x.astype(np.float16)
    else:
        x_hat = round_to_bf16(x) if nk.rounds_bf16_activations(path) else x
    x_hat = x_hat.astype(np.float64)
    return x_hat @ w.T, np.abs(x_hat) @ np.abs(w).T


def one_at_a_time(t, raw, rows, cols, x, path) -> np.ndarray:
    return np.stack([nk.matmul(raw, t, rows, cols, x[v:v + 1], path)[0] for v in range(len(x))])


def test_the_table_names_the_gemm_and_where_it_starts():
    for t, name in ((T.F16, "vec_dot_f16_f16_gemm_"), (T.BF16, "vec_dot_bf16_f32_gemm_")):
        row = type_traits()[int(t)]
        assert set(gemm_paths(t)) == {"avx2", "avx2-vnni", "avx512"} & set(nk.available_paths())
        for path in gemm_paths(t):
            assert row.float_gemm_from[path] == MIN_VECS
            assert row.kernels[path] == name + ("avx512" if path == "avx512" else "avx2")
            assert not nk.batch_exact(t, MIN_VECS, path) and nk.batch_exact(t, MIN_VECS - 1, path)


@pytest.mark.parametrize("t, path", CASES)
@pytest.mark.parametrize("rows, cols, n_vec", [(16, 256, 32), (37, 896, 33), (5, 288, 38), (130, 32, 64),
                                               (21, 4896, 47), (19, 96, 129), (7, 544, 200), (3, 3072, 32)])
def test_gemm_matches_the_twin_and_the_one_vector_dot(t, path, rows, cols, n_vec):
    rng = np.random.default_rng(rows * 1000 + n_vec)
    w, raw = half_matrix(rng, t, rows, cols)
    x = rng.standard_normal((n_vec, cols)).astype(np.float32)
    batched = nk.matmul(raw, t, rows, cols, x, path)
    exact, magnitude = twin(t, w, x, path)
    bound = RTOL * magnitude
    assert np.all(np.abs(batched - exact) <= bound), f"{rows}x{cols}, {n_vec} vectors on {path} vs the exact twin"
    alone = one_at_a_time(t, raw, rows, cols, x, path)
    assert np.all(np.abs(alone - exact) <= bound)
    assert np.all(np.abs(batched - alone) <= 2 * bound)
    assert not np.array_equal(batched, alone)   # it is the GEMM: another summation order


@pytest.mark.parametrize("t, path", CASES)
def test_a_vectors_result_does_not_depend_on_its_batch(t, path):
    rng = np.random.default_rng(5)
    rows, cols, n_vec = 45, 800, 140
    w, raw = half_matrix(rng, t, rows, cols)
    x = rng.standard_normal((n_vec, cols)).astype(np.float32)
    full = nk.matmul(raw, t, rows, cols, x, path)
    np.testing.assert_array_equal(nk.matmul(raw, t, rows, cols, x[:MIN_VECS], path), full[:MIN_VECS])
    np.testing.assert_array_equal(nk.matmul(raw, t, rows, cols, x[::-1].copy(), path), full[::-1])
    np.testing.assert_array_equal(nk.matmul(raw, t, rows, cols, x[7:7 + 61], path), full[7:7 + 61])


@pytest.mark.parametrize("t, path", CASES)
@pytest.mark.parametrize("r0, r1", [(0, 1), (3, 19), (5, 37), (16, 48), (40, 41)])
def test_gemm_writes_only_its_rows(t, path, r0, r1):
    """A matmul chunk (rows r0..r1 of y, y_stride apart per vector): every other float of y keeps its sentinel."""
    rng = np.random.default_rng(r0 * 100 + r1)
    rows, cols, n_vec, y_stride = 48, 320, 35, 53
    w, raw = half_matrix(rng, t, rows, cols)
    x = rng.standard_normal((n_vec, cols)).astype(np.float32)
    xq = nk.quantize_act(x, t, path)
    y = np.full((n_vec, y_stride), np.nan, np.float32)
    _core.matmul(int(t), raw, 2 * cols, cols, xq, xq.shape[1], n_vec, y, y_stride, r0, r1, path)
    assert np.isnan(y[:, :r0]).all() and np.isnan(y[:, r1:]).all()
    exact, magnitude = twin(t, w, x, path)
    assert np.all(np.abs(y[:, r0:r1] - exact[:, r0:r1]) <= RTOL * magnitude[:, r0:r1])


@pytest.mark.parametrize("t, path", CASES)
@pytest.mark.parametrize("rows, cols, n_vec", [(23, 640, MIN_VECS - 1), (9, 4864 + 13, 40), (6, 5, 33)])
def test_small_batches_and_ragged_rows_stay_bit_identical(t, path, rows, cols, n_vec):
    """31 vectors, or rows not a multiple of 32 long, run the F16 tile: each vector exactly its one-vector result"""
    rng = np.random.default_rng(rows + cols)
    w, raw = half_matrix(rng, t, rows, cols)
    x = rng.standard_normal((n_vec, cols)).astype(np.float32)
    np.testing.assert_array_equal(nk.matmul(raw, t, rows, cols, x, path), one_at_a_time(t, raw, rows, cols, x, path))


@pytest.mark.parametrize("t, path", CASES)
def test_the_knob_off_gives_the_exact_tile_and_the_overlap_changes_nothing(t, path):
    rng = np.random.default_rng(77)
    rows, cols, n_vec = 29, 800, 70
    w, raw = half_matrix(rng, t, rows, cols)
    x = rng.standard_normal((n_vec, cols)).astype(np.float32)
    alone = one_at_a_time(t, raw, rows, cols, x, path)
    _core.float_gemm(0)
    assert nk.batch_exact(t, n_vec, path)
    np.testing.assert_array_equal(nk.matmul(raw, t, rows, cols, x, path), alone)
    _core.float_gemm(1)
    before = _core.gemm_overlap(0)
    try:
        in_turn = nk.matmul(raw, t, rows, cols, x, path)
        _core.gemm_overlap(1)
        overlapped = nk.matmul(raw, t, rows, cols, x, path)
    finally:
        _core.gemm_overlap(before)
    np.testing.assert_array_equal(overlapped, in_turn)
    assert not np.array_equal(overlapped, alone)


def real_f16_rows(path, per_tensor: int = 40) -> list[tuple[str, np.ndarray]]:
    """(name, rows as fp16 [n, cols]) of every F16 matrix in a GGUF file: its first and last rows"""
    from onewell.gguf.reader import GGUFReader

    out = []
    with GGUFReader(path) as reader:
        for name, info in reader.tensors.items():
            if len(info.shape) == 2 and info.ggml_type == T.F16:
                rows, cols = info.shape
                data = np.frombuffer(reader.tensor_data(name).tobytes(), np.float16).reshape(rows, cols)
                out.append((name, np.concatenate([data[:per_tensor // 2], data[-per_tensor // 2:]])))
    return out


@pytest.mark.model
@pytest.mark.parametrize("t", TYPES)
def test_gemm_on_real_weights(nomic_embed_path, t):
    """nomic-embed-text-v1.5's F16 matrices (attention, FFN; as they are, and rounded to bf16) against 40 vectors
    with a few massive channels"""
    samples = real_f16_rows(nomic_embed_path)
    assert len(samples) >= 4
    rng = np.random.default_rng(3)
    for name, w16 in samples[:12]:
        rows, cols = w16.shape
        w, raw = raw_of(t, w16.astype(np.float32))
        x = rng.standard_normal((40, cols)).astype(np.float32)
        x[:, rng.integers(0, cols, 3)] *= 50.0
        for path in gemm_paths(t):
            exact, magnitude = twin(t, w, x, path)
            batched = nk.matmul(raw, t, rows, cols, x, path)
            assert np.all(np.abs(batched - exact) <= RTOL * magnitude), f"{name} on {path}"
            alone = nk.matmul(raw, t, rows, cols, x[5:6], path)[0]
            assert np.all(np.abs(batched[5] - alone) <= 2 * RTOL * magnitude[5]), f"{name} on {path}, vector 5"


def avx512_narrow_and_wide(t: GGMLType, seed: int, rows: int, cols: int, n_vec: int):
    """(w, raw, x, result with ow_wide_tiles 0, result with 1) of one AVX-512 matmul; the knob restored after"""
    rng = np.random.default_rng(seed)
    w, raw = half_matrix(rng, t, rows, cols)
    x = rng.standard_normal((n_vec, cols)).astype(np.float32)
    before = _core.wide_tiles(0)
    try:
        narrow = nk.matmul(raw, t, rows, cols, x, "avx512")
        _core.wide_tiles(1)
        wide = nk.matmul(raw, t, rows, cols, x, "avx512")
    finally:
        _core.wide_tiles(before)
    return w, raw, x, narrow, wide


def test_avx512_runs_the_256_bit_gemm_where_512_bit_work_is_split():
    """Without full-width 512-bit units (ow_wide_tiles 0, e.g. Zen 4) the AVX-512 path's F16 GEMM is the AVX2 one,
    bit for bit; with them, its own 32-row panels (another pass length: equal to the twin, not to the AVX2 one).
    A CPU without AVX-512 has no such path to run (the table's slot is checked above)."""
    if "avx512" not in GEMM_PATHS:
        assert "avx512" not in nk.available_paths()
        return
    rows, cols = 70, 1024
    w, raw, x, narrow, wide = avx512_narrow_and_wide(T.F16, 11, rows, cols, 50)
    avx2 = nk.matmul(raw, T.F16, rows, cols, x, "avx2")
    np.testing.assert_array_equal(narrow, avx2)
    exact, magnitude = twin(T.F16, w, x, "avx512")
    assert np.all(np.abs(wide - exact) <= RTOL * magnitude) and not np.array_equal(wide, avx2)


def test_avx512_bf16_keeps_its_tile_where_512_bit_work_is_split():
    """BF16 on the AVX-512 path: without full-width 512-bit units the vdpbf16ps tile (batched = one at a time);
    with them the 512-bit GEMM on bf16-rounded activations; without AVX512-BF16 the AVX2 path's GEMM, bit for bit"""
    if "avx512" not in GEMM_PATHS:
        assert "avx512" not in nk.available_paths()
        return
    rows, cols = 40, 768
    w, raw, x, narrow, wide = avx512_narrow_and_wide(T.BF16, 12, rows, cols, 40)
    if not nk.rounds_bf16_activations("avx512"):   # an AVX-512 CPU without AVX512-BF16
        np.testing.assert_array_equal(narrow, nk.matmul(raw, T.BF16, rows, cols, x, "avx2"))
        np.testing.assert_array_equal(wide, narrow)
        return
    np.testing.assert_array_equal(narrow, one_at_a_time(T.BF16, raw, rows, cols, x, "avx512"))
    exact, magnitude = twin(T.BF16, w, x, "avx512")
    assert np.all(np.abs(wide - exact) <= RTOL * magnitude) and not np.array_equal(wide, narrow)
