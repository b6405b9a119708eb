"""IQ4_NL: blocks of 32 weights = fp16 scale d + 32 four-bit indices into a fixed non-linear codebook.

Block (18 bytes): d: fp16 @0 | qs: u8[16] @2. Byte j holds weight j's index in its low nibble, weight j+16's in
its high one (as Q4_0). weight = d * KVALUES[index], float32 as in ggml's dequantize_row_iq4_nl.
"""
from __future__ import annotations

import numpy as np

from ._blocks import F32, fp16_field, low_high_nibbles

BLOCK = 32
# ggml's kvalues_iq4nl: a codebook denser near zero, where most weights are
KVALUES = np.array([-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113], dtype=np.int8)


def codebook_values(qs: np.ndarray) -> np.ndarray:
    """(n, 16 k) packed bytes → (n, k/16, 32) codebook values: per 16 bytes, low nibbles then high nibbles."""
    low, high = low_high_nibbles(qs.reshape(qs.shape[0], -1, 16))
    return KVALUES[np.concatenate([low, high], axis=2)]


def dequantize_iq4_nl(blocks: np.ndarray) -> np.ndarray:
    d = fp16_field(blocks, 0)
    return d[:, None] * codebook_values(blocks[:, 2:18]).reshape(-1, BLOCK).astype(F32)
