"""Q4_1 R16, the load-time repacked Q4_1 layout (onewell.quant.repack, _native/kernels/q4_1_r16.h).

What must hold, and how tight:
- the C repack writes exactly the bytes of its numpy twin (random and real SmolLM2 tensors) and loses nothing;
- a matmul on the repacked layout equals the original Q4_1 matmul up to ONE known difference: ggml's Q8_1
  activations carry s = fp16(d * sum(q)), the R16 activations give d_x * sum(q) in f32 (same quants, same d).
  So y_r16 - y_q4_1 = sum_b m_b (d_x,b sum(q_b) - s_b) exactly in real numbers; the test predicts that per row
  and bounds the rest by float rounding: |residual| <= 1e-5 * M (M = |x_hat| @ |W|, measured ~1e-7 M). The
  predicted term itself is bounded by sum_b |m_b s_b| 2^-11 (fp16 rounding), checked too;
- each vector's result does not depend on how many vectors share the call (bit-identical), on every path;
- SmolLM2 (Q4_1) gives nearly the same logits with repack on and off, and the same greedy tokens.
"""
from __future__ import annotations

import numpy as np
import pytest
from conftest import with_knob
from test_native_backend import IDS, tiny_spec

from onewell._native import _core
from onewell.gguf.constants import GGMLType, row_nbytes
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
# 1 block; SmolLM2's 576 (one group + a 2-block tail) and 1536 (3 groups); 512 k (whole groups); 160 (a lone tail)
COLS = [32, 160, 512, 576, 1024, 1536, 2560]


def random_q4_1(rng: np.random.Generator, rows: int, cols: int) -> np.ndarray:
    """Raw bytes: every nibble pattern, fp16 d > 0 and m of both signs in SmolLM2's range."""
    raw = rng.integers(0, 256, rows * row_nbytes(T.Q4_1, cols), dtype=np.uint8)
    blocks = raw.reshape(-1, 20)
    blocks[:, 0:2] = rng.uniform(1e-3, 1e-2, len(blocks)).astype("<f2").view(np.uint8).reshape(-1, 2)
    blocks[:, 2:4] = rng.uniform(-0.08, 0.02, len(blocks)).astype("<f2").view(np.uint8).reshape(-1, 2)
    return raw


