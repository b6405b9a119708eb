"""Q8_0 R8, the load-time layout of Q8_0 for the AVX2 path of AMD family 0x17 (onewell.quant.repack_r8,
_native/kernels/q8_0_r8.h, vec_dot_q8_0_r8_avx2.c).

What must hold, and how tight:
- the C repack writes exactly the bytes of its numpy twin (random tensors and Qwen2.5-0.5B Q8_0's) and is lossless;
- a matmul on R8 computes the Q8_0 matmul's exact integer block dots times the same scale products: on the generic
  path in the same order (bit-identical); the AVX2 decode kernel adds them in 8 lanes: |diff| <= 1e-5 * M,
  M = |x_hat| @ |W| (float32 summation; measured ~2e-7 M); the float GEMM (32+ vectors) builds the same panels
  as the Q8_0 GEMM's: bit-identical to it;
- each vector's result does not depend on how many vectors share the call, below the GEMM (bit-identical), and a
  row's result not on whether it is read alone, in a pair or as the call's odd row (any row count);
- the backend gives the logits and greedy tokens of the file layout within the bounds of test_repack.py, and the
  AVX2 path repacks Q8_0 to R8 by default exactly where the C table says (_core.cpu_identity).
"""
from __future__ import annotations

import numpy as np
import pytest
from test_native_backend import IDS, tiny_spec
from test_repack import (PROMPT, R16_TYPES, assert_layout_keeps_the_model, assert_the_knob_switches,
                         assert_tiny_logits_match, magnitude, prefill_in_each_rows_gemm_mode, random_weight)

from onewell._native import _core
from onewell.errors import UnsupportedError
from onewell.gguf.constants import GGMLType, row_nbytes
from onewell.quant import repack_r8 as R8
from onewell.runtime import native_kernels as nk
from onewell.runtime import native_repack as NR
from onewell.runtime.native import NativeBackend
from onewell.runtime.native_types import layout_sources, type_traits
from onewell.runtime.plan import build_plan, repack_type_set

T = GGMLType
PATHS = nk.available_paths()
# 1 block (a lone tail of 1); 4 (a tail of 4, read in place); 9 = one group + 1; 18 (SmolLM2's 576: 2 groups + 2);
# 28 (Qwen's 896: 3 groups + the in-place tail of 4); 152 (Qwen's 4864: 19 groups); 37, 14, 15, 11 (tails of 5, 6, 7
# and 3): every tail size, on 128-bit lanes (m <= 4) and as a group (m > 4)
COLS = [32, 128, 288, 576, 896, 4864, 1184, 448, 480, 352]
RTOL = 1e-5


def test_layout_row_in_the_type_table():
    row = type_traits()[R8.Q8_0_R8]
    assert row.name == "q8_0_r8" and row.repacked and row.repack_from == T.Q8_0
    assert row.act_type == T.Q8_0 and row.block_bytes == 34 and row.repack_to is None
    assert layout_sources()[R8.Q8_0_R8] == T.Q8_0
    assert type_traits()[int(T.Q8_0)].repack_to != R8.Q8_0_R8   # R16 stays Q8_0's layout unless R8 is named


