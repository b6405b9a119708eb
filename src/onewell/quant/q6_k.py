"""Q6_K: super-blocks of 256 weights = 16 sub-blocks of 16, each with a signed 8-bit scale; 6-bit quants.

Block (210 bytes): ql: u8[128] @0 | qh: u8[64] @128 | scales: i8[16] @192 | d: fp16 @208.
Each half h (128 weights) uses ql[64h:64h+64] and qh[32h:32h+32]. For l in 0..31, weights l, l+32, l+64, l+96 of the
half take their low 4 bits from: ql[l] low nibble, ql[l+32] low nibble, ql[l] high nibble, ql[l+32] high nibble,
and their top 2 bits from bits 0-1, 2-3, 4-5, 6-7 of qh[l]. Weight i uses scale i // 16.
weight = (d * scale) * (q - 32), float32 as in ggml's dequantize_row_q6_K.
"""
from __future__ import annotations

import numpy as np

from ._blocks import F32, fp16_bytes, fp16_field, low_high_nibbles
from .k_search import GROUP_MAX_EPS, fit_symmetric_scale, nearest_int

BLOCK = 256


def dequantize_q6_k(blocks: np.ndarray) -> np.ndarray:
    ql = blocks[:, 0:128].reshape(-1, 2, 2, 32)      # (block, half, first/second 32 bytes, l)
    qh = blocks[:, 128:192].reshape(-1, 2, 1, 32)    # (block, half, -, l)
    low, high = low_high_nibbles(ql)
    low4 = np.concatenate([low, high], axis=2)       # (block, half, quarter 0..3, l)
    shifts = np.array([0, 2, 4, 6], dtype=np.uint8).reshape(1, 1, 4, 1)
    top2 = (qh >> shifts) & 3
    q = (low4 | (top2 << 4)).astype(np.int8) - 32
    scale = fp16_field(blocks, 208)[:, None] * blocks[:, 192:208].view(np.int8).astype(F32)   # (block, 16)
    weights = scale.reshape(-1, 16, 1) * q.reshape(-1, 16, 16).astype(F32)
    return weights.reshape(-1, BLOCK)


def quantize_q6_k(x: np.ndarray) -> np.ndarray:
    """ggml's quantize_row_q6_K_ref (llama-quantize without an importance matrix): per sub-block of 16 a symmetric
    6-bit fit (weights x^2), the 16 scales quantized to int8 against the one of largest magnitude (which maps to
    -128), then every weight re-rounded with the stored scale. A block with all sub-block scales ~0 is all zeros."""
    n = x.shape[0]
    sub = x.astype(F32, copy=False).reshape(n * 16, 16)
    scales, q = fit_symmetric_scale(sub, 32)
    scales, q = scales.reshape(n, 16), q.reshape(n, 16, 16)
    first_largest = np.abs(scales).argmax(axis=1)
    max_scale = scales[np.arange(n), first_largest]
    empty = np.abs(max_scale) < GROUP_MAX_EPS
    iscale = F32(-128) / np.where(empty, F32(1), max_scale)
    d_bytes = fp16_bytes(F32(1) / iscale)
    sc = np.minimum(127, nearest_int(iscale[:, None] * scales)).astype(np.int8)
    d = d_bytes.view("<f2")[:, 0].astype(F32)
    step = d[:, None] * sc.astype(F32)
    safe = np.where(step != 0, step, F32(1))
    requant = np.clip(nearest_int(sub.reshape(n, 16, 16) / safe[:, :, None]), -32, 31) + 32
    q = np.where((step != 0)[:, :, None], requant, q).astype(np.uint8).reshape(n, 2, 4, 32)   # (block, half, k, l)
    lo4 = q & 0x0F
    ql = np.concatenate([lo4[:, :, 0] | (lo4[:, :, 2] << 4), lo4[:, :, 1] | (lo4[:, :, 3] << 4)], axis=2)   # (n, 2, 64)
    qh = (q[:, :, 0] >> 4) | ((q[:, :, 1] >> 4) << 2) | ((q[:, :, 2] >> 4) << 4) | ((q[:, :, 3] >> 4) << 6)
    out = np.concatenate([ql.reshape(n, 128), qh.reshape(n, 64), sc.view(np.uint8), d_bytes], axis=1)
    out[empty] = 0
    return out
