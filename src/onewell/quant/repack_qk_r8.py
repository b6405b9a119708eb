"""Q4_K R8, Q5_K R8, Q6_K R8 and IQ4_XS R8: onewell's load-time layouts of K-quant (and IQ4_XS) weights for the AVX2
kernels of AMD family 0x17, numpy twin of onewell/_native/kernels/qk_r8.c (same bytes; qk_r8.h has the full
description and docs/perf-log.md entries 44 and 45 the measurements).

Q4_K R8 super-block (148 bytes; the file's is 144):
    [fp16 d][fp16 dmin][8 u8 scales][8 u8 minima][4 chunks of 32 bytes]
    chunk j, bytes 4k..4k+3 = bytes 4j..4j+3 of sub-block k's 16 nibble bytes, Q4_0's order (byte t: element t in
    the low nibble, element 16 + t in the high one).
Q5_K R8 super-block (180 bytes; the file's is 176):
    [fp16 d][fp16 dmin][8 u8 scales][8 u8 minima][8 u32 h'][4 chunks of 32 bytes as Q4_K R8's]
    h'_k holds sub-block k's fifth bits (the file's bit k of qh[e] for element e) with element e's at bit
    8 (e % 4) + e // 4 (Q5_0 R8's permutation).
Q6_K R8 super-block (210 bytes, as the file's):
    [fp16 d][16 i8 scales][4 chunks X0..X3 of 32 bytes][2 chunks Y0, Y1 of 32 bytes]
    element 16 p + 2 v + s is byte 2 p + s of "vector" v: bits 0-5 of X_v (v < 4); for v = 4 + k, bits 6-7 of X_k
    (its high 2 bits) and nibble k % 2 of Y_{k // 2} (its low 4).
IQ4_XS R8 super-block (138 bytes; the file's is 136):
    [fp16 d][8 i8 scales (the 6-bit scale - 32)][4 chunks of 32 bytes as Q4_K R8's]
Activations are the file types' own: plain Q8_K blocks.
"""
from __future__ import annotations

import numpy as np

from .k_scales import pack_scales_mins, unpack_scales_mins
from .q4_k import nibbles_by_sub_block

