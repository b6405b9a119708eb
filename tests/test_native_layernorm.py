"""The encoder's LayerNorm with bias (ops_layernorm.h) against its numpy twin (ops_reference.layernorm) on the
generic and AVX2 kernels: float32 against float64, rows of sizes that exercise the 8-lane tails."""
import numpy as np
import pytest

from onewell.runtime import native_ops as ops
from onewell.runtime import ops_reference as ref

RTOL, ATOL = 2e-5, 2e-5


def randn(seed, *shape):
    return np.random.default_rng(seed).standard_normal(shape, dtype=np.float32)


@pytest.mark.parametrize("path", ["generic", "avx2"])
@pytest.mark.parametrize("dim", [1, 7, 8, 9, 31, 768, 1027])
def test_layernorm_matches_twin(path, dim):
    x = randn(dim, 3, dim) * 3 + 5           # an offset: the mean must really be subtracted
    w, b = randn(dim + 1, dim), randn(dim + 2, dim)
    got = ops.layernorm(x, w, b, 1e-12, path=path)
    want = ref.layernorm(x, w, b, 1e-12)
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL * max(1.0, float(np.abs(want).max())))


def test_layernorm_is_not_rmsnorm_and_has_unit_variance():
    x = randn(1, 4, 64) + 2
    ones, zeros = np.ones(64, np.float32), np.zeros(64, np.float32)
    y = ops.layernorm(x, ones, zeros, 1e-12)
    np.testing.assert_allclose(y.mean(axis=1), 0, atol=1e-5)
    np.testing.assert_allclose(y.var(axis=1), 1, rtol=1e-4)
    assert np.abs(y - ops.rmsnorm(x, ones, 1e-12)).max() > 0.5
    # the bias is added after the scale
    np.testing.assert_allclose(ops.layernorm(x, ones * 2, ones, 1e-12), 2 * y + 1, rtol=1e-5, atol=1e-5)


def test_generic_and_avx2_agree_bit_for_bit():
    """No FMA and the same 8 lanes on both paths (ops_layernorm.h), so they round alike."""
    x, w, b = randn(3, 5, 771), randn(4, 771), randn(5, 771)
    assert np.array_equal(ops.layernorm(x, w, b, 1e-5, path="generic"), ops.layernorm(x, w, b, 1e-5, path="avx2"))


def test_constant_row_and_in_place():
    x = np.full((2, 16), 3.0, np.float32)   # variance 0: (x - mean) = 0, so the output is the bias
    b = np.arange(16, dtype=np.float32)
    np.testing.assert_array_equal(ops.layernorm(x, np.ones(16, np.float32), b, 1e-12), np.stack([b, b]))
    y = randn(9, 2, 16)
    want = ref.layernorm(y, np.ones(16, np.float32), b, 1e-6)
    ops.layernorm(y, np.ones(16, np.float32), b, 1e-6, out=y)
    np.testing.assert_allclose(y, want, rtol=RTOL, atol=ATOL)


def test_bad_arguments_are_value_errors():
    x = randn(0, 2, 8)
    with pytest.raises(ValueError, match="shape"):
        ops.layernorm(x, np.ones(7, np.float32), np.ones(8, np.float32), 1e-5)
    with pytest.raises(ValueError, match="path"):
        ops.layernorm(x, np.ones(8, np.float32), np.ones(8, np.float32), 1e-5, path="neon")
