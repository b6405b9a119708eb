"""Q4_K, Q5_K, Q6_K, Q2_K, Q3_K and IQ4_XS prefill on the x86 paths (AVX2: vpmaddubsw + vpmaddwd by the scales, AVX-VNNI, AVX-512 with
the EVEX vpdpbusd on ymm or zmm panels) as an int8 GEMM with the weight rows in the vector lanes
(kernels/gemm_k_rows.inc; docs/perf-log.md, entries 30, 31, 33) against the numpy twin and the exact tiles.

From OW_FLOAT_GEMM_MIN_VECS (32) vectors on, while _core.float_gemm and _core.rows_gemm are on, each (row, vector,
super-block) has its exact integer sums (the sub-blocks' sums times their scales; Q4_K / Q5_K's mins times the
activations' sub-block sums, Q2_K's too; Q6_K / Q3_K seeded by -32 / -4 x their scales times them; IQ4_XS's
signed codebook values + 128 seeded by -128 x, or |value| with the signs on the activations without VNNI), then one float chain per (row, vector):
the twin's bound |err| <= 1e-5 * M (M = |W| @ |x_hat|) holds, a vector's result does not depend on its batch, and
every path and panel width gives the same floats. With rows_gemm off the slot runs the exact tile again (Q5_K on
the AVX2 paths, Q2_K, Q3_K and IQ4_XS everywhere, which have no tile: the decode kernel), every vector bit for bit its
one-vector result. Real data: Qwen's Q4_K / Q6_K matrices, and ggml's own encoding of real weights in every type. Shapes around the 8- and
16-row panels, the 4-, 6- and 8-vector micro-kernels, the 4- and 8-super-block passes and the 128-vector group.
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
TYPES = (T.Q4_K, T.Q5_K, T.Q6_K, T.Q2_K, T.Q3_K, T.IQ4_XS)
X86 = [p for p in nk.available_paths() if p in ("avx2", "avx2-vnni", "avx512")]
MIN_VECS = 32
RTOL = 1e-5
# where each type's fp16 scales sit in its block: d and dmin first (Q4_K, Q5_K), last (Q6_K, Q2_K, Q3_K), d first
# (IQ4_XS)
SCALE_AT = {T.Q4_K: (0, 2), T.Q5_K: (0, 2), T.Q6_K: (208,), T.Q2_K: (80, 82), T.Q3_K: (108,), T.IQ4_XS: (0,)}
pytestmark = pytest.mark.usefixtures("float_gemm_on")


def matrix(rng: np.random.Generator, wt: GGMLType, rows: int, cols: int) -> np.ndarray:
    """Raw blocks: every quant, high-bit and packed-scale pattern, fp16 scales of both signs"""
    block_bytes = row_nbytes(wt, 256)
    blocks = rng.integers(0, 256, (rows * cols // 256, block_bytes), dtype=np.uint8)
    for at in SCALE_AT[wt]:
        scale = rng.uniform(1e-3, 1e-2, len(blocks)) * rng.choice([-1.0, 1.0], len(blocks))
        blocks[:, at:at + 2] = scale.astype("<f2").view(np.uint8).reshape(-1, 2)
    return blocks.reshape(-1)


def twin(raw, wt, rows, cols, x):
    exact, magnitude, _, _ = twin_product(raw, wt, rows, cols, x)
    return exact, magnitude


def on_paths(raw, wt, rows, cols, x) -> dict:
    """the GEMM's result on every x86 path, and on the AVX-512 path with both panel widths"""
    out = {}
    for path in X86:
        for wide in ((0, 1) if path == "avx512" else (None,)):
            run = lambda: with_knob(_core.rows_gemm, 1, lambda: nk.matmul(raw, wt, rows, cols, x, path))  # noqa: E731
            out[(path, wide)] = run() if wide is None else with_knob(_core.wide_tiles, wide, run)
    return out


