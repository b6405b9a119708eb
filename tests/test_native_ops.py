"""Native ops (onewell/_native/ops.c) against their numpy twins (onewell/runtime/ops_reference.py), on every ISA
path this CPU has, with odd sizes; determinism across thread counts and splits; validation before C."""
import numpy as np
import pytest

from onewell._native import _core
from onewell.runtime import native_ops as ops
from onewell.runtime import ops_reference as ref

# Tolerances: the twins compute in float64; C in float32 with fixed-order partial sums and a 2-ulp exp.
RTOL, ATOL = 2e-5, 2e-6


@pytest.fixture(params=ops.available_isas())
def isa(request):
    before = ops.ops_isa()
    ops.set_ops_isa(request.param)
    yield request.param
    ops.set_ops_isa(before)


def rng(seed=0):
    return np.random.default_rng(seed)


def randn(r, *shape):
    return r.standard_normal(shape, dtype=np.float32)


@pytest.mark.parametrize("dim", [1, 7, 16, 17, 100, 896, 1001])
@pytest.mark.parametrize("rows", [1, 3])
def test_rmsnorm(isa, dim, rows):
    r = rng(dim)
    x = randn(r, rows, dim) * 3
    w = randn(r, dim)
    got = ops.rmsnorm(x, w, 1e-6)
    np.testing.assert_allclose(got, ref.rmsnorm(x, w, 1e-6), rtol=RTOL, atol=ATOL)
    one = ops.rmsnorm(x[0].copy(), w, 1e-6)
    np.testing.assert_array_equal(one, got[0])
    inplace = x.copy()
    ops.rmsnorm(inplace, w, 1e-6, out=inplace)
    np.testing.assert_array_equal(inplace, got)


def test_rmsnorm_of_zeros_is_finite():
    out = ops.rmsnorm(np.zeros(33, np.float32), np.ones(33, np.float32), 1e-5)
    assert np.all(out == 0)


@pytest.mark.parametrize("style", ["normal", "neox"])
@pytest.mark.parametrize("head_dim,n_rot", [(64, 64), (6, 6), (10, 4), (128, 128)])
@pytest.mark.parametrize("base", [10000.0, 1000000.0])
def test_rope(style, head_dim, n_rot, base):
    r = rng(head_dim)
    pos = np.array([0, 1, 17, 4095, 32767])
    x = randn(r, len(pos), 3, head_dim)
    want = ref.rope(x, pos, base, style, n_rot)
    got = ops.rope(x.copy(), pos, base, style, n_rot)
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)
    np.testing.assert_array_equal(got[0], x[0])                    # position 0: no rotation
    np.testing.assert_array_equal(got[..., n_rot:], x[..., n_rot:])  # dims past n_rot untouched
    # a rotation keeps each pair's length
    np.testing.assert_allclose(np.linalg.norm(got, axis=-1), np.linalg.norm(x, axis=-1), rtol=1e-5)


def test_rope_styles_pair_different_elements():
    x = np.zeros((1, 1, 8), np.float32)
    x[0, 0, 1] = 1.0
    normal = ops.rope(x.copy(), [1], 10000.0, "normal")
    neox = ops.rope(x.copy(), [1], 10000.0, "neox")
    assert normal[0, 0, 0] != 0 and normal[0, 0, 5] == 0  # element 1 pairs with 0 ...
    assert neox[0, 0, 5] != 0 and neox[0, 0, 0] == 0      # ... or with 1 + 8/2


def test_rope_table_matches_twin_and_single_token_shape():
    pos = np.array([0, 3, 1000])
    np.testing.assert_allclose(ops.rope_table(pos, 64, 1e6), ref.rope_table(pos, 64, 1e6), atol=1e-7)
    x = randn(rng(), 4, 16)  # (n_head, head_dim): one token
    want = ref.rope(x[None], np.array([5]), 10000.0, "neox")[0]
    np.testing.assert_allclose(ops.rope(x.copy(), 5, 10000.0, "neox"), want, rtol=RTOL, atol=ATOL)


ATTN_SHAPES = [  # n_head, n_head_kv, head_dim, n_ctx, cache length
    (14, 2, 64, 1, 4),
    (14, 2, 64, 37, 40),
    (9, 3, 64, 129, 129),
    (4, 4, 20, 5, 9),      # no GQA, head_dim with a vector tail
    (6, 2, 72, 17, 17),    # head_dim past one register block
    (2, 1, 128, 300, 300),
    (3, 1, 3, 2, 2),
]


