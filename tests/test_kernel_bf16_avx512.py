"""BF16 weights on the avx512 path (kernels/vec_dot_bf16_avx512.c): on CPUs with AVX512-BF16 the activations are
rounded to bf16 as onewell.quant.floats.round_to_bf16 says (its twin), on every other path and CPU they stay exact
float32. An identity matrix shows the rounded activations themselves, bit for bit: ties of both parities,
denormals (to zero), huge and tiny values. Accuracy against the exact twin, tails, batches and real
tensors are in test_native_kernels.py and test_quant_vs_ggml.py, which know this path's rounding."""
import numpy as np
import pytest

from onewell.gguf.constants import GGMLType
from onewell.quant.floats import dequantize_bf16, quantize_bf16, round_to_bf16
from onewell.runtime import native_kernels as nk

PATHS = nk.available_paths()


def awkward_floats(rng: np.random.Generator, n: int) -> np.ndarray:
    bits = rng.standard_normal(n).astype(np.float32).view(np.uint32)
    bits[0::5] = (bits[0::5] & 0xFFFF0000) | 0x8000              # exact ties: even and odd kept bits
    bits[1::7] = rng.integers(1, 0x7FFFFF, bits[1::7].size)        # positive denormals
    bits[2::11] = rng.integers(0x80000001, 0x807FFFFF, bits[2::11].size, dtype=np.uint64).astype(np.uint32)
    bits[3::13] = 0x80000000                                       # -0
    x = bits.view(np.float32).copy()
    x[4::17] = np.float32(3e38)
    x[5::19] = np.float32(1.5e-38)                                 # the smallest normals stay
    return x


@pytest.mark.parametrize("path", PATHS)
def test_identity_shows_the_activations_the_kernel_uses(path):
    rng = np.random.default_rng(5)
    for cols in (32, 45, 96, 200):
        eye = quantize_bf16(np.eye(cols, dtype=np.float32))
        x = np.stack([awkward_floats(rng, cols) for _ in range(3)])
        expected = round_to_bf16(x) if nk.rounds_bf16_activations(path) else x
        for n_vec in (1, 3):   # decode and the prefill tile
            y = nk.matmul(eye, GGMLType.BF16, cols, cols, x[:n_vec], path)
            # exact equality of values (a sum starting from +0 turns -0 into +0, so signs of zeros are not seen)
            np.testing.assert_array_equal(y, expected[:n_vec], err_msg=f"{cols} columns, {n_vec} vectors on {path}")


def test_the_twin_rounds_to_nearest_even_and_flushes_denormals():
    f = np.array([1.0, 1 + 2 ** -8, 1 + 3 * 2 ** -8, 1 + 2 ** -9, -(1 + 3 * 2 ** -9), 1e-40, -1e-40, 3.0e38],
                 dtype=np.float32)
    r = round_to_bf16(f)
    assert r[0] == 1.0 and r[1] == 1.0 and r[2] == 1 + 4 * 2 ** -8   # ties to even, either way
    assert r[3] == 1.0 and r[4] == -(1 + 2 ** -7)                      # below / above half a step
    assert r[5] == 0 and not np.signbit(r[5]) and r[6] == 0 and np.signbit(r[6])
    assert np.isfinite(r[7]) and abs(r[7] / f[7] - 1) < 2 ** -8


@pytest.mark.parametrize("path", PATHS)
def test_rows_wider_than_the_converted_activation_buffer(path):
    """Decode converts the activation to bf16 once per call up to 32,768 columns and as it goes beyond; both give
    the prefill tile's floats (one chain per row and vector), odd and even row counts (rows paired r, r + n/2)."""
    rng = np.random.default_rng(9)
    for cols in (32768, 32768 + 45):
        for rows in (1, 2, 5):
            w = quantize_bf16(rng.standard_normal((rows, cols)).astype(np.float32))
            x = rng.standard_normal((2, cols)).astype(np.float32)
            batched = nk.matmul(w, GGMLType.BF16, rows, cols, x, path)
            alone = nk.matmul(w, GGMLType.BF16, rows, cols, x[1:], path)[0]
            np.testing.assert_array_equal(batched[1], alone, err_msg=f"{rows}x{cols} on {path}")
            x_hat = round_to_bf16(x[1]) if nk.rounds_bf16_activations(path) else x[1]
            w_hat = dequantize_bf16(w).reshape(rows, cols).astype(np.float64)
            exact = w_hat @ x_hat.astype(np.float64)
            assert np.all(np.abs(alone - exact) <= 1e-5 * (np.abs(w_hat) @ np.abs(x_hat.astype(np.float64))))
