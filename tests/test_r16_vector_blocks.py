"""The AVX-512 R16 prefill tiles take a batch's vectors in blocks whose activations fit a budget
(`_core.r16_act_bytes`, default 24 KiB: ow_r16_vector_block in kernels/vec_dot.h), so they stay in L1 while a
chunk's rows pass. Blocking only reorders which (row, vector) pairs run when; each vector's arithmetic is the same,
so every budget must give every vector bit for bit its one-vector result. Budgets: 0 (one block), below one
vector group (the floor is a group), a few groups, the default, and more than the batch. From 32 vectors the AVX-512
path runs the rows GEMM on these layouts (perf-log 36, 37), which does not block by this budget: the tiles are
tested with the knob rows_gemm off, as they run below 32 vectors.
"""
from __future__ import annotations

import numpy as np
import pytest
from test_repack import random_weight
from test_repack_q4_1 import random_q4_1

from onewell._native import _core
from onewell.gguf.constants import GGMLType
from onewell.quant import repack as R
from onewell.runtime import native_kernels as nk
from onewell.runtime import native_repack as NR

T = GGMLType
DEFAULT = 24 << 10
BUDGETS = [0, 1, 5000, 16 << 10, DEFAULT, 1 << 24]
LAYOUTS = {"q8_0_r16": (T.Q8_0, R.Q8_0_R16), "q4_1_r16": (T.Q4_1, R.Q4_1_R16)}


@pytest.fixture(autouse=True)
def restore_budget():
    rows_gemm = _core.rows_gemm(0)
    yield
    _core.r16_act_bytes(-2)
    _core.rows_gemm(rows_gemm)


@pytest.mark.parametrize("path", nk.available_paths())
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("cols", [576, 896, 2048])
def test_every_budget_gives_each_vector_its_one_vector_result(path, layout, cols):
    wt, packed_layout = LAYOUTS[layout]
    rng = np.random.default_rng(cols)
    rows, n_vec = 19, 75   # 75 vectors of 896 columns: ~70 KiB of activations, three 24 KiB blocks
    raw = random_weight(rng, wt, rows, cols) if wt == T.Q8_0 else random_q4_1(rng, rows, cols)
    packed = NR.repack(raw, wt, rows, cols)
    x = rng.standard_normal((n_vec, cols)).astype(np.float32)
    alone = np.stack([NR.matmul(packed, rows, cols, v, isa=path, layout=packed_layout) for v in x])
    for budget in BUDGETS:
        _core.r16_act_bytes(budget)
        together = NR.matmul(packed, rows, cols, x, isa=path, layout=packed_layout)
        np.testing.assert_array_equal(together, alone, err_msg=f"{layout}, {cols} columns, budget {budget} on {path}")


def test_the_knob_reads_sets_resets_and_refuses_absurd_budgets():
    assert _core.r16_act_bytes(-1) == DEFAULT
    assert _core.r16_act_bytes(4096) == DEFAULT
    assert _core.r16_act_bytes(-1) == 4096
    assert _core.r16_act_bytes(-2) == 4096
    assert _core.r16_act_bytes(-1) == DEFAULT
    for bad in (-3, (1 << 24) + 1, 2**62):
        with pytest.raises(ValueError, match="r16_act_bytes"):
            _core.r16_act_bytes(bad)
    with pytest.raises(OverflowError):
        _core.r16_act_bytes(2**70)
    assert _core.r16_act_bytes(-1) == DEFAULT
