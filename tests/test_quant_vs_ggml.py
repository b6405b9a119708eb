"""onewell's codecs and native kernels against ggml's own, from data recorded with llama.cpp build 11434
(tests/data/ggml_codecs.npz, made by scripts/make_ggml_codec_data.py; llama.cpp is not needed here).

- dequantization: our numpy twin and the native row dequantizer reproduce ggml's float32 values bit for bit
  (sha256 of ggml's to_float output) on random, real (SmolLM2 blk.0.ffn_down) and test-quantize-fns data;
- encoders: ours write ggml's bytes (ggml_quantize_chunk without an importance matrix, what llama-quantize does);
- llama.cpp's test-quantize-fns thresholds: round-trip RMSE (its sqrt(sum d^2) / n) below 0.002, 0.004 (3-bit)
  and 0.0075 (2-bit); a dot product with the paired activation within 0.02 (0.04 for Q2_K) of the float one,
  per element, on every kernel path;
- native matmul on the real tensors vs the exact twin, as test_native_kernels states it: |err| <= 1e-5 M.
"""
from __future__ import annotations

import hashlib

import numpy as np
import pytest

from conftest import DATA
from onewell._native import _core
from onewell.gguf.constants import GGMLType as T
from onewell.quant import QUANTIZE_TYPES, dequantize, quantize
from onewell.runtime import native_kernels as nk
from test_native_kernels import EXACT_RTOL, check_within, twin_product

RECORD = np.load(DATA / "ggml_codecs.npz")
TYPES = [T.Q2_K, T.Q3_K, T.Q4_K, T.Q5_K, T.Q6_K, T.IQ4_NL, T.IQ4_XS, T.Q4_0, T.Q5_0, T.Q5_1, T.Q8_0, T.BF16]
SOURCES = ["random", "real", "cos"]
CASES = [(t, src) for t in TYPES for src in SOURCES]
RMSE_LIMIT = {T.Q2_K: 0.0075, T.Q3_K: 0.0040}       # test-quantize-fns: MAX_QUANTIZATION_TOTAL_ERROR_2BITS/_3BITS
DOT_LIMIT = {T.Q2_K: 0.04}                          # MAX_DOT_PRODUCT_ERROR_LOWBIT; others MAX_DOT_PRODUCT_ERROR


def recorded(t: T, src: str) -> tuple[np.ndarray, np.ndarray, str]:
    return RECORD[f"input_{src}"], RECORD[f"{t.name}_{src}_bytes"], str(RECORD[f"{t.name}_{src}_f32_sha256"])


def sha256(values: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(values, np.float32).tobytes()).hexdigest()


@pytest.mark.parametrize("t,src", CASES, ids=[f"{t.name}-{s}" for t, s in CASES])
def test_dequantization_is_ggml_bit_for_bit(t, src):
    x, raw, expected = recorded(t, src)
    assert sha256(dequantize(t, raw, x.shape)) == expected
    rows, cols = x.shape
    out = np.empty((rows, cols), np.float32)
    _core.dequantize_rows(int(t), raw, raw.size // rows, cols, np.arange(rows, dtype=np.int32), out)
    assert sha256(out) == expected


@pytest.mark.parametrize("t,src", [c for c in CASES if c[0] in QUANTIZE_TYPES],
                         ids=[f"{t.name}-{s}" for t, s in CASES if t in QUANTIZE_TYPES])
def test_encoder_writes_ggml_bytes(t, src):
    x, raw, _ = recorded(t, src)
    ours = quantize(t, x)
    assert ours.size == raw.size
    assert int((ours != raw).sum()) == 0


def ggml_rmse(a: np.ndarray, b: np.ndarray) -> float:
    diff = a.astype(np.float64).reshape(-1) - b.astype(np.float64).reshape(-1)
    return float(np.sqrt((diff * diff).sum()) / diff.size)


@pytest.mark.parametrize("t", TYPES, ids=lambda t: t.name)
def test_round_trip_error_within_test_quantize_fns_threshold(t):
    x, raw, _ = recorded(t, "cos")
    error = ggml_rmse(x, dequantize(t, raw, x.shape))
    assert error < RMSE_LIMIT.get(t, 0.002)
    if t not in (T.BF16, T.Q8_0):
        assert error > 1e-6, "suspiciously exact: is the data really quantized?"


@pytest.mark.parametrize("path", nk.available_paths())
@pytest.mark.parametrize("t", TYPES, ids=lambda t: t.name)
def test_dot_product_error_within_test_quantize_fns_threshold(t, path):
    x, raw, _ = recorded(t, "cos")
    n = x.shape[1]
    y = (np.float32(0.1) + np.float32(2) * np.cos(np.arange(n, dtype=np.float32) + np.float32(1))).astype(np.float32)
    result = nk.matmul(raw, t, 1, n, y[None], path)[0, 0]
    reference = float(x[0].astype(np.float64) @ y.astype(np.float64))
    assert abs(float(result) - reference) / n < DOT_LIMIT.get(t, 0.02)


@pytest.mark.parametrize("path", nk.available_paths())
@pytest.mark.parametrize("t", TYPES, ids=lambda t: t.name)
def test_native_matmul_on_real_tensors_matches_the_exact_twin(t, path):
    x, raw, _ = recorded(t, "real")
    rows, cols = x.shape
    act = np.random.default_rng(3).standard_normal((3, cols)).astype(np.float32)
    y = nk.matmul(raw, t, rows, cols, act, path)
    exact, magnitude, _, _ = twin_product(raw, t, rows, cols, act, path)
    check_within(y, exact, EXACT_RTOL * magnitude + 1e-30, f"{t.name} real rows on {path}")
