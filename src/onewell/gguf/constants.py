"""Numbers of the GGUF format: metadata value types and tensor (ggml) types with their block layouts.

Facts from the GGUF specification (ggml's docs/gguf.md) and ggml's type table; the names are ggml's.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass

GGUF_MAGIC = b"GGUF"
SUPPORTED_VERSIONS = (2, 3)
DEFAULT_ALIGNMENT = 32


class ValueType(enum.IntEnum):
    UINT8 = 0
    INT8 = 1
    UINT16 = 2
    INT16 = 3
    UINT32 = 4
    INT32 = 5
    FLOAT32 = 6
    BOOL = 7
    STRING = 8
    ARRAY = 9
    UINT64 = 10
    INT64 = 11
    FLOAT64 = 12


class GGMLType(enum.IntEnum):
    F32 = 0
    F16 = 1
    Q4_0 = 2
    Q4_1 = 3
    Q5_0 = 6
    Q5_1 = 7
    Q8_0 = 8
    Q8_1 = 9
    Q2_K = 10
    Q3_K = 11
    Q4_K = 12
    Q5_K = 13
    Q6_K = 14
    Q8_K = 15
    IQ2_XXS = 16
    IQ2_XS = 17
    IQ3_XXS = 18
    IQ1_S = 19
    IQ4_NL = 20
    IQ3_S = 21
    IQ2_S = 22
    IQ4_XS = 23
    I8 = 24
    I16 = 25
    I32 = 26
    I64 = 27
    F64 = 28
    IQ1_M = 29
    BF16 = 30
    TQ1_0 = 34
    TQ2_0 = 35


@dataclass(frozen=True)
class BlockLayout:
    block_size: int  # elements per block (along the fastest dimension)
    type_size: int   # bytes per block


# (elements per block, bytes per block) for every type a GGUF file may name.
BLOCK_LAYOUTS: dict[GGMLType, BlockLayout] = {
    GGMLType.F32: BlockLayout(1, 4),
    GGMLType.F16: BlockLayout(1, 2),
    GGMLType.BF16: BlockLayout(1, 2),
    GGMLType.F64: BlockLayout(1, 8),
    GGMLType.I8: BlockLayout(1, 1),
    GGMLType.I16: BlockLayout(1, 2),
    GGMLType.I32: BlockLayout(1, 4),
    GGMLType.I64: BlockLayout(1, 8),
    GGMLType.Q4_0: BlockLayout(32, 18),
    GGMLType.Q4_1: BlockLayout(32, 20),
    GGMLType.Q5_0: BlockLayout(32, 22),
    GGMLType.Q5_1: BlockLayout(32, 24),
    GGMLType.Q8_0: BlockLayout(32, 34),
    GGMLType.Q8_1: BlockLayout(32, 36),
    GGMLType.Q2_K: BlockLayout(256, 84),
    GGMLType.Q3_K: BlockLayout(256, 110),
    GGMLType.Q4_K: BlockLayout(256, 144),
    GGMLType.Q5_K: BlockLayout(256, 176),
    GGMLType.Q6_K: BlockLayout(256, 210),
    GGMLType.Q8_K: BlockLayout(256, 292),
    GGMLType.IQ2_XXS: BlockLayout(256, 66),
    GGMLType.IQ2_XS: BlockLayout(256, 74),
    GGMLType.IQ3_XXS: BlockLayout(256, 98),
    GGMLType.IQ1_S: BlockLayout(256, 50),
    GGMLType.IQ4_NL: BlockLayout(32, 18),
    GGMLType.IQ3_S: BlockLayout(256, 110),
    GGMLType.IQ2_S: BlockLayout(256, 82),
    GGMLType.IQ4_XS: BlockLayout(256, 136),
    GGMLType.IQ1_M: BlockLayout(256, 56),
    GGMLType.TQ1_0: BlockLayout(256, 54),
    GGMLType.TQ2_0: BlockLayout(256, 66),
}


def row_nbytes(ggml_type: GGMLType, n_elements: int) -> int:
    """Bytes of one row of `n_elements` (must be a whole number of blocks)."""
    layout = BLOCK_LAYOUTS[ggml_type]
    if n_elements % layout.block_size:
        raise ValueError(f"{ggml_type.name}: row of {n_elements} elements is not a multiple of {layout.block_size}")
    return n_elements // layout.block_size * layout.type_size


# general.file_type values (llama.cpp's LLAMA_FTYPE_*), for the types `onewell quantize` writes.
FILE_TYPE = {"f32": 0, "f16": 1, "q4_0": 2, "q4_1": 3, "q8_0": 7, "q5_0": 8, "q5_1": 9, "q4_k_m": 15, "q6_k": 18,
             "bf16": 32}
