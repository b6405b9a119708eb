"""Q4_K R8, Q5_K R8, Q6_K R8 and IQ4_XS R8, the load-time layouts of Q4_K, Q5_K, Q6_K and IQ4_XS for the AVX2 path
of AMD family 0x17 (onewell.quant.repack_qk_r8, _native/kernels/qk_r8.h, qk_r8.c, vec_dot_qk_r8_avx2.c).

What must hold, and how tight:
- the C repack writes exactly the bytes of its numpy twin (random tensors and Qwen2.5 Q4_K_M's Q4_K and Q6_K
  tensors, and ggml's own IQ4_XS encodings of SmolLM2 rows, random and cosine inputs (tests/data/ggml_codecs.npz); no
  real Q5_K tensor is among the tests' models) and is lossless; Q4_K's and Q5_K's scales and minima are the file's
  6-bit values unpacked, IQ4_XS's its signed scales; every element (and Q5_K's fifth bit) sits where qk_r8.h says;
- a matmul on R8 computes the file type's integer sums with the same scale products: on the generic path in the
  same order (bit-identical); the AVX2 decode kernels add them in 8 lanes: |diff| <= 1e-5 * M, M = |x_hat| @ |W|
  (float32 summation; measured ~3e-8 M);
- from 32 vectors the AVX2 tile turns rows back into the file's blocks for the file type's GEMM: bit-identical to
  the file layout's matmul where it runs the same GEMM (avx2), within the bound on the other x86 paths;
- each vector's result does not depend on how many vectors share the call below the GEMM (nor with the GEMM knob
  off, where a batch runs 32 vectors at a time), nor a row's on how the call's rows are split;
- the plan's copies, the repack argument's names; a random model's and Qwen2.5 Q4_K_M's logits within test_repack's
  bounds and the same greedy tokens.
"""
from __future__ import annotations

import numpy as np
import pytest
from test_native_backend import IDS, LOW_BIT_TYPES, QWEN_TYPES, tiny_spec
from test_repack import (PROMPT, assert_layout_keeps_the_model, assert_r8_prefill_is_the_files,
                         assert_the_knob_switches, assert_tiny_logits_match, magnitude,
                         prefill_in_each_rows_gemm_mode)
from test_repack_q4_r8 import check_ggml_encoding_on_r8

from onewell._native import _core
from onewell.errors import UnsupportedError
from onewell.gguf.constants import GGMLType, row_nbytes
from onewell.quant import repack_qk_r8 as QK
from onewell.quant.k_scales import unpack_scales_mins
from onewell.runtime import native_kernels as nk
from onewell.runtime import native_repack as NR
from onewell.runtime.native import NativeBackend
from onewell.runtime.native_types import layout_sources, type_traits
from onewell.runtime.plan import build_plan, repack_type_set

T = GGMLType
PATHS = nk.available_paths()
# 1 super-block; 2; 3 (a row of 768: no power of two); 8; Gemma's attn_output (1,024); Qwen's ffn_down (4,864)
COLS = [256, 512, 768, 2048, 1024, 4864]
RTOL = 1e-5
LAYOUTS = {T.Q4_K: QK.Q4_K_R8, T.Q5_K: QK.Q5_K_R8, T.Q6_K: QK.Q6_K_R8, T.IQ4_XS: QK.IQ4_XS_R8}
BYTES = {T.Q4_K: (144, 148), T.Q5_K: (176, 180), T.Q6_K: (210, 210), T.IQ4_XS: (136, 138)}   # file, layout
REAL = {T.Q4_K: QK.Q4_K_R8, T.Q6_K: QK.Q6_K_R8}   # the types of Qwen2.5 Q4_K_M's ffn_down


def random_k(rng, wt, rows, cols):
    """Raw Q4_K, Q5_K, Q6_K or IQ4_XS bytes: every quant, scale (and minimum) pattern, modest fp16 d (and dmin) of
    both signs."""
    raw = rng.integers(0, 256, rows * row_nbytes(wt, cols), dtype=np.uint8)
    blocks = raw.reshape(-1, BYTES[wt][0])
    for at in {T.Q6_K: (208,), T.IQ4_XS: (0,)}.get(wt, (0, 2)):
        scale = rng.uniform(1e-4, 1e-3, len(blocks)) * rng.choice([-1.0, 1.0], len(blocks))
        blocks[:, at:at + 2] = scale.astype("<f2").view(np.uint8).reshape(-1, 2)
    return raw


