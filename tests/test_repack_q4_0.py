"""Q4_0 into the Q4_1 R16 layout (onewell.quant.repack.repack_q4_0_r16, _native/kernels/repack_q4_1_r16.c).

A Q4_0 block d (q - 8) is the Q4_1 block d q + m with m = -8 d, which fp16 holds exactly while |d| <= 8188, so the
copy loses nothing and runs on the Q4_1 R16 kernels. What must hold, and how tight:
- the C repack writes exactly the bytes of its numpy twin, and its Q4_1 form dequantizes to the same floats;
- a scale beyond 8188 is refused by both (C: ValueError), and the plan keeps such a matrix in the file's layout;
- a matmul on the copy equals the Q4_0 kernels' up to float rounding: both sum the same real numbers,
  d_w d_x sum(q x) - 8 d_w d_x sum(x) (measured ~2e-7 of M = |x_hat| @ |W|; bound 1e-5 M), on every path;
- each vector's result does not depend on how many vectors share the call;
- a model's logits with the copy match those without it (within the 8-bit activation steps an ulp can flip),
  and its greedy tokens are the same.
"""
from __future__ import annotations

import numpy as np
import pytest
from test_native_backend import IDS, tiny_spec

from onewell.gguf.constants import GGMLType, row_nbytes
from onewell.quant import dequantize
from onewell.quant import repack as R
from onewell.quant.act_formats import dequantize_act, quantize_act
from onewell.runtime import native_kernels as nk
from onewell.runtime import native_repack as NR
from onewell.runtime.native import NativeBackend
from onewell.runtime.plan import build_plan

T = GGMLType
PATHS = nk.available_paths()
COLS = [32, 160, 576, 896, 4864]


def random_q4_0(rng: np.random.Generator, rows: int, cols: int, edge_scales: bool = False) -> np.ndarray:
    """Raw bytes: every nibble pattern, fp16 d of both signs; with edge_scales also 0, subnormals and +-8188."""
    raw = rng.integers(0, 256, rows * row_nbytes(T.Q4_0, cols), dtype=np.uint8)
    blocks = raw.reshape(-1, 18)
    d = rng.uniform(-0.05, 0.05, len(blocks)).astype("<f2")
    if edge_scales:
        edges = np.array([0.0, -0.0, 6e-8, -3e-5, 8188.0, -8188.0, 1.0, 2.0**-14], dtype="<f2")
        d[:len(edges)] = edges[:len(d)]
    blocks[:, 0:2] = d.view(np.uint8).reshape(-1, 2)
    return raw


def magnitude(raw: np.ndarray, rows: int, cols: int, x: np.ndarray) -> np.ndarray:
    x_hat = dequantize_act(T.Q8_0, quantize_act(T.Q8_0, x), cols).astype(np.float64)
    return np.abs(x_hat) @ np.abs(dequantize(T.Q4_0, raw, (rows, cols)).astype(np.float64)).T


@pytest.mark.parametrize("cols", COLS)
def test_c_repack_writes_the_numpy_bytes_and_loses_nothing(cols):
    rng = np.random.default_rng(cols)
    rows = 7
    raw = random_q4_0(rng, rows, cols, edge_scales=True)
    packed = NR.repack(raw, T.Q4_0, rows, cols)
    assert NR.layout_for(T.Q4_0) == R.Q4_1_R16 and packed.shape == (rows, R.q4_1_row_stride(cols))
    np.testing.assert_array_equal(packed, R.repack_q4_0_r16(raw, rows, cols))
    as_q4_1 = R.q4_0_as_q4_1(raw, rows, cols)
    np.testing.assert_array_equal(R.unpack_q4_1_r16(packed, rows, cols), as_q4_1)
    np.testing.assert_array_equal(dequantize(T.Q4_1, as_q4_1, (rows, cols)), dequantize(T.Q4_0, raw, (rows, cols)))


