"""Q4_1 R8, Q5_0 R8, Q4_0 R8 and IQ4_NL R8, the load-time layouts of Q4_1, Q5_0, Q4_0 and IQ4_NL for the AVX2 path of
AMD family 0x17 (onewell.quant.repack_q4_r8, _native/kernels/q4_r8.h, q4_r8.c, vec_dot_q4_r8_avx2.c).

What must hold, and how tight:
- the C repack writes exactly the bytes of its numpy twin (random tensors, SmolLM2's Q4_1 and Qwen2.5 Q4_K_M's Q5_0
  tensors; Q4_0 on random data and a random model only: no real Q4_0 file is among the tests' models; IQ4_NL on
  random data and ggml's own encodings of SmolLM2 rows, random and cosine inputs, tests/data/ggml_codecs.npz) and is
  lossless; Q5_0's fifth-bit permutation is the one q4_r8.h describes;
- a matmul on R8 computes the file type's exact integer block dots with the same scale products (IQ4_NL: of its
  codebook values, whose products with the activations reach 2 x 127 x 127 per pair, so the AVX2 kernel widens every
  vpmaddubsw result): on the generic path in the same order (bit-identical); the AVX2 decode kernel adds them in 8
  lanes: |diff| <= 1e-5 * M,
  M = |x_hat| @ |W| (float32 summation; measured ~2e-7 M), on every tail size;
- from 32 vectors the AVX2 tile turns rows back into the file's blocks for the file type's GEMM: bit-identical to
  the file layout's matmul on every x86 path that falls back to it (a wrong unpack changes the floats);
- each vector's result does not depend on how many vectors share the call below the GEMM, nor a row's on how the
  call's rows are split;
- the plan's copies, the repack argument's names and the per-CPU default; real-model logits within test_repack's
  bounds and the same greedy tokens.
"""
from __future__ import annotations

import numpy as np
import pytest
from conftest import DATA
from test_native_backend import IDS, tiny_spec
from test_repack import (PROMPT, R16_TYPES, assert_layout_keeps_the_model, assert_r8_prefill_is_the_files,
                         assert_the_knob_switches, assert_tiny_logits_match, magnitude, prefill_in_each_rows_gemm_mode,
                         random_weight)
from test_repack_q4_1 import random_q4_1

from onewell._native import _core
from onewell.errors import UnsupportedError
from onewell.gguf.constants import GGMLType, row_nbytes
from onewell.quant import repack_q4_r8 as Q4R8
from onewell.quant.repack_r8 import Q8_0_R8
from onewell.runtime import native_kernels as nk
from onewell.runtime import native_repack as NR
from onewell.runtime.native import NativeBackend
from onewell.runtime.native_types import layout_sources, type_traits
from onewell.runtime.plan import build_plan, repack_type_set

T = GGMLType
PATHS = nk.available_paths()
LAYOUTS = {T.Q4_1: Q4R8.Q4_1_R8, T.Q5_0: Q4R8.Q5_0_R8, T.Q4_0: Q4R8.Q4_0_R8, T.IQ4_NL: Q4R8.IQ4_NL_R8}
# 1 block (a lone tail of 1); 4 (a tail of 4, read in place); 9 = one group + 1; 18 (SmolLM2's 576: 2 groups + 2);
# 28 (Qwen's 896: 3 groups + 4); 48 (SmolLM2's 1536: 6 groups); 152 (Qwen's 4864); 37, 14, 15, 11 (tails of 5, 6, 7
# and 3): every tail size, on 128-bit lanes (m <= 4) and as a group (m > 4)
COLS = [32, 128, 288, 576, 896, 1536, 4864, 1184, 448, 480, 352]
RTOL = 1e-5


def weight(rng, wt, rows, cols):
    return random_q4_1(rng, rows, cols) if wt == T.Q4_1 else random_weight(rng, wt, rows, cols)


def test_layout_rows_in_the_type_table():
    for wt, layout in LAYOUTS.items():
        row = type_traits()[layout]
        assert row.name == f"{wt.name.lower()}_r8" and row.repacked and row.repack_from == wt
        assert row.act_type == type_traits()[int(wt)].act_type and row.block_bytes == row_nbytes(wt, 32)
        assert layout_sources()[layout] == wt and row.repack_to is None
        assert type_traits()[int(wt)].repack_to != layout   # R16 stays the type's layout unless R8 is named


