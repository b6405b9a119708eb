"""Q4_K: super-blocks of 256 weights = 8 sub-blocks of 32, each with a 6-bit scale and a 6-bit min.

Block (144 bytes): d: fp16 @0 | dmin: fp16 @2 | scales: u8[12] @4 (see k_scales) | qs: u8[128] @16.
qs is four 32-byte groups; group g holds sub-block 2g in its low nibbles and sub-block 2g+1 in its high nibbles.
weight = (d * scale_s) * q - (dmin * min_s), each product rounded to float32 as in ggml's dequantize_row_q4_K.
"""
from __future__ import annotations

import numpy as np

from ._blocks import F32, fp16_field, low_high_nibbles
from .k_scales import unpack_scales_mins

BLOCK = 256


def sub_block_factors(blocks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per sub-block (n, 8, 1): the float32 multiplier d*scale and the float32 subtrahend dmin*min (Q4_K and Q5_K)."""
    d = fp16_field(blocks, 0)
    dmin = fp16_field(blocks, 2)
    scales, mins = unpack_scales_mins(blocks[:, 4:16])
    return (d[:, None] * scales.astype(F32))[:, :, None], (dmin[:, None] * mins.astype(F32))[:, :, None]


def nibbles_by_sub_block(qs: np.ndarray) -> np.ndarray:
    """(n, 128) packed bytes → (n, 8, 32) 4-bit values, sub-block order (low nibbles of a group before its high)."""
    low, high = low_high_nibbles(qs.reshape(-1, 4, 32))
    return np.stack([low, high], axis=2).reshape(-1, 8, 32)


def dequantize_q4_k(blocks: np.ndarray) -> np.ndarray:
    scale, offset = sub_block_factors(blocks)
    q = nibbles_by_sub_block(blocks[:, 16:144]).astype(F32)
    return (scale * q - offset).reshape(-1, BLOCK)