@pytest.mark.parametrize("cols", COLS)
def test_native_repack_writes_the_numpy_twins_bytes_and_is_lossless(cols):
    rng = np.random.default_rng(cols)
    rows = 7
    raw = random_weight(rng, T.Q8_0, rows, cols)
    packed = NR.repack(raw, T.Q8_0, rows, cols, layout=R8.Q8_0_R8)
    assert packed.shape == (rows, R8.row_bytes(cols)) and R8.row_bytes(cols) == row_nbytes(T.Q8_0, cols)
    np.testing.assert_array_equal(packed, R8.repack_q8_0_r8(raw, rows, cols))
    np.testing.assert_array_equal(R8.unpack_q8_0_r8(packed, rows, cols), raw)
    # the group of block g starts with its scales: block 0's fp16 scale is the row's first two bytes
    np.testing.assert_array_equal(packed[:, :2], raw.reshape(rows, -1, 34)[:, 0, :2])


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("cols", COLS)
def test_matmul_on_r8_equals_the_q8_0_matmul(path, cols):
    rng = np.random.default_rng(11 * cols)
    rows = 13   # odd: six pairs from the two halves and a last row
    raw = random_weight(rng, T.Q8_0, rows, cols)
    packed = NR.repack(raw, T.Q8_0, rows, cols, layout=R8.Q8_0_R8)
    for n_vec in (1, 2, 5):
        x = rng.standard_normal((n_vec, cols)).astype(np.float32)
        original = nk.matmul(raw, T.Q8_0, rows, cols, x, isa=path)
        on_r8 = NR.matmul(packed, rows, cols, x, isa=path, layout=R8.Q8_0_R8)
        if path == "generic":
            np.testing.assert_array_equal(on_r8, original)
        else:
            bound = RTOL * magnitude(raw, T.Q8_0, rows, cols, x)
            assert (np.abs(on_r8 - original) <= bound).all(), np.abs(on_r8 - original).max()
        for v in range(n_vec):   # a vector alone gives what it gives in the batch
            alone = NR.matmul(packed, rows, cols, x[v], isa=path, layout=R8.Q8_0_R8)
            np.testing.assert_array_equal(alone, on_r8[v])


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("cols", [896, 1184])
def test_a_rows_result_does_not_depend_on_the_calls_rows(path, cols):
    """Rows go in pairs from the two halves of a call, the odd one alone: every split gives every row the same
    floats (the executor's chunks start anywhere)."""
    rng = np.random.default_rng(cols)
    rows = 11
    raw = random_weight(rng, T.Q8_0, rows, cols)
    packed = NR.repack(raw, T.Q8_0, rows, cols, layout=R8.Q8_0_R8)
    x = rng.standard_normal(cols).astype(np.float32)
    whole = NR.matmul(packed, rows, cols, x, isa=path, layout=R8.Q8_0_R8)
    stride = R8.row_bytes(cols)
    for r0, r1 in [(0, 1), (3, 4), (2, 9), (5, 11), (10, 11)]:
        part = packed.reshape(rows, stride)[r0:r1].copy()
        np.testing.assert_array_equal(NR.matmul(part, r1 - r0, cols, x, isa=path, layout=R8.Q8_0_R8), whole[r0:r1])


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("mode", [0, 1, 2, 3])
def test_prefill_gemm_on_r8_is_the_q8_0_gemm(path, mode):
    """From OW_FLOAT_GEMM_MIN_VECS vectors the AVX2 tile (the other x86 paths fall back to it) runs what the Q8_0
    layout's AVX2 prefill runs under the rows_gemm knob: the float GEMM on panels made from R8 rows (modes 0, 3), or
    the int8 rows GEMM on slabs of rows turned back into Q8_0 blocks (modes 1, 2; a last group of 5 blocks at 1,184
    columns): on the AVX2 path the Q8_0 layout's floats exactly in every mode, on AVX2 + AVX-VNNI where both run
    the float GEMM (mode 0); on every path within the float-rounding bound of the Q8_0 matmul."""
    rng = np.random.default_rng(5)
    rows, n_vec = 37, 40
    for cols in (896, 1184, 4864):
        raw = random_weight(rng, T.Q8_0, rows, cols)
        packed = NR.repack(raw, T.Q8_0, rows, cols, layout=R8.Q8_0_R8)
        x = rng.standard_normal((n_vec, cols)).astype(np.float32)
        before = _core.rows_gemm(mode)
        try:
            original = nk.matmul(raw, T.Q8_0, rows, cols, x, isa=path)
            on_r8 = NR.matmul(packed, rows, cols, x, isa=path, layout=R8.Q8_0_R8)
        finally:
            _core.rows_gemm(before)
        if path == "generic" or (_core.float_gemm(-1) and (path == "avx2" or (path == "avx2-vnni" and mode == 0))):
            np.testing.assert_array_equal(on_r8, original)
        bound = RTOL * magnitude(raw, T.Q8_0, rows, cols, x)
        assert (np.abs(on_r8 - original) <= bound).all(), np.abs(on_r8 - original).max()


@pytest.mark.parametrize("path", PATHS)
def test_prefill_on_r8_runs_the_gemm_the_knob_names(path):
    """The R8 prefill really switches GEMMs with rows_gemm, as Q8_0's does: on the x86 SIMD paths (all run the AVX2
    kernel) the int8 rows GEMM (modes 1, 2: the signs by vpsignb or xor + sub, the same exact block sums) and the
    float GEMM (modes 0, 3) give different low bits; the generic kernel ignores the knob."""
    rng = np.random.default_rng(9)
    rows, cols = 37, 1184
    raw = random_weight(rng, T.Q8_0, rows, cols)
    packed = NR.repack(raw, T.Q8_0, rows, cols, layout=R8.Q8_0_R8)
    x = rng.standard_normal((40, cols)).astype(np.float32)
    out = prefill_in_each_rows_gemm_mode(packed, rows, cols, x, path, R8.Q8_0_R8)
    assert_the_knob_switches(out, path)
    np.testing.assert_array_equal(out[0], out[3])


def test_repack_argument_names_the_layout():
    assert dict(repack_type_set({"q8_0_r8"})) == {T.Q8_0: R8.Q8_0_R8}
    # a layout named wins over its source type's R16, whatever the order; the other types keep theirs
    both = repack_type_set(["q8_0_r8", "q8_0", "q4_1"])
    assert both[T.Q8_0] == R8.Q8_0_R8 and both[T.Q4_1] == type_traits()[int(T.Q4_1)].repack_to
    assert dict(repack_type_set(both)) == dict(both)   # a resolved argument goes through unchanged
    with pytest.raises(ValueError, match="repack"):
        repack_type_set({T.Q5_0: R8.Q8_0_R8})   # R8 is built from Q8_0 only
    with pytest.raises(ValueError, match="repack"):
        repack_type_set(["q3_k_r8"])   # no such layout
    with pytest.raises(UnsupportedError):
        NR.layout_for(T.Q5_0, R8.Q8_0_R8)


