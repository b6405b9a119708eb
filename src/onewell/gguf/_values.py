"""Encodings of GGUF metadata value types, shared by the reader and the writer (all little-endian)."""
from __future__ import annotations

import struct

import numpy as np

from onewell.gguf.constants import ValueType

U32 = struct.Struct("<I")
U64 = struct.Struct("<Q")

# Fixed-size value types: struct for one value, numpy dtype for an array of them.
SCALAR_STRUCTS: dict[ValueType, struct.Struct] = {
    ValueType.UINT8: struct.Struct("<B"),
    ValueType.INT8: struct.Struct("<b"),
    ValueType.UINT16: struct.Struct("<H"),
    ValueType.INT16: struct.Struct("<h"),
    ValueType.UINT32: struct.Struct("<I"),
    ValueType.INT32: struct.Struct("<i"),
    ValueType.FLOAT32: struct.Struct("<f"),
    ValueType.BOOL: struct.Struct("<B"),  # one byte, 0 or 1
    ValueType.UINT64: struct.Struct("<Q"),
    ValueType.INT64: struct.Struct("<q"),
    ValueType.FLOAT64: struct.Struct("<d"),
}

ARRAY_DTYPES: dict[ValueType, np.dtype] = {
    ValueType.UINT8: np.dtype("<u1"),
    ValueType.INT8: np.dtype("<i1"),
    ValueType.UINT16: np.dtype("<u2"),
    ValueType.INT16: np.dtype("<i2"),
    ValueType.UINT32: np.dtype("<u4"),
    ValueType.INT32: np.dtype("<i4"),
    ValueType.FLOAT32: np.dtype("<f4"),
    ValueType.BOOL: np.dtype(np.bool_),
    ValueType.UINT64: np.dtype("<u8"),
    ValueType.INT64: np.dtype("<i8"),
    ValueType.FLOAT64: np.dtype("<f8"),
}

INT_RANGES: dict[ValueType, tuple[int, int]] = {
    ValueType.UINT8: (0, 2**8 - 1),
    ValueType.INT8: (-(2**7), 2**7 - 1),
    ValueType.UINT16: (0, 2**16 - 1),
    ValueType.INT16: (-(2**15), 2**15 - 1),
    ValueType.UINT32: (0, 2**32 - 1),
    ValueType.INT32: (-(2**31), 2**31 - 1),
    ValueType.UINT64: (0, 2**64 - 1),
    ValueType.INT64: (-(2**63), 2**63 - 1),
}

FLOAT_TYPES = (ValueType.FLOAT32, ValueType.FLOAT64)

# The fewest bytes one value of each type occupies: bounds any count before we loop or allocate.
MIN_ENCODED_SIZE: dict[ValueType, int] = {t: s.size for t, s in SCALAR_STRUCTS.items()}
MIN_ENCODED_SIZE[ValueType.STRING] = 8           # length, no bytes
MIN_ENCODED_SIZE[ValueType.ARRAY] = 4 + 8        # element type and count, no elements

# Arrays inside arrays deeper than this are refused: no real file nests, and it bounds recursion.
MAX_ARRAY_NESTING = 16


def value_type_for_dtype(dtype: np.dtype) -> ValueType | None:
    """The GGUF element type an array of this numpy dtype is written as (None: no such type)."""
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return ValueType.BOOL
    for vtype, candidate in ARRAY_DTYPES.items():
        if vtype != ValueType.BOOL and candidate.kind == dtype.kind and candidate.itemsize == dtype.itemsize:
            return vtype
    return None
