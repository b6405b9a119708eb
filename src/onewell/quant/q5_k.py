"""Q5_K: super-blocks of 256 weights = 8 sub-blocks of 32, each with a 6-bit scale and a 6-bit min; 5-bit quants.

Block (176 bytes): d: fp16 @0 | dmin: fp16 @2 | scales: u8[12] @4 | qh: u8[32] @16 | qs: u8[128] @48.
The low 4 bits are laid out as in Q4_K; the 5th bit of weight l of sub-block s is bit s of qh[l].
weight = (d * scale_s) * q - (dmin * min_s), float32 as in ggml's dequantize_row_q5_K.
"""
from __future__ import annotations

import numpy as np

from ._blocks import F32
from .q4_k import nibbles_by_sub_block, sub_block_factors

BLOCK = 256


def dequantize_q5_k(blocks: np.ndarray) -> np.ndarray:
    scale, offset = sub_block_factors(blocks)
    low = nibbles_by_sub_block(blocks[:, 48:176])
    # high bits: (n, 32 weights, 8 sub-blocks) → (n, 8, 32)
    high = np.unpackbits(blocks[:, 16:48, None], axis=2, bitorder="little").transpose(0, 2, 1)
    q = (low | (high << 4)).astype(F32)
    return (scale * q - offset).reshape(-1, BLOCK)