def test_fifth_bit_permutation_is_the_documented_one():
    """h' bit 8b + t is qh bit 4t + b (q4_r8.h), checked on every single bit and on random words through one Q5_0
    block (whose row is one group of one block: d, h', then the 16 nibble bytes)."""
    rng = np.random.default_rng(3)
    for i in range(32):
        raw = np.zeros(22, dtype=np.uint8)
        raw[2:6] = np.array([1 << i], dtype="<u4").view(np.uint8)
        packed = Q4R8.repack_q4_r8(raw, Q4R8.Q5_0_R8, 1, 32)[0]
        t, b = divmod(i, 4)
        assert packed[2:6].view("<u4")[0] == 1 << (8 * b + t)
        np.testing.assert_array_equal(NR.repack(raw, T.Q5_0, 1, 32, layout=Q4R8.Q5_0_R8)[0], packed)
    raw = random_weight(rng, T.Q5_0, 50, 32)
    np.testing.assert_array_equal(NR.repack(raw, T.Q5_0, 50, 32, layout=Q4R8.Q5_0_R8),
                                  Q4R8.repack_q4_r8(raw, Q4R8.Q5_0_R8, 50, 32))


@pytest.mark.parametrize("wt", LAYOUTS)
@pytest.mark.parametrize("cols", COLS)
def test_native_repack_writes_the_numpy_twins_bytes_and_is_lossless(wt, cols):
    rng = np.random.default_rng(cols)
    rows, layout = 7, LAYOUTS[wt]
    raw = weight(rng, wt, rows, cols)
    packed = NR.repack(raw, wt, rows, cols, layout=layout)
    assert packed.shape == (rows, Q4R8.row_bytes(layout, cols)) and Q4R8.row_bytes(layout, cols) == row_nbytes(wt, cols)
    np.testing.assert_array_equal(packed, Q4R8.repack_q4_r8(raw, layout, rows, cols))
    np.testing.assert_array_equal(Q4R8.unpack_q4_r8(packed, layout, rows, cols), raw)
    # a group starts with its blocks' fp16 scales d: block 0's are the row's first two bytes
    np.testing.assert_array_equal(packed[:, :2], raw.reshape(rows, -1, row_nbytes(wt, 32))[:, 0, :2])


def test_twin_refuses_bad_shapes():
    with pytest.raises(ValueError, match="columns"):
        Q4R8.row_bytes(Q4R8.Q4_1_R8, 48)
    with pytest.raises(ValueError, match="layout"):
        Q4R8.row_bytes(1011, 64)
    with pytest.raises(ValueError):
        Q4R8.repack_q4_r8(np.zeros(19, dtype=np.uint8), Q4R8.Q4_1_R8, 1, 32)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("wt", LAYOUTS)