def test_layout_rows_in_the_type_table():
    for wt, layout in LAYOUTS.items():
        row = type_traits()[layout]
        assert row.name == f"{wt.name.lower()}_r8" and row.repacked and row.repack_from == wt
        assert row.act_type == type_traits()[int(wt)].act_type == T.Q8_K and row.repack_to is None
        assert row.block_size == 256 and row.block_bytes == BYTES[wt][1]
        assert layout_sources()[layout] == wt
        assert type_traits()[int(wt)].repack_to is None   # built only when named


@pytest.mark.parametrize("wt", LAYOUTS)
@pytest.mark.parametrize("cols", COLS)
def test_native_repack_writes_the_numpy_twins_bytes_and_is_lossless(wt, cols):
    rng = np.random.default_rng(cols)
    rows, layout = 7, LAYOUTS[wt]
    raw = random_k(rng, wt, rows, cols)
    packed = NR.repack(raw, wt, rows, cols, layout=layout)
    assert packed.shape == (rows, QK.row_bytes(layout, cols)) and QK.row_bytes(layout, cols) == cols // 256 * BYTES[wt][1]
    np.testing.assert_array_equal(packed, QK.repack_qk_r8(raw, layout, rows, cols))
    np.testing.assert_array_equal(QK.unpack_qk_r8(packed, layout, rows, cols), raw)
    blocks, file = packed.reshape(-1, BYTES[wt][1]), raw.reshape(-1, BYTES[wt][0])
    if wt in (T.Q4_K, T.Q5_K):   # each super-block: the file's d and dmin, then its 6-bit scales and minima unpacked
        scales, mins = unpack_scales_mins(file[:, 4:16])
        np.testing.assert_array_equal(blocks[:, :4], file[:, :4])
        np.testing.assert_array_equal(blocks[:, 4:12], scales)
        np.testing.assert_array_equal(blocks[:, 12:20], mins)
    elif wt == T.Q6_K:   # d, then the 16 int8 scales
        np.testing.assert_array_equal(blocks[:, :2], file[:, 208:210])
        np.testing.assert_array_equal(blocks[:, 2:18], file[:, 192:208])
    else:   # IQ4_XS: d, then sub-block k's scale - 32 (nibble k of scales_l, bits 2k..2k+1 of scales_h on top)
        np.testing.assert_array_equal(blocks[:, :2], file[:, :2])
        high = file[:, 2].astype(np.int32) | (file[:, 3].astype(np.int32) << 8)
        for k in range(8):
            ls = ((file[:, 4 + k // 2] >> (4 * (k % 2))) & 15) | (((high >> (2 * k)) & 3) << 4)
            np.testing.assert_array_equal(blocks[:, 2 + k].view(np.int8), ls - 32)


def test_q6_k_values_sit_where_the_header_says():
    """Element 16 p + 2 v + s with 6-bit value q: bits 0-5 of X_v byte 2 p + s (v < 4); for v = 4 + k, q's top 2
    bits in bits 6-7 of X_k and its low 4 in nibble k % 2 of Y_{k // 2}; checked for every element of a block whose
    values are 63 - (position % 64), written through the file's ql / qh."""
    from onewell.quant.repack_qk_r8 import _q6_k_file

    q = (63 - np.arange(256) % 64).astype(np.uint8)
    raw = np.zeros(210, dtype=np.uint8)
    raw[:192] = _q6_k_file(q[None])[0]
    packed = NR.repack(raw, T.Q6_K, 1, 256, layout=QK.Q6_K_R8)[0]
    x, y = packed[18:146].reshape(4, 32), packed[146:210].reshape(2, 32)
    for e in range(256):
        p, v, s = e // 16, (e % 16) // 2, e % 2
        b = 2 * p + s
        if v < 4:
            assert x[v, b] & 63 == q[e]
        else:
            k = v - 4
            assert (x[k, b] >> 6) == q[e] >> 4 and (y[k // 2, b] >> (4 * (k % 2))) & 15 == q[e] & 15


def test_q5_k_fifth_bits_sit_where_the_header_says():
    """Element e of sub-block k has its fifth bit at bit k of the file's qh[e] and at bit 8 (e % 4) + e / 4 of the
    layout's h'_k (bytes 20 + 4k..): every single bit, and the nibbles of a Q5_K block sit as Q4_K R8's."""
    for e in range(32):
        for k in range(8):
            raw = np.zeros(176, dtype=np.uint8)
            raw[16 + e] = 1 << k
            packed = NR.repack(raw, T.Q5_K, 1, 256, layout=QK.Q5_K_R8)[0]
            h = packed[20:52].view("<u4")
            assert h[k] == 1 << (8 * (e % 4) + e // 4) and not np.delete(h, k).any()
    rng = np.random.default_rng(2)
    raw = random_k(rng, T.Q5_K, 3, 512)
    as_q4 = np.concatenate([raw.reshape(-1, 176)[:, :16], raw.reshape(-1, 176)[:, 48:]], axis=1).reshape(-1)
    np.testing.assert_array_equal(NR.repack(raw, T.Q5_K, 3, 512, layout=QK.Q5_K_R8).reshape(-1, 180)[:, 52:],
                                  NR.repack(as_q4, T.Q4_K, 3, 512, layout=QK.Q4_K_R8).reshape(-1, 148)[:, 20:])


def test_nibbles_sit_where_the_header_says():
    """Element e of sub-block k (file: nibble k % 2 of qs byte 32 (k / 2) + e) is nibble e / 16 of layout byte
    20 + 32 ((e % 16) / 4) + 4 k + e % 4, checked for every element on a block whose values are its positions."""
    raw = np.zeros(144, dtype=np.uint8)
    values = np.arange(256) % 16   # element 32k + e of the super-block gets (32k + e) % 16
    for k in range(8):
        for e in range(32):
            raw[16 + 32 * (k // 2) + e] |= values[32 * k + e] << (4 * (k % 2))
    packed = NR.repack(raw, T.Q4_K, 1, 256, layout=QK.Q4_K_R8)[0]
    for k in range(8):
        for e in range(32):
            byte = packed[20 + 32 * ((e % 16) // 4) + 4 * k + e % 4]
            assert (byte >> (4 * (e // 16))) & 15 == values[32 * k + e]


def test_iq4_xs_indices_sit_where_the_header_says():
    """Index byte t of sub-block k (file: qs[16 k + t], Q4_0's order) is layout byte 10 + 32 (t / 4) + 4 k + t % 4,
    checked for every byte of a block whose index bytes are their positions."""
    raw = np.zeros(136, dtype=np.uint8)
    raw[8:] = np.arange(128)
    packed = NR.repack(raw, T.IQ4_XS, 1, 256, layout=QK.IQ4_XS_R8)[0]
    for k in range(8):
        for t in range(16):
            assert packed[10 + 32 * (t // 4) + 4 * k + t % 4] == 16 * k + t
    assert (packed[2:10].view(np.int8) == -32).all()   # scale 0 in the file is -32


def test_twin_refuses_bad_shapes():
    with pytest.raises(ValueError, match="columns"):
        QK.row_bytes(QK.Q6_K_R8, 288)
    with pytest.raises(ValueError, match="layout"):
        QK.row_bytes(1014, 256)
    with pytest.raises(ValueError, match="bytes"):
        QK.repack_qk_r8(np.zeros(143, dtype=np.uint8), QK.Q4_K_R8, 1, 256)
    with pytest.raises(ValueError):
        NR.repack(np.zeros(210 * 2, dtype=np.uint8), T.Q6_K, 1, 288, layout=QK.Q6_K_R8)   # not 256 wide


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("wt", LAYOUTS)
@pytest.mark.parametrize("cols", COLS)
def test_matmul_on_r8_equals_the_file_matmul(path, wt, cols):
    rng = np.random.default_rng(11 * cols + int(wt))
    rows, layout = 13, LAYOUTS[wt]   # odd: six pairs from the two halves and a last row
    raw = random_k(rng, wt, rows, cols)
    packed = NR.repack(raw, wt, rows, cols, layout=layout)
    for n_vec in (1, 2, 5):
        x = rng.standard_normal((n_vec, cols)).astype(np.float32)
        original = nk.matmul(raw, wt, rows, cols, x, isa=path)
        on_r8 = NR.matmul(packed, rows, cols, x, isa=path, layout=layout)
        if path == "generic":
            np.testing.assert_array_equal(on_r8, original)
        else:
            bound = RTOL * magnitude(raw, wt, rows, cols, x)
            assert (np.abs(on_r8 - original) <= bound).all(), np.abs(on_r8 - original).max()
        for v in range(n_vec):   # a vector alone gives what it gives in the batch
            alone = NR.matmul(packed, rows, cols, x[v], isa=path, layout=layout)
            np.testing.assert_array_equal(alone, on_r8[v])


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("wt", LAYOUTS)
def test_a_rows_result_does_not_depend_on_the_calls_rows(path, wt):
    """Rows go in pairs from the two halves of a call, the odd one alone: every split gives every row the same
    floats (the executor's chunks start anywhere)."""
    rng = np.random.default_rng(4)
    rows, cols, layout = 11, 1024, LAYOUTS[wt]
    raw = random_k(rng, wt, rows, cols)
    packed = NR.repack(raw, wt, rows, cols, layout=layout)
    x = rng.standard_normal(cols).astype(np.float32)
    whole = NR.matmul(packed, rows, cols, x, isa=path, layout=layout)
    for r0, r1 in [(0, 1), (3, 4), (2, 9), (5, 11), (10, 11)]:
        part = packed[r0:r1].copy()
        np.testing.assert_array_equal(NR.matmul(part, r1 - r0, cols, x, isa=path, layout=layout), whole[r0:r1])


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("wt", LAYOUTS)
@pytest.mark.parametrize("mode", [0, 1, 2, 3])
def test_prefill_on_r8_is_the_file_types_prefill(path, wt, mode):
    """From OW_FLOAT_GEMM_MIN_VECS vectors the tile runs what the file type's AVX2 slot runs under the rows_gemm knob:
    Q4_K R8 and IQ4_XS R8 the int8 rows GEMM on panels built straight from R8 rows (modes 1-3), else rows turned
    back (the AVX2 unpack) in slabs through the file type's AVX2 GEMM: the file layout's floats on the AVX2 path in
    every mode (37 rows: a panel's missing rows); the other x86 paths run their own GEMM on the file layout, so
    there the bound of float rounding holds; on generic, bit-identical (one vector at a time on both)."""
    rng = np.random.default_rng(5 + int(wt))
    n_vec, layout = 40, LAYOUTS[wt]
    for rows, cols in ((37, 256), (150, 512), (9, 4864), (70, 2048)):   # 150 rows: slabs of 64, 64 and 22
        raw = random_k(rng, wt, rows, cols)
        packed = NR.repack(raw, wt, rows, cols, layout=layout)
        x = rng.standard_normal((n_vec, cols)).astype(np.float32)
        assert_r8_prefill_is_the_files(raw, packed, wt, rows, cols, x, path, layout, mode)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("wt", LAYOUTS)
def test_prefill_on_r8_runs_the_gemm_the_knob_names(path, wt):
    """The R8 prefill really switches with rows_gemm, as the file type's slot does: on the x86 SIMD paths (all run
    the AVX2 kernel) the exact tile or decode kernel (mode 0) and the int8 rows GEMM (modes 1-3, the same for
    K-quants) give different low bits; the generic kernel ignores the knob."""
    rng = np.random.default_rng(11)
    rows, cols = 37, 1024
    raw = random_k(rng, wt, rows, cols)
    packed = NR.repack(raw, wt, rows, cols, layout=LAYOUTS[wt])
    x = rng.standard_normal((40, cols)).astype(np.float32)
    assert_the_knob_switches(prefill_in_each_rows_gemm_mode(packed, rows, cols, x, path, LAYOUTS[wt]), path, (2, 3))


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("wt", LAYOUTS)
def test_with_the_gemm_knob_off_a_batch_runs_as_decode(path, wt):
    """_core.float_gemm(0): 70 vectors run 32 at a time through the decode kernel, each its one-vector result."""
    rng = np.random.default_rng(9)
    rows, cols, n_vec, layout = 21, 512, 70, LAYOUTS[wt]
    packed = NR.repack(random_k(rng, wt, rows, cols), wt, rows, cols, layout=layout)
    x = rng.standard_normal((n_vec, cols)).astype(np.float32)
    alone = np.stack([NR.matmul(packed, rows, cols, x[v], isa=path, layout=layout) for v in range(n_vec)])
    before = _core.float_gemm(0)
    try:
        np.testing.assert_array_equal(NR.matmul(packed, rows, cols, x, isa=path, layout=layout), alone)
    finally:
        _core.float_gemm(before)


def test_repack_argument_names_the_layouts():
    assert dict(repack_type_set({"q4_k_r8", "q5_k_r8", "q6_k_r8", "iq4_xs_r8"})) == {
        T.Q4_K: QK.Q4_K_R8, T.Q5_K: QK.Q5_K_R8, T.Q6_K: QK.Q6_K_R8, T.IQ4_XS: QK.IQ4_XS_R8}
    with pytest.raises(ValueError, match="repack"):
        repack_type_set({T.Q6_K: QK.Q4_K_R8})   # Q4_K R8 is built from Q4_K only
    with pytest.raises(UnsupportedError):
        NR.layout_for(T.Q5_K, QK.Q6_K_R8)


def test_avx2_default_follows_the_cpu_table():
    rule = bool(_core.cpu_identity()["default_r8"])
    for path in PATHS:
        chosen = nk.default_repack(path)
        assert ({"q4_k_r8", "q5_k_r8", "q6_k_r8", "iq4_xs_r8"} <= chosen) is (rule and path == "avx2")
        assert not ({"q4_k_r8", "q5_k_r8", "q6_k_r8", "iq4_xs_r8"} & chosen) or path == "avx2"


def test_plan_copies_k_matrices_to_r8():
    spec = tiny_spec("qwen2", QWEN_TYPES)   # wk Q4_K, w_gate Q5_K, wo Q6_K
    plan = build_plan(spec, repack={"q4_k_r8", "q5_k_r8", "q6_k_r8"})
    copies = [m for m in plan.matrices if m.repacked]
    assert {m.ggml_type for m in copies} == {T.Q4_K, T.Q5_K, T.Q6_K}
    assert all(m.native_type == LAYOUTS[m.ggml_type] for m in copies)
    assert all(m.row_bytes == QK.row_bytes(LAYOUTS[m.ggml_type], m.cols) for m in copies)
    q45 = sum(m.rows * m.cols // 256 for m in copies if m.ggml_type != T.Q6_K)   # super-blocks: 4 bytes more each
    assert plan.repacked["bytes"] == plan.repacked["source_bytes"] + 4 * q45


def test_plan_copies_iq4_xs_matrices_to_r8():
    spec = tiny_spec("qwen2", LOW_BIT_TYPES)   # wo and token_embd IQ4_XS
    plan = build_plan(spec, repack={"iq4_xs_r8"})
    copies = [m for m in plan.matrices if m.repacked]
    assert copies and all(m.ggml_type == T.IQ4_XS and m.native_type == QK.IQ4_XS_R8 for m in copies)
    assert all(m.row_bytes == QK.row_bytes(QK.IQ4_XS_R8, m.cols) for m in copies)
    blocks = sum(m.rows * m.cols // 256 for m in copies)   # super-blocks: 2 bytes more each (the scales)
    assert plan.repacked["bytes"] == plan.repacked["source_bytes"] + 2 * blocks


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("layout", ["q4_k_r8", "q5_k_r8", "q6_k_r8", "iq4_xs_r8"])
def test_backend_logits_with_r8(path, layout):
    # QWEN_TYPES: wk is Q4_K, w_gate Q5_K, wo Q6_K; LOW_BIT_TYPES: wo IQ4_XS
    spec = tiny_spec("qwen2", LOW_BIT_TYPES if layout == "iq4_xs_r8" else QWEN_TYPES)
    off = NativeBackend(spec, n_ctx=32, isa=path, repack=False, kv_type="f32").forward(IDS, all_logits=True)
    backend = NativeBackend(spec, n_ctx=32, isa=path, repack={layout}, kv_type="f32")
    assert backend.info()["repacked"]["matrices"] > 0
    on = backend.forward(IDS, all_logits=True)
    assert_tiny_logits_match(path, on, off)   # the bounds of test_repack.py's R16 comparison


@pytest.mark.parametrize("source", ["real", "random", "cos"])
def test_ggml_iq4_xs_encodings_on_r8(source):
    check_ggml_encoding_on_r8(T.IQ4_XS, QK.IQ4_XS_R8, source, QK.repack_qk_r8, QK.unpack_qk_r8)


# ---- a real model: Qwen2.5 Q4_K_M's ffn_down (12 Q4_K, 12 Q6_K; 4,864 columns) ------------------------------

@pytest.fixture(scope="module")
def qwen_q4km_spec(qwen_q4km_path):
    from onewell.gguf import GGUFReader
    from onewell.models.registry import load_spec

    return load_spec(GGUFReader(qwen_q4km_path))


@pytest.mark.model
@pytest.mark.parametrize("wt", REAL)
def test_real_tensors_repack_to_the_twins_bytes(wt, qwen_q4km_spec):
    layout = REAL[wt]
    mats = [w for layer in qwen_q4km_spec.layers for w in layer.tensors.values() if w.ggml_type == wt]
    assert mats
    for w in mats[:3]:
        rows, cols = w.shape
        rows = min(rows, 301)
        raw = w.raw.reshape(-1)[:rows * row_nbytes(wt, cols)]
        packed = NR.repack(raw, wt, rows, cols, layout=layout)
        np.testing.assert_array_equal(packed, QK.repack_qk_r8(raw, layout, rows, cols), err_msg=w.name)
        x = np.random.default_rng(cols).standard_normal((3, cols)).astype(np.float32)
        np.testing.assert_array_equal(NR.matmul(packed, rows, cols, x, isa="generic", layout=layout),
                                      nk.matmul(raw, wt, rows, cols, x, isa="generic"))
        for path in PATHS:
            got = NR.matmul(packed, rows, cols, x, isa=path, layout=layout)
            want = nk.matmul(raw, wt, rows, cols, x, isa=path)
            assert (np.abs(got - want) <= RTOL * magnitude(raw, wt, rows, cols, x)).all(), (w.name, path)


@pytest.mark.model
def test_real_model_with_r8_keeps_its_tokens(qwen_q4km_spec):
    """Generic path: bit-identical logits with both K R8 layouts. Default path: as test_repack.py's R16 comparison."""
    spec = qwen_q4km_spec
    prompt = [t % spec.config.n_vocab for t in PROMPT]
    generic = [NativeBackend(spec, n_ctx=16, threads=2, isa="generic", repack=r).forward(prompt[:3], all_logits=True)
               for r in (False, {"q4_k_r8", "q6_k_r8"})]
    np.testing.assert_array_equal(generic[0], generic[1])
    path = nk.default_path()
    other = [p for p in PATHS if p != path][-1] if len(PATHS) > 1 else path
    off = NativeBackend(spec, n_ctx=64, threads=2, isa=path, repack=False)
    on = NativeBackend(spec, n_ctx=64, threads=2, isa=path, repack={"q4_k_r8", "q6_k_r8"})
    assert on.info()["repacked"]["matrices"] == 24   # the 12 Q4_K and 12 Q6_K ffn_down
    lo = off.forward(prompt, all_logits=True)
    ln = on.forward(prompt, all_logits=True)
    baseline = NativeBackend(spec, n_ctx=64, threads=2, isa=other, repack=False).forward(prompt, all_logits=True)
    assert_layout_keeps_the_model(off, on, lo, ln, baseline)
