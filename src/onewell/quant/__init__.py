"""Reference (numpy) codecs of the GGUF tensor types: the exact twins of ggml's C, and of our native kernels.

    dequantize(ggml_type, raw, shape) -> float32 array of `shape` (numpy order: last dim = GGUF ne0)
    quantize(ggml_type, x)            -> uint8 array of raw bytes (rows contiguous, as stored in a GGUF file)

Each block family lives in its own module and works on a (n_blocks, bytes_per_block) matrix; this module checks
sizes and walks big tensors in slices of whole blocks so temporaries stay small.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..errors import UnsupportedError
from ..gguf.constants import BLOCK_LAYOUTS, GGMLType
from .floats import dequantize_bf16, dequantize_f16, dequantize_f32, quantize_bf16, quantize_f16, quantize_f32
from .iq4_nl import dequantize_iq4_nl
from .iq4_xs import dequantize_iq4_xs
from .q2_k import dequantize_q2_k
from .q3_k import dequantize_q3_k
from .q4_0 import dequantize_q4_0, quantize_q4_0
from .q4_1 import dequantize_q4_1
from .q4_k import dequantize_q4_k, quantize_q4_k
from .q5_0 import dequantize_q5_0, quantize_q5_0
from .q5_1 import dequantize_q5_1, quantize_q5_1
from .q5_k import dequantize_q5_k, quantize_q5_k
from .q6_k import dequantize_q6_k, quantize_q6_k
from .q8_0 import dequantize_q8_0, quantize_q8_0

BlockFn = Callable[[np.ndarray], np.ndarray]

_DEQUANTIZERS: dict[GGMLType, BlockFn] = {
    GGMLType.F32: dequantize_f32,
    GGMLType.F16: dequantize_f16,
    GGMLType.BF16: dequantize_bf16,
    GGMLType.Q4_0: dequantize_q4_0,
    GGMLType.Q4_1: dequantize_q4_1,
    GGMLType.Q5_0: dequantize_q5_0,
    GGMLType.Q5_1: dequantize_q5_1,
    GGMLType.Q8_0: dequantize_q8_0,
    GGMLType.Q2_K: dequantize_q2_k,
    GGMLType.Q3_K: dequantize_q3_k,
    GGMLType.Q4_K: dequantize_q4_k,
    GGMLType.Q5_K: dequantize_q5_k,
    GGMLType.Q6_K: dequantize_q6_k,
    GGMLType.IQ4_NL: dequantize_iq4_nl,
    GGMLType.IQ4_XS: dequantize_iq4_xs,
}

_QUANTIZERS: dict[GGMLType, BlockFn] = {
    GGMLType.F32: quantize_f32,
    GGMLType.F16: quantize_f16,
    GGMLType.BF16: quantize_bf16,
    GGMLType.Q4_0: quantize_q4_0,
    GGMLType.Q5_0: quantize_q5_0,
    GGMLType.Q5_1: quantize_q5_1,
    GGMLType.Q8_0: quantize_q8_0,
    GGMLType.Q4_K: quantize_q4_k,
    GGMLType.Q5_K: quantize_q5_k,
    GGMLType.Q6_K: quantize_q6_k,
}

DEQUANTIZE_TYPES: frozenset[GGMLType] = frozenset(_DEQUANTIZERS)
QUANTIZE_TYPES: frozenset[GGMLType] = frozenset(_QUANTIZERS)

# Elements handled per slice: big enough to amortize numpy's call overhead, small enough (≈16 MB of float32)
# that a 136M-element embedding does not need several full-size temporaries.
_SLICE_ELEMENTS = 1 << 22


@dataclass(frozen=True)
class _Geometry:
    block_size: int
    type_size: int
    n_blocks: int

    @property
    def blocks_per_slice(self) -> int:
        return max(1, _SLICE_ELEMENTS // self.block_size)


def _geometry(ggml_type: GGMLType, shape: tuple[int, ...], table: dict[GGMLType, BlockFn], verb: str) -> _Geometry:
    try:
        ggml_type = GGMLType(ggml_type)
    except ValueError:
        raise UnsupportedError(f"cannot {verb} unknown tensor type id {ggml_type!r}") from None
    if ggml_type not in table:
        supported = ", ".join(sorted(t.name for t in table))
        raise UnsupportedError(f"cannot {verb} tensor type {ggml_type.name} (supported: {supported})")
    layout = BLOCK_LAYOUTS[ggml_type]
    if any(int(n) < 0 for n in shape):
        raise ValueError(f"{ggml_type.name}: negative dimension in shape {tuple(shape)}")
    row = int(shape[-1]) if len(shape) else 1
    if row % layout.block_size:
        raise ValueError(f"{ggml_type.name}: last dimension {row} is not a multiple of the block size {layout.block_size}")
    n_elements = int(np.prod(shape, dtype=np.int64))
    return _Geometry(layout.block_size, layout.type_size, n_elements // layout.block_size)


def _as_bytes(raw) -> np.ndarray:
    if isinstance(raw, (bytes, bytearray, memoryview)):
        return np.frombuffer(raw, dtype=np.uint8)
    raw = np.asarray(raw)
    if raw.dtype != np.uint8:
        raise ValueError(f"raw tensor data must be uint8 bytes, got dtype {raw.dtype}")
    return raw.reshape(-1)


def dequantize(ggml_type: GGMLType, raw, shape: tuple[int, ...]) -> np.ndarray:
    """Decode a tensor's raw bytes into float32 values of `shape` (numpy order, last dimension = GGUF ne0)."""
    shape = tuple(int(n) for n in shape)
    geo = _geometry(ggml_type, shape, _DEQUANTIZERS, "dequantize")
    data = _as_bytes(raw)
    expected = geo.n_blocks * geo.type_size
    if data.size != expected:
        raise ValueError(
            f"{GGMLType(ggml_type).name} tensor of shape {shape} needs {expected} bytes, got {data.size}")
    decode = _DEQUANTIZERS[GGMLType(ggml_type)]
    blocks = data.reshape(geo.n_blocks, geo.type_size)
    if geo.n_blocks <= geo.blocks_per_slice:
        return decode(np.ascontiguousarray(blocks)).reshape(shape)
    out = np.empty((geo.n_blocks, geo.block_size), dtype=np.float32)
    step = geo.blocks_per_slice
    for start in range(0, geo.n_blocks, step):
        chunk = np.ascontiguousarray(blocks[start:start + step])
        out[start:start + step] = decode(chunk).reshape(-1, geo.block_size)
    return out.reshape(shape)


