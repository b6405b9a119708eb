"""Small helpers shared by the block codecs: reading fields out of a (n_blocks, type_size) byte matrix, rounding.

Every codec works on whole tensors at once: `blocks` is a C-contiguous uint8 array with one row per block.
Arithmetic stays in float32 because ggml's C does, and float64 would round differently.
"""
from __future__ import annotations

import numpy as np

F32 = np.float32


def fp16_field(blocks: np.ndarray, offset: int) -> np.ndarray:
    """The little-endian fp16 at byte `offset` of every block, widened (exactly) to float32, shape (n_blocks,)."""
    return np.ascontiguousarray(blocks[:, offset:offset + 2]).view("<f2")[:, 0].astype(F32)


def fp16_bytes(values: np.ndarray) -> np.ndarray:
    """float32 values rounded to fp16 (round-to-nearest-even, as ggml's GGML_FP32_TO_FP16), as (n, 2) bytes."""
    with np.errstate(over="ignore"):  # overflow to ±inf is the defined result
        return values.astype("<f2").reshape(-1, 1).view(np.uint8)


def low_high_nibbles(packed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(low 4 bits, high 4 bits) of every byte."""
    return packed & 0x0F, packed >> 4


def bits_of_u32(words: np.ndarray) -> np.ndarray:
    """The 32 bits of each little-endian uint32 in `words` (n, 4 bytes), bit j at column j: shape (n, 32), 0/1."""
    return np.unpackbits(words, axis=1, bitorder="little")


def pack_bits_u32(bits: np.ndarray) -> np.ndarray:
    """Inverse of bits_of_u32: (n, 32) 0/1 → (n, 4) bytes of a little-endian uint32."""
    return np.packbits(bits.astype(np.uint8), axis=1, bitorder="little")


def round_half_away_from_zero(x: np.ndarray) -> np.ndarray:
    """C's roundf on float32 values: ties go away from zero (numpy's rint would go to even).

    x - trunc(x) is exact in float32, so the test "fraction >= 0.5" is exact too (x + 0.5 would round).
    """
    whole = np.trunc(x)
    away = (np.abs(x - whole) >= F32(0.5)).astype(x.dtype)
    return whole + np.copysign(away, x)


def reciprocal_or_zero(d: np.ndarray) -> np.ndarray:
    """ggml's `id = d ? 1.0f/d : 0.0f`, in float32."""
    out = np.zeros_like(d, dtype=F32)
    np.divide(F32(1.0), d, out=out, where=d != 0)
    return out
