"""Q8_K: the activation format the K-quants pair with (ggml's quantize_row_q8_K_ref), numpy twin of the native one.

Block (292 bytes): d: float32 @0 | qs: int8[256] @4 | bsums: int16[16] @260 (sum of each 16 consecutive quants).
The value of largest magnitude (the first one, on ties) maps to -127: iscale = -127 / max, q = min(127,
round-half-even(iscale * x)), d = 1 / iscale. An all-zero block has d = 0 and zero quants and sums.
"""
from __future__ import annotations

import numpy as np

from ._blocks import F32

BLOCK = 256
BLOCK_BYTES = 292
Q8_K_DTYPE = np.dtype([("d", "<f4"), ("qs", "i1", (BLOCK,)), ("bsums", "<i2", (BLOCK // 16,))])
assert Q8_K_DTYPE.itemsize == BLOCK_BYTES


def quantize_q8_k(x: np.ndarray) -> np.ndarray:
    """(n_blocks, 256) float32 -> (n_blocks, 292) uint8."""
    x = np.ascontiguousarray(x, dtype=F32)
    first_max = np.argmax(np.abs(x), axis=1)   # argmax keeps the first of equal magnitudes, like ggml's scan
    signed_max = x[np.arange(x.shape[0]), first_max]
    nonzero = signed_max != 0
    iscale = np.zeros_like(signed_max)
    np.divide(F32(-127.0), signed_max, out=iscale, where=nonzero)
    q = np.minimum(np.rint(x * iscale[:, None]), F32(127)).astype(np.int8)
    out = np.zeros(x.shape[0], dtype=Q8_K_DTYPE)
    out["qs"] = q
    out["bsums"] = q.reshape(-1, BLOCK // 16, 16).sum(axis=2, dtype=np.int32).astype(np.int16)
    d = np.zeros_like(iscale)
    np.divide(F32(1.0), iscale, out=d, where=nonzero)
    out["d"] = d
    return out.view(np.uint8).reshape(-1, BLOCK_BYTES)


def dequantize_q8_k(blocks: np.ndarray) -> np.ndarray:
    """(n_blocks, 292) uint8 -> (n_blocks, 256) float32: d * q."""
    fields = np.ascontiguousarray(blocks).view(Q8_K_DTYPE).reshape(-1)
    return fields["d"][:, None] * fields["qs"].astype(F32)
