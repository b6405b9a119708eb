"""Q5_1: blocks of 32 weights = fp16 scale d, fp16 offset m, 32 unsigned 5-bit quants; weight = q * d + m.

Block (24 bytes): d: fp16 @0 | m: fp16 @2 | qh: u32 little-endian @4 | qs: u8[16] @8 (bits laid out as in Q5_0).
"""
from __future__ import annotations

import numpy as np

from ._blocks import F32, fp16_bytes, fp16_field, pack_bits_u32, reciprocal_or_zero
from .q5_0 import five_bit_quants

BLOCK = 32


def dequantize_q5_1(blocks: np.ndarray) -> np.ndarray:
    d = fp16_field(blocks, 0)
    m = fp16_field(blocks, 2)
    q = five_bit_quants(blocks[:, 4:8], blocks[:, 8:24]).astype(F32)
    return q * d[:, None] + m[:, None]


def quantize_q5_1(x: np.ndarray) -> np.ndarray:
    """ggml's quantize_row_q5_1_ref: m = block min, d = (max - min) / 31, q = (uint8)((x - m) / d + 0.5f)
    (via x * (1/d); the bits C keeps of q, including a rare q = 32, go to qs and qh)."""
    lo, hi = x.min(axis=1), x.max(axis=1)
    d = (hi - lo) / F32(31)
    inv_d = reciprocal_or_zero(d)
    q = np.trunc((x - lo[:, None]) * inv_d[:, None] + F32(0.5)).astype(np.uint8)
    packed = (q[:, :16] & 0x0F) | ((q[:, 16:] & 0x0F) << 4)
    qh = pack_bits_u32((q >> 4) & 1)
    return np.concatenate([fp16_bytes(d), fp16_bytes(lo), qh, packed], axis=1)