Q4_K_R8 = 1015     # type ids, = kernels/matvec.h (outside ggml's range: never in a file)
Q6_K_R8 = 1016
Q5_K_R8 = 1017
IQ4_XS_R8 = 1019
BLOCK = 256
_FILE_BYTES = {Q4_K_R8: 144, Q5_K_R8: 176, Q6_K_R8: 210, IQ4_XS_R8: 136}
_BLOCK_BYTES = {Q4_K_R8: 148, Q5_K_R8: 180, Q6_K_R8: 210, IQ4_XS_R8: 138}
_NAMES = {Q4_K_R8: "Q4_K", Q5_K_R8: "Q5_K", Q6_K_R8: "Q6_K", IQ4_XS_R8: "IQ4_XS"}
_FIFTH_BIT_AT = (8 * (np.arange(32) % 4) + np.arange(32) // 4)   # element e's bit in h'


def _blocks_of(layout: int, cols: int) -> int:
    if layout not in _BLOCK_BYTES:
        raise ValueError(f"layout must be Q4_K_R8 ({Q4_K_R8}), Q5_K_R8 ({Q5_K_R8}), Q6_K_R8 ({Q6_K_R8}) or "
                         f"IQ4_XS_R8 ({IQ4_XS_R8}), got {layout!r}")
    if isinstance(cols, bool) or int(cols) != cols or cols <= 0 or cols % BLOCK:
        raise ValueError(f"{_NAMES[layout]} R8: {cols!r} columns is not a positive multiple of {BLOCK}")
    return int(cols) // BLOCK


def row_bytes(layout: int, cols: int) -> int:
    """Bytes per row of the layout (148, 180, 210 or 138 per super-block of 256)."""
    return _blocks_of(layout, cols) * _BLOCK_BYTES[layout]


def _blocks(data, layout: int, rows: int, cols: int, block_bytes: int, what: str) -> np.ndarray:
    nb = _blocks_of(layout, cols)
    if isinstance(rows, bool) or int(rows) != rows or rows < 0:
        raise ValueError(f"rows must be a non-negative integer, got {rows!r}")
    data = np.asarray(data)
    if data.dtype != np.uint8:
        raise ValueError(f"{what} data must be uint8 bytes, got {data.dtype}")
    if data.size != int(rows) * nb * block_bytes:
        raise ValueError(f"{what} {rows} x {cols} takes {int(rows) * nb * block_bytes} bytes, got {data.size}")
    return data.reshape(-1, block_bytes)


# ---- Q4_K R8 and Q5_K R8 ------------------------------------------------------------------------------------

def _q45_k_to_r8(blocks: np.ndarray, fifth: bool) -> np.ndarray:
    head = 52 if fifth else 20
    out = np.empty((blocks.shape[0], head + 128), dtype=np.uint8)
    out[:, :4] = blocks[:, :4]                                   # d, dmin
    out[:, 4:12], out[:, 12:20] = unpack_scales_mins(blocks[:, 4:16])
    if fifth:   # qh[e] bit k -> h'_k bit _FIFTH_BIT_AT[e]
        bits = (blocks[:, 16:48, None] >> np.arange(8, dtype=np.uint8)) & 1    # (n, element e, sub-block k)
        spread = np.zeros((blocks.shape[0], 8, 32), dtype=np.uint8)
        spread[:, :, _FIFTH_BIT_AT] = bits.transpose(0, 2, 1)
        out[:, 20:52] = np.packbits(spread, axis=2, bitorder="little").reshape(-1, 32)
    q = nibbles_by_sub_block(blocks[:, head - 4:])               # (n, 8 sub-blocks, 32 elements)
    pairs = q[:, :, :16] | (q[:, :, 16:] << 4)                   # (n, sub-block k, byte t)
    out[:, head:] = _chunks(pairs)                               # chunk j, lane k, byte
    return out


def _q45_k_from_r8(blocks: np.ndarray, fifth: bool) -> np.ndarray:
    head = 52 if fifth else 20
    out = np.empty((blocks.shape[0], head - 4 + 128), dtype=np.uint8)
    out[:, :4] = blocks[:, :4]
    out[:, 4:16] = pack_scales_mins(blocks[:, 4:12], blocks[:, 12:20])
    if fifth:
        spread = np.unpackbits(blocks[:, 20:52].reshape(-1, 8, 4), axis=2, bitorder="little")   # (n, k, bit)
        bits = spread[:, :, _FIFTH_BIT_AT]                                                      # (n, k, e)
        out[:, 16:48] = np.packbits(bits.transpose(0, 2, 1), axis=2, bitorder="little")[:, :, 0]
    pairs = blocks[:, head:].reshape(-1, 4, 8, 4).transpose(0, 2, 1, 3).reshape(-1, 8, 16)
    q = np.concatenate([pairs & 0x0F, pairs >> 4], axis=2)       # (n, sub-block, 32 elements)
    out[:, head - 4:] = (q[:, 0::2] | (q[:, 1::2] << 4)).reshape(-1, 128)   # group c: sub-block 2c low, 2c + 1 high
    return out


# ---- IQ4_XS R8 ----------------------------------------------------------------------------------------------

_SUB = np.arange(8)


def _chunks(by_sub_block: np.ndarray) -> np.ndarray:
    """(n, 8 sub-blocks, 16 bytes) -> (n, 128): chunk j, lane k = bytes 4j..4j+3 of sub-block k."""
    return by_sub_block.reshape(-1, 8, 4, 4).transpose(0, 2, 1, 3).reshape(-1, 128)


def _iq4_xs_to_r8(blocks: np.ndarray) -> np.ndarray:
    out = np.empty((blocks.shape[0], 138), dtype=np.uint8)
    out[:, :2] = blocks[:, :2]                                                       # d
    high = blocks[:, 2].astype(np.int16) | (blocks[:, 3].astype(np.int16) << 8)     # scales_h
    low = (blocks[:, 4 + _SUB // 2] >> (4 * (_SUB % 2)).astype(np.uint8)) & 15
    scales = (low.astype(np.int16) | (((high[:, None] >> (2 * _SUB)) & 3) << 4)) - 32
    out[:, 2:10] = scales.astype(np.int8).view(np.uint8)
    out[:, 10:] = _chunks(blocks[:, 8:].reshape(-1, 8, 16))                           # already Q4_0's order
    return out


def _iq4_xs_from_r8(blocks: np.ndarray) -> np.ndarray:
    out = np.empty((blocks.shape[0], 136), dtype=np.uint8)
    out[:, :2] = blocks[:, :2]
    ls = blocks[:, 2:10].view(np.int8).astype(np.int16) + 32                        # 0..63
    high = (((ls >> 4) & 3) << (2 * _SUB)).sum(axis=1)
    out[:, 2], out[:, 3] = high & 0xFF, high >> 8
    out[:, 4:8] = (ls[:, 0::2] & 15) | ((ls[:, 1::2] & 15) << 4)
    out[:, 8:] = blocks[:, 10:].reshape(-1, 4, 8, 4).transpose(0, 2, 1, 3).reshape(-1, 128)
    return out


# ---- Q6_K R8 ------------------------------------------------------------------------------------------------

def _q6_k_quants(blocks: np.ndarray) -> np.ndarray:
    """(n, 210) file blocks -> (n, 256) 6-bit values (0..63) in element order (q6_k.py's description)."""
    ql = blocks[:, 0:128].reshape(-1, 2, 2, 32)                  # (block, half, first/second 32 bytes, l)
    qh = blocks[:, 128:192].reshape(-1, 2, 1, 32)
    low4 = np.concatenate([ql & 0x0F, ql >> 4], axis=2)          # (block, half, quarter, l)
    top2 = (qh >> np.array([0, 2, 4, 6], dtype=np.uint8).reshape(1, 1, 4, 1)) & 3
    return (low4 | (top2 << 4)).reshape(-1, 256)


def _q6_k_file(q: np.ndarray) -> np.ndarray:
    """Inverse of _q6_k_quants: (n, 256) values -> (n, 192) ql then qh."""
    q = q.reshape(-1, 2, 4, 32)                                  # (block, half, quarter, l)
    lo4 = q & 0x0F
    ql = np.concatenate([lo4[:, :, 0] | (lo4[:, :, 2] << 4), lo4[:, :, 1] | (lo4[:, :, 3] << 4)], axis=2)
    top = q >> 4
    qh = top[:, :, 0] | (top[:, :, 1] << 2) | (top[:, :, 2] << 4) | (top[:, :, 3] << 6)
    return np.concatenate([ql.reshape(-1, 128), qh.reshape(-1, 64)], axis=1)


def _q6_k_vectors(q: np.ndarray) -> np.ndarray:
    """(n, 256) element order -> (n, 8 vectors, 32 bytes): element 16 p + 2 v + s at vector v, byte 2 p + s."""
    return q.reshape(-1, 16, 8, 2).transpose(0, 2, 1, 3).reshape(-1, 8, 32)


def _q6_k_to_r8(blocks: np.ndarray) -> np.ndarray:
    vec = _q6_k_vectors(_q6_k_quants(blocks))
    out = np.empty((blocks.shape[0], 210), dtype=np.uint8)
    out[:, 0:2] = blocks[:, 208:210]                             # d
    out[:, 2:18] = blocks[:, 192:208]                            # scales
    x = vec[:, :4] | ((vec[:, 4:] >> 4) << 6)                    # (n, 4, 32)
    y = vec[:, 4::2] & 0x0F | ((vec[:, 5::2] & 0x0F) << 4)       # (n, 2, 32): vectors 4 | 5, 6 | 7
    out[:, 18:146], out[:, 146:210] = x.reshape(-1, 128), y.reshape(-1, 64)
    return out


def _q6_k_from_r8(blocks: np.ndarray) -> np.ndarray:
    x = blocks[:, 18:146].reshape(-1, 4, 32)
    y = blocks[:, 146:210].reshape(-1, 2, 32)
    low = np.stack([y & 0x0F, y >> 4], axis=2).reshape(-1, 4, 32)   # vectors 4, 5, 6, 7's low 4 bits
    vec = np.concatenate([x & 63, low | ((x >> 6) << 4)], axis=1)    # (n, 8, 32)
    q = vec.reshape(-1, 8, 16, 2).transpose(0, 2, 1, 3).reshape(-1, 256)
    out = np.empty((blocks.shape[0], 210), dtype=np.uint8)
    out[:, :192] = _q6_k_file(q)
    out[:, 192:208] = blocks[:, 2:18]
    out[:, 208:210] = blocks[:, 0:2]
    return out


_TO_R8 = {Q4_K_R8: lambda b: _q45_k_to_r8(b, False), Q5_K_R8: lambda b: _q45_k_to_r8(b, True), Q6_K_R8: _q6_k_to_r8,
          IQ4_XS_R8: _iq4_xs_to_r8}
_FROM_R8 = {Q4_K_R8: lambda b: _q45_k_from_r8(b, False), Q5_K_R8: lambda b: _q45_k_from_r8(b, True),
            Q6_K_R8: _q6_k_from_r8, IQ4_XS_R8: _iq4_xs_from_r8}


def repack_qk_r8(raw, layout: int, rows: int, cols: int) -> np.ndarray:
    """Raw Q4_K (layout Q4_K_R8), Q5_K (Q5_K_R8), Q6_K (Q6_K_R8) or IQ4_XS (IQ4_XS_R8) bytes of a rows x cols matrix
    -> uint8 [rows, row_bytes]."""
    blocks = _blocks(raw, layout, rows, cols, _FILE_BYTES.get(layout, 0), _NAMES.get(layout, "?"))
    return _TO_R8[layout](blocks).reshape(int(rows), -1)


def unpack_qk_r8(packed, layout: int, rows: int, cols: int) -> np.ndarray:
    """Inverse of repack_qk_r8: the raw file bytes (rows * cols/256 * 144, 176, 210 or 136)."""
    blocks = _blocks(np.asarray(packed, dtype=np.uint8).reshape(-1), layout, rows, cols, _BLOCK_BYTES.get(layout, 0),
                     f"{_NAMES.get(layout, '?')} R8")
    return _FROM_R8[layout](blocks).reshape(-1)