def test_scales_without_an_exact_q4_1_form_are_refused_and_left_in_the_file_layout():
    rng = np.random.default_rng(3)
    for bad in (8192.0, -9000.0, np.inf, np.nan):
        raw = random_q4_0(rng, 2, 64)
        raw.reshape(-1, 18)[3, 0:2] = np.array([bad], dtype="<f2").view(np.uint8)
        with pytest.raises(ValueError, match="8188"):
            NR.repack(raw, T.Q4_0, 2, 64)
        with pytest.raises(ValueError, match="8188"):
            R.repack_q4_0_r16(raw, 2, 64)
    spec = tiny_spec("llama", Q4_0_TYPES)
    spec.layers[1].tensors["w_up"].raw.reshape(-1, 18)[0, 0:2] = np.array([8192.0], dtype="<f2").view(np.uint8)
    plan = build_plan(spec, repack={"q4_0"})
    repacked = {m.name: m.repacked for m in plan.matrices[1:]}   # [0]: the gather table, never repacked
    assert repacked.pop("blk.1.w_up") is False
    assert all(repacked.values()) and len(repacked) == 1 + 7 * spec.config.n_layer - 1


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("cols", COLS)
def test_matmul_equals_the_q4_0_matmul_up_to_float_rounding(path, cols):
    rng = np.random.default_rng(200 + cols)
    rows = 9
    raw = random_q4_0(rng, rows, cols)
    packed = NR.repack(raw, T.Q4_0, rows, cols)
    x = rng.standard_normal((5, cols)).astype(np.float32)
    x[:, rng.integers(0, cols, 3)] *= 20   # outliers, as real activations have
    original = nk.matmul(raw, T.Q4_0, rows, cols, x, isa=path).astype(np.float64)
    scale = magnitude(raw, rows, cols, x)
    for n_vec in (1, 2, 5):
        y = NR.matmul(packed, rows, cols, x[:n_vec], isa=path, layout=R.Q4_1_R16).astype(np.float64)
        err = np.abs(y - original[:n_vec]) / scale[:n_vec]
        assert err.max() <= 1e-5, (path, cols, n_vec, err.max())


@pytest.mark.parametrize("path", PATHS)
def test_a_vector_gets_the_same_result_whatever_shares_the_call(path):
    rng = np.random.default_rng(8)
    rows, cols = 6, 896
    packed = NR.repack(random_q4_0(rng, rows, cols), T.Q4_0, rows, cols)
    x = rng.standard_normal((21, cols)).astype(np.float32)
    together = NR.matmul(packed, rows, cols, x, isa=path, layout=R.Q4_1_R16)
    for v in (0, 15, 16, 20):
        np.testing.assert_array_equal(together[v], NR.matmul(packed, rows, cols, x[v], isa=path, layout=R.Q4_1_R16))


Q4_0_TYPES = dict(wq=T.Q4_0, wk=T.Q4_0, wv=T.Q4_0, wo=T.Q4_0, w_gate=T.Q4_0, w_up=T.Q4_0, w_down=T.Q4_0,
                  token_embd=T.Q4_0)


def test_backend_logits_with_and_without_repack():
    spec = tiny_spec("llama", Q4_0_TYPES)
    for path in PATHS:
        off = NativeBackend(spec, n_ctx=32, isa=path, repack=False, kv_type="f32").forward(IDS, all_logits=True)
        backend = NativeBackend(spec, n_ctx=32, isa=path, repack={"q4_0"}, kv_type="f32")
        on = backend.forward(IDS, all_logits=True)
        assert backend.info()["repacked"]["matrices"] == 1 + 7 * spec.config.n_layer   # all but the gather table
        # the matmuls differ by float ulps, and an ulp can move an 8-bit activation across a rounding boundary in
        # the next layer: then one step of that activation (measured here: mean 1.4e-4, max 4.6e-3 of the logit
        # range, generic path); the Q4_1 R16 test's bounds, calibrated on this model for that effect
        err = np.abs(on - off) / np.abs(off).max()
        assert err.mean() < 1e-3 and err.max() < 2e-2, (path, err.mean(), err.max())
        assert (on.argmax(axis=1) == off.argmax(axis=1)).all()
