"""Q8_0 R16, the load-time repacked Q8_0/Q5_0 layout (onewell.quant.repack, _native/kernels/q8_0_r16.h).

What must hold, and how tight:
- the C repack and activation quantizer write exactly the bytes of their numpy twins (random and real tensors);
- the repack is lossless: unpacking gives back the Q8_0 bytes; Q5_0 converts to the same values;
- a matmul on the repacked layout computes the same integer block dots and the same scales as the original
  layout's matmul on the same kernel path. The generic path even adds them in the same order: bit-identical.
  SIMD paths add in another order: |diff| <= 1e-5 * M, M = |x_hat| @ |W| (float32 summation, measured ~2e-7 M);
- each activation vector's result does not depend on how many vectors share the call (bit-identical);
- the backend gives the same logits with repack on and off (bit-identical on the generic path; on the SIMD paths
  no further apart than two kernel paths of the original layout are) and the same greedy tokens.
"""
from __future__ import annotations

import contextlib
import platform
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import with_knob
from test_native_backend import IDS, tiny_spec

from onewell._native import _core
from onewell.errors import UnsupportedError
from onewell.gguf.constants import BLOCK_LAYOUTS, GGMLType, row_nbytes
from onewell.quant import dequantize
from onewell.quant import repack as R
from onewell.quant.act_formats import dequantize_act, quantize_act
from onewell.runtime import native_kernels as nk
from onewell.runtime import native_repack as NR
from onewell.runtime.native import NativeBackend
from onewell.runtime.native_types import type_traits
from onewell.runtime.plan import build_plan

T = GGMLType
PATHS = nk.available_paths()
# 1 block; whole groups only (512 = 1 group, 1536 = 3); 896 = 28 blocks (one group + a 12-block tail);
# 4864 = 152 blocks (9 groups + an 8-block tail); 160 = a lone 5-block tail
COLS = [32, 160, 512, 896, 1536, 4864]
SOURCES = [T.Q8_0, T.Q5_0]
RTOL = 1e-5


def random_weight(rng: np.random.Generator, wt: GGMLType, rows: int, cols: int) -> np.ndarray:
    """Raw bytes: every quant bit pattern (Q8_0's -128 included), modest fp16 scales of both signs."""
    raw = rng.integers(0, 256, rows * row_nbytes(wt, cols), dtype=np.uint8)
    blocks = raw.reshape(-1, BLOCK_LAYOUTS[wt].type_size)
    scale = rng.uniform(1e-3, 1e-2, len(blocks)) * rng.choice([-1.0, 1.0], len(blocks))
    blocks[:, :2] = scale.astype("<f2").view(np.uint8).reshape(-1, 2)
    return raw


def numpy_repack(raw: np.ndarray, wt: GGMLType, rows: int, cols: int) -> np.ndarray:
    return (R.repack_q8_0_r16 if wt == T.Q8_0 else R.q5_0_to_q8_0_r16)(raw, rows, cols)


@contextlib.contextmanager
def rows_gemm_mode(mode: int):
    """_core.rows_gemm set to `mode` inside the block, restored after"""
    before = _core.rows_gemm(mode)
    try:
        yield
    finally:
        _core.rows_gemm(before)


def prefill_in_each_rows_gemm_mode(packed, rows: int, cols: int, x: np.ndarray, path: str, layout) -> dict:
    """{mode: the matmul of a repacked matrix by a batch x} under each _core.rows_gemm mode 0-3"""
    out = {}
    for mode in (0, 1, 2, 3):
        with rows_gemm_mode(mode):
            out[mode] = NR.matmul(packed, rows, cols, x, isa=path, layout=layout)
    return out


def assert_r8_prefill_is_the_files(raw, packed, wt, rows: int, cols: int, x: np.ndarray, path: str, layout,
                                   mode: int) -> None:
    """Under rows_gemm `mode` the R8 copy's batch matmul equals the file layout's: bit for bit on the AVX2 path
    (which the R8 kernels are) and generic, within float rounding (RTOL x magnitude) on the paths whose file
    layout runs GEMMs of their own"""
    with rows_gemm_mode(mode):
        original = nk.matmul(raw, wt, rows, cols, x, isa=path)
        on_r8 = NR.matmul(packed, rows, cols, x, isa=path, layout=layout)
    if path in ("generic", "avx2"):
        np.testing.assert_array_equal(on_r8, original)
    bound = RTOL * magnitude(raw, wt, rows, cols, x)
    assert (np.abs(on_r8 - original) <= bound).all(), np.abs(on_r8 - original).max()