@pytest.mark.parametrize("cols", COLS)
def test_matmul_on_r8_equals_the_file_matmul(path, wt, cols):
    rng = np.random.default_rng(11 * cols + int(wt))
    rows, layout = 13, LAYOUTS[wt]   # odd: six pairs from the two halves and a last row
    raw = weight(rng, wt, rows, cols)
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
@pytest.mark.parametrize("wt", [T.Q8_0, *LAYOUTS])
@pytest.mark.parametrize("cols", [16416, 18944])
def test_rows_longer_than_the_stack_vector_keep_the_kernel(path, wt, cols):
    """Past 16,384 columns (one vector's stack buffer; 18,944: Qwen2.5-7B's ffn_down) every R8 layout, Q8_0's too,
    interleaves its vectors on the heap and runs its own kernel (until 2026-12-06 the generic one): the file
    layout's results within the bound, generic bit for bit, a vector alone as in its batch, and with the GEMM knob
    off a batch past 32 vectors as its vectors one at a time."""
    rng = np.random.default_rng(7)
    rows, layout = 5, LAYOUTS.get(wt, Q8_0_R8)
    raw = weight(rng, wt, rows, cols)
    packed = NR.repack(raw, wt, rows, cols, layout=layout)
    x = rng.standard_normal((3, cols)).astype(np.float32)
    on_r8 = NR.matmul(packed, rows, cols, x, isa=path, layout=layout)
    original = nk.matmul(raw, wt, rows, cols, x, isa=path)
    if path == "generic":
        np.testing.assert_array_equal(on_r8, original)
    else:   # its own kernel, not the generic one: another summation order, other low bits (the old fallback's tell)
        assert not np.array_equal(on_r8, NR.matmul(packed, rows, cols, x, isa="generic", layout=layout))
    assert (np.abs(on_r8 - original) <= RTOL * magnitude(raw, wt, rows, cols, x)).all()
    np.testing.assert_array_equal(NR.matmul(packed, rows, cols, x[1], isa=path, layout=layout), on_r8[1])
    many = rng.standard_normal((34, cols)).astype(np.float32)
    before = _core.float_gemm(0)
    try:
        batch = NR.matmul(packed, rows, cols, many, isa=path, layout=layout)
    finally:
        _core.float_gemm(before)
    for v in (0, 31, 32, 33):
        np.testing.assert_array_equal(batch[v], NR.matmul(packed, rows, cols, many[v], isa=path, layout=layout))


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("wt", LAYOUTS)
@pytest.mark.parametrize("cols", [576, 896, 1184])
def test_a_rows_result_does_not_depend_on_the_calls_rows(path, wt, cols):
    """Rows go in pairs from the two halves of a call, the odd one alone, the call's last row's tail copied: every
    split gives every row the same floats (the executor's chunks start anywhere)."""
    rng = np.random.default_rng(cols)
    rows, layout = 11, LAYOUTS[wt]
    raw = weight(rng, wt, rows, cols)
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
    """From OW_FLOAT_GEMM_MIN_VECS vectors the R8 tile runs what the file type's AVX2 slot runs under the rows_gemm
    knob: its int8 rows GEMM on panels built straight from R8 rows (modes 1-3; IQ4_NL's float GEMM at 3), else rows
    turned back (full groups with AVX2, a partial one with the portable code) in slabs through the file type's exact
    tile: the same floats as the file layout on the AVX2 path in every mode (37 rows: a panel's missing rows; 1,184
    columns: a last group of 5 blocks). The other x86 paths fall back to that tile while the file layout runs their
    own GEMMs, so there the bound of float rounding holds; on generic, bit-identical (one vector at a time on both)."""
    rng = np.random.default_rng(5 + int(wt))
    layout, n_vec = LAYOUTS[wt], 40
    for rows, cols in ((37, 896), (150, 576), (9, 1184), (70, 4864)):   # 150 rows: slabs of 64, 64 and 22
        raw = weight(rng, wt, rows, cols)
        packed = NR.repack(raw, wt, rows, cols, layout=layout)
        x = rng.standard_normal((n_vec, cols)).astype(np.float32)
        assert_r8_prefill_is_the_files(raw, packed, wt, rows, cols, x, path, layout, mode)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("wt", LAYOUTS)
def test_prefill_on_r8_runs_the_gemm_the_knob_names(path, wt):
    """The R8 prefill really switches with rows_gemm, as the file type's slot does: on the x86 SIMD paths (all run
    the AVX2 kernel) the exact tile (mode 0) and the int8 rows GEMM (modes 1, 2; IQ4_NL's float GEMM at 3) give
    different low bits; the generic kernel ignores the knob."""
    rng = np.random.default_rng(11)
    rows, cols = 37, 1184
    raw = weight(rng, wt, rows, cols)
    packed = NR.repack(raw, wt, rows, cols, layout=LAYOUTS[wt])
    x = rng.standard_normal((40, cols)).astype(np.float32)
    out = prefill_in_each_rows_gemm_mode(packed, rows, cols, x, path, LAYOUTS[wt])
    assert_the_knob_switches(out, path)
    if path in ("avx2", "avx2-vnni", "avx512") and _core.float_gemm(-1):
        assert np.array_equal(out[1], out[3]) is (wt != T.IQ4_NL)
    elif path in ("generic", "neon", "neon-dotprod"):
        np.testing.assert_array_equal(out[0], out[3])


