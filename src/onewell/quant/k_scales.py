"""The 12-byte field of Q4_K and Q5_K that packs 8 six-bit sub-block scales and 8 six-bit sub-block mins.

Bytes 0-3: scale 0-3 in bits 0-5, top 2 bits of scale 4-7 in bits 6-7.
Bytes 4-7: min 0-3 in bits 0-5, top 2 bits of min 4-7 in bits 6-7.
Bytes 8-11: low 4 bits of scale 4-7 in bits 0-3, low 4 bits of min 4-7 in bits 4-7.
(ggml's get_scale_min_k4.)
"""
from __future__ import annotations

import numpy as np


def unpack_scales_mins(packed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(scales, mins), each (n, 8) uint8 in 0..63, from the (n, 12) packed bytes."""
    first, second, third = packed[:, 0:4], packed[:, 4:8], packed[:, 8:12]
    scales = np.concatenate([first & 63, (third & 0x0F) | ((first >> 6) << 4)], axis=1)
    mins = np.concatenate([second & 63, (third >> 4) | ((second >> 6) << 4)], axis=1)
    return scales, mins


def pack_scales_mins(scales: np.ndarray, mins: np.ndarray) -> np.ndarray:
    """Inverse of unpack_scales_mins: (n, 8) scales and mins in 0..63 -> (n, 12) packed bytes."""
    scales, mins = scales.astype(np.uint8), mins.astype(np.uint8)
    first = (scales[:, :4] & 63) | ((scales[:, 4:] >> 4) << 6)
    second = (mins[:, :4] & 63) | ((mins[:, 4:] >> 4) << 6)
    third = (scales[:, 4:] & 0x0F) | ((mins[:, 4:] & 0x0F) << 4)
    return np.concatenate([first, second, third], axis=1)
