"""Q3_K: super-blocks of 256 weights = 16 sub-blocks of 16, each with a signed 6-bit scale; 3-bit signed quants.

Block (110 bytes): hmask: u8[32] @0 | qs: u8[64] @32 | scales: u8[12] @96 | d: fp16 @108.
The low 2 bits of weight i are laid out as in Q2_K; its third bit is bit i // 32 of hmask[i % 32], and the quant is
low2 - 4 when that bit is clear (low2 when set): q in -4..3.
Scale s (0..15): low 4 bits from scales[s] (s < 8) or scales[s - 8] >> 4, top 2 bits from bits 2(s // 4)..+1 of
scales[8 + s % 4]; the scale is that 6-bit value - 32. weight = (d * scale) * q, float32 as in ggml.
"""
from __future__ import annotations

import numpy as np

from ._blocks import F32, fp16_field
from .q2_k import two_bit_quants

BLOCK = 256


def q3_k_scales(packed: np.ndarray) -> np.ndarray:
    """(n, 12) packed bytes → (n, 16) int8 scales in -32..31."""
    low = np.concatenate([packed[:, 0:8] & 0x0F, packed[:, 0:8] >> 4], axis=1)
    high = (packed[:, 8:12, None] >> np.array([0, 2, 4, 6], dtype=np.uint8)) & 3   # (n, 4 bytes, 4 shifts)
    high = high.transpose(0, 2, 1).reshape(-1, 16)                                  # scale s: shift s // 4, byte s % 4
    return (low | (high << 4)).astype(np.int8) - 32


def three_bit_quants(blocks: np.ndarray) -> np.ndarray:
    """(n, 256) int8 quants in -4..3."""
    low = two_bit_quants(blocks[:, 32:96]).astype(np.int8)
    high = np.unpackbits(blocks[:, 0:32, None], axis=2, bitorder="little")   # (n, 32 l, 8 bits): weight 32*bit + l
    high = high.transpose(0, 2, 1).reshape(-1, BLOCK).astype(np.int8)
    return low - 4 * (1 - high)


def dequantize_q3_k(blocks: np.ndarray) -> np.ndarray:
    d = fp16_field(blocks, 108)
    scale = d[:, None] * q3_k_scales(blocks[:, 96:108]).astype(F32)   # (n, 16)
    q = three_bit_quants(blocks).reshape(-1, 16, 16).astype(F32)
    return (scale[:, :, None] * q).reshape(-1, BLOCK)
