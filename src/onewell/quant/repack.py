"""Q8_0 R16 and Q4_1 R16: onewell's load-time repacked layouts of Q8_0 (and, losslessly, Q5_0) and Q4_1 weights,
numpy twins.

The native core repacks at load time (onewell/_native/kernels/repack_r16.c) so its AVX-512 VNNI kernel needs one
convert and one fma per 16 blocks instead of per block; these functions produce the same bytes, for tests and as
the readable definition (onewell/_native/kernels/q8_0_r16.h has the full description).

Weight row, padded to `row_stride(cols)` (a multiple of 64) with zeros:
    [quants: cols bytes][fp16 scales: cols/32 x 2 bytes]
    Blocks of 32 go in groups of 16 (a row's last group may hold m < 16). In the group starting at block g,
    chunk j (0..7) sits at byte 32g + 4mj and holds bytes 4j..4j+3 of each block of the group in turn.
    Quants are stored as q ^ 0x80 = q + 128 (unsigned).
Activation row (Q8_0 quantization, as onewell.quant.act_formats, then interleaved the same way):
    [signed quants: cols bytes][f32 scales (fp16-rounded d): cols/32 x 4][int32 seeds -128 * sum(q): cols/32 x 4]
"""
from __future__ import annotations

import numpy as np

from ..gguf.constants import GGMLType
from .act_formats import quantize_act
from .q5_0 import five_bit_quants

# Type ids of the repacked layouts, outside ggml's range (they never appear in a file); = kernels/matvec.h.
Q8_0_R16 = 1008
ACT_Q8_0_R16 = 1009
GROUP = 16        # blocks per interleaved group
BLOCK = 32
ROW_ALIGN = 64

_Q8_0_BYTES, _Q5_0_BYTES = 34, 22


def _blocks_of(cols: int) -> int:
    if isinstance(cols, bool) or int(cols) != cols or cols <= 0 or cols % BLOCK:
        raise ValueError(f"Q8_0 R16: {cols!r} columns is not a positive multiple of {BLOCK}")
    return int(cols) // BLOCK