@pytest.mark.parametrize("shape", ATTN_SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("kv_dtype", [np.float32, np.float16])
def test_attention(isa, shape, kv_dtype):
    n_head, n_kv, hd, n_ctx, cap = shape
    r = rng(sum(shape))
    q = randn(r, n_head, hd)
    k = (randn(r, cap, n_kv, hd) * 2).astype(kv_dtype)
    v = randn(r, cap, n_kv, hd).astype(kv_dtype)
    want = ref.attention(q, k[:n_ctx], v[:n_ctx])
    got = ops.attention(q, k, v, n_ctx=n_ctx)
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=5 * ATOL)


def test_attention_gqa_mapping_and_scale():
    r = rng(3)
    q = randn(r, 4, 8)
    k = randn(r, 6, 2, 8)
    v = randn(r, 6, 2, 8)
    got = ops.attention(q, k, v, scale=0.5)
    # heads 0,1 read kv head 0; heads 2,3 read kv head 1
    for h in range(4):
        np.testing.assert_allclose(got[h], ref.attention(q[h:h + 1], k[:, h // 2:h // 2 + 1], v[:, h // 2:h // 2 + 1], 0.5)[0],
                                   rtol=RTOL, atol=ATOL)
    # one position: the output is that position's value row
    np.testing.assert_allclose(ops.attention(q, k, v, n_ctx=1), v[0, [0, 0, 1, 1]], rtol=1e-6)


def test_attention_large_scores_are_stable():
    r = rng(4)
    q = randn(r, 2, 16) * 100
    k = randn(r, 30, 1, 16) * 100
    v = randn(r, 30, 1, 16)
    got = ops.attention(q, k, v)
    assert np.all(np.isfinite(got))
    np.testing.assert_allclose(got, ref.attention(q, k, v), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("kv_dtype", [np.float32, np.float16])
def test_attention_same_bits_for_any_thread_count(isa, kv_dtype):
    r = rng(5)
    q = randn(r, 14, 64)
    k = randn(r, 77, 2, 64).astype(kv_dtype)
    v = randn(r, 77, 2, 64).astype(kv_dtype)
    base = ops.attention(q, k, v)
    for n in (1, 2, 3, 4):
        with ops.ThreadPool(n) as pool:
            for _ in range(3):
                np.testing.assert_array_equal(ops.attention(q, k, v, pool=pool), base)


@pytest.mark.parametrize("n", [1, 5, 8, 15, 16, 17, 31, 33, 100, 4864])
def test_swiglu(isa, n):
    r = rng(n)
    g = randn(r, n) * 4
    u = randn(r, n)
    np.testing.assert_allclose(ops.swiglu(g, u), ref.swiglu(g, u), rtol=RTOL, atol=1e-30)


def test_swiglu_extremes():
    # exp overflows (-g > 88.7) and flushes to zero (-g < -87.3) inside this range
    g = np.array([-1e4, -100, -88.8, -88.7, -87.4, -20, 0, 20, 87.4, 88.8, 100, 1e4, 3e38], np.float32)
    u = np.full_like(g, 0.5)
    got = ops.swiglu(g, u)
    np.testing.assert_allclose(got, ref.swiglu(g, u), rtol=RTOL, atol=1e-30)
    assert got[0] == 0 and got[-1] == np.float32(1.5e38)


def test_swiglu_bits_do_not_depend_on_where_a_split_starts(isa):
    """The executor may split element-wise ops across threads at any offset: every element must come out the
    same wherever its piece starts (vector body vs. tail)."""
    r = rng(6)
    g, u = randn(r, 203) * 5, randn(r, 203)
    whole = ops.swiglu(g, u)
    for start in (1, 3, 7, 13, 100):
        part = ops.swiglu(g[start:].copy(), u[start:].copy())
        np.testing.assert_array_equal(part, whole[start:])


@pytest.mark.parametrize("n", [1, 2, 15, 17, 1000, 151936])
def test_softmax(isa, n):
    r = rng(n)
    x = randn(r, 2, n) * 10
    got = ops.softmax(x)
    np.testing.assert_allclose(got, ref.softmax(x), rtol=RTOL, atol=1e-9)
    np.testing.assert_allclose(got.sum(axis=-1), 1.0, rtol=1e-5)


def test_softmax_shift_invariant_and_extreme():
    x = np.array([1000.0, 999.0, -1e30, 1000.0], np.float32)
    got = ops.softmax(x)
    np.testing.assert_allclose(got, ref.softmax(x), rtol=1e-6, atol=1e-30)
    assert got[2] == 0.0


def test_add_and_bias_are_exact(isa):
    r = rng(7)
    a, b = randn(r, 3, 37), randn(r, 3, 37)
    np.testing.assert_array_equal(ops.add(a, b), a + b)
    bias = randn(r, 37)
    x = a.copy()
    assert ops.add_bias(x, bias) is x
    np.testing.assert_array_equal(x, a + bias)
    out = a.copy()
    ops.add(out, b, out=out)
    np.testing.assert_array_equal(out, a + b)


def test_argmax():
    r = rng(8)
    for n in (1, 2, 17, 151936):
        x = randn(r, n)
        assert ops.argmax(x) == ref.argmax(x)
    x = np.array([1, 5, 2, 5, 5], np.float32)
    assert ops.argmax(x) == 1                       # first of ties
    x = np.array([1, np.nan, 7, np.nan], np.float32)
    assert ops.argmax(x) == ref.argmax(x) == 1      # NaN counts as the maximum, like numpy
    assert ops.argmax(np.array([-np.inf, -np.inf], np.float32)) == 0


def test_f16_conversions_are_bit_exact(isa):
    r = rng(9)
    bits = r.integers(0, 2**32, 200_003, dtype=np.uint64).astype(np.uint32)
    specials = np.array([0.0, -0.0, 65504, 65519.99, 65520, -65520, 6e-8, 2.9802322e-08, 2.9802326e-08,
                         5.9604645e-08, 6.1035156e-05, 6.1035152e-05, 1e-40, np.inf, -np.inf, 1.0, 1.00048828125,
                         1.0009765625, 1.00146484375], np.float32)
    x = np.concatenate([bits.view(np.float32), specials, randn(r, 1001), randn(r, 1001) * 1e-5])
    x = x[~np.isnan(x)]
    got = ops.f32_to_f16(x)
    with np.errstate(over="ignore"):  # overflow to inf is part of what is compared
        want = x.astype(np.float16)
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))
    assert np.isnan(ops.f32_to_f16(np.array([np.nan], np.float32))[0])
    every_half = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.float16)
    back = ops.f16_to_f32(every_half)
    finite = ~np.isnan(every_half)
    np.testing.assert_array_equal(back[finite].view(np.uint32), every_half[finite].astype(np.float32).view(np.uint32))
    assert np.all(np.isnan(back[~finite]))


