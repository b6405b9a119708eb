"""Q5_1: blocks of 32 weights = fp16 scale d, fp16 offset m, 32 unsigned 5-bit quants; weight = q * d + m.

Block (24 bytes): d: fp16 @0 | m: fp16 @2 | qh: u32 little-endian @4 | qs: u8[16] @8 (bits laid out as in Q5_0).
"""
from __future__ import annotations

import numpy as np

from ._blocks import F32, fp16_field
from .q5_0 import five_bit_quants

BLOCK = 32


def dequantize_q5_1(blocks: np.ndarray) -> np.ndarray:
    d = fp16_field(blocks, 0)
    m = fp16_field(blocks, 2)
    q = five_bit_quants(blocks[:, 4:8], blocks[:, 8:24]).astype(F32)
    return q * d[:, None] + m[:, None]
