"""Q4_1: blocks of 32 weights = fp16 scale d, fp16 offset m, 32 unsigned 4-bit quants; weight = q * d + m.

Block (20 bytes): d: fp16 @0 | m: fp16 @2 | qs: u8[16] @4 (byte j: weight j low nibble, weight j+16 high nibble).
"""
from __future__ import annotations

import numpy as np

from ._blocks import F32, fp16_field, low_high_nibbles

BLOCK = 32


def dequantize_q4_1(blocks: np.ndarray) -> np.ndarray:
    d = fp16_field(blocks, 0)
    m = fp16_field(blocks, 2)
    low, high = low_high_nibbles(blocks[:, 4:20])
    q = np.concatenate([low, high], axis=1).astype(F32)
    return q * d[:, None] + m[:, None]
