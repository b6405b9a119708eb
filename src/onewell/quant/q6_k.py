"""Q6_K: super-blocks of 256 weights = 16 sub-blocks of 16, each with a signed 8-bit scale; 6-bit quants.

Block (210 bytes): ql: u8[128] @0 | qh: u8[64] @128 | scales: i8[16] @192 | d: fp16 @208.
Each half h (128 weights) uses ql[64h:64h+64] and qh[32h:32h+32]. For l in 0..31, weights l, l+32, l+64, l+96 of the
half take their low 4 bits from: ql[l] low nibble, ql[l+32] low nibble, ql[l] high nibble, ql[l+32] high nibble,
and their top 2 bits from bits 0-1, 2-3, 4-5, 6-7 of qh[l]. Weight i uses scale i // 16.
weight = (d * scale) * (q - 32), float32 as in ggml's dequantize_row_q6_K.
"""
from __future__ import annotations

import numpy as np

from ._blocks import F32, fp16_field, low_high_nibbles

BLOCK = 256


def dequantize_q6_k(blocks: np.ndarray) -> np.ndarray:
    ql = blocks[:, 0:128].reshape(-1, 2, 2, 32)      # (block, half, first/second 32 bytes, l)
    qh = blocks[:, 128:192].reshape(-1, 2, 1, 32)    # (block, half, -, l)
    low, high = low_high_nibbles(ql)
    low4 = np.concatenate([low, high], axis=2)       # (block, half, quarter 0..3, l)
    shifts = np.array([0, 2, 4, 6], dtype=np.uint8).reshape(1, 1, 4, 1)
    top2 = (qh >> shifts) & 3
    q = (low4 | (top2 << 4)).astype(np.int8) - 32
    scale = fp16_field(blocks, 208)[:, None] * blocks[:, 192:208].view(np.int8).astype(F32)   # (block, 16)
    weights = scale.reshape(-1, 16, 1) * q.reshape(-1, 16, 16).astype(F32)
    return weights.reshape(-1, BLOCK)
