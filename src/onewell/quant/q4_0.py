"""Q4_0: blocks of 32 weights = fp16 scale d + 32 unsigned 4-bit quants; weight = (q - 8) * d.

Block (18 bytes): d: fp16 @0 | qs: u8[16] @2. Byte j holds weight j in its low nibble and weight j+16 in its high one.
"""
from __future__ import annotations

import numpy as np

from ._blocks import F32, fp16_bytes, fp16_field, low_high_nibbles, reciprocal_or_zero

BLOCK = 32


def dequantize_q4_0(blocks: np.ndarray) -> np.ndarray:
    d = fp16_field(blocks, 0)
    low, high = low_high_nibbles(blocks[:, 2:18])
    q = np.concatenate([low, high], axis=1).astype(np.int8) - 8
    return q.astype(F32) * d[:, None]


def quantize_q4_0(x: np.ndarray) -> np.ndarray:
    """ggml's quantize_row_q4_0_ref: the weight of largest magnitude (first one on ties) maps to q = 0 exactly,
    d = that signed weight / -8, and q = min(15, (int8)(x/d + 8.5f)) — truncation after a float32 add."""
    n = x.shape[0]
    first_largest = np.abs(x).argmax(axis=1)
    signed_max = x[np.arange(n), first_largest]
    # C starts from max = +0.0 and keeps it when no |x| exceeds 0; argmax would pick a -0.0 instead
    signed_max = np.where(signed_max == 0, F32(0.0), signed_max)
    d = signed_max / F32(-8)
    inv_d = reciprocal_or_zero(d)
    shifted = x * inv_d[:, None] + F32(8.5)
    q = np.minimum(15, np.trunc(shifted)).astype(np.uint8)
    packed = q[:, :16] | (q[:, 16:] << 4)
    return np.concatenate([fp16_bytes(d), packed], axis=1)
