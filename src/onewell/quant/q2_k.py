"""Q2_K: super-blocks of 256 weights = 16 sub-blocks of 16, each with a 4-bit scale and a 4-bit min; 2-bit quants.

Block (84 bytes): scales: u8[16] @0 (scale in the low nibble, min in the high one) | qs: u8[64] @16 |
d: fp16 @80 | dmin: fp16 @82.
Half h (128 weights) uses qs[32h:32h+32]: weight 128h + 32j + l (j = 0..3, l = 0..31) is bits 2j..2j+1 of
qs[32h + l]. Weight i uses scale/min byte i // 16.
weight = (d * scale) * q - (dmin * min), each product rounded to float32 as in ggml's dequantize_row_q2_K.
"""
from __future__ import annotations

import numpy as np

from ._blocks import F32, fp16_field

BLOCK = 256
_SHIFTS = np.array([0, 2, 4, 6], dtype=np.uint8).reshape(1, 1, 4, 1)


def two_bit_quants(qs: np.ndarray) -> np.ndarray:
    """(n, 64) packed bytes → (n, 256) values 0..3 in weight order (shared by Q2_K and Q3_K)."""
    return ((qs.reshape(-1, 2, 1, 32) >> _SHIFTS) & 3).reshape(-1, BLOCK)


def dequantize_q2_k(blocks: np.ndarray) -> np.ndarray:
    sc = blocks[:, 0:16]
    d, dmin = fp16_field(blocks, 80), fp16_field(blocks, 82)
    scale = d[:, None] * (sc & 0x0F).astype(F32)        # (n, 16)
    offset = dmin[:, None] * (sc >> 4).astype(F32)
    q = two_bit_quants(blocks[:, 16:80]).reshape(-1, 16, 16).astype(F32)
    return (scale[:, :, None] * q - offset[:, :, None]).reshape(-1, BLOCK)
