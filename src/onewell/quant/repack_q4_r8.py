"""Q4_1 R8, Q5_0 R8, Q4_0 R8 and IQ4_NL R8: onewell's load-time layouts of Q4_1, Q5_0, Q4_0 and IQ4_NL weights for
the AVX2 kernels of AMD family 0x17, numpy twin of onewell/_native/kernels/q4_r8.c (same bytes; q4_r8.h has the full
description and docs/perf-log.md entries 43 and 45 the measurements).

Weight row: exactly the file row's bytes (20, 22 or 18 per block of 32), reordered:
    groups of m blocks at block g = 0, 8, 16, ... (m = 8, or fewer in a row's last group), at byte B g:
        Q4_1 R8: [m fp16 d][m fp16 m][4 chunks of 4m bytes]
        Q5_0 R8: [m fp16 d][m u32 h'][4 chunks of 4m bytes]
        Q4_0 R8: [m fp16 d][4 chunks of 4m bytes]
        IQ4_NL R8: Q4_0 R8's bytes (the nibbles are codebook indices)
    chunk j = nibble bytes 4j..4j+3 of blocks g..g+m-1 in turn; Q5_0's h' is its qh with bit 4t+b moved to bit 8b+t.
Activations are the file types' own: plain Q8_1 (Q4_1 R8) and Q8_0 (Q5_0 R8, Q4_0 R8, IQ4_NL R8) blocks.
"""
from __future__ import annotations

import numpy as np

from .repack import _source_blocks
from .repack_r8 import BLOCK, GROUP

Q4_1_R8 = 1012    # type ids, = kernels/matvec.h (outside ggml's range: never in a file)
Q5_0_R8 = 1013
Q4_0_R8 = 1014
IQ4_NL_R8 = 1018
_BLOCK_BYTES = {Q4_1_R8: 20, Q5_0_R8: 22, Q4_0_R8: 18, IQ4_NL_R8: 18}
_NAMES = {Q4_1_R8: "Q4_1", Q5_0_R8: "Q5_0", Q4_0_R8: "Q4_0", IQ4_NL_R8: "IQ4_NL"}


def _blocks_of(layout: int, cols: int) -> int:
    if layout not in _BLOCK_BYTES:
        raise ValueError(f"layout must be Q4_1_R8 ({Q4_1_R8}), Q5_0_R8 ({Q5_0_R8}), Q4_0_R8 ({Q4_0_R8}) or "
                         f"IQ4_NL_R8 ({IQ4_NL_R8}), got {layout!r}")
    if isinstance(cols, bool) or int(cols) != cols or cols <= 0 or cols % BLOCK:
        raise ValueError(f"{_NAMES[layout]} R8: {cols!r} columns is not a positive multiple of {BLOCK}")
    return int(cols) // BLOCK


def row_bytes(layout: int, cols: int) -> int:
    """Bytes per row of the layout: the file row's (no padding)."""
    return _blocks_of(layout, cols) * _BLOCK_BYTES[layout]


def _order(layout: int, nb: int) -> np.ndarray:
    """For each byte of a row of the layout, the byte of the file row it comes from."""
    size = _BLOCK_BYTES[layout]
    second = size - 18   # bytes of m (Q4_1) or qh (Q5_0); none for Q4_0 and IQ4_NL
    src = np.arange(nb * size, dtype=np.int64).reshape(nb, size)
    parts = []
    for g in range(0, nb, GROUP):
        blocks = src[g:g + GROUP]
        m = len(blocks)
        parts.append(blocks[:, :2].reshape(-1))                                         # m scales d
        parts.append(blocks[:, 2:2 + second].reshape(-1))                               # m minima or qh words
        parts.append(blocks[:, 2 + second:].reshape(m, 4, 4).transpose(1, 0, 2).reshape(-1))   # 4 chunks of 4m
    return np.concatenate(parts)


def _qh_words(layout: int, nb: int) -> np.ndarray:
    """Byte offsets (in a row of the layout) of Q5_0 R8's h' words; empty for Q4_1 R8."""
    if layout != Q5_0_R8:
        return np.zeros(0, dtype=np.int64)
    starts = []
    for g in range(0, nb, GROUP):
        m = min(GROUP, nb - g)
        starts.extend(22 * g + 2 * m + 4 * k for k in range(m))
    return np.asarray(starts, dtype=np.int64)


def _permute_bits(words: np.ndarray, spread: bool) -> np.ndarray:
    """qh -> h' (spread) or back: bit 4t+b <-> bit 8b+t of each uint32."""
    out = np.zeros_like(words)
    for b in range(4):
        for t in range(8):
            src, dst = (4 * t + b, 8 * b + t) if spread else (8 * b + t, 4 * t + b)
            out |= ((words >> np.uint32(src)) & np.uint32(1)) << np.uint32(dst)
    return out


def _rewrite_qh(rows: np.ndarray, layout: int, nb: int, spread: bool) -> None:
    at = _qh_words(layout, nb)
    if not at.size:
        return
    idx = at[:, None] + np.arange(4)
    words = np.ascontiguousarray(rows[:, idx]).view("<u4")[..., 0]
    rows[:, idx] = _permute_bits(words, spread)[..., None].view(np.uint8)


def _check(raw, layout: int, rows: int, cols: int) -> np.ndarray:
    _blocks_of(layout, cols)   # the layout's message for bad column counts
    return _source_blocks(raw, rows, cols, _BLOCK_BYTES[layout], _NAMES[layout]).reshape(int(rows), -1)


def repack_q4_r8(raw, layout: int, rows: int, cols: int) -> np.ndarray:
    """Raw Q4_1 (layout Q4_1_R8), Q5_0 (Q5_0_R8), Q4_0 (Q4_0_R8) or IQ4_NL (IQ4_NL_R8) bytes of a rows x cols
    matrix -> uint8 [rows, row_bytes]."""
    nb = _blocks_of(layout, cols)
    out = np.ascontiguousarray(_check(raw, layout, rows, cols)[:, _order(layout, nb)])
    _rewrite_qh(out, layout, nb, spread=True)
    return out


def unpack_q4_r8(packed, layout: int, rows: int, cols: int) -> np.ndarray:
    """Inverse of repack_q4_r8: the raw file bytes (rows * cols/32 * block bytes)."""
    nb = _blocks_of(layout, cols)
    data = _check(np.asarray(packed, dtype=np.uint8).reshape(-1), layout, rows, cols).copy()
    _rewrite_qh(data, layout, nb, spread=False)
    out = np.empty_like(data)
    out[:, _order(layout, nb)] = data
    return out.reshape(-1)