def test_the_x86_slots_run_the_gemm_from_32_vectors():
    for wt in TYPES:
        traits = type_traits()[int(wt)]
        for path in X86:
            assert traits.float_gemm_from[path] == MIN_VECS
            name = traits.name   # q4_K, iq4_xs
            assert traits.kernels[path] == f"vec_dot_{name}_q8_K_gemm_{path.replace('-', '_')}"
            assert not nk.batch_exact(wt, MIN_VECS, path) and nk.batch_exact(wt, MIN_VECS - 1, path)
        assert traits.float_gemm_from.get("generic") is None


@pytest.mark.parametrize("wt", TYPES, ids=lambda t: t.name)
@pytest.mark.parametrize("rows, cols, n_vec", [(37, 1024, 33), (8, 2304, 64), (130, 4864, 47), (17, 256, 129),
                                               (7, 512, 200), (3, 20736, 32)])
def test_int8_gemm_meets_the_twin_and_keeps_each_vector_to_itself(wt, rows, cols, n_vec):
    rng = np.random.default_rng(rows * 7 + cols + n_vec)
    raw = matrix(rng, wt, rows, cols)
    x = rng.standard_normal((n_vec, cols)).astype(np.float32)
    exact, magnitude = twin(raw, wt, rows, cols, x)
    results = on_paths(raw, wt, rows, cols, x)
    first = next(iter(results.values()))
    for (path, wide), got in results.items():
        assert np.all(np.abs(got - exact) <= RTOL * magnitude), f"{wt.name} {rows}x{cols}x{n_vec} on {path} {wide}"
        # vpmaddubsw + vpmaddwd, VEX and EVEX vpdpbusd, ymm and zmm: the same integers, the same float chain
        np.testing.assert_array_equal(got, first, err_msg=f"{path} {wide}")
    for path in X86:
        tail = with_knob(_core.rows_gemm, 1, lambda: nk.matmul(raw, wt, rows, cols, x[n_vec - MIN_VECS:], path))
        np.testing.assert_array_equal(tail, results[(path, None if path != "avx512" else 0)][n_vec - MIN_VECS:])


