"""Activation formats: how a float activation vector is quantized before a matmul with quantized weights.

Numpy twins of the native quantizers (onewell/_native/kernels/act_quant*.c), bit-exact. Pairing as in ggml:
Q4_0, Q5_0, Q8_0, IQ4_NL weights x Q8_0 activations; Q4_1, Q5_1 x Q8_1; K-quants (Q2_K..Q6_K) and IQ4_XS x
Q8_K; F16 x F16; F32 x F32; BF16 x F32 (ggml pairs BF16 with BF16, but without AVX512-BF16 a bf16 weight is
one shift from float32, and float32 activations are exact: no activation rounding at all). On AVX512-BF16 CPUs
the avx512 path's BF16 kernels round the F32 activations to bf16 as they read them, as ggml does (vdpbf16ps takes
bf16 on both sides; twin: floats.round_to_bf16, runtime.native_kernels.rounds_bf16_activations).

Q8_0 / Q8_1 follow ggml's x86 code, which produced our golden outputs: d = amax / 127 (stored as fp16) and
q = round-half-even(x * (127 / amax)). That differs from the weight quantizer `quantize(Q8_0, ...)` (ggml's
reference: round-half-away of x * (1 / d)). Q8_1 adds s = fp16(d * sum(q)).
"""
from __future__ import annotations

import numpy as np

from ..errors import UnsupportedError
from ..gguf.constants import BLOCK_LAYOUTS, GGMLType
from ._blocks import F32, fp16_bytes, fp16_field
from .q8_k import dequantize_q8_k, quantize_q8_k

ACT_TYPE_FOR: dict[GGMLType, GGMLType] = {
    GGMLType.F32: GGMLType.F32,
    GGMLType.F16: GGMLType.F16,
    GGMLType.BF16: GGMLType.F32,
    GGMLType.Q4_0: GGMLType.Q8_0,
    GGMLType.Q5_0: GGMLType.Q8_0,
    GGMLType.Q8_0: GGMLType.Q8_0,
    GGMLType.Q4_1: GGMLType.Q8_1,
    GGMLType.Q5_1: GGMLType.Q8_1,
    GGMLType.Q4_K: GGMLType.Q8_K,
    GGMLType.Q5_K: GGMLType.Q8_K,
    GGMLType.Q6_K: GGMLType.Q8_K,
    GGMLType.Q2_K: GGMLType.Q8_K,
    GGMLType.Q3_K: GGMLType.Q8_K,
    GGMLType.IQ4_NL: GGMLType.Q8_0,
    GGMLType.IQ4_XS: GGMLType.Q8_K,
}
ACT_TYPES = frozenset(ACT_TYPE_FOR.values())


def act_type_for(weight_type: GGMLType) -> GGMLType:
    """The activation type weights of `weight_type` are multiplied with."""
    try:
        return ACT_TYPE_FOR[GGMLType(weight_type)]
    except (KeyError, ValueError):
        raise UnsupportedError(f"no matmul kernel for weight type {weight_type!r}") from None


def act_row_nbytes(act_type: GGMLType, n_cols: int) -> int:
    layout = BLOCK_LAYOUTS[GGMLType(act_type)]
    if n_cols <= 0 or n_cols % layout.block_size:
        raise ValueError(f"{GGMLType(act_type).name}: {n_cols} columns is not a positive multiple of {layout.block_size}")
    return n_cols // layout.block_size * layout.type_size


def _quantize_32(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(n, 32) float32 -> (d before fp16 rounding, int8 quants), as ggml's x86 quantize_row_q8_0/q8_1."""
    amax = np.abs(x).max(axis=1)
    d = amax / F32(127)
    inv = np.zeros_like(amax)
    np.divide(F32(127), amax, out=inv, where=amax != 0)
    return d, np.rint(x * inv[:, None]).astype(np.int8)


def quantize_q8_0_act(x: np.ndarray) -> np.ndarray:
    """(n_blocks, 32) float32 -> (n_blocks, 34) uint8."""
    d, q = _quantize_32(x)
    return np.concatenate([fp16_bytes(d), q.view(np.uint8)], axis=1)


def quantize_q8_1_act(x: np.ndarray) -> np.ndarray:
    """(n_blocks, 32) float32 -> (n_blocks, 36) uint8: d, s = d * sum(q), quants."""
    d, q = _quantize_32(x)
    s = d * q.sum(axis=1, dtype=np.int32).astype(F32)
    return np.concatenate([fp16_bytes(d), fp16_bytes(s), q.view(np.uint8)], axis=1)


def dequantize_q8_0_act(blocks: np.ndarray) -> np.ndarray:
    return blocks[:, 2:].view(np.int8).astype(F32) * fp16_field(blocks, 0)[:, None]


def dequantize_q8_1_act(blocks: np.ndarray) -> np.ndarray:
    return blocks[:, 4:].view(np.int8).astype(F32) * fp16_field(blocks, 0)[:, None]


def _to_f16(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):   # beyond 65504 becomes inf, as F16C and ggml do
        return x.astype("<f2").view(np.uint8)


_QUANTIZE = {
    GGMLType.Q8_0: quantize_q8_0_act,
    GGMLType.Q8_1: quantize_q8_1_act,
    GGMLType.Q8_K: quantize_q8_k,
    GGMLType.F16: _to_f16,
    GGMLType.F32: lambda x: x.astype("<f4").view(np.uint8),
}
_DEQUANTIZE = {
    GGMLType.Q8_0: dequantize_q8_0_act,
    GGMLType.Q8_1: dequantize_q8_1_act,
    GGMLType.Q8_K: dequantize_q8_k,
    GGMLType.F16: lambda b: b.view("<f2").astype(F32),
    GGMLType.F32: lambda b: b.view("<f4").astype(F32),
}


def quantize_act(act_type: GGMLType, x: np.ndarray) -> np.ndarray:
    """float activations [..., n_cols] -> uint8 [..., row bytes] in `act_type` (one packed row per vector)."""
    act_type = GGMLType(act_type)
    if act_type not in _QUANTIZE:
        raise UnsupportedError(f"{act_type.name} is not an activation type")
    x = np.ascontiguousarray(x, dtype=F32)
    n_cols = x.shape[-1]
    row_bytes = act_row_nbytes(act_type, n_cols)
    block = BLOCK_LAYOUTS[act_type].block_size
    packed = _QUANTIZE[act_type](x.reshape(-1, block))
    return np.ascontiguousarray(packed).reshape(*x.shape[:-1], row_bytes)


def dequantize_act(act_type: GGMLType, packed: np.ndarray, n_cols: int) -> np.ndarray:
    """uint8 [..., row bytes] -> float32 [..., n_cols]: the values the kernels actually multiply."""
    act_type = GGMLType(act_type)
    if act_type not in _DEQUANTIZE:
        raise UnsupportedError(f"{act_type.name} is not an activation type")
    layout = BLOCK_LAYOUTS[act_type]
    row_bytes = act_row_nbytes(act_type, n_cols)
    packed = np.ascontiguousarray(packed, dtype=np.uint8)
    if packed.shape[-1] != row_bytes:
        raise ValueError(f"{act_type.name}: rows of {n_cols} values take {row_bytes} bytes, got {packed.shape[-1]}")
    values = _DEQUANTIZE[act_type](packed.reshape(-1, layout.type_size))
    return values.reshape(*packed.shape[:-1], n_cols)
