"""The native type-traits table (kernels/type_traits.c) and the Python sets derived from it.

The table is checked against independent facts: the GGUF block layouts, the numpy twins' activation pairing, the
repacked layouts' ids in onewell.quant, and the kernel-path fallback rule of docs/kernels.md."""
import numpy as np
import pytest

from onewell._native import _core
from onewell.errors import UnsupportedError
from onewell.gguf.constants import BLOCK_LAYOUTS, GGMLType as T
from onewell.quant import DEQUANTIZE_TYPES
from onewell.quant import repack as R
from onewell.quant.repack_q4_r8 import IQ4_NL_R8, Q4_0_R8, Q4_1_R8, Q5_0_R8
from onewell.quant.repack_qk_r8 import IQ4_XS_R8, Q4_K_R8, Q5_K_R8, Q6_K_R8
from onewell.quant.repack_r8 import Q8_0_R8
from onewell.quant.act_formats import ACT_TYPE_FOR, ACT_TYPES
from onewell.runtime import native_kernels as nk
from onewell.runtime import native_repack as NR
from onewell.runtime import plan as P
from onewell.runtime.native_types import repack_layouts, type_traits, weight_types

PATHS = nk.KERNEL_PATHS
FALLBACK = {"generic": None, "avx2": "generic", "avx2-vnni": "avx2", "avx512": "avx2", "neon": "generic",
            "neon-dotprod": "neon"}
OWN_IDS = {R.Q8_0_R16: "q8_0_r16", R.ACT_Q8_0_R16: "act_q8_0_r16", R.Q4_1_R16: "q4_1_r16", Q8_0_R8: "q8_0_r8",
           Q4_1_R8: "q4_1_r8", Q5_0_R8: "q5_0_r8", Q4_0_R8: "q4_0_r8", IQ4_NL_R8: "iq4_nl_r8", Q4_K_R8: "q4_k_r8",
           Q5_K_R8: "q5_k_r8", Q6_K_R8: "q6_k_r8", IQ4_XS_R8: "iq4_xs_r8"}


def test_ggml_rows_match_the_gguf_block_layouts():
    for tid, t in type_traits().items():
        if tid in OWN_IDS:
            continue
        layout = BLOCK_LAYOUTS[T(tid)]
        assert (t.block_size, t.block_bytes) == (layout.block_size, layout.type_size), T(tid).name
        assert t.name.lower() == T(tid).name.lower()


def test_own_layouts_have_the_ids_of_the_numpy_twins():
    own = {tid: t.name for tid, t in type_traits().items() if t.repacked}
    assert own == OWN_IDS


def test_weight_types_pair_as_the_numpy_twins_and_have_every_piece():
    assert weight_types() == frozenset(nk.WEIGHT_TYPES)
    for wt in weight_types():
        t = type_traits()[int(wt)]
        assert t.act_type == ACT_TYPE_FOR[wt], wt.name          # the numpy twin's pairing
        assert t.dequant_row and wt in DEQUANTIZE_TYPES, wt.name   # gather + numpy codec
        assert all(t.kernels[p] for p in PATHS), wt.name          # runs on every path (fallback ends at generic)
        assert _core.act_type_for(int(wt)) == t.act_type
    # activation types are exactly those with a quantizer, and each pairs with something
    acts = {tid for tid, t in type_traits().items() if t.act_quant["generic"]}
    assert {T(a) for a in acts if a not in OWN_IDS} == set(ACT_TYPES)
    assert {t.act_type for t in type_traits().values() if t.act_type is not None} <= acts


def test_non_weights_are_refused():
    non_weights = [tid for tid, t in type_traits().items() if not t.executor_weight and tid not in OWN_IDS]
    assert T.Q8_K in non_weights and T.Q8_1 in non_weights
    for tid in non_weights:
        with pytest.raises(UnsupportedError):
            nk.act_type_for(T(tid))
    assert _core.act_type_for(12345) == -1


@pytest.mark.parametrize("tid", sorted(type_traits()), ids=lambda i: type_traits()[i].name)
def test_kernel_names_follow_the_fallback_chain(tid):
    t = type_traits()[tid]
    for table in (t.kernels, t.act_quant):
        for path in PATHS:
            name = table[path]
            if name is None:
                continue
            # a kernel is either built for this path or inherited from the one it falls back to
            suffix = path.replace("-", "_")
            own = name.endswith("_" + suffix) or name.endswith("_avx512_256") and path == "avx512"
            assert own or name == table[FALLBACK[path]], (path, name)
            if path == "generic":
                assert name.endswith("_generic")


def test_repack_layouts_are_the_plans_and_the_repackers():
    layouts = repack_layouts()
    assert layouts == NR.LAYOUTS
    assert NR.SOURCE_TYPES == {wt for wt, layout in layouts.items() if layout == R.Q8_0_R16}
    for wt, layout in layouts.items():
        assert type_traits()[layout].repacked and type_traits()[layout].act_type == R.ACT_Q8_0_R16
        assert NR.layout_for(wt) == layout
    non_repacked = next(wt for wt in weight_types() if wt not in layouts)
    with pytest.raises(ValueError, match="neither"):
        _core.repack_r16(int(non_repacked), np.zeros(64, np.uint8), 64, 1, 32, np.zeros(128, np.uint8), 128)


def test_plan_refuses_a_type_outside_the_table():
    from onewell.models.base import Weight

    missing = next(t for t in T if t not in weight_types() and t in BLOCK_LAYOUTS)
    w = Weight("blk.0.attn_q.weight", missing, (4, 256), np.zeros(1, np.uint8))
    with pytest.raises(UnsupportedError, match="no native kernel"):
        P._matrix(w, (4, 256))


@pytest.mark.skipif("avx512" not in _core.kernel_paths() and "avx2" not in _core.kernel_paths(),
                    reason="x86-only kernels: this build has none")
def test_avx512_path_reads_q4_0_and_q5_0_through_its_vnni_kernels():
    """Q4_0 and Q5_0 keep their file layout on the AVX-512 path (perf-log 19): its slot runs the int8 GEMM with rows
    in the lanes from 32 vectors (perf-log 29), else its VNNI tiles, and one vector streams through the 256-bit
    EVEX decode kernels (the tiles' own fallback)."""
    traits = type_traits()
    for t in (T.Q4_0, T.Q5_0):
        assert traits[int(t)].kernels["avx512"] == f"vec_dot_{t.name.lower()}_q8_0_gemm_avx512"
        assert traits[int(t)].float_gemm_from["avx512"] == 32
    assert "q5_0" not in nk.DEFAULT_REPACK["avx512"] and "q4_0" not in nk.DEFAULT_REPACK["avx512"]


def test_the_vnni_path_prefills_through_the_avx2_tiles():
    """An AVX-VNNI CPU's own dot kernels must not shadow the AVX2 tiles: they did until perf-log entry 24, and its
    prefill ran 0.66-0.68x llama.cpp on Qwen (every vector re-decoded each row)."""
    checked = 0
    for t in type_traits().values():
        avx2 = t.kernels.get("avx2") or ""
        if "tile" in avx2 or "gemm" in avx2:
            vnni = t.kernels["avx2-vnni"] or ""
            assert "tile" in vnni or "gemm" in vnni, (t.name, vnni)
            checked += 1
    assert checked >= 8   # the 32-element types (Q8_0: a float GEMM), Q4_K, Q6_K, F16 (a float GEMM), BF16