@pytest.mark.parametrize("wt", TYPES, ids=lambda t: t.name)
@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_the_largest_sums_stay_exact(wt, sign):
    """Every quant, scale and min at its largest (all bytes 0xff; IQ4_XS's scales and values at their most negative) against activation quants of +127 or -128 (x all
    +1 or all -1): the int16 pair sums of vpmaddubsw and the int32 sums at their extremes, still on the twin"""
    rows, cols, n_vec = 9, 2048, 40
    blocks = np.full((rows * cols // 256, row_nbytes(wt, 256)), 0xFF, np.uint8)
    for at in SCALE_AT[wt]:
        blocks[:, at:at + 2] = np.array([0.01], "<f2").view(np.uint8)
    if wt == T.Q6_K:   # its int8 scales at -128, the other extreme of the seed
        blocks[:, 192:208] = 0x80
    if wt == T.Q3_K:   # its 6-bit scales at 0 - 32, the other extreme of its seed
        blocks[:, 96:108] = 0
    if wt == T.IQ4_XS:   # scales at 0 - 32 and every value -127: VNNI's seed and AVX2's |v| |a| pairs at their largest
        blocks[:, 2:] = 0
    raw = blocks.reshape(-1)
    x = np.full((n_vec, cols), sign, np.float32)
    exact, magnitude = twin(raw, wt, rows, cols, x)
    assert np.all(magnitude > 0)
    for (path, wide), got in on_paths(raw, wt, rows, cols, x).items():
        assert np.all(np.abs(got - exact) <= RTOL * magnitude), f"{wt.name} on {path} {wide}"


@pytest.mark.parametrize("wt", TYPES, ids=lambda t: t.name)
def test_rows_gemm_off_gives_back_the_exact_tile(wt):
    rng = np.random.default_rng(int(wt))
    rows, cols, n_vec = 29, 1280, 70
    raw = matrix(rng, wt, rows, cols)
    x = rng.standard_normal((n_vec, cols)).astype(np.float32)
    exact, magnitude = twin(raw, wt, rows, cols, x)
    for path in X86:
        alone = np.stack([nk.matmul(raw, wt, rows, cols, x[v:v + 1], path)[0] for v in range(n_vec)])
        off = with_knob(_core.rows_gemm, 0, lambda: nk.matmul(raw, wt, rows, cols, x, path))
        np.testing.assert_array_equal(off, alone)
        gemm = with_knob(_core.rows_gemm, 1, lambda: nk.matmul(raw, wt, rows, cols, x, path))
        assert not np.array_equal(gemm, alone)
        assert np.all(np.abs(gemm - exact) <= RTOL * magnitude)
    assert with_knob(_core.rows_gemm, 0, lambda: _core.rows_gemm(-1)) == 0


@pytest.mark.parametrize("wt", TYPES, ids=lambda t: t.name)
@pytest.mark.parametrize("r0, r1", [(0, 1), (3, 19), (5, 37), (16, 48), (40, 41)])
def test_the_gemm_writes_only_its_rows(wt, r0, r1):
    rng = np.random.default_rng(r0 * 100 + r1)
    rows, cols, n_vec, y_stride = 48, 768, 35, 53
    raw = matrix(rng, wt, rows, cols)
    x = rng.standard_normal((n_vec, cols)).astype(np.float32)
    exact, magnitude = twin(raw, wt, rows, cols, x)
    for path in X86:
        xq = nk.quantize_act(x, wt, path)
        y = np.full((n_vec, y_stride), np.nan, np.float32)
        with_knob(_core.rows_gemm, 1, lambda: _core.matmul(int(wt), raw, row_nbytes(wt, cols), cols, xq, xq.shape[1],
                                                            n_vec, y, y_stride, r0, r1, path))
        assert np.isnan(y[:, :r0]).all() and np.isnan(y[:, r1:]).all()
        assert np.all(np.abs(y[:, r0:r1] - exact[:, r0:r1]) <= RTOL * magnitude[:, r0:r1])


def check_hidden_states(raw, wt, rows, cols, rng, n_vec: int, label: str) -> None:
    """n_vec vectors with a few massive channels, as Qwen's hidden states have: the twin bound on every path and
    width, and the same floats on each"""
    x = rng.standard_normal((n_vec, cols)).astype(np.float32)
    x[:, rng.integers(0, cols, 3)] *= 50.0
    exact, magnitude = twin(raw, wt, rows, cols, x)
    results = on_paths(raw, wt, rows, cols, x)
    first = next(iter(results.values()))
    for (path, wide), got in results.items():
        assert np.all(np.abs(got - exact) <= RTOL * magnitude), f"{label} on {path} {wide}"
        np.testing.assert_array_equal(got, first)


@pytest.mark.model
@pytest.mark.parametrize("wt", (T.Q4_K, T.Q6_K), ids=lambda t: t.name)
def test_the_gemm_on_real_k_quant_weights(qwen_q4km_path, wt):
    """Qwen Q4_K_M's ffn_down matrices (Q4_K in half the layers, Q6_K in the others) against 40 vectors"""
    samples = real_rows(qwen_q4km_path, wt)
    assert len(samples) >= 12
    rng = np.random.default_rng(5)
    for name, cols, raw in samples[::3]:
        check_hidden_states(raw, wt, raw.size // row_nbytes(wt, cols), cols, rng, 40, name)


@pytest.mark.parametrize("wt", TYPES, ids=lambda t: t.name)
def test_the_gemm_on_ggml_encoded_real_weights(wt):
    """Real weights (SmolLM2's blk.0.ffn_down, 8 x 1536) as llama.cpp 11434's quantizer wrote them in each type
    (tests/data/ggml_codecs.npz), against 48 vectors"""
    record = np.load(DATA / "ggml_codecs.npz")
    rows, cols = record["input_real"].shape
    check_hidden_states(record[f"{wt.name}_real_bytes"], wt, rows, cols, np.random.default_rng(6), 48, wt.name)