def test_repack_argument_names_the_layouts():
    assert dict(repack_type_set({"q4_1_r8", "q5_0_r8"})) == {T.Q4_1: Q4R8.Q4_1_R8, T.Q5_0: Q4R8.Q5_0_R8}
    both = repack_type_set(["q5_0_r8", "q8_0", "q4_1"])   # a named layout wins; the other types keep their R16
    assert both[T.Q5_0] == Q4R8.Q5_0_R8 and both[T.Q4_1] == type_traits()[int(T.Q4_1)].repack_to
    assert dict(repack_type_set(both)) == dict(both)
    with pytest.raises(ValueError, match="repack"):
        repack_type_set({T.Q8_0: Q4R8.Q5_0_R8})   # Q5_0 R8 is built from Q5_0 only
    with pytest.raises(UnsupportedError):
        NR.layout_for(T.Q4_1, Q4R8.Q5_0_R8)


def test_plan_copies_q5_0_matrices_to_r8():
    spec = tiny_spec("qwen2", R16_TYPES)
    plan = build_plan(spec, repack={"q5_0_r8"})
    copies = [m for m in plan.matrices if m.repacked]
    assert copies and all(m.ggml_type == T.Q5_0 and m.native_type == Q4R8.Q5_0_R8 for m in copies)
    assert all(m.row_bytes == Q4R8.row_bytes(Q4R8.Q5_0_R8, m.cols) for m in copies)
    assert plan.repacked["bytes"] == plan.repacked["source_bytes"] > 0   # the same bytes as the file


Q4_0_TYPES = dict(R16_TYPES, wq=T.Q4_0, wv=T.Q4_0, w_gate=T.Q4_0, w_down=T.Q4_0)
IQ4_NL_TYPES = dict(R16_TYPES, wq=T.IQ4_NL, wv=T.IQ4_NL, w_gate=T.IQ4_NL, w_down=T.IQ4_NL)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("layout", ["q5_0_r8", "q4_0_r8", "iq4_nl_r8"])
def test_backend_logits_with_r8(path, layout):
    spec = tiny_spec("qwen2", IQ4_NL_TYPES if layout == "iq4_nl_r8" else Q4_0_TYPES)
    off = NativeBackend(spec, n_ctx=32, isa=path, repack=False, kv_type="f32").forward(IDS, all_logits=True)
    backend = NativeBackend(spec, n_ctx=32, isa=path, repack={layout}, kv_type="f32")
    assert backend.info()["repacked"]["matrices"] > 0
    on = backend.forward(IDS, all_logits=True)
    assert_tiny_logits_match(path, on, off)   # the bounds of test_repack.py's R16 comparison


def test_avx2_default_follows_the_cpu_table():
    rule = bool(_core.cpu_identity()["default_r8"])
    for path in PATHS:
        chosen = nk.default_repack(path)
        assert ({"q4_1_r8", "q5_0_r8", "q4_0_r8", "iq4_nl_r8"} <= chosen) is (rule and path == "avx2")
        assert not ({"q4_1_r8", "q5_0_r8", "q4_0_r8", "iq4_nl_r8"} & chosen) or path == "avx2"


# ---- real models ----------------------------------------------------------------------------------------

def _spec(path):
    from onewell.gguf import GGUFReader
    from onewell.models.registry import load_spec

    return load_spec(GGUFReader(path))


@pytest.fixture(scope="module")
def smollm_spec(smollm_path):
    return _spec(smollm_path)


@pytest.fixture(scope="module")
def qwen_q4km_spec(qwen_q4km_path):
    return _spec(qwen_q4km_path)


def _real_matrices(spec, wt):
    return [w for layer in spec.layers[:4] for w in layer.tensors.values() if w.ggml_type == wt and len(w.shape) == 2]


@pytest.mark.model
@pytest.mark.parametrize("wt", [T.Q4_1, T.Q5_0])
def test_real_tensors_repack_to_the_twins_bytes(wt, smollm_spec, qwen_q4km_spec):
    """SmolLM2's Q4_1 (576 columns: two groups and a tail of 2; 1,536: six groups) and Qwen2.5 Q4_K_M's Q5_0"""
    layout = LAYOUTS[wt]
    mats = _real_matrices(smollm_spec if wt == T.Q4_1 else qwen_q4km_spec, wt)
    assert mats
    for w in mats[:4]:
        rows, cols = w.shape
        rows = min(rows, 301)
        raw = w.raw.reshape(-1)[:rows * row_nbytes(wt, cols)]
        packed = NR.repack(raw, wt, rows, cols, layout=layout)
        np.testing.assert_array_equal(packed, Q4R8.repack_q4_r8(raw, layout, rows, cols), err_msg=w.name)
        x = np.random.default_rng(cols).standard_normal((3, cols)).astype(np.float32)
        np.testing.assert_array_equal(NR.matmul(packed, rows, cols, x, isa="generic", layout=layout),
                                      nk.matmul(raw, wt, rows, cols, x, isa="generic"))
        for path in PATHS:
            got = NR.matmul(packed, rows, cols, x, isa=path, layout=layout)
            want = nk.matmul(raw, wt, rows, cols, x, isa=path)
            assert (np.abs(got - want) <= RTOL * magnitude(raw, wt, rows, cols, x)).all(), (w.name, path)