def row_stride(cols: int) -> int:
    """Bytes per repacked weight row: quants + fp16 scales, rounded up to a multiple of 64."""
    used = cols + 2 * _blocks_of(cols)
    return -(-used // ROW_ALIGN) * ROW_ALIGN


def act_row_nbytes(cols: int) -> int:
    """Bytes of one R16 activation vector: quants, f32 scales, int32 seeds."""
    return cols + 8 * _blocks_of(cols)


def interleave(quants: np.ndarray) -> np.ndarray:
    """(n, blocks, 32) per-block quant bytes -> (n, blocks * 32) in the R16 group/chunk order."""
    n, nb, _ = quants.shape
    full = nb // GROUP * GROUP
    parts = []
    if full:   # (n, groups, 16 blocks, 8 chunks, 4) -> chunk-major inside each group
        groups = quants[:, :full].reshape(n, full // GROUP, GROUP, 8, 4)
        parts.append(groups.transpose(0, 1, 3, 2, 4).reshape(n, full * BLOCK))
    if nb > full:
        m = nb - full
        tail = quants[:, full:].reshape(n, m, 8, 4)
        parts.append(tail.transpose(0, 2, 1, 3).reshape(n, m * BLOCK))
    return np.concatenate(parts, axis=1) if len(parts) > 1 else np.ascontiguousarray(parts[0])


def _pack_rows(signed_quants: np.ndarray, scale_bytes: np.ndarray, cols: int) -> np.ndarray:
    """(rows, blocks, 32) int8 quants, (rows, blocks, 2) fp16 scale bytes -> uint8 [rows, row_stride(cols)]."""
    rows, nb = signed_quants.shape[:2]
    out = np.zeros((rows, row_stride(cols)), dtype=np.uint8)
    out[:, :cols] = interleave(signed_quants.view(np.uint8) ^ np.uint8(0x80))
    out[:, cols:cols + 2 * nb] = scale_bytes.reshape(rows, 2 * nb)
    return out


def _source_blocks(raw, rows: int, cols: int, block_bytes: int, name: str) -> np.ndarray:
    nb = _blocks_of(cols)
    if isinstance(rows, bool) or int(rows) != rows or rows < 0:
        raise ValueError(f"rows must be a non-negative integer, got {rows!r}")
    data = np.asarray(raw)
    if data.dtype != np.uint8:
        raise ValueError(f"{name} data must be uint8 bytes, got {data.dtype}")
    if data.size != rows * nb * block_bytes:
        raise ValueError(f"{name} {rows} x {cols} takes {rows * nb * block_bytes} bytes, got {data.size}")
    return data.reshape(int(rows), nb, block_bytes)


def repack_q8_0_r16(raw, rows: int, cols: int) -> np.ndarray:
    """Raw Q8_0 bytes of a rows x cols matrix -> uint8 [rows, row_stride(cols)] in the R16 layout."""
    blocks = _source_blocks(raw, rows, cols, _Q8_0_BYTES, "Q8_0")
    return _pack_rows(np.ascontiguousarray(blocks[:, :, 2:]).view(np.int8), blocks[:, :, :2], cols)


def q5_0_to_q8_0_r16(raw, rows: int, cols: int) -> np.ndarray:
    """Raw Q5_0 bytes -> the R16 layout, losslessly: the values q - 16 (in [-16, 15]) become int8 quants and the
    fp16 scale d stays, so every dot product is the one the Q5_0 kernels compute."""
    blocks = _source_blocks(raw, rows, cols, _Q5_0_BYTES, "Q5_0")
    flat = blocks.reshape(-1, _Q5_0_BYTES)
    values = five_bit_quants(flat[:, 2:6], flat[:, 6:22]).astype(np.int16) - 16
    return _pack_rows(values.astype(np.int8).reshape(blocks.shape[0], -1, BLOCK), blocks[:, :, :2], cols)


def unpack_q8_0_r16(packed: np.ndarray, rows: int, cols: int) -> np.ndarray:
    """Inverse of repack_q8_0_r16: uint8 [rows, stride] -> the raw Q8_0 bytes (rows * cols/32 * 34)."""
    nb = _blocks_of(cols)
    packed = np.asarray(packed, dtype=np.uint8).reshape(rows, -1)
    order = interleave(np.arange(nb * BLOCK, dtype=np.int64).reshape(1, nb, BLOCK))[0]
    quants = np.empty((rows, nb * BLOCK), dtype=np.uint8)
    quants[:, order] = packed[:, :cols] ^ np.uint8(0x80)
    out = np.empty((rows, nb, _Q8_0_BYTES), dtype=np.uint8)
    out[:, :, :2] = packed[:, cols:cols + 2 * nb].reshape(rows, nb, 2)
    out[:, :, 2:] = quants.reshape(rows, nb, BLOCK)
    return out.reshape(-1)


def quantize_act_r16(x: np.ndarray) -> np.ndarray:
    """float32 activations [..., cols] -> uint8 [..., act_row_nbytes(cols)]: Q8_0 activation quantization
    (bit-exact with the native quantizers), in the R16 layout."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    cols = x.shape[-1]
    nb = _blocks_of(cols)
    vectors = x.reshape(-1, cols)
    q8_0 = quantize_act(GGMLType.Q8_0, vectors).reshape(len(vectors), nb, _Q8_0_BYTES)
    quants = np.ascontiguousarray(q8_0[:, :, 2:]).view(np.int8)
    scales = np.ascontiguousarray(q8_0[:, :, :2]).view("<f2")[..., 0].astype("<f4")
    seeds = (-128 * quants.sum(axis=2, dtype=np.int32)).astype("<i4")
    out = np.concatenate([interleave(quants.view(np.uint8)), scales.view(np.uint8), seeds.view(np.uint8)], axis=1)
    return out.reshape(*x.shape[:-1], act_row_nbytes(cols))


# --- Q4_1 R16 (onewell/_native/kernels/q4_1_r16.h) -------------------------------------------------------------
#
# Weight row, padded to `q4_1_row_stride(cols)` (a multiple of 64) with zeros:
#     [nibbles: cols/2 bytes][fp16 d: cols/32 x 2][fp16 m: cols/32 x 2]
#     The group of m blocks starting at block g takes 16m bytes at 16g: 4 pairs i of 4m bytes at 16g + 4mi.
#     Byte 4k + t of pair i = q[g+k][8i+t] | q[g+k][8i+4+t] << 4: the low nibbles are R16 chunk 2i, the high
#     nibbles chunk 2i + 1, so one 64-byte load yields the weights of two activation chunks.
# It multiplies the R16 activation rows above: block value d_w d_x sum(q x_q) + m_w d_x sum(x_q).

Q4_1_R16 = 1010
_Q4_1_BYTES = 20


def q4_1_row_stride(cols: int) -> int:
    """Bytes per repacked Q4_1 weight row: nibbles + fp16 d + fp16 m, rounded up to a multiple of 64."""
    used = cols // 2 + 4 * _blocks_of(cols)
    return -(-used // ROW_ALIGN) * ROW_ALIGN


def _q4_1_quants(blocks: np.ndarray) -> np.ndarray:
    """(rows, blocks, 20) raw Q4_1 -> (rows, blocks, 32) uint8 values 0..15 in element order."""
    qs = blocks[:, :, 4:]
    return np.concatenate([qs & np.uint8(0x0F), qs >> np.uint8(4)], axis=2)


def repack_q4_1_r16(raw, rows: int, cols: int) -> np.ndarray:
    """Raw Q4_1 bytes of a rows x cols matrix -> uint8 [rows, q4_1_row_stride(cols)] in the Q4_1 R16 layout."""
    blocks = _source_blocks(raw, rows, cols, _Q4_1_BYTES, "Q4_1")
    rows, nb = blocks.shape[:2]
    # R16 interleave of the values, then each run of 4m bytes (chunk 2i) joins the next run (chunk 2i + 1)
    values = interleave(_q4_1_quants(blocks))
    nibbles = np.empty((rows, cols // 2), dtype=np.uint8)
    for g in range(0, nb, GROUP):
        m = min(GROUP, nb - g)
        chunks = values[:, BLOCK * g:BLOCK * (g + m)].reshape(rows, 4, 2, 4 * m)   # pair i, low/high, bytes
        nibbles[:, 16 * g:16 * (g + m)] = (chunks[:, :, 0] | (chunks[:, :, 1] << np.uint8(4))).reshape(rows, 16 * m)
    out = np.zeros((rows, q4_1_row_stride(cols)), dtype=np.uint8)
    out[:, :cols // 2] = nibbles
    out[:, cols // 2:cols // 2 + 2 * nb] = blocks[:, :, 0:2].reshape(rows, 2 * nb)
    out[:, cols // 2 + 2 * nb:cols // 2 + 4 * nb] = blocks[:, :, 2:4].reshape(rows, 2 * nb)
    return out


def unpack_q4_1_r16(packed: np.ndarray, rows: int, cols: int) -> np.ndarray:
    """Inverse of repack_q4_1_r16: uint8 [rows, stride] -> the raw Q4_1 bytes (rows * cols/32 * 20)."""
    nb = _blocks_of(cols)
    packed = np.asarray(packed, dtype=np.uint8).reshape(rows, -1)
    values = np.empty((rows, cols), dtype=np.uint8)   # R16-interleaved values
    for g in range(0, nb, GROUP):
        m = min(GROUP, nb - g)
        pairs = packed[:, 16 * g:16 * (g + m)].reshape(rows, 4, 1, 4 * m)
        both = np.concatenate([pairs & np.uint8(0x0F), pairs >> np.uint8(4)], axis=2)
        values[:, BLOCK * g:BLOCK * (g + m)] = both.reshape(rows, BLOCK * m)
    order = interleave(np.arange(nb * BLOCK, dtype=np.int64).reshape(1, nb, BLOCK))[0]
    quants = np.empty((rows, nb * BLOCK), dtype=np.uint8)
    quants[:, order] = values
    quants = quants.reshape(rows, nb, BLOCK)
    out = np.empty((rows, nb, _Q4_1_BYTES), dtype=np.uint8)
    out[:, :, 0:2] = packed[:, cols // 2:cols // 2 + 2 * nb].reshape(rows, nb, 2)
    out[:, :, 2:4] = packed[:, cols // 2 + 2 * nb:cols // 2 + 4 * nb].reshape(rows, nb, 2)
    out[:, :, 4:] = quants[:, :, :16] | (quants[:, :, 16:] << np.uint8(4))
    return out.reshape(-1)
