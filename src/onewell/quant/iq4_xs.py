"""IQ4_XS: super-blocks of 256 weights = 8 sub-blocks of 32 with 6-bit scales; IQ4_NL's codebook for the weights.

Block (136 bytes): d: fp16 @0 | scales_h: u16 @2 | scales_l: u8[4] @4 | qs: u8[128] @8.
Sub-block s: scale = (nibble s of scales_l (low nibble first) | bits 2s..2s+1 of scales_h << 4) - 32; its 16 bytes
qs[16s:16s+16] are packed as an IQ4_NL block. weight = (d * scale) * KVALUES[index], float32 as in ggml.
"""
from __future__ import annotations

import numpy as np

from ._blocks import F32, fp16_field, low_high_nibbles
from .iq4_nl import codebook_values

BLOCK = 256


def iq4_xs_scales(blocks: np.ndarray) -> np.ndarray:
    """(n, 8) int scales in -32..31."""
    low, high = low_high_nibbles(blocks[:, 4:8])
    low4 = np.stack([low, high], axis=2).reshape(-1, 8)
    scales_h = np.ascontiguousarray(blocks[:, 2:4]).view("<u2").astype(np.int32)   # (n, 1)
    top2 = (scales_h >> (2 * np.arange(8))) & 3
    return (low4 | (top2 << 4)) - 32


def dequantize_iq4_xs(blocks: np.ndarray) -> np.ndarray:
    d = fp16_field(blocks, 0)
    scale = d[:, None] * iq4_xs_scales(blocks).astype(F32)              # (n, 8)
    values = codebook_values(blocks[:, 8:136]).astype(F32)               # (n, 8, 32)
    return (scale[:, :, None] * values).reshape(-1, BLOCK)
