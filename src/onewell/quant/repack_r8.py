"""Q8_0 R8: onewell's load-time repacked layout of Q8_0 weights for the AVX2 kernels of CPUs whose 256-bit
instructions are two 128-bit µops (AMD family 0x17), numpy twin of onewell/_native/kernels/q8_0_r8.c (same bytes;
q8_0_r8.h has the full description and docs/perf-log.md entry 42 the measurements).

Weight row: exactly the Q8_0 row's bytes (34 per block of 32), reordered:
    groups of m blocks at block g = 0, 8, 16, ... (m = 8, or fewer in a row's last group), at byte 34 g:
        [m fp16 scales][8 chunks of 4m bytes: chunk j = bytes 4j..4j+3 of blocks g..g+m-1 in turn]
    quants signed, as in the file.
Activations are plain Q8_0 blocks (onewell.quant.act_formats).
"""
from __future__ import annotations

import numpy as np

from .repack import _source_blocks

Q8_0_R8 = 1011    # type id, = kernels/matvec.h (outside ggml's range: never in a file)
GROUP = 8         # blocks per interleaved group
BLOCK = 32
_Q8_0_BYTES = 34


def _blocks_of(cols: int) -> int:
    if isinstance(cols, bool) or int(cols) != cols or cols <= 0 or cols % BLOCK:
        raise ValueError(f"Q8_0 R8: {cols!r} columns is not a positive multiple of {BLOCK}")
    return int(cols) // BLOCK


def row_bytes(cols: int) -> int:
    """Bytes per R8 row: the Q8_0 row's (no padding)."""
    return _blocks_of(cols) * _Q8_0_BYTES


def _order(nb: int) -> np.ndarray:
    """For each byte of an R8 row, the byte of the Q8_0 row it comes from."""
    src = np.arange(nb * _Q8_0_BYTES, dtype=np.int64).reshape(nb, _Q8_0_BYTES)
    parts = []
    for g in range(0, nb, GROUP):
        blocks = src[g:g + GROUP]
        m = len(blocks)
        parts.append(blocks[:, :2].reshape(-1))                                          # m scales
        parts.append(blocks[:, 2:].reshape(m, 8, 4).transpose(1, 0, 2).reshape(-1))      # 8 chunks of 4m bytes
    return np.concatenate(parts)


def _check(raw, rows: int, cols: int) -> np.ndarray:
    _blocks_of(cols)   # R8's message for bad column counts
    return _source_blocks(raw, rows, cols, _Q8_0_BYTES, "Q8_0").reshape(int(rows), -1)


def repack_q8_0_r8(raw, rows: int, cols: int) -> np.ndarray:
    """Raw Q8_0 bytes of a rows x cols matrix -> uint8 [rows, row_bytes(cols)] in the R8 layout."""
    return np.ascontiguousarray(_check(raw, rows, cols)[:, _order(_blocks_of(cols))])


def unpack_q8_0_r8(packed, rows: int, cols: int) -> np.ndarray:
    """Inverse of repack_q8_0_r8: the raw Q8_0 bytes (rows * cols/32 * 34)."""
    data = _check(np.asarray(packed, dtype=np.uint8).reshape(-1), rows, cols)
    out = np.empty_like(data)
    out[:, _order(_blocks_of(cols))] = data
    return out.reshape(-1)
