"""The ops behind the model description's feature flags (GeGLU, soft-capping, RoPE frequency factors, partial
RoPE, soft-capped attention) against their numpy twins (runtime/ops_reference.py), on every ISA path this CPU has.
Same tolerances as test_native_ops.py: the twins compute in float64, C in float32 with a 2-ulp exp."""
import os

import numpy as np
import pytest

from onewell.runtime import native_ops as ops
from onewell.runtime import ops_reference as ref
from onewell.runtime.native_kernels import KERNEL_PATHS, available_paths

RTOL, ATOL = 2e-5, 2e-6


@pytest.fixture(params=ops.available_isas())
def isa(request):
    before = ops.ops_isa()
    ops.set_ops_isa(request.param)
    yield request.param
    ops.set_ops_isa(before)


def randn(seed, *shape):
    return np.random.default_rng(seed).standard_normal(shape, dtype=np.float32)


@pytest.mark.parametrize("n", [1, 5, 8, 15, 17, 100, 2048])
def test_geglu(isa, n):
    g, u = randn(n, n) * 4, randn(n + 1, n)
    np.testing.assert_allclose(ops.geglu(g, u), ref.geglu(g, u), rtol=RTOL, atol=1e-6)


def test_geglu_extremes_and_known_values():
    # the exp argument overflows for g < ~-10 and flushes to zero for g > ~10: gelu -> 0 and g there
    g = np.array([-1e4, -100, -20, -10, -1, 0, 1, 10, 20, 100, 1e4], np.float32)
    got = ops.geglu(g, np.ones_like(g))
    np.testing.assert_allclose(got, ref.geglu(g, np.ones_like(g)), rtol=RTOL, atol=1e-6)
    assert got[0] == 0 and got[-1] == np.float32(1e4) and got[5] == 0
    # GELU-tanh(1) = 0.5 * (1 + tanh(sqrt(2/pi) * 1.044715)) = 0.841192
    assert abs(got[6] - 0.841192) < 1e-5
    # GeGLU is not SwiGLU: the two activations differ visibly at 1
    assert abs(got[6] - ops.swiglu(g, np.ones_like(g))[6]) > 0.1


def test_geglu_bits_do_not_depend_on_where_a_split_starts(isa):
    g, u = randn(6, 203) * 5, randn(7, 203)
    whole = ops.geglu(g, u)
    for start in (1, 3, 7, 13, 100):
        np.testing.assert_array_equal(ops.geglu(g[start:].copy(), u[start:].copy()), whole[start:])


@pytest.mark.parametrize("cap", [1.0, 30.0, 50.0])
@pytest.mark.parametrize("n", [1, 7, 8, 33, 1000])
def test_softcap(isa, n, cap):
    x = randn(n, n) * 3 * cap
    got = ops.softcap(x, cap)
    np.testing.assert_allclose(got, ref.softcap(x, cap), rtol=2e-6, atol=1e-30)
    assert np.all(np.abs(got) <= cap)


def test_softcap_is_odd_bounded_and_passes_nan():
    x = np.array([-1e30, -1e4, -30, -1e-3, 0, 1e-3, 30, 1e4, 1e30, np.inf, -np.inf, np.nan], np.float32)
    got = ops.softcap(x, 30.0)
    np.testing.assert_array_equal(ops.softcap(-x[:11], 30.0), -got[:11])
    assert got[0] == -30 and got[8] == 30 and got[9] == 30 and got[10] == -30 and np.isnan(got[11])
    assert got[4] == 0
    np.testing.assert_allclose(got[5], 30 * np.tanh(1e-3 / 30), rtol=1e-6)   # near zero: the series, no cancellation


def test_softcap_bits_do_not_depend_on_where_a_split_starts(isa):
    x = randn(8, 203) * 50
    whole = ops.softcap(x, 30.0)
    for start in (1, 5, 9):
        np.testing.assert_array_equal(ops.softcap(x[start:].copy(), 30.0), whole[start:])


@pytest.mark.parametrize("style", ["normal", "neox"])
@pytest.mark.parametrize("head_dim,n_rot", [(64, 64), (64, 32), (10, 4)])
def test_rope_with_frequency_factors(style, head_dim, n_rot):
    pos = np.array([0, 1, 17, 4095, 32767])
    x = randn(head_dim, len(pos), 3, head_dim)
    factors = np.linspace(1.0, 8.0, n_rot // 2).astype(np.float32)
    table = ops.rope_table(pos, n_rot, 500000.0, factors)
    np.testing.assert_allclose(table, ref.rope_table(pos, n_rot, 500000.0, factors), rtol=RTOL, atol=ATOL)
    assert not np.allclose(table[2:], ops.rope_table(pos, n_rot, 500000.0)[2:])   # the factors change angles
    got = ops.rope_apply(x.copy(), table, style)
    np.testing.assert_array_equal(got[..., n_rot:], x[..., n_rot:])               # partial RoPE: rest untouched
    # the twin: rotate with the twin's table
    cs = ref.rope_table(pos, n_rot, 500000.0, factors)
    want = ops.rope_apply(x.copy(), cs, style)
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=1e-5)
    with pytest.raises(ValueError, match="freq_factors"):
        ops.rope_table(pos, n_rot, 1e4, factors[:-1])
    with pytest.raises(ValueError, match="freq_factors"):
        ops.rope_table(pos, n_rot, 1e4, -factors)


@pytest.mark.parametrize("kv_dtype", [np.float32, np.float16])
def test_attention_softcap(isa, kv_dtype):
    q = randn(1, 4, 32) * 3
    k = (randn(2, 40, 2, 32) * 3).astype(kv_dtype)
    v = randn(3, 40, 2, 32).astype(kv_dtype)
    for cap in (5.0, 50.0):
        got = ops.attention(q, k, v, n_ctx=37, softcap=cap)
        np.testing.assert_allclose(got, ref.attention(q, k[:37], v[:37], softcap=cap), rtol=1e-4, atol=1e-5)
    # scores of size ~30 capped at 5 flatten the softmax: a visible change
    assert np.abs(ops.attention(q, k, v, softcap=5.0) - ops.attention(q, k, v)).max() > 1e-2
    np.testing.assert_array_equal(ops.attention(q, k, v, softcap=0.0), ops.attention(q, k, v))
    with pytest.raises(ValueError, match="softcap"):
        ops.attention(q, k, v, softcap=-1.0)


def test_new_ops_validate_before_c():
    f = np.zeros(16, np.float32)
    with pytest.raises(ValueError):
        ops.geglu(f, np.zeros(15, np.float32))
    with pytest.raises(ValueError):
        ops.softcap(f, 0.0)
    with pytest.raises(ValueError):
        ops.softcap(f, float("nan"))


def test_every_kernel_path_has_an_ops_path_this_cpu_runs():
    """Tests pair a kernel path with its ops path (KERNEL_PATH_OPS_ISA); a path missing there failed only on
    the CPUs that have it (the NEON paths: a KeyError under qemu)."""
    assert set(ops.KERNEL_PATH_OPS_ISA) == set(KERNEL_PATHS)
    assert set(ops.KERNEL_PATH_OPS_ISA.values()) <= set(ops.ISA_PATHS)
    if os.environ.get("ONEWELL_ISA"):   # a cap lowers the ops ladder, not the kernel paths: nothing to pair here
        return
    for path in available_paths():
        assert ops.KERNEL_PATH_OPS_ISA[path] in ops.available_isas(), path
