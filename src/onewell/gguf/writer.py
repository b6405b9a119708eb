"""Write a GGUF v3 file atomically: metadata and tensors are collected, then written in one pass to a
temporary file in the destination folder and renamed over the target (no partial output, ever).

Tensor data is only referenced until write(), then streamed to disk one tensor at a time, so callers may
pass views of another file's mmap or a zero-argument callable that produces the bytes on demand.
Metadata value types are inferred when not given; the rules are in onewell.gguf._encode.
"""
from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Union

import numpy as np

from onewell.errors import GGUFError
from onewell.gguf._encode import encode_string, encode_value, infer_type
from onewell.gguf._values import U32, U64
from onewell.gguf.constants import BLOCK_LAYOUTS, DEFAULT_ALIGNMENT, GGUF_MAGIC, GGMLType, ValueType

_VERSION = 3
_INT64_MAX = 2**63 - 1
_MAX_DIMS = 4

ByteSource = Union[bytes, bytearray, memoryview, np.ndarray]
TensorData = Union[ByteSource, Callable[[], ByteSource]]


@dataclass
class _PendingTensor:
    name: str
    ggml_type: GGMLType
    dims: tuple[int, ...]
    nbytes: int
    data: TensorData


def _align(n: int, alignment: int) -> int:
    return -(-n // alignment) * alignment


class GGUFWriter:
    """Collects metadata and tensors, then write() produces the file.

    `data` of add_tensor: bytes-like, or any C-contiguous-able numpy array (its raw bytes are written), or a
    zero-argument callable returning one of those at write time. Its byte size must equal what the type
    and dims need. Anything else raises GGUFError naming the field.
    """

    def __init__(self, path: str | os.PathLike, alignment: int = DEFAULT_ALIGNMENT):
        self.path = Path(path)
        if isinstance(alignment, bool) or not isinstance(alignment, int) or alignment <= 0 or alignment & (alignment - 1):
            raise GGUFError(f"{self.path}: alignment {alignment!r} is not a nonzero power of two")
        self.alignment = alignment
        self._metadata: dict[str, bytes] = {}  # key -> encoded value type id and value
        self._tensors: dict[str, _PendingTensor] = {}

    def add_metadata(self, key: str, value: Any, value_type: ValueType | int | None = None,
                     element_type: ValueType | int | None = None) -> None:
        """Add one metadata entry. Pass the types from GGUFReader.metadata_types to copy a value unchanged;
        `element_type` alone implies ARRAY."""
        where = f"{self.path}: metadata {key!r}"
        if not isinstance(key, str) or not key:
            raise GGUFError(f"{where}: key must be a non-empty str")
        if key in self._metadata:
            raise GGUFError(f"{where}: duplicate metadata key")
        vtype = self._value_type(value_type, where) if value_type is not None else None
        elem = self._value_type(element_type, where) if element_type is not None else None
        if vtype is None:
            vtype, inferred_elem = (ValueType.ARRAY, None) if elem is not None else infer_type(value, where)
            elem = elem if elem is not None else inferred_elem
        if key == "general.alignment" and (isinstance(value, bool) or not isinstance(value, (int, np.integer))
                                           or int(value) != self.alignment):
            raise GGUFError(f"{where}: {value!r} differs from the writer's alignment {self.alignment}; "
                            f"pass alignment={value!r} to GGUFWriter instead")
        self._metadata[key] = encode_value(vtype, elem, value, where)

    def add_tensor(self, name: str, ggml_type: GGMLType | int, dims: Sequence[int], data: TensorData) -> None:
        """Add a tensor; `dims` in GGUF order (ne0, the fastest dimension, first)."""
        where = f"{self.path}: tensor {name!r}"
        if not isinstance(name, str) or not name:
            raise GGUFError(f"{where}: name must be a non-empty str")
        if name in self._tensors:
            raise GGUFError(f"{where}: duplicate tensor name")
        try:
            gtype = GGMLType(ggml_type)
            layout = BLOCK_LAYOUTS[gtype]
        except (ValueError, KeyError):
            raise GGUFError(f"{where}: unknown tensor type {ggml_type!r}") from None
        dims = tuple(dims)
        if not 1 <= len(dims) <= _MAX_DIMS:
            raise GGUFError(f"{where}: {len(dims)} dims, must be 1 to {_MAX_DIMS}")
        n_elements = 1
        for d in dims:
            if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d <= 0:
                raise GGUFError(f"{where}: dims {dims} must be positive integers")
            n_elements *= int(d)
        if n_elements > _INT64_MAX:
            raise GGUFError(f"{where}: element count of dims {dims} overflows int64")
        if dims[0] % layout.block_size:
            raise GGUFError(f"{where}: ne0={dims[0]} is not a multiple of the {gtype.name} block size "
                            f"{layout.block_size}")
        nbytes = n_elements // layout.block_size * layout.type_size
        if not callable(data):
            _check_size(_byte_size(data, where), nbytes, where)
        self._tensors[name] = _PendingTensor(name, gtype, tuple(int(d) for d in dims), nbytes, data)

    def write(self) -> Path:
        """Write the file (GGUF v3). On any error nothing is left behind and an existing file is untouched."""
        header, data_start = self._header()
        tmp = self.path.with_name(f".{self.path.name}.{secrets.token_hex(6)}.tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
        except OSError as e:
            raise GGUFError(f"{self.path}: cannot create {tmp.name}: {e.strerror or e}") from e
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(header)
                f.write(bytes(data_start - len(header)))
                self._write_tensor_data(f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        except BaseException as e:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            if isinstance(e, OSError):
                raise GGUFError(f"{self.path}: write failed: {e.strerror or e}") from e
            raise
        return self.path

    # ---- internals -----------------------------------------------------------------------------

    @staticmethod
    def _value_type(t: ValueType | int, where: str) -> ValueType:
        try:
            return ValueType(t)
        except ValueError:
            raise GGUFError(f"{where}: invalid value type {t!r}") from None

    def _header(self) -> tuple[bytes, int]:
        """Header, metadata and tensor table; and where the data section starts."""
        metadata = dict(self._metadata)
        if self.alignment != DEFAULT_ALIGNMENT and "general.alignment" not in metadata:
            metadata["general.alignment"] = U32.pack(ValueType.UINT32) + U32.pack(self.alignment)
        parts = [GGUF_MAGIC, U32.pack(_VERSION), U64.pack(len(self._tensors)), U64.pack(len(metadata))]
        for key, encoded in metadata.items():
            parts += [encode_string(key, key), encoded]
        offset = 0
        for t in self._tensors.values():
            offset = _align(offset, self.alignment)
            parts += [encode_string(t.name, t.name), U32.pack(len(t.dims)), *(U64.pack(d) for d in t.dims),
                      U32.pack(t.ggml_type), U64.pack(offset)]
            offset += t.nbytes
        header = b"".join(parts)
        return header, _align(len(header), self.alignment)

    def _write_tensor_data(self, f) -> None:
        # Same layout as _header: each tensor starts aligned; padding after the last one too, as ggml writes.
        written = 0
        for t in self._tensors.values():
            where = f"{self.path}: tensor {t.name!r}"
            f.write(bytes(_align(written, self.alignment) - written))
            written = _align(written, self.alignment)
            source = t.data() if callable(t.data) else t.data
            view = _byte_view(source, where)
            _check_size(view.nbytes, t.nbytes, where)
            f.write(view)
            written += t.nbytes
            del source, view  # let a produced tensor be freed before the next one
        f.write(bytes(_align(written, self.alignment) - written))


def _byte_size(data: Any, where: str) -> int:
    if isinstance(data, np.ndarray):
        if data.dtype.hasobject:
            raise GGUFError(f"{where}: data is an object array, not raw bytes")
        return int(data.nbytes)
    try:
        with memoryview(data) as mv:
            return mv.nbytes
    except TypeError:
        raise GGUFError(f"{where}: data must be bytes-like or a numpy array, got {type(data).__name__}") from None


def _byte_view(data: Any, where: str) -> memoryview:
    _byte_size(data, where)  # type check with a clear message
    if isinstance(data, np.ndarray):
        return memoryview(np.ascontiguousarray(data).reshape(-1).view(np.uint8))
    mv = memoryview(data)
    if not mv.c_contiguous:
        mv = memoryview(mv.tobytes())
    return mv.cast("B")


def _check_size(got: int, expected: int, where: str) -> None:
    if got != expected:
        raise GGUFError(f"{where}: data has {got} bytes, the type and dims need {expected}")