def test_validation_happens_before_c():
    f = np.zeros(8, np.float32)
    with pytest.raises(TypeError, match="float32"):
        ops.rmsnorm(f.astype(np.float64), f, 1e-5)
    with pytest.raises(ValueError, match="shape"):
        ops.rmsnorm(f, np.zeros(7, np.float32), 1e-5)
    with pytest.raises(ValueError, match="contiguous"):
        ops.swiglu(np.zeros(16, np.float32)[::2], f)
    with pytest.raises(ValueError, match="same shape"):
        ops.add(f, np.zeros(9, np.float32))
    with pytest.raises(ValueError, match="style"):
        ops.rope(np.zeros((1, 8), np.float32), 0, 1e4, "gptj")
    with pytest.raises(ValueError, match="n_rot"):
        ops.rope(np.zeros((1, 8), np.float32), 0, 1e4, "neox", n_rot=3)
    with pytest.raises(ValueError, match="positions"):
        ops.rope(np.zeros((1, 1, 8), np.float32), [-1], 1e4, "neox")
    q = np.zeros((4, 8), np.float32)
    k = np.zeros((5, 3, 8), np.float32)
    with pytest.raises(ValueError, match="multiple"):
        ops.attention(q, k, k)
    k = np.zeros((5, 2, 8), np.float32)
    with pytest.raises(ValueError, match="n_ctx"):
        ops.attention(q, k, k, n_ctx=6)
    with pytest.raises(ValueError, match="must match"):
        ops.attention(q, k, k.astype(np.float16))
    with pytest.raises(ValueError, match="empty"):
        ops.argmax(np.zeros(0, np.float32))
    ro = np.zeros(8, np.float32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="writable"):
        ops.add_bias(ro, f)
    with pytest.raises(ValueError, match="ISA"):
        ops.set_ops_isa("sse9")


def test_c_binding_refuses_short_buffers():
    """The raw binding checks sizes too, so a wrong call from anywhere is an error, not a crash."""
    small = np.zeros(4, np.float32)
    with pytest.raises(ValueError, match="bytes"):
        _core.add(small, small, small, 1000)
    with pytest.raises(ValueError):
        _core.add(small, small, small, -1)
    with pytest.raises(ValueError, match="bytes"):
        _core.attention(None, small, small, small, small, small, 100, 1, 1, 4, 1.0, 0)
    with pytest.raises(ValueError):
        _core.rope_apply(small, small, 1, 1, 4, 3, 0)