def check_ggml_encoding_on_r8(wt, layout, source, repack_twin, unpack_twin):
    """ggml's own encoding of one of tests/data/ggml_codecs.npz's inputs (SmolLM2's first 8 ffn_down rows, 1,536
    columns; 16 x 512 random; 1 x 4,096 cosine) in type wt, on its R8 layout: the twin's bytes, lossless, generic bit
    for bit, every path within the bound, prefill on AVX2 bit for bit (also used by test_repack_qk_r8.py)."""
    data = np.load(DATA / "ggml_codecs.npz")
    rows, cols = data[f"input_{source}"].shape
    raw = data[f"{wt.name}_{source}_bytes"]
    assert raw.size == rows * row_nbytes(wt, cols)
    packed = NR.repack(raw, wt, rows, cols, layout=layout)
    np.testing.assert_array_equal(packed, repack_twin(raw, layout, rows, cols))
    np.testing.assert_array_equal(unpack_twin(packed, layout, rows, cols), raw)
    rng = np.random.default_rng(cols)
    for n_vec in (1, 3, 33):
        x = rng.standard_normal((n_vec, cols)).astype(np.float32)
        np.testing.assert_array_equal(NR.matmul(packed, rows, cols, x, isa="generic", layout=layout),
                                      nk.matmul(raw, wt, rows, cols, x, isa="generic"))
        bound = RTOL * magnitude(raw, wt, rows, cols, x)
        for path in PATHS:
            got = NR.matmul(packed, rows, cols, x, isa=path, layout=layout)
            want = nk.matmul(raw, wt, rows, cols, x, isa=path)
            assert (np.abs(got - want) <= bound).all(), (path, n_vec, np.abs(got - want).max())
            if path == "avx2" and n_vec >= 32:
                np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("source", ["real", "random", "cos"])
def test_ggml_iq4_nl_encodings_on_r8(source):
    check_ggml_encoding_on_r8(T.IQ4_NL, Q4R8.IQ4_NL_R8, source, Q4R8.repack_q4_r8, Q4R8.unpack_q4_r8)


@pytest.mark.model
@pytest.mark.parametrize("name", ["smollm", "qwen_q4km"])
def test_real_model_with_r8_keeps_its_tokens(name, smollm_spec, qwen_q4km_spec):
    """Generic path: bit-identical logits with R8. Default path: as test_repack.py's R16 comparison."""
    spec, layout = (smollm_spec, "q4_1_r8") if name == "smollm" else (qwen_q4km_spec, "q5_0_r8")
    prompt = [t % spec.config.n_vocab for t in PROMPT]
    generic = [NativeBackend(spec, n_ctx=16, threads=2, isa="generic", repack=r).forward(prompt[:3], all_logits=True)
               for r in (False, {layout})]
    np.testing.assert_array_equal(generic[0], generic[1])
    path = nk.default_path()
    other = [p for p in PATHS if p != path][-1] if len(PATHS) > 1 else path
    off = NativeBackend(spec, n_ctx=64, threads=2, isa=path, repack=False)
    on = NativeBackend(spec, n_ctx=64, threads=2, isa=path, repack={layout})
    assert on.info()["repacked"]["bytes"] == on.info()["repacked"]["source_bytes"] > 0
    lo = off.forward(prompt, all_logits=True)
    ln = on.forward(prompt, all_logits=True)
    baseline = NativeBackend(spec, n_ctx=64, threads=2, isa=other, repack=False).forward(prompt, all_logits=True)
    assert_layout_keeps_the_model(off, on, lo, ln, baseline)
