"""Q5_0: blocks of 32 weights = fp16 scale d + 32 unsigned 5-bit quants; weight = (q - 16) * d.

Block (22 bytes): d: fp16 @0 | qh: u32 little-endian @2 | qs: u8[16] @6.
Weight j (j < 16) = low nibble of qs[j] | bit j of qh << 4; weight j+16 = high nibble of qs[j] | bit j+16 of qh << 4.
"""
from __future__ import annotations

import numpy as np

from ._blocks import F32, bits_of_u32, fp16_bytes, fp16_field, low_high_nibbles, pack_bits_u32, reciprocal_or_zero

BLOCK = 32


def five_bit_quants(qh: np.ndarray, qs: np.ndarray) -> np.ndarray:
    """The 32 unsigned 5-bit quants of Q5_0/Q5_1 blocks from their qh (n, 4) and qs (n, 16) bytes: (n, 32) uint8."""
    low, high = low_high_nibbles(qs)
    return np.concatenate([low, high], axis=1) | (bits_of_u32(qh) << 4)


def dequantize_q5_0(blocks: np.ndarray) -> np.ndarray:
    d = fp16_field(blocks, 0)
    q = five_bit_quants(blocks[:, 2:6], blocks[:, 6:22]).astype(np.int8) - 16
    return q.astype(F32) * d[:, None]


def quantize_q5_0(x: np.ndarray) -> np.ndarray:
    """ggml's quantize_row_q5_0_ref: as Q4_0 with 5 bits, d = (signed largest magnitude) / -16 and
    q = min(31, (int8)(x/d + 16.5f)); bit 4 of quant j goes to bit j of qh."""
    n = x.shape[0]
    first_largest = np.abs(x).argmax(axis=1)
    signed_max = x[np.arange(n), first_largest]
    signed_max = np.where(signed_max == 0, F32(0.0), signed_max)   # C keeps its +0.0 start for an all-zero block
    d = signed_max / F32(-16)
    inv_d = reciprocal_or_zero(d)
    q = np.minimum(31, np.trunc(x * inv_d[:, None] + F32(16.5))).astype(np.uint8)
    packed = (q[:, :16] & 0x0F) | ((q[:, 16:] & 0x0F) << 4)
    qh = pack_bits_u32(q >> 4)
    return np.concatenate([fp16_bytes(d), qh, packed], axis=1)