def assert_the_knob_switches(out: dict, path: str, same_as_mode_1=(2,)) -> None:
    """prefill_in_each_rows_gemm_mode's results: the modes named give mode 1's floats; on the x86 SIMD paths (which
    run the AVX2 R8 kernels) mode 0's exact tile differs from mode 1's rows GEMM in low bits; the portable kernels
    ignore the knob"""
    for mode in same_as_mode_1:
        np.testing.assert_array_equal(out[1], out[mode])
    if path in ("avx2", "avx2-vnni", "avx512") and _core.float_gemm(-1):
        assert not np.array_equal(out[0], out[1])
    elif path in ("generic", "neon", "neon-dotprod"):
        np.testing.assert_array_equal(out[0], out[1])


def magnitude(raw: np.ndarray, wt: GGMLType, rows: int, cols: int, x: np.ndarray) -> np.ndarray:
    """M = |x_hat| @ |W|^T in float64, x_hat the Q8_0-quantized activations: the scale of float rounding."""
    x_hat = dequantize_act(T.Q8_0, quantize_act(T.Q8_0, x), cols).astype(np.float64)
    return np.abs(x_hat) @ np.abs(dequantize(wt, raw, (rows, cols)).astype(np.float64)).T


# ---- the layout ------------------------------------------------------------------------------------------


def test_layout_ids_and_strides_agree_with_the_native_core():
    assert _core.act_type_for(R.Q8_0_R16) == R.ACT_Q8_0_R16
    for cols in COLS + [64, 4096]:
        assert _core.r16_row_stride(cols) == R.row_stride(cols)
        assert R.row_stride(cols) % 64 == 0 and R.row_stride(cols) >= cols + 2 * cols // 32
    assert R.row_stride(896) == 960 and R.row_stride(4864) == 5184
    with pytest.raises(ValueError):
        R.row_stride(48)