def expected_difference(raw: np.ndarray, rows: int, cols: int, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(y_r16 - y_q4_1 in exact arithmetic, its bound sum_b |m_b s_b| 2^-11), float64, shape [n_vec, rows]."""
    nb = cols // 32
    m = raw.reshape(rows, nb, 20)[:, :, 2:4].copy().view("<f2")[..., 0].astype(np.float64)
    q8_1 = quantize_act(T.Q8_1, x).reshape(len(x), nb, 36)
    d = q8_1[:, :, 0:2].copy().view("<f2")[..., 0].astype(np.float64)
    s = q8_1[:, :, 2:4].copy().view("<f2")[..., 0].astype(np.float64)
    qsum = q8_1[:, :, 4:].copy().view(np.int8).sum(axis=2, dtype=np.int64)
    return (d * qsum - s) @ m.T, np.abs(s) @ np.abs(m).T * 2.0**-11


def magnitude(raw: np.ndarray, rows: int, cols: int, x: np.ndarray) -> np.ndarray:
    x_hat = dequantize_act(T.Q8_0, quantize_act(T.Q8_0, x), cols).astype(np.float64)
    return np.abs(x_hat) @ np.abs(dequantize(T.Q4_1, raw, (rows, cols)).astype(np.float64)).T


# ---- the layout ------------------------------------------------------------------------------------------


def test_layout_id_and_stride():
    assert _core.act_type_for(R.Q4_1_R16) == R.ACT_Q8_0_R16
    for cols in COLS:
        assert R.q4_1_row_stride(cols) % 64 == 0 and 0 <= R.q4_1_row_stride(cols) - 20 * cols // 32 < 64
    assert R.q4_1_row_stride(576) == 384 and R.q4_1_row_stride(1536) == 960


def test_nibbles_follow_the_documented_formula():
    """Element t of block b: byte 16g + 4m(t//8) + 4(b-g) + t%4, the high nibble when (t//4) is odd."""
    rng = np.random.default_rng(1)
    for nb in (1, 5, 16, 18, 48):
        cols = 32 * nb
        raw = random_q4_1(rng, 1, cols)
        packed = R.repack_q4_1_r16(raw, 1, cols)[0]
        blocks = raw.reshape(nb, 20)
        qs = blocks[:, 4:]
        q = np.concatenate([qs & 15, qs >> 4], axis=1)
        for b in range(nb):
            g = b // 16 * 16
            m = min(16, nb - g)
            for t in range(32):
                byte = packed[16 * g + 4 * m * (t // 8) + 4 * (b - g) + t % 4]
                assert (byte >> 4 if (t // 4) % 2 else byte & 15) == q[b, t]
        np.testing.assert_array_equal(packed[cols // 2:cols // 2 + 2 * nb], blocks[:, 0:2].reshape(-1))
        np.testing.assert_array_equal(packed[cols // 2 + 2 * nb:cols // 2 + 4 * nb], blocks[:, 2:4].reshape(-1))
        assert not packed[cols // 2 + 4 * nb:].any()


@pytest.mark.parametrize("cols", COLS)
def test_c_repack_writes_the_numpy_bytes_and_loses_nothing(cols):
    rng = np.random.default_rng(cols)
    rows = 7   # odd
    raw = random_q4_1(rng, rows, cols)
    packed = NR.repack(raw, T.Q4_1, rows, cols)
    assert packed.shape == (rows, R.q4_1_row_stride(cols)) and packed.ctypes.data % 64 == 0
    np.testing.assert_array_equal(packed, R.repack_q4_1_r16(raw, rows, cols))
    np.testing.assert_array_equal(R.unpack_q4_1_r16(packed, rows, cols), raw)
    assert NR.layout_for(T.Q4_1) == R.Q4_1_R16


# ---- the kernels -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("cols", COLS)
def test_matmul_equals_the_q4_1_matmul_but_for_the_fp16_rounding_of_s(path, cols):
    rng = np.random.default_rng(100 + cols)
    rows = 9
    raw = random_q4_1(rng, rows, cols)
    packed = NR.repack(raw, T.Q4_1, rows, cols)
    x = rng.standard_normal((5, cols)).astype(np.float32)
    x[:, rng.integers(0, cols, 3)] *= 20   # outliers, as real activations have
    original = nk.matmul(raw, T.Q4_1, rows, cols, x, isa=path).astype(np.float64)
    predicted, bound = expected_difference(raw, rows, cols, x)
    scale = magnitude(raw, rows, cols, x)
    assert (np.abs(predicted) <= bound * (1 + 1e-9)).all()
    for n_vec in range(1, 6):
        y = NR.matmul(packed, rows, cols, x[:n_vec], isa=path, layout=R.Q4_1_R16).astype(np.float64)
        residual = y - original[:n_vec] - predicted[:n_vec]
        assert (np.abs(residual) <= 1e-5 * scale[:n_vec]).all(), np.abs(residual / scale[:n_vec]).max()
        assert (np.abs(y - original[:n_vec]) <= bound[:n_vec] + 1e-5 * scale[:n_vec]).all()


@pytest.mark.parametrize("path", PATHS)
def test_a_vector_gets_the_same_result_whatever_shares_the_call(path):
    rng = np.random.default_rng(7)
    rows, cols = 6, 576
    raw = random_q4_1(rng, rows, cols)
    packed = NR.repack(raw, T.Q4_1, rows, cols)
    x = rng.standard_normal((21, cols)).astype(np.float32)   # > 16: two passes on avx512
    together = NR.matmul(packed, rows, cols, x, isa=path, layout=R.Q4_1_R16)
    for v in (0, 15, 16, 20):
        np.testing.assert_array_equal(together[v], NR.matmul(packed, rows, cols, x[v], isa=path, layout=R.Q4_1_R16))


@pytest.mark.parametrize("rows, cols, n_vec", [(9, 576, 33), (16, 1536, 64), (37, 160, 40), (130, 2560, 47),
                                               (5, 96, 129), (17, 1024, 32)])
def test_the_avx512_gemm_from_32_vectors(rows, cols, n_vec):
    """From 32 vectors the AVX-512 path runs the int8 GEMM with rows in the lanes on the R16 layout
    (kernels/gemm_i8_rows.inc; docs/perf-log.md, entry 36): the bound against the Q4_1 matmul, a vector's result
    independent of its batch, the same floats on ymm and zmm panels, and the streaming tile back, bit for bit the
    one-vector results, with rows_gemm off. Shapes around R16's 16-block groups, the 8- and 16-row panels, the
    32-block pass and the 128-vector group."""
    traits = type_traits()[R.Q4_1_R16]
    assert traits.float_gemm_from["avx512"] == 32 and traits.kernels["avx512"] == "vec_dot_q4_1r16_q8_0r16_gemm_avx512"
    rng = np.random.default_rng(rows * cols + n_vec)
    raw = random_q4_1(rng, rows, cols)
    packed = NR.repack(raw, T.Q4_1, rows, cols)
    x = rng.standard_normal((n_vec, cols)).astype(np.float32)
    x[:, rng.integers(0, cols, 3)] *= 20
    scale = magnitude(raw, rows, cols, x)
    # R16 takes the mins' term from d_x sum(q_x) (not Q8_1's fp16 s): exactly x_hat @ W in real numbers
    exact = (dequantize_act(T.Q8_0, quantize_act(T.Q8_0, x), cols).astype(np.float64)
             @ dequantize(T.Q4_1, raw, (rows, cols)).astype(np.float64).T)
    for path in [p for p in PATHS if p == "avx512"]:   # the table row above holds on every CPU
        run = lambda v=x: NR.matmul(packed, rows, cols, v, isa=path, layout=R.Q4_1_R16)  # noqa: E731
        out = {wide: with_knob(_core.wide_tiles, wide, lambda: with_knob(_core.rows_gemm, 1, run)) for wide in (0, 1)}
        np.testing.assert_array_equal(out[1], out[0])
        y = out[1].astype(np.float64)
        assert (np.abs(y - exact) <= 1e-5 * scale).all(), np.abs((y - exact) / scale).max()
        tail = with_knob(_core.rows_gemm, 1, lambda: run(x[n_vec - 32:]))
        np.testing.assert_array_equal(tail, out[1][n_vec - 32:])
        off = with_knob(_core.rows_gemm, 0, run)
        alone = np.stack([run(x[v]) for v in range(n_vec)])
        np.testing.assert_array_equal(off, alone)
        assert not np.array_equal(out[1], alone)


@pytest.mark.parametrize("path", PATHS)
def test_decode_of_a_chunk_equals_each_row_alone(path):
    """AVX-512 decode takes a whole chunk per call and reads rows r and r + nr/2 together (two streams), an odd
    row last and alone; each row's floats must be those of the row decoded by itself."""
    rng = np.random.default_rng(43)
    cols = 576   # SmolLM2's width: a full group of 16 blocks and a partial one of 2
    stride = R.q4_1_row_stride(cols)
    for rows in (1, 2, 5, 8, 13):
        raw = random_q4_1(rng, rows, cols)
        packed = NR.repack(raw, T.Q4_1, rows, cols)
        x = rng.standard_normal(cols).astype(np.float32)
        together = NR.matmul(packed, rows, cols, x, isa=path, layout=R.Q4_1_R16)
        xq = NR.quantize_act(x[None], isa=path)
        for r in range(rows):
            y = np.full(rows, np.nan, dtype=np.float32)
            _core.matmul(R.Q4_1_R16, packed.reshape(-1), stride, cols, xq, xq.shape[1], 1, y, rows, r, r + 1, path)
            assert y[r] == together[r], f"row {r} of {rows} on {path}"


@pytest.mark.parametrize("path", PATHS)
def test_row_ranges_of_the_raw_call(path):
    rng = np.random.default_rng(9)
    rows, cols = 11, 1536
    raw = random_q4_1(rng, rows, cols)
    packed = NR.repack(raw, T.Q4_1, rows, cols)
    x = rng.standard_normal((3, cols)).astype(np.float32)
    full = NR.matmul(packed, rows, cols, x, isa=path, layout=R.Q4_1_R16)
    xq = NR.quantize_act(x, isa=path)
    stride = R.q4_1_row_stride(cols)
    y = np.full((3, rows), np.nan, np.float32)
    _core.matmul(R.Q4_1_R16, packed.reshape(-1), stride, cols, xq, xq.shape[1], 3, y, rows, 3, 10, path)
    np.testing.assert_array_equal(y[:, 3:10], full[:, 3:10])
    assert np.isnan(y[:, :3]).all() and np.isnan(y[:, 10:]).all()


def test_bad_arguments_raise_clear_errors():
    rng = np.random.default_rng(5)
    raw = random_q4_1(rng, 4, 64)
    with pytest.raises(ValueError, match="bytes"):
        NR.repack(raw[:-1], T.Q4_1, 4, 64)
    with pytest.raises(ValueError, match="bytes"):
        R.repack_q4_1_r16(raw, 5, 64)
    with pytest.raises(ValueError, match="row size"):
        _core.repack_r16(int(T.Q4_1), raw, 40, 4, 64, np.empty(4 * 39, np.uint8), 39)
    packed = NR.repack(raw, T.Q4_1, 4, 64)
    with pytest.raises(ValueError, match="bytes"):
        NR.matmul(packed[:2], 4, 64, np.ones(64, np.float32), layout=R.Q4_1_R16)
    with pytest.raises(ValueError, match="layout"):
        NR.matmul(packed, 4, 64, np.ones(64, np.float32), layout=1234)
    xq = NR.quantize_act(np.ones(64, np.float32))
    with pytest.raises(ValueError, match="at least"):
        _core.matmul(R.Q4_1_R16, packed.reshape(-1), 39, 64, xq, xq.size, 1, np.empty(4, np.float32), 4, 0, 4,
                     "generic")


# ---- the plan and the backend ----------------------------------------------------------------------------

Q4_1_TYPES = dict(wq=T.Q4_1, wk=T.Q4_1, wv=T.Q8_0, wo=T.Q4_1, w_gate=T.Q4_1, w_up=T.Q4_1, w_down=T.Q4_1,
                  token_embd=T.Q4_1)


@pytest.fixture(scope="module")
def q4_1_tiny():
    """llama style, tied Q4_1 embeddings: the output gets a Q4_1 R16 copy, the gather table stays raw."""
    return tiny_spec("llama", Q4_1_TYPES)


def test_plan_repacks_q4_1_matrices_but_the_gather_table(q4_1_tiny):
    plan = build_plan(q4_1_tiny, repack=True)
    embd, output, *layers = plan.matrices
    assert not embd.repacked and embd.native_type == int(T.Q4_1)
    assert output.repacked and output.native_type == R.Q4_1_R16 and output.raw is not embd.raw
    assert {m.native_type for m in layers} == {R.Q4_1_R16, R.Q8_0_R16}
    for m in plan.matrices[1:]:
        stride = R.q4_1_row_stride(m.cols) if m.ggml_type == T.Q4_1 else R.row_stride(m.cols)
        assert m.row_bytes == stride and m.raw.size == m.rows * stride and m.raw.ctypes.data % 64 == 0
    config, mats, vecs = plan.native_args()
    mats["token_embd"] = mats["output"]   # a repacked copy as the embedding table is refused
    with pytest.raises(ValueError, match="inconsistent"):
        _core.executor_create(config, mats, vecs, 1, 8, 4)


def test_backend_logits_with_and_without_repack(q4_1_tiny):
    for path in PATHS:
        off = NativeBackend(q4_1_tiny, n_ctx=32, isa=path, repack=False).forward(IDS, all_logits=True)
        backend = NativeBackend(q4_1_tiny, n_ctx=32, isa=path, repack=True)
        on = backend.forward(IDS, all_logits=True)
        assert backend.info()["repacked"]["matrices"] == 1 + 7 * q4_1_tiny.config.n_layer
        err = np.abs(on - off) / np.abs(off).max()
        assert err.mean() < 1e-3 and err.max() < 2e-2, (path, err.mean(), err.max())
        assert (on.argmax(axis=1) == off.argmax(axis=1)).all()


# ---- SmolLM2 ---------------------------------------------------------------------------------------------

SMOL_PROMPT = [1, 9690, 198, 2683, 359, 253, 5356, 5646, 11173, 2, 198, 1, 4093, 198, 21040, 314, 260, 3575, 282]


@pytest.fixture(scope="module")
def smol_spec(smollm_path):
    from onewell.gguf import GGUFReader
    from onewell.models.registry import load_spec

    return load_spec(GGUFReader(smollm_path))


@pytest.mark.model
def test_smollm_tensors_repack_identically_in_c_and_numpy(smol_spec):
    layer = smol_spec.layers[5]
    checked = 0
    for w in (layer["wq"], layer["wk"], layer["w_gate"], layer["w_down"], smol_spec.output):
        if w.ggml_type != T.Q4_1:
            continue
        rows, cols = w.shape
        rows = min(rows, 301)
        raw = w.raw.reshape(-1)[:rows * row_nbytes(T.Q4_1, cols)]
        packed = NR.repack(raw, T.Q4_1, rows, cols)
        np.testing.assert_array_equal(packed, R.repack_q4_1_r16(raw, rows, cols), err_msg=w.name)
        np.testing.assert_array_equal(R.unpack_q4_1_r16(packed, rows, cols), raw)
        checked += 1
    assert checked >= 3


@pytest.mark.model
def test_smollm_repack_on_and_off_agree(smol_spec):
    """SmolLM2 amplifies tiny activation differences (a flipped 8-bit rounding early on moves logits by ~0.2 on
    average): switching the ORIGINAL layout from the generic to the SIMD path already does (measured mean 0.20,
    max 1.7), repack on vs off does about as much (measured 0.26, 2.0 on avx512). So: no further apart than twice
    the path-to-path noise, every clear top-1 (lead > 0.5) the same, and the same greedy tokens. Those figures are
    the f32 KV cache's, which these runs use: with the f16 cache (the default since) a key's f16 rounding can fall
    either way too, and on Zen 4 one clear top-1 of the 15 then differed (mean |on - off| 0.29, generic vs avx512
    0.18), which says nothing about the repack."""
    path = nk.default_path()
    off = NativeBackend(smol_spec, n_ctx=64, threads=2, isa=path, repack=False, kv_type="f32")
    on = NativeBackend(smol_spec, n_ctx=64, threads=2, isa=path, repack=True, kv_type="f32")
    info = on.info()["repacked"]
    q4_1 = [m for m in build_plan(smol_spec).matrices[1:] if m.ggml_type == T.Q4_1]
    assert info["matrices"] >= len({m.raw.ctypes.data for m in q4_1}) > 0
    lo = off.forward(SMOL_PROMPT, all_logits=True)
    ln = on.forward(SMOL_PROMPT, all_logits=True)
    other = "generic" if path != "generic" else PATHS[-1]
    baseline = NativeBackend(smol_spec, n_ctx=64, threads=2, isa=other, repack=False,
                             kv_type="f32").forward(SMOL_PROMPT, all_logits=True)
    diff, noise = np.abs(ln - lo).mean(), np.abs(baseline - lo).mean()
    print(f"\nSmolLM2 on {path}: {info['matrices']} matrices repacked; mean |on - off| {diff:.3f}, "
          f"|{other} - {path}| {noise:.3f}")
    assert diff <= 2 * noise + 1e-3
    top2 = np.sort(lo, axis=1)[:, -2:]
    clear = top2[:, 1] - top2[:, 0] > 0.5
    assert clear.sum() >= 5 and (ln.argmax(axis=1)[clear] == lo.argmax(axis=1)[clear]).all()
    tokens = {}
    for label, backend in (("off", off), ("on", on)):
        seq = [backend.forward_argmax([int(lo[-1].argmax())])]
        for _ in range(11):
            seq.append(backend.forward_argmax([seq[-1]]))
        tokens[label] = seq
    assert tokens["on"] == tokens["off"], tokens
