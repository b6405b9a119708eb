"""Q8_0: blocks of 32 weights = fp16 scale d + 32 int8 quants; weight = q * d.

Block (34 bytes): d: fp16 @0 | qs: int8[32] @2.
"""
from __future__ import annotations

import numpy as np

from ._blocks import F32, fp16_bytes, fp16_field, reciprocal_or_zero, round_half_away_from_zero

BLOCK = 32


def dequantize_q8_0(blocks: np.ndarray) -> np.ndarray:
    d = fp16_field(blocks, 0)
    q = blocks[:, 2:].view(np.int8)
    return q.astype(F32) * d[:, None]


def quantize_q8_0(x: np.ndarray) -> np.ndarray:
    """ggml's quantize_row_q8_0_ref: d = amax/127, q = roundf(x / d) (via x * (1/d)); d is stored as fp16,
    but the quants use the float32 d before that rounding."""
    amax = np.abs(x).max(axis=1)
    d = amax / F32(127)
    inv_d = reciprocal_or_zero(d)
    q = round_half_away_from_zero(x * inv_d[:, None]).astype(np.int8)
    return np.concatenate([fp16_bytes(d), q.view(np.uint8)], axis=1)
