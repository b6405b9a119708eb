"""Turn Python/numpy metadata values into GGUF bytes, inferring value types when none are given.

Inference rules (documented for GGUFWriter.add_metadata):
  bool -> BOOL; int -> INT32 if it fits, else INT64, else UINT64; float -> FLOAT32; str -> STRING;
  numpy scalars keep their own type (np.uint16 -> UINT16, np.float64 -> FLOAT64, ...);
  list/tuple -> ARRAY whose element type follows the same rules over all items (ints by the range of all,
  ints mixed with floats -> FLOAT32, lists of lists -> ARRAY); a 1-D ndarray -> ARRAY of its dtype;
  an EMPTY list -> ARRAY of STRING (the reader returns [] only for string and nested arrays, so an empty
  list reads back as the same empty list).
"""
from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from onewell.errors import GGUFError
from onewell.gguf._values import (
    ARRAY_DTYPES,
    FLOAT_TYPES,
    INT_RANGES,
    MAX_ARRAY_NESTING,
    SCALAR_STRUCTS,
    U32,
    U64,
    value_type_for_dtype,
)
from onewell.gguf.constants import ValueType

_INFERRED_INT_TYPES = (ValueType.INT32, ValueType.INT64, ValueType.UINT64)


def _is_bool(v: Any) -> bool:
    return isinstance(v, (bool, np.bool_))