def quantize(ggml_type: GGMLType, x: np.ndarray) -> np.ndarray:
    """Encode float values as ggml's reference quantizer does; returns the raw bytes (rows contiguous), 1-D uint8.

    Values are taken as float32 (ggml's quantizers read float). The last dimension must be a whole number of blocks.
    Quantized types refuse NaN/inf, whose scales ggml would reject as invalid row data.
    """
    x = np.asarray(x)
    if not np.issubdtype(x.dtype, np.floating):
        raise ValueError(f"quantize expects floating-point values, got dtype {x.dtype}")
    geo = _geometry(ggml_type, x.shape, _QUANTIZERS, "quantize")
    ggml_type = GGMLType(ggml_type)
    values = np.ascontiguousarray(x, dtype=np.float32).reshape(geo.n_blocks, geo.block_size)
    encode = _QUANTIZERS[ggml_type]
    is_float_type = geo.block_size == 1
    out = np.empty((geo.n_blocks, geo.type_size), dtype=np.uint8)
    step = geo.blocks_per_slice
    for start in range(0, geo.n_blocks, step):
        chunk = values[start:start + step]
        if not is_float_type and not np.isfinite(chunk).all():
            bad = start + int(np.argwhere(~np.isfinite(chunk))[0][0])
            raise ValueError(f"{ggml_type.name}: cannot quantize non-finite values (block {bad})")
        out[start:start + step] = encode(chunk).reshape(-1, geo.type_size)
    return out.reshape(-1)


__all__ = ["dequantize", "quantize", "DEQUANTIZE_TYPES", "QUANTIZE_TYPES"]
