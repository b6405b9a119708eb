"""What the native core supports, read from its type-traits table (onewell/_native/kernels/type_traits.c).

Every supported-type set of the native side is derived here, so Python and C cannot disagree: add a row (or a
kernel) to the C table and these follow. The numpy twins keep their own tables (onewell.quant): they say what the
reference backend can do, with or without the native core.

    type_traits()     -> {type id: TypeTraits}, every row of the table
    weight_types()    -> ggml types the executor and native_kernels.matmul take (matmul kernel + row dequantizer)
    repack_layouts()  -> {ggml type: the onewell layout id the plan may repack it into}
    layout_sources()  -> {onewell layout id: the ggml type it is built from}, for the layouts made only when asked
                         for by name (Q8_0 R8), not as a type's repack_to
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from types import MappingProxyType
from typing import Mapping

from onewell.gguf.constants import GGMLType


@dataclass(frozen=True)
class TypeTraits:
    id: int
    name: str
    block_size: int
    block_bytes: int          # repacked layouts: per block, padding excluded
    act_type: int | None      # activation type weights of this type pair with; None: no matmul kernel
    repack_to: int | None     # onewell layout the plan may repack this type into
    repack_from: int | None   # an own layout built only when asked for by name: the ggml type it is built from
    executor_weight: bool     # a file tensor of this type may be an executor matrix
    repacked: bool            # onewell's own load-time layout
    dequant_row: bool         # has a row dequantizer (the embedding gather)
    kernels: Mapping[str, str | None]    # kernel path -> the matmul kernel it runs (after fallback)
    act_quant: Mapping[str, str | None]  # kernel path -> activation quantizer (activation types only)
    float_gemm_from: Mapping[str, int | None]  # kernel path -> batch size from which its matmul is a float GEMM
                                               # (equal to one vector at a time to float rounding, not bit for
                                               # bit); None: every batch is exact (kernels/type_traits.h)


@functools.cache
def type_traits() -> Mapping[int, TypeTraits]:
    from onewell._native import _core   # only when asked: the reference backend runs without the native core

    rows = {}
    for row in _core.type_traits():
        row = dict(row, kernels=MappingProxyType(row["kernels"]), act_quant=MappingProxyType(row["act_quant"]),
                   float_gemm_from=MappingProxyType(row["float_gemm_from"]))
        rows[row["id"]] = TypeTraits(**row)
    return MappingProxyType(rows)


@functools.cache
def weight_types() -> frozenset[GGMLType]:
    return frozenset(GGMLType(t.id) for t in type_traits().values() if t.executor_weight)


@functools.cache
def repack_layouts() -> Mapping[GGMLType, int]:
    return MappingProxyType({GGMLType(t.id): t.repack_to for t in type_traits().values() if t.repack_to is not None})


@functools.cache
def layout_sources() -> Mapping[int, GGMLType]:
    return MappingProxyType({t.id: GGMLType(t.repack_from) for t in type_traits().values()
                             if t.repack_from is not None})