def test_plan_copies_q8_0_matrices_to_r8():
    spec = tiny_spec("llama", R16_TYPES)
    plan = build_plan(spec, repack={"q8_0_r8"})
    embd, *rest = plan.matrices
    assert not embd.repacked
    for m in rest:
        if m.ggml_type == T.Q8_0:
            assert m.repacked and m.native_type == R8.Q8_0_R8 and m.row_bytes == R8.row_bytes(m.cols)
        else:
            assert not m.repacked
    assert plan.repacked["bytes"] == plan.repacked["source_bytes"] > 0   # the same bytes as the file


@pytest.mark.parametrize("path", PATHS)
def test_backend_logits_with_r8(path):
    spec = tiny_spec("llama", R16_TYPES)
    off = NativeBackend(spec, n_ctx=32, isa=path, repack=False, kv_type="f32").forward(IDS, all_logits=True)
    backend = NativeBackend(spec, n_ctx=32, isa=path, repack={"q8_0_r8"}, kv_type="f32")
    on = backend.forward(IDS, all_logits=True)
    assert backend.info()["repacked"]["matrices"] > 0
    assert_tiny_logits_match(path, on, off)   # the bounds of test_repack.py's R16 comparison


def test_avx2_default_follows_the_cpu_table():
    rule = bool(_core.cpu_identity()["default_r8"])
    ident = _core.cpu_identity()
    # AMD family 0x17 (perf-log 42) and Zen 3, family 0x19 without AVX-512 (46)
    zen3 = ident["family"] == 0x19 and not _core.cpu_features()["avx512f"]
    assert rule == (ident["vendor"] == "amd" and (ident["family"] == 0x17 or zen3))
    if "avx2" in PATHS:
        assert ("q8_0_r8" in nk.default_repack("avx2")) is rule
        # batch_exact answers from the layout a backend on that path uses: R8 and Q8_0 share float_gemm_from
        assert nk.batch_exact(T.Q8_0, 40, isa="avx2") == nk.batch_exact(T.Q8_0, 40, isa="avx2", repacked=False)
    for path in PATHS:
        if path != "avx2":
            assert "q8_0_r8" not in nk.default_repack(path)


# ---- a real model ---------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def qwen_q8_0_spec(qwen_q8_0_path):
    from onewell.gguf import GGUFReader
    from onewell.models.registry import load_spec

    return load_spec(GGUFReader(qwen_q8_0_path))


@pytest.mark.model
def test_real_tensors_repack_to_the_twins_bytes(qwen_q8_0_spec):
    """Qwen2.5-Coder-0.5B Q8_0: 896 columns (three groups and the in-place tail of 4) and 4,864 (19 groups)"""
    layer = qwen_q8_0_spec.layers[5]
    for w in (layer["wq"], layer["w_up"], layer["w_down"]):
        rows, cols = w.shape
        rows = min(rows, 301)
        raw = w.raw.reshape(-1)[:rows * row_nbytes(T.Q8_0, cols)]
        packed = NR.repack(raw, T.Q8_0, rows, cols, layout=R8.Q8_0_R8)
        np.testing.assert_array_equal(packed, R8.repack_q8_0_r8(raw, rows, cols), err_msg=w.name)
        x = np.random.default_rng(cols).standard_normal((3, cols)).astype(np.float32)
        np.testing.assert_array_equal(NR.matmul(packed, rows, cols, x, isa="generic", layout=R8.Q8_0_R8),
                                      nk.matmul(raw, T.Q8_0, rows, cols, x, isa="generic"))
        for path in PATHS:
            got = NR.matmul(packed, rows, cols, x, isa=path, layout=R8.Q8_0_R8)
            want = nk.matmul(raw, T.Q8_0, rows, cols, x, isa=path)
            assert (np.abs(got - want) <= RTOL * magnitude(raw, T.Q8_0, rows, cols, x)).all(), (w.name, path)


@pytest.mark.model
def test_real_model_with_r8_keeps_its_tokens(qwen_q8_0_spec):
    """Generic path: bit-identical logits with R8. Default path: as test_repack.py's R16 comparison, no further from
    the file layout than another kernel path is, every clear top-1 kept and the same greedy tokens."""
    spec = qwen_q8_0_spec
    generic = [NativeBackend(spec, n_ctx=16, threads=2, isa="generic", repack=r).forward(PROMPT[:3], all_logits=True)
               for r in (False, {"q8_0_r8"})]
    np.testing.assert_array_equal(generic[0], generic[1])
    path = nk.default_path()
    other = [p for p in PATHS if p != path][-1] if len(PATHS) > 1 else path
    off = NativeBackend(spec, n_ctx=64, threads=2, isa=path, repack=False)
    on = NativeBackend(spec, n_ctx=64, threads=2, isa=path, repack={"q8_0_r8"})
    assert on.info()["repacked"]["bytes"] == on.info()["repacked"]["source_bytes"] > 0
    lo = off.forward(PROMPT, all_logits=True)
    ln = on.forward(PROMPT, all_logits=True)
    baseline = NativeBackend(spec, n_ctx=64, threads=2, isa=other, repack=False).forward(PROMPT, all_logits=True)
    assert_layout_keeps_the_model(off, on, lo, ln, baseline)