def test_interleave_follows_the_documented_formula():
    """Element t of block b sits at 32g + 4mj + 4k + t%4 (g its group's first block, m the group's blocks,
    j = t // 4, k = b - g), written out independently of the reshapes in onewell.quant.repack."""
    for nb in (1, 5, 16, 28, 152):
        where = R.interleave(np.arange(nb * 32, dtype=np.int64).reshape(1, nb, 32))[0]
        expected = np.empty(nb * 32, dtype=np.int64)
        for b in range(nb):
            g = b // 16 * 16
            m = min(16, nb - g)
            for t in range(32):
                expected[32 * g + 4 * m * (t // 4) + 4 * (b - g) + t % 4] = 32 * b + t
        np.testing.assert_array_equal(where, expected)


@pytest.mark.parametrize("wt", SOURCES, ids=lambda t: t.name)
@pytest.mark.parametrize("cols", COLS)
def test_c_repack_writes_the_numpy_bytes_and_loses_nothing(wt, cols):
    rng = np.random.default_rng(cols + int(wt))
    for rows in (1, 3, 7):
        raw = random_weight(rng, wt, rows, cols)
        packed = NR.repack(raw, wt, rows, cols)
        assert packed.shape == (rows, R.row_stride(cols)) and packed.ctypes.data % 64 == 0
        np.testing.assert_array_equal(packed, numpy_repack(raw, wt, rows, cols))
        assert not packed[:, cols + cols // 16:].any()   # padding is zeros
        q8_0 = R.unpack_q8_0_r16(packed, rows, cols)
        if wt == T.Q8_0:
            np.testing.assert_array_equal(q8_0, raw)
        else:   # Q5_0 -> Q8_0 is exact: the same weights, value for value
            np.testing.assert_array_equal(dequantize(T.Q8_0, q8_0, (rows, cols)), dequantize(wt, raw, (rows, cols)))


def test_big_buffers_are_aligned_too():
    big = NR.aligned_empty(3 << 20)
    small = NR.aligned_empty(1000)
    assert big.ctypes.data % 64 == 0 and small.ctypes.data % 64 == 0 and big.size == 3 << 20
    big[:] = 7   # writable
    assert int(big[-1]) == 7


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("cols", COLS)
def test_activations_are_q8_0_quants_interleaved_with_scales_and_seeds(path, cols):
    rng = np.random.default_rng(cols)
    x = (rng.standard_normal((3, cols)) * rng.uniform(0.01, 30, (3, 1))).astype(np.float32)
    x[1, :32] = 0.0   # an all-zero block: scale 0
    native = NR.quantize_act(x, isa=path)
    np.testing.assert_array_equal(native, R.quantize_act_r16(x))
    nb = cols // 32
    q8_0 = quantize_act(T.Q8_0, x).reshape(3, nb, 34)
    order = R.interleave(np.arange(cols).reshape(1, nb, 32))[0]
    quants = np.empty((3, cols), dtype=np.uint8)
    quants[:, order] = native[:, :cols]
    np.testing.assert_array_equal(quants.reshape(3, nb, 32), q8_0[:, :, 2:])
    scales = native[:, cols:cols + 4 * nb].copy().view("<f4")
    np.testing.assert_array_equal(scales, q8_0[:, :, :2].copy().view("<f2")[..., 0].astype(np.float32))
    seeds = native[:, cols + 4 * nb:].copy().view("<i4")
    np.testing.assert_array_equal(seeds, -128 * q8_0[:, :, 2:].view(np.int8).sum(axis=2, dtype=np.int32))


# ---- the matmul -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("wt", SOURCES, ids=lambda t: t.name)
@pytest.mark.parametrize("cols", [32, 896, 1536, 4864])
def test_matmul_on_the_repacked_layout_equals_the_original(path, wt, cols):
    rng = np.random.default_rng(7 * cols + int(wt))
    rows = 13   # three row tiles of 4 and a leftover row
    raw = random_weight(rng, wt, rows, cols)
    packed = NR.repack(raw, wt, rows, cols)
    for n_vec in range(1, 6):
        x = rng.standard_normal((n_vec, cols)).astype(np.float32)
        original = nk.matmul(raw, wt, rows, cols, x, isa=path)
        repacked = NR.matmul(packed, rows, cols, x, isa=path)
        if path == "generic":
            np.testing.assert_array_equal(repacked, original)
        else:
            bound = RTOL * magnitude(raw, wt, rows, cols, x)
            assert (np.abs(repacked - original) <= bound).all(), np.abs(repacked - original).max()
    x = rng.standard_normal(cols).astype(np.float32)   # a single vector as [cols]
    assert NR.matmul(packed, rows, cols, x, isa=path).shape == (rows,)


@pytest.mark.parametrize("path", PATHS)
def test_a_vector_gets_the_same_result_whatever_shares_the_call(path):
    """The AVX-512 kernel runs vectors in batches of 4, then singly, 16 per pass: 21 vectors cross all cases."""
    rng = np.random.default_rng(3)
    rows, cols = 9, 896
    raw = random_weight(rng, T.Q8_0, rows, cols)
    packed = NR.repack(raw, T.Q8_0, rows, cols)
    x = rng.standard_normal((21, cols)).astype(np.float32)
    together = NR.matmul(packed, rows, cols, x, isa=path)
    alone = np.stack([NR.matmul(packed, rows, cols, v, isa=path) for v in x])
    np.testing.assert_array_equal(together, alone)


@pytest.mark.parametrize("wt", SOURCES, ids=lambda t: t.name)
@pytest.mark.parametrize("rows, cols, n_vec", [(9, 896, 33), (16, 1536, 64), (37, 160, 40), (130, 4864, 47),
                                               (5, 96, 129), (17, 512, 32)])
def test_the_avx512_gemm_from_32_vectors(wt, rows, cols, n_vec):
    """From 32 vectors the AVX-512 path runs the int8 GEMM with rows in the lanes on the R16 layout
    (kernels/gemm_i8_rows.inc; docs/perf-log.md, entry 37): within the twin's bound of x_hat @ W, a vector's result
    independent of its batch, the same floats on ymm and zmm panels, and the R16 tile back, bit for bit the
    one-vector results, with rows_gemm off. Shapes around the 16-block groups (a lone 3-block tail, 896 = a group
    + 12), the 8- and 16-row panels, the 32-block pass and the 128-vector group."""
    traits = type_traits()[R.Q8_0_R16]
    assert traits.float_gemm_from["avx512"] == 32 and traits.kernels["avx512"] == "vec_dot_q8_0r16_q8_0r16_gemm_avx512"
    rng = np.random.default_rng(rows * cols + n_vec + int(wt))
    raw = random_weight(rng, wt, rows, cols)
    packed = NR.repack(raw, wt, rows, cols)
    x = rng.standard_normal((n_vec, cols)).astype(np.float32)
    x[:, rng.integers(0, cols, 3)] *= 20
    scale = magnitude(raw, wt, rows, cols, x)
    exact = (dequantize_act(T.Q8_0, quantize_act(T.Q8_0, x), cols).astype(np.float64)
             @ dequantize(wt, raw, (rows, cols)).astype(np.float64).T)
    for path in [p for p in PATHS if p == "avx512"]:   # the table row above holds on every CPU
        run = lambda v=x: NR.matmul(packed, rows, cols, v, isa=path)  # noqa: E731
        out = {wide: with_knob(_core.wide_tiles, wide, lambda: with_knob(_core.rows_gemm, 1, run)) for wide in (0, 1)}
        np.testing.assert_array_equal(out[1], out[0])
        assert (np.abs(out[1] - exact) <= RTOL * scale).all(), np.abs((out[1] - exact) / scale).max()
        tail = with_knob(_core.rows_gemm, 1, lambda: run(x[n_vec - 32:]))
        np.testing.assert_array_equal(tail, out[1][n_vec - 32:])
        off = with_knob(_core.rows_gemm, 0, run)
        np.testing.assert_array_equal(off, np.stack([run(x[v]) for v in range(n_vec)]))
        assert not np.array_equal(out[1], off)


@pytest.mark.parametrize("path", PATHS)
def test_decode_of_a_chunk_equals_each_row_alone(path):
    """AVX-512 decode takes a whole chunk per call and reads rows r and r + nr/2 together (two streams), an odd
    row last and alone; each row's floats must be those of the row decoded by itself."""
    rng = np.random.default_rng(41)
    cols = 544   # a full group of 16 blocks and a partial one of 1
    for rows in (1, 2, 5, 8, 13):
        raw = random_weight(rng, T.Q8_0, rows, cols)
        packed = NR.repack(raw, T.Q8_0, rows, cols)
        x = rng.standard_normal(cols).astype(np.float32)
        together = NR.matmul(packed, rows, cols, x, isa=path)
        xq = NR.quantize_act(x[None], isa=path)
        stride = packed.size // rows
        for r in range(rows):
            y = np.full(rows, np.nan, dtype=np.float32)
            _core.matmul(R.Q8_0_R16, packed.reshape(-1), stride, cols, xq, xq.shape[1], 1, y, rows, r, r + 1, path)
            assert y[r] == together[r], f"row {r} of {rows} on {path}"


@pytest.mark.parametrize("path", PATHS)
def test_row_ranges_and_strides_of_the_raw_call(path):
    """_core.matmul over rows [r0, r1) writes exactly those outputs, at any y_stride, and accepts any row pitch
    of at least quants + scales (the kernel does not need the 64-byte padding)."""
    rng = np.random.default_rng(4)
    rows, cols, n_vec = 11, 160, 3
    raw = random_weight(rng, T.Q8_0, rows, cols)
    x = rng.standard_normal((n_vec, cols)).astype(np.float32)
    full = NR.matmul(NR.repack(raw, T.Q8_0, rows, cols), rows, cols, x, isa=path)
    tight = cols + cols // 16
    dense = np.empty(rows * tight, dtype=np.uint8)
    _core.repack_r16(int(T.Q8_0), raw, row_nbytes(T.Q8_0, cols), rows, cols, dense, tight)
    xq = NR.quantize_act(x, isa=path)
    y = np.full((n_vec, 16), -1.0, dtype=np.float32)
    _core.matmul(R.Q8_0_R16, dense, tight, cols, xq, xq.shape[1], n_vec, y, 16, 2, 9, path)
    np.testing.assert_array_equal(y[:, 2:9], full[:, 2:9])
    assert (y[:, :2] == -1).all() and (y[:, 9:] == -1).all()


def test_bad_arguments_raise_clear_errors():
    rng = np.random.default_rng(5)
    raw = random_weight(rng, T.Q8_0, 4, 64)
    with pytest.raises(UnsupportedError, match="Q4_0"):
        NR.repack(np.zeros(4 * 36, np.uint8), T.Q4_0, 4, 64)
    with pytest.raises(ValueError, match="bytes"):
        NR.repack(raw[:-1], T.Q8_0, 4, 64)
    with pytest.raises(ValueError):
        NR.repack(raw, T.Q8_0, 4, 48)
    with pytest.raises(ValueError, match="bytes"):
        R.repack_q8_0_r16(raw, 5, 64)
    with pytest.raises(ValueError, match="needed"):
        _core.repack_r16(int(T.Q8_0), raw, 68, 4, 64, np.empty(3 * 68, np.uint8), 68)
    with pytest.raises(ValueError, match="row size"):
        _core.repack_r16(int(T.Q8_0), raw, 68, 4, 64, np.empty(4 * 60, np.uint8), 60)
    with pytest.raises(ValueError, match="neither"):
        _core.repack_r16(int(T.Q4_0), raw, 68, 4, 64, np.empty(4 * 128, np.uint8), 128)
    packed = NR.repack(raw, T.Q8_0, 4, 64)
    xq = NR.quantize_act(np.ones(64, np.float32))
    y = np.empty(4, np.float32)
    with pytest.raises(ValueError, match="at least"):
        _core.matmul(R.Q8_0_R16, packed, 67, 64, xq, xq.size, 1, y, 4, 0, 4, "generic")
    with pytest.raises(ValueError, match="r1 rows"):
        _core.matmul(R.Q8_0_R16, packed[:3], 128, 64, xq, xq.size, 1, y, 4, 0, 4, "generic")
    with pytest.raises(ValueError, match="activation buffer"):
        _core.matmul(R.Q8_0_R16, packed, 128, 64, xq[:-1], xq.size, 1, y, 4, 0, 4, "generic")
    with pytest.raises(ValueError, match="bytes"):
        NR.matmul(packed[:3], 4, 64, np.ones(64, np.float32))
    with pytest.raises(ValueError):
        _core.r16_prefetch(-3)


def test_prefetch_knob_keeps_results_and_restores():
    rng = np.random.default_rng(6)
    rows, cols = 8, 4864
    raw = random_weight(rng, T.Q8_0, rows, cols)
    packed = NR.repack(raw, T.Q8_0, rows, cols)
    x = rng.standard_normal((2, cols)).astype(np.float32)
    plain = NR.matmul(packed, rows, cols, x)
    before = _core.r16_prefetch(4096)
    try:
        assert _core.r16_prefetch(-1) == 4096
        np.testing.assert_array_equal(NR.matmul(packed, rows, cols, x), plain)
    finally:
        _core.r16_prefetch(before)
    assert _core.r16_prefetch(-1) == before


# ---- the backend ----------------------------------------------------------------------------------------

# every matrix Q8_0 or Q5_0; n_ff = 512 cols for w_down (a whole group), 256 elsewhere (an 8-block tail)
R16_TYPES = dict(wq=T.Q8_0, wk=T.Q5_0, wv=T.Q8_0, wo=T.Q5_0, w_gate=T.Q8_0, w_up=T.Q5_0, w_down=T.Q8_0,
                 token_embd=T.Q8_0, output=T.Q5_0)


@pytest.fixture(scope="module", params=["llama", "qwen2"])
def r16_tiny(request):
    """llama: tied Q8_0 embeddings (the output projection gets a repacked copy); qwen2: a separate Q5_0 output."""
    return tiny_spec(request.param, R16_TYPES)


def test_plan_repacks_every_q8_0_and_q5_0_matrix_but_the_gather_table(r16_tiny):
    plan = build_plan(r16_tiny, repack=True)
    embd, output, *layers = plan.matrices
    assert not embd.repacked and embd.native_type == int(T.Q8_0)
    assert output.repacked and all(m.repacked for m in layers)
    assert {m.native_type for m in plan.matrices[1:]} == {R.Q8_0_R16}
    for m in plan.matrices[1:]:
        assert m.row_bytes == R.row_stride(m.cols) and m.raw.size == m.rows * m.row_bytes
        assert m.raw.ctypes.data % 64 == 0
    stats = plan.repacked
    assert stats["matrices"] == 1 + 7 * r16_tiny.config.n_layer
    assert stats["bytes"] == sum(m.raw.nbytes for m in plan.matrices[1:])
    assert stats["source_bytes"] == sum(m.rows * row_nbytes(m.ggml_type, m.cols) for m in plan.matrices[1:])
    assert build_plan(r16_tiny).repacked == {"matrices": 0, "bytes": 0, "source_bytes": 0}


def test_backend_logits_with_and_without_repack(r16_tiny):
    """The same model with and without the R16 copies, per path. With the f32 KV cache, the conditions these bounds
    were measured in: since the f16 cache became the default, a key whose float32 value the two layouts' summation
    orders put on either side of an f16 rounding boundary moves every later position by one f16 step, 2.3e-3 of
    the logit range on the llama tiny model (avx512 without repack, and avx2 with only Q8_0 repacked, on Zen 4;
    with the f32 cache the same runs are at 1.35e-5 mean / 6.7e-4 max). That is the cache's rounding, not the
    layouts'; the f16 cache has tests of its own (test_kv_cache.py)."""
    off = {p: NativeBackend(r16_tiny, n_ctx=32, isa=p, repack=False, kv_type="f32").forward(IDS, all_logits=True)
           for p in PATHS}
    scale = np.abs(off["generic"]).max()
    for path in PATHS:
        backend = NativeBackend(r16_tiny, n_ctx=32, isa=path, repack=True, kv_type="f32")
        on = backend.forward(IDS, all_logits=True)
        assert backend.info()["repacked"]["matrices"] == 1 + 7 * r16_tiny.config.n_layer
        assert_tiny_logits_match(path, on, off[path], scale)


def assert_tiny_logits_match(path, on, off, scale=None):
    """A random model's logits with a load-time layout (on) against the file layout (off) on kernel path `path`:
    bit-identical on generic; elsewhere float summation order only: mean ~1e-8 of the logit scale (default: off's);
    where an activation sits within an ulp of an 8-bit rounding boundary one step flips (max 6.7e-4 measured; avx2
    vs avx512 of the original layout differ as much, generic vs avx512 up to 7e-3). Same argmax everywhere."""
    if path == "generic":
        np.testing.assert_array_equal(on, off)
    else:
        err = np.abs(on - off) / (np.abs(off).max() if scale is None else scale)
        assert err.mean() < 1e-4 and err.max() < 1e-2, (err.mean(), err.max())
    assert (on.argmax(axis=1) == off.argmax(axis=1)).all()


def repacked_types(backend) -> set[str]:
    return {m.ggml_type.name.lower() for m in backend.plan.matrices if m.repacked}


def test_repack_defaults_follow_each_paths_measured_choice(r16_tiny):
    every = repacked_types(NativeBackend(r16_tiny, n_ctx=8, repack=True))
    traits = type_traits()
    for path in PATHS:
        backend = NativeBackend(r16_tiny, n_ctx=8, isa=path)
        types = repacked_types(backend)
        chosen = nk.default_repack(path)
        # a layout named (Q8_0 R8 on the AVX2 path of the CPUs it was measured on) stands for its source type
        named = {traits[t.repack_from].name for t in traits.values() if t.repack_from is not None and t.name in chosen}
        assert types == every & (chosen | named)
        assert (backend.info()["repacked"]["matrices"] > 0) is bool(types)
        assert chosen == nk.DEFAULT_REPACK[path] | (
            nk.R8_LAYOUTS if path == "avx2" and _core.cpu_identity()["default_r8"] else set())
    assert nk.DEFAULT_REPACK["avx512"] == {"q8_0", "q4_1"}   # Q5_0 streams as in the file (perf-log 19)
    assert set(nk.DEFAULT_REPACK) == set(nk.KERNEL_PATHS)   # every path decided, aarch64's too (not only this CPU's)
    for bad in ("yes", 1, 0.0, ["q4_0"], ["q9_9"]):
        with pytest.raises(ValueError, match="repack"):
            NativeBackend(r16_tiny, n_ctx=8, repack=bad)


def test_repack_can_name_the_types(r16_tiny):
    present = repacked_types(NativeBackend(r16_tiny, n_ctx=8, repack=True))
    assert present, "the tiny model must hold a repackable type"
    for one in sorted(present):
        assert repacked_types(NativeBackend(r16_tiny, n_ctx=8, repack=[one])) == {one}
    assert repacked_types(NativeBackend(r16_tiny, n_ctx=8, repack=[])) == set()


def test_executor_refuses_a_repacked_gather_table(r16_tiny):
    plan = build_plan(r16_tiny, repack=True)
    config, mats, vecs = plan.native_args()
    mats["token_embd"] = mats["output"]   # the output's R16 copy as the embedding table
    with pytest.raises(ValueError, match="inconsistent"):
        _core.executor_create(config, mats, vecs, 1, 8, 4)


# ---- real models ----------------------------------------------------------------------------------------

REAL = ["qwen_q8_0_path", "qwen_q4km_path"]
PROMPT = [151644, 872, 198, 7985, 264, 729, 311, 1779, 264, 10250, 1372, 13, 151645, 198]


@pytest.fixture(scope="module", params=REAL)
def real_spec(request):
    from onewell.gguf import GGUFReader
    from onewell.models.registry import load_spec

    return request.param, load_spec(GGUFReader(request.getfixturevalue(request.param)))


@pytest.mark.model
def test_real_tensors_repack_identically_in_c_and_numpy(real_spec):
    name, spec = real_spec
    layer = spec.layers[3]
    checked = 0
    for w in (layer["wq"], layer["wk"], layer["wv"], layer["w_gate"], layer["w_down"], spec.output):
        if w.ggml_type not in (T.Q8_0, T.Q5_0):
            continue
        rows, cols = w.shape
        rows = min(rows, 301)   # an odd slice of the big ones keeps numpy fast
        raw = w.raw.reshape(-1)[:rows * row_nbytes(w.ggml_type, cols)]
        packed = NR.repack(raw, w.ggml_type, rows, cols)
        np.testing.assert_array_equal(packed, numpy_repack(raw, w.ggml_type, rows, cols), err_msg=w.name)
        x = np.random.default_rng(checked).standard_normal((2, cols)).astype(np.float32)
        np.testing.assert_array_equal(NR.matmul(packed, rows, cols, x, isa="generic"),
                                      nk.matmul(raw, w.ggml_type, rows, cols, x, isa="generic"))
        checked += 1
    assert checked >= 3, name


@pytest.mark.model
def test_real_model_repack_on_and_off_agree(real_spec):
    """Generic path: bit-identical logits. SIMD: Qwen's activation outliers turn float-order differences into
    visible logit moves (measured max ~2 on the last prompt token), but repack on vs off moves them no more than
    switching the original layout from avx512 to avx2 does; every clear top-1 (lead > 1 logit) is the same and
    greedy decoding gives the same tokens."""
    name, spec = real_spec
    generic = [NativeBackend(spec, n_ctx=16, threads=2, isa="generic", repack=r).forward(PROMPT[:3], all_logits=True)
               for r in (False, True)]
    np.testing.assert_array_equal(generic[0], generic[1])

    path = nk.default_path()
    other = [p for p in PATHS if p != path][-1] if len(PATHS) > 1 else path   # the widest other path
    off = NativeBackend(spec, n_ctx=64, threads=2, isa=path, repack=False)
    on = NativeBackend(spec, n_ctx=64, threads=2, isa=path, repack=True)
    info = on.info()["repacked"]
    print(f"\n{name}: {info['matrices']} matrices repacked, {info['bytes'] / 1e6:.1f} MB of copies for "
          f"{info['source_bytes'] / 1e6:.1f} MB of originals")
    assert info["matrices"] > 0 and info["bytes"] >= info["source_bytes"]
    lo = off.forward(PROMPT, all_logits=True)
    ln = on.forward(PROMPT, all_logits=True)
    baseline = NativeBackend(spec, n_ctx=64, threads=2, isa=other, repack=False).forward(PROMPT, all_logits=True)
    assert_layout_keeps_the_model(off, on, lo, ln, baseline)


def assert_layout_keeps_the_model(off, on, lo, ln, baseline):
    """A repacked layout (backend `on`, logits ln) against the file layout (`off`, lo): no further from it on average
    than another kernel path (baseline) is, every clear top-1 (lead > 1 logit) kept, the same 8 greedy tokens."""
    noise = np.abs(baseline - lo).mean(axis=1)
    diff = np.abs(ln - lo).mean(axis=1)
    print(f"mean |on - off| per token {np.round(diff, 4)}; other path - this path {np.round(noise, 4)}")
    assert diff.mean() <= 2 * noise.mean() + 1e-3
    top2 = np.sort(lo, axis=1)[:, -2:]
    clear = top2[:, 1] - top2[:, 0] > 1.0
    assert clear.sum() >= 5 and (ln.argmax(axis=1)[clear] == lo.argmax(axis=1)[clear]).all()
    tokens = {}
    for label, backend in (("off", off), ("on", on)):
        seq = [backend.forward_argmax([int(lo[-1].argmax())])]
        for _ in range(7):
            seq.append(backend.forward_argmax([seq[-1]]))
        tokens[label] = seq
    assert tokens["on"] == tokens["off"], tokens


def test_decode_prefetch_default_is_the_measured_table():
    """Software prefetch of the streaming decode kernels is chosen per CPU from measurements (perf-log entries 3, 19,
    41, 46): off on AMD Zen 4 EPYC (family 0x19, models 0x10-0x1f), Zen 3 (family 0x19 without AVX-512) and AMD
    family 0x17, 8 KiB elsewhere; a fresh process starts with this CPU's entry, and setting the knob overrides it."""
    assert _core.default_prefetch("amd", 0x19, 0x11, True) == 0   # Zen 4 Genoa: 1.03-1.24x without (entry 19)
    assert _core.default_prefetch("amd", 0x19, 0x10, True) == 0 and _core.default_prefetch("amd", 0x19, 0x1f, True) == 0
    assert _core.default_prefetch("amd", 0x19, 0x01) == 0      # Zen 3 Milan: 1.01-1.12x without (entry 46)
    assert _core.default_prefetch("amd", 0x19, 0x21) == 0      # ... and the other Zen 3 (no AVX-512)
    assert _core.default_prefetch("amd", 0x19, 0x61, True) == 8192   # Zen 4 desktop: not measured
    assert _core.default_prefetch("amd", 0x17, 0x01) == 0      # family 0x17 (Zen 1 EPYC): 1.14-1.17x without (41)
    assert _core.default_prefetch("amd", 0x17, 0x31) == 0 and _core.default_prefetch("intel", 0x17, 0x01) == 8192
    assert _core.default_prefetch("amd", 0x1a, 0x02) == 8192
    assert _core.default_prefetch("intel", 0x19, 0x11) == 8192
    assert _core.default_prefetch("", 0, 0) == 8192
    ident = _core.cpu_identity()
    assert ident["default_prefetch"] == _core.default_prefetch(ident["vendor"], ident["family"], ident["model"],
                                                               bool(_core.cpu_features()["avx512f"]))
    fresh = subprocess.run([sys.executable, "-c", "from onewell._native import _core; print(_core.r16_prefetch(-1))"],
                           capture_output=True, text=True, check=True)
    assert int(fresh.stdout) == ident["default_prefetch"]


def test_wide_tiles_default_follows_the_cpu():
    """Two rows per zmm only where 512-bit work runs at full width on two ports (Intel with AMX, perf-log 24)."""
    ident, features = _core.cpu_identity(), _core.cpu_features()
    expected = ident["vendor"] == "intel" and bool(features["avx512f"]) and bool(features["amx_tile"])
    assert ident["default_wide_tiles"] == int(expected)
    before = _core.wide_tiles(-1)
    try:
        assert _core.wide_tiles(1 - before) == before and _core.wide_tiles(-1) == 1 - before
    finally:
        _core.wide_tiles(before)


def test_the_l1_data_cache_size_is_the_one_linux_reports():
    """cpuid's L1 data size (it picks ow_default_gemm_overlap) against the kernel's cacheinfo, where Linux has it;
    0 off x86 (not probed: the GEMM it tunes is x86 code)"""
    reported = _core.cpu_identity()["l1d_kib"]
    if platform.machine() not in ("x86_64", "AMD64", "i686"):
        assert reported == 0
        return
    index = Path("/sys/devices/system/cpu/cpu0/cache")
    l1d = [d for d in index.glob("index*") if (d / "level").read_text().strip() == "1"
           and (d / "type").read_text().strip() == "Data"]
    if not l1d:
        assert 0 <= reported <= 4096   # no cacheinfo to compare with (not Linux, or a container hiding it)
        return
    assert reported == int((l1d[0] / "size").read_text().strip().rstrip("K"))


def test_f16_streams_have_their_own_default_distance_and_the_knob_resets():
    """F16 decode streams take 16 KiB on Intel Xeons with AMX (1.09-1.15x over 8 KiB there, perf-log 24), the common
    distance elsewhere; r16_prefetch(-2) returns every stream to its CPU default after an explicit setting."""
    ident, features = _core.cpu_identity(), _core.cpu_features()
    amx_xeon = ident["vendor"] == "intel" and bool(features["amx_tile"])
    assert ident["default_f16_prefetch"] == (16384 if amx_xeon else ident["default_prefetch"])
    before = _core.r16_prefetch(4096)
    try:
        assert _core.r16_prefetch(-2) == 4096
        assert _core.r16_prefetch(-1) == ident["default_prefetch"]
    finally:
        _core.r16_prefetch(-2 if before == ident["default_prefetch"] else before)
