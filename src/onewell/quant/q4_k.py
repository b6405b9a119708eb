"""Q4_K: super-blocks of 256 weights = 8 sub-blocks of 32, each with a 6-bit scale and a 6-bit min.

Block (144 bytes): d: fp16 @0 | dmin: fp16 @2 | scales: u8[12] @4 (see k_scales) | qs: u8[128] @16.
qs is four 32-byte groups; group g holds sub-block 2g in its low nibbles and sub-block 2g+1 in its high nibbles.
weight = (d * scale_s) * q - (dmin * min_s), each product rounded to float32 as in ggml's dequantize_row_q4_K.
"""
from __future__ import annotations

import numpy as np

from ._blocks import F32, fp16_bytes, fp16_field, low_high_nibbles
from .k_scales import pack_scales_mins, unpack_scales_mins
from .k_search import fit_scale_min, nearest_int, seq_sum

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


def fit_k_super_blocks(x: np.ndarray, nmax: int, rmin: float, nstep: int):
    """The shared part of ggml's quantize_row_q4_K_ref / q5_K_ref: per sub-block of 32 a weighted scale/min fit
    (weights rms + |x|), the 8 scales and mins quantized to 6 bits against the largest of each, then every weight
    re-rounded with the stored (fp16, 6-bit) scale and min. Returns (d, dmin as (n, 2) fp16 bytes, the (n, 12)
    packed scales, the quants (n, 8, 32) in 0..nmax)."""
    n = x.shape[0]
    sub = x.astype(F32, copy=False).reshape(n * 8, 32)
    av_x = np.sqrt(seq_sum(sub * sub) / F32(32))
    scales, mins, q = fit_scale_min(sub, av_x[:, None] + np.abs(sub), nmax, rmin, 0.1, nstep)
    scales, mins, q = scales.reshape(n, 8), mins.reshape(n, 8), q.reshape(n, 8, 32)
    # C starts from +0.0 and takes only larger values: a -0.0 min never replaces it
    max_scale = np.where(scales.max(axis=1) > 0, scales.max(axis=1), F32(0))
    max_min = np.where(mins.max(axis=1) > 0, mins.max(axis=1), F32(0))
    inv_scale = np.where(max_scale > 0, F32(63) / np.where(max_scale > 0, max_scale, F32(1)), F32(0))
    inv_min = np.where(max_min > 0, F32(63) / np.where(max_min > 0, max_min, F32(1)), F32(0))
    ls = np.minimum(63, nearest_int(inv_scale[:, None] * scales) & 0xFF).astype(np.uint8)   # C stores uint8 first
    lm = np.minimum(63, nearest_int(inv_min[:, None] * mins) & 0xFF).astype(np.uint8)
    d_bytes, dmin_bytes = fp16_bytes(max_scale / F32(63)), fp16_bytes(max_min / F32(63))
    # re-round with what a decoder will see: fp16 d and dmin times the 6-bit values; a zero scale keeps the fit's q
    d = d_bytes.view("<f2")[:, 0].astype(F32)
    dmin = dmin_bytes.view("<f2")[:, 0].astype(F32)
    step = d[:, None] * ls.astype(F32)
    offset = dmin[:, None] * lm.astype(F32)
    safe = np.where(step != 0, step, F32(1))
    requant = np.clip(nearest_int((sub.reshape(n, 8, 32) + offset[:, :, None]) / safe[:, :, None]), 0, nmax)
    q = np.where((step != 0)[:, :, None], requant, q).astype(np.uint8)
    return d_bytes, dmin_bytes, pack_scales_mins(ls, lm), q


def quantize_q4_k(x: np.ndarray) -> np.ndarray:
    """ggml's quantize_row_q4_K_ref (what llama-quantize writes without an importance matrix)."""
    d_bytes, dmin_bytes, packed, q = fit_k_super_blocks(x, 15, -1.0, 20)
    pairs = q.reshape(-1, 4, 2, 32)
    qs = (pairs[:, :, 0] | (pairs[:, :, 1] << 4)).reshape(-1, 128)
    return np.concatenate([d_bytes, dmin_bytes, packed, qs], axis=1)