def _is_int(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not _is_bool(v)


def _is_real(v: Any) -> bool:
    return isinstance(v, numbers.Real) and not _is_bool(v)


def _is_sequence(v: Any) -> bool:
    return isinstance(v, (list, tuple, np.ndarray))


def _int_type_for_range(lo: int, hi: int, where: str) -> ValueType:
    for vtype in _INFERRED_INT_TYPES:
        tmin, tmax = INT_RANGES[vtype]
        if tmin <= lo and hi <= tmax:
            return vtype
    raise GGUFError(f"{where}: integer range [{lo}, {hi}] fits no GGUF integer type")


def _dtype_type(dtype: np.dtype, where: str) -> ValueType:
    vtype = value_type_for_dtype(dtype)
    if vtype is None:
        raise GGUFError(f"{where}: numpy dtype {dtype} has no GGUF value type")
    return vtype


def infer_type(value: Any, where: str) -> tuple[ValueType, ValueType | None]:
    """(value type, element type or None) for a value given without explicit types."""
    if _is_bool(value):
        return ValueType.BOOL, None
    if isinstance(value, (np.integer, np.floating)):
        return _dtype_type(value.dtype, where), None
    if isinstance(value, int):
        return _int_type_for_range(value, value, where), None
    if isinstance(value, float):
        return ValueType.FLOAT32, None
    if isinstance(value, str):
        return ValueType.STRING, None
    if _is_sequence(value):
        return ValueType.ARRAY, infer_element_type(value, where)
    raise GGUFError(f"{where}: cannot store a value of type {type(value).__name__} in GGUF metadata")


def infer_element_type(items: Any, where: str) -> ValueType:
    if isinstance(items, np.ndarray):
        return _dtype_type(items.dtype, where)
    if len(items) == 0:
        return ValueType.STRING
    if all(isinstance(v, str) for v in items):
        return ValueType.STRING
    if all(_is_bool(v) for v in items):
        return ValueType.BOOL
    if all(_is_int(v) for v in items):
        return _int_type_for_range(int(min(items)), int(max(items)), where)
    if all(_is_real(v) for v in items):
        return ValueType.FLOAT32
    if all(_is_sequence(v) for v in items):
        return ValueType.ARRAY
    kinds = sorted({type(v).__name__ for v in items})
    raise GGUFError(f"{where}: array mixes element kinds {kinds}; give element_type or make them uniform")


def encode_value(vtype: ValueType, elem: ValueType | None, value: Any, where: str) -> bytes:
    """The bytes after a metadata key: value type id, then the value."""
    if vtype == ValueType.ARRAY:
        return U32.pack(vtype) + encode_array(elem, value, where, depth=1)
    if elem is not None:
        raise GGUFError(f"{where}: an element type is only meaningful for ARRAY values, not {vtype.name}")
    return U32.pack(vtype) + encode_scalar(vtype, value, where)


def encode_string(value: Any, where: str) -> bytes:
    if isinstance(value, str):
        raw = value.encode("utf-8", "surrogateescape")  # the reader's decoding, reversed
    elif isinstance(value, (bytes, bytearray)):
        raw = bytes(value)
    else:
        raise GGUFError(f"{where}: STRING value must be str, got {type(value).__name__}")
    return U64.pack(len(raw)) + raw


def encode_scalar(vtype: ValueType, value: Any, where: str) -> bytes:
    if vtype == ValueType.STRING:
        return encode_string(value, where)
    if vtype == ValueType.BOOL:
        if not _is_bool(value):
            raise GGUFError(f"{where}: BOOL value must be a bool, got {value!r}")
        return b"\x01" if value else b"\x00"
    if vtype in INT_RANGES:
        if not _is_int(value):
            raise GGUFError(f"{where}: {vtype.name} value must be an integer, got {value!r}")
        lo, hi = INT_RANGES[vtype]
        if not lo <= int(value) <= hi:
            raise GGUFError(f"{where}: {value} is out of range for {vtype.name} [{lo}, {hi}]")
        return SCALAR_STRUCTS[vtype].pack(int(value))
    if vtype in FLOAT_TYPES:
        if not _is_real(value):
            raise GGUFError(f"{where}: {vtype.name} value must be a number, got {value!r}")
        return SCALAR_STRUCTS[vtype].pack(float(value))
    raise GGUFError(f"{where}: {vtype.name} is not a scalar value type")


def encode_array(elem: ValueType | None, items: Any, where: str, depth: int) -> bytes:
    """Element type id, count, elements."""
    if depth > MAX_ARRAY_NESTING:
        raise GGUFError(f"{where}: arrays nested more than {MAX_ARRAY_NESTING} deep")
    if not _is_sequence(items):
        raise GGUFError(f"{where}: ARRAY value must be a list, tuple or 1-D ndarray, got {type(items).__name__}")
    if isinstance(items, np.ndarray) and items.ndim != 1:
        raise GGUFError(f"{where}: ARRAY ndarray must be 1-D, has shape {items.shape}")
    if elem is None:
        elem = infer_element_type(items, where)
    head = U32.pack(elem) + U64.pack(len(items))
    if elem == ValueType.STRING:
        return head + b"".join([encode_string(v, f"{where} element {j}") for j, v in enumerate(items)])
    if elem == ValueType.ARRAY:
        return head + b"".join([encode_array(None, v, f"{where} element {j}", depth + 1)
                                for j, v in enumerate(items)])
    return head + _numeric_array(elem, items, where).tobytes()


def _numeric_array(elem: ValueType, items: Any, where: str) -> np.ndarray:
    """Items as a little-endian array of `elem`, refusing anything that would not store exactly."""
    if isinstance(items, np.ndarray):
        src = items
        kind = src.dtype.kind
        ok = {"b": kind == "b", "i": kind in "iu", "f": kind in "iuf"}
    else:
        check = _is_bool if elem == ValueType.BOOL else _is_int if elem in INT_RANGES else _is_real
        for j, v in enumerate(items):
            if not check(v):
                raise GGUFError(f"{where} element {j}: {v!r} is not a valid {elem.name}")
        src = np.array(items, dtype=object) if elem in INT_RANGES else np.array(items)
        ok = {"b": True, "i": True, "f": True}
    group = "b" if elem == ValueType.BOOL else "i" if elem in INT_RANGES else "f"
    if not ok[group]:
        raise GGUFError(f"{where}: cannot store a {src.dtype} array as {elem.name}")
    if group == "i" and src.size:
        lo, hi = INT_RANGES[elem]
        smallest, largest = int(src.min()), int(src.max())
        if smallest < lo or largest > hi:
            raise GGUFError(f"{where}: values [{smallest}, {largest}] are out of range for {elem.name}")
    if elem == ValueType.BOOL:
        return src.astype(np.uint8)
    return src.astype(ARRAY_DTYPES[elem])
