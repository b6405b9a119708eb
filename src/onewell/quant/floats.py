"""Plain float element types: F32, F16, BF16 (one element per "block")."""
from __future__ import annotations

import numpy as np

from ._blocks import F32


def dequantize_f32(blocks: np.ndarray) -> np.ndarray:
    return blocks.view("<f4").astype(F32)  # a copy: never hand out a view of a read-only file mapping


def quantize_f32(x: np.ndarray) -> np.ndarray:
    return x.astype("<f4").view(np.uint8)


def dequantize_f16(blocks: np.ndarray) -> np.ndarray:
    return blocks.view("<f2").astype(F32)


def quantize_f16(x: np.ndarray) -> np.ndarray:
    # numpy rounds to nearest even, overflows to inf and keeps subnormals, like ggml's fp32→fp16
    with np.errstate(over="ignore"):
        return x.astype("<f2").view(np.uint8)


def dequantize_bf16(blocks: np.ndarray) -> np.ndarray:
    # bf16 is the top half of a float32
    return (blocks.view("<u2").astype(np.uint32) << 16).view(F32)


def quantize_bf16(x: np.ndarray) -> np.ndarray:
    """ggml's fp32→bf16: round to nearest even on the bit pattern; NaN stays NaN but is forced quiet."""
    bits = np.ascontiguousarray(x, dtype=F32).view(np.uint32)
    rounded = (bits + (np.uint32(0x7FFF) + ((bits >> 16) & 1))) >> 16
    is_nan = (bits & 0x7FFFFFFF) > 0x7F800000
    out = np.where(is_nan, (bits >> 16) | 0x40, rounded).astype("<u2")
    return out.view(np.uint8)


def round_to_bf16(x: np.ndarray) -> np.ndarray:
    """Float32 values rounded to bf16 as vcvtne2ps2bf16 does (the AVX512-BF16 kernels' activations; twin of
    kernels/vec_dot_bf16_avx512.c): nearest even, denormals to zero of the same sign, NaN kept (quiet)."""
    bits = np.ascontiguousarray(x, dtype=F32).view(np.uint32)
    denormal = (bits & 0x7F800000) == 0
    kept = np.where(denormal, bits & 0x80000000, bits)
    half = quantize_bf16(kept.view(F32))
    return dequantize_bf16(half).reshape(np.shape(x))
