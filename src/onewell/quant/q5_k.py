"""Q5_K: super-blocks of 256 weights = 8 sub-blocks of 32, each with a 6-bit scale and a 6-bit min; 5-bit quants.

Block (176 bytes): d: fp16 @0 | dmin: fp16 @2 | scales: u8[12] @4 | qh: u8[32] @16 | qs: u8[128] @48.
The low 4 bits are laid out as in Q4_K; the 5th bit of weight l of sub-block s is bit s of qh[l].
weight = (d * scale_s) * q - (dmin * min_s), float32 as in ggml's dequantize_row_q5_K.
"""
from __future__ import annotations

import numpy as np

from ._blocks import F32
from .q4_k import fit_k_super_blocks, nibbles_by_sub_block, sub_block_factors

BLOCK = 256


def dequantize_q5_k(blocks: np.ndarray) -> np.ndarray:
    scale, offset = sub_block_factors(blocks)
    low = nibbles_by_sub_block(blocks[:, 48:176])
    # high bits: (n, 32 weights, 8 sub-blocks) → (n, 8, 32)
    high = np.unpackbits(blocks[:, 16:48, None], axis=2, bitorder="little").transpose(0, 2, 1)
    q = (low | (high << 4)).astype(F32)
    return (scale * q - offset).reshape(-1, BLOCK)


def quantize_q5_k(x: np.ndarray) -> np.ndarray:
    """ggml's quantize_row_q5_K_ref: Q4_K's fit with 5-bit quants (nmax 31, rmin -0.5, 16 candidates)."""
    d_bytes, dmin_bytes, packed, q = fit_k_super_blocks(x, 31, -0.5, 15)
    pairs = q.reshape(-1, 4, 2, 32)                                  # (block, 64-group c, low/high half, l)
    qs = ((pairs[:, :, 0] & 15) | ((pairs[:, :, 1] & 15) << 4)).reshape(-1, 128)
    bits = (pairs >> 4).transpose(0, 3, 1, 2).reshape(-1, 32, 8)      # (block, l, bit 2c + half)
    qh = np.packbits(bits, axis=2, bitorder="little").reshape(-1, 32)
    return np.concatenate([d_bytes, dmin_bytes, packed, qh, qs], axis=1)
