"""Read a GGUF file (v2/v3, little-endian): metadata, tensor table and zero-copy views of tensor data.

The whole header is validated when the reader is created, so later code can trust every field. Every
count read from the file is checked against the bytes left BEFORE anything is allocated or looped over,
so a hostile header fails at once. All problems raise GGUFError naming the file, field and byte offset.

Decisions: bool bytes other than 0/1 are rejected (reading them as True would not write back unchanged);
`general.alignment` may be any integer type (the spec says UINT32) but must be a nonzero power of two;
strings are UTF-8 decoded with errors="surrogateescape", so invalid bytes survive a read/write cycle;
empty metadata keys and empty tensor names are rejected; bytes after the last tensor are allowed.
"""
from __future__ import annotations

import mmap
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from onewell.errors import GGUFError
from onewell.gguf._values import (
    ARRAY_DTYPES,
    MAX_ARRAY_NESTING,
    MIN_ENCODED_SIZE,
    SCALAR_STRUCTS,
    U32,
    U64,
)
from onewell.gguf.constants import (
    BLOCK_LAYOUTS,
    DEFAULT_ALIGNMENT,
    GGUF_MAGIC,
    SUPPORTED_VERSIONS,
    GGMLType,
    ValueType,
)

_INT64_MAX = 2**63 - 1
_MAX_DIMS = 4
_HEADER_SIZE = 4 + 4 + 8 + 8                    # magic, version, tensor count, kv count
_MIN_KV_SIZE = 8 + 4 + 1                        # empty key, value type, smallest value
_MIN_TENSOR_INFO_SIZE = 8 + 4 + 8 + 4 + 8       # empty name, n_dims, one dim, type, offset


@dataclass(frozen=True)
class TensorInfo:
    """One entry of the tensor table. `dims` is GGUF order (ne0, the fastest, first)."""

    name: str
    ggml_type: GGMLType
    dims: tuple[int, ...]
    n_elements: int
    offset: int  # absolute byte offset of the data in the file
    nbytes: int

    @property
    def shape(self) -> tuple[int, ...]:
        """numpy order: the slowest dimension first (a matrix is (rows, cols))."""
        return tuple(reversed(self.dims))


class GGUFReader:
    """A memory-mapped, fully validated GGUF file. Use as a context manager or call close()."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self._mmap = _map_file(self.path)
        try:
            parsed = _HeaderParser(self._mmap, len(self._mmap), str(self.path)).parse()
        except BaseException:
            _close_mapping(self._mmap)
            raise
        self.version: int = parsed.version
        self.alignment: int = parsed.alignment
        self.data_offset: int = parsed.data_offset
        self.metadata: dict[str, Any] = parsed.metadata
        self.metadata_types: dict[str, tuple[ValueType, ValueType | None]] = parsed.metadata_types
        self.tensors: dict[str, TensorInfo] = parsed.tensors
        self._bytes: np.ndarray | None = np.frombuffer(self._mmap, dtype=np.uint8)

    @property
    def file_bytes(self) -> np.ndarray:
        """The whole file as a zero-copy uint8 array (tensor views are slices of it)."""
        if self._bytes is None:
            raise ValueError(f"{self.path}: reader is closed")
        return self._bytes

    def tensor_data(self, name: str) -> np.ndarray:
        """The raw bytes of tensor `name`: a 1-D uint8 view of the mapping, no copy."""
        info = self.tensors.get(name)
        if info is None:
            raise KeyError(f"{self.path}: no tensor named {name!r}")
        return self.file_bytes[info.offset : info.offset + info.nbytes]

    def get(self, key: str, default: Any = None) -> Any:
        return self.metadata.get(key, default)

    def close(self) -> None:
        """Drop the mapping. Views handed out earlier keep it alive until they are gone (never dangle)."""
        self._bytes = None
        _close_mapping(self._mmap)

    def __enter__(self) -> GGUFReader:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"GGUFReader({str(self.path)!r}, version={self.version}, "
                f"{len(self.metadata)} metadata keys, {len(self.tensors)} tensors)")


def _close_mapping(mapping: mmap.mmap) -> None:
    try:
        mapping.close()
    except BufferError:
        pass  # numpy views still export the buffer; the mapping is freed with the last of them


def _map_file(path: Path) -> mmap.mmap:
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size < _HEADER_SIZE:
                start = f.read(len(GGUF_MAGIC))
                if start != GGUF_MAGIC[: len(start)]:
                    raise GGUFError(f"{path}: magic: bad magic {start!r}, expected {GGUF_MAGIC!r}: "
                                    f"not a GGUF file (at byte 0)")
                raise GGUFError(f"{path}: header: truncated, the file has only {size} bytes (at byte {size})")
            return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except OSError as e:
        raise GGUFError(f"{path}: cannot open: {e.strerror or e}") from e


@dataclass
class _Parsed:
    version: int
    alignment: int
    data_offset: int
    metadata: dict[str, Any]
    metadata_types: dict[str, tuple[ValueType, ValueType | None]]
    tensors: dict[str, TensorInfo]


class _HeaderParser:
    """Walks the header once; every read is bounds-checked against the file size."""

    def __init__(self, buf: mmap.mmap, size: int, path: str):
        self.buf = buf
        self.size = size
        self.path = path
        self.pos = 0

    # ---- primitives -------------------------------------------------------------------------

    def fail(self, field: str, problem: str, offset: int | None = None) -> GGUFError:
        at = self.pos if offset is None else offset
        return GGUFError(f"{self.path}: {field}: {problem} (at byte {at})")

    def need(self, n: int, field: str) -> None:
        if n > self.size - self.pos:
            raise self.fail(field, f"truncated, needs {n} bytes but only {self.size - self.pos} remain")

    def u32(self, field: str) -> int:
        self.need(4, field)
        (v,) = U32.unpack_from(self.buf, self.pos)
        self.pos += 4
        return v

    def u64(self, field: str) -> int:
        self.need(8, field)
        (v,) = U64.unpack_from(self.buf, self.pos)
        self.pos += 8
        return v

    def string(self, field: str) -> str:
        start = self.pos
        n = self.u64(f"{field} length")
        if n > self.size - self.pos:
            raise self.fail(field, f"string length {n} exceeds the {self.size - self.pos} bytes left", start)
        s = self.buf[self.pos : self.pos + n].decode("utf-8", "surrogateescape")
        self.pos += n
        return s

    def check_count(self, count: int, min_item_size: int, field: str, offset: int) -> None:
        if count * min_item_size > self.size - self.pos:
            raise self.fail(field, f"count {count} cannot fit in the {self.size - self.pos} bytes left", offset)

    def value_type(self, field: str) -> ValueType:
        start = self.pos
        raw = self.u32(field)
        try:
            return ValueType(raw)
        except ValueError:
            raise self.fail(field, f"invalid value type id {raw}", start) from None

    # ---- sections ---------------------------------------------------------------------------

    def parse(self) -> _Parsed:
        version, n_tensors, n_kv = self.parse_header()
        metadata, types = self.parse_metadata(n_kv)
        alignment = self.alignment_of(metadata, types)
        tensors, offset_fields = self.parse_tensor_infos(n_tensors)
        data_offset = -(-self.pos // alignment) * alignment
        tensors = self.place_tensors(tensors, offset_fields, data_offset, alignment)
        return _Parsed(version, alignment, data_offset, metadata, types, tensors)

    def parse_header(self) -> tuple[int, int, int]:
        magic = bytes(self.buf[0:4])
        if magic != GGUF_MAGIC:
            if magic == GGUF_MAGIC[::-1]:
                raise self.fail("magic", "big-endian GGUF files are not supported", 0)
            raise self.fail("magic", f"bad magic {magic!r}, expected {GGUF_MAGIC!r}: not a GGUF file", 0)
        self.pos = 4
        version = self.u32("version")
        if version not in SUPPORTED_VERSIONS:
            swapped = int.from_bytes(version.to_bytes(4, "little"), "big")
            if swapped in (1, 2, 3):
                problem = "big-endian GGUF files are not supported"
            else:
                problem = f"unsupported GGUF version {version} (supported: {', '.join(map(str, SUPPORTED_VERSIONS))})"
            raise self.fail("version", problem, 4)
        n_tensors = self.u64("tensor count")
        n_kv = self.u64("metadata kv count")
        self.check_count(n_kv, _MIN_KV_SIZE, "metadata kv count", 16)
        self.check_count(n_tensors, _MIN_TENSOR_INFO_SIZE, "tensor count", 8)
        if n_kv * _MIN_KV_SIZE + n_tensors * _MIN_TENSOR_INFO_SIZE > self.size - self.pos:
            raise self.fail("tensor count", f"{n_tensors} tensors and {n_kv} metadata keys cannot fit "
                            f"in the {self.size - self.pos} bytes left", 8)
        return version, n_tensors, n_kv

    def parse_metadata(self, n_kv: int) -> tuple[dict[str, Any], dict[str, tuple[ValueType, ValueType | None]]]:
        metadata: dict[str, Any] = {}
        types: dict[str, tuple[ValueType, ValueType | None]] = {}
        for i in range(n_kv):
            start = self.pos
            key = self.string(f"metadata key #{i}")
            field = f"metadata key #{i} {key!r}"
            if not key:
                raise self.fail(f"metadata key #{i}", "empty key", start)
            if key in metadata:
                raise self.fail(field, "duplicate metadata key", start)
            vtype = self.value_type(f"{field} value type")
            if vtype == ValueType.ARRAY:
                elem, value = self.array(field, depth=1)
                types[key] = (vtype, elem)
            else:
                value = self.scalar(vtype, field)
                types[key] = (vtype, None)
            metadata[key] = value
        return metadata, types

    def scalar(self, vtype: ValueType, field: str) -> Any:
        if vtype == ValueType.STRING:
            return self.string(field)
        codec = SCALAR_STRUCTS[vtype]
        self.need(codec.size, field)
        (v,) = codec.unpack_from(self.buf, self.pos)
        if vtype == ValueType.BOOL:
            if v > 1:
                raise self.fail(field, f"bool byte is {v}, must be 0 or 1")
            v = bool(v)
        self.pos += codec.size
        return v

    def array(self, field: str, depth: int) -> tuple[ValueType, Any]:
        """An array value after its ARRAY type id: element type, count, elements."""
        if depth > MAX_ARRAY_NESTING:
            raise self.fail(field, f"arrays nested more than {MAX_ARRAY_NESTING} deep")
        elem = self.value_type(f"{field} array element type")
        count_at = self.pos
        count = self.u64(f"{field} array length")
        self.check_count(count, MIN_ENCODED_SIZE[elem], f"{field} array length", count_at)
        if elem == ValueType.STRING:
            return elem, self.string_array(count, field)
        if elem == ValueType.ARRAY:
            return elem, [self.array(f"{field} element {j}", depth + 1)[1] for j in range(count)]
        return elem, self.numeric_array(elem, count, field)

    def numeric_array(self, elem: ValueType, count: int, field: str) -> np.ndarray:
        start = self.pos
        if elem == ValueType.BOOL:
            raw = np.frombuffer(self.buf, dtype=np.uint8, count=count, offset=start)
            bad = np.flatnonzero(raw > 1)
            values = raw.astype(np.bool_)
            if bad.size:
                j, byte = int(bad[0]), int(raw[bad[0]])
                del raw  # a live view of the mapping would stop close() after this error
                raise self.fail(f"{field} element {j}", f"bool byte is {byte}, must be 0 or 1", start + j)
        else:
            values = np.frombuffer(self.buf, dtype=ARRAY_DTYPES[elem], count=count, offset=start).copy()
        self.pos += values.nbytes
        return values

    def string_array(self, count: int, field: str) -> list[str]:
        # Hot path (150k tokenizer strings): locals only, no method calls per element.
        buf, size, pos = self.buf, self.size, self.pos
        unpack = U64.unpack_from
        out: list[str] = [""] * count
        for j in range(count):
            if size - pos < 8:
                self.pos = pos
                raise self.fail(f"{field} element {j} length", f"truncated, only {size - pos} bytes remain")
            (n,) = unpack(buf, pos)
            if n > size - pos - 8:
                raise self.fail(f"{field} element {j}",
                                f"string length {n} exceeds the {size - pos - 8} bytes left", pos)
            pos += 8
            out[j] = buf[pos : pos + n].decode("utf-8", "surrogateescape")
            pos += n
        self.pos = pos
        return out

    def alignment_of(self, metadata: dict[str, Any], types: dict[str, tuple[ValueType, ValueType | None]]) -> int:
        if "general.alignment" not in metadata:
            return DEFAULT_ALIGNMENT
        value = metadata["general.alignment"]
        vtype = types["general.alignment"][0]
        field = "metadata 'general.alignment'"
        if vtype in (ValueType.BOOL, ValueType.STRING, ValueType.ARRAY) or not isinstance(value, int):
            raise self.fail(field, f"must be an integer, is of type {vtype.name}")
        if value <= 0 or value & (value - 1):
            raise self.fail(field, f"alignment {value} is not a nonzero power of two")
        return value

    def parse_tensor_infos(self, n_tensors: int) -> tuple[list[TensorInfo], list[int]]:
        infos: list[TensorInfo] = []
        offset_fields: list[int] = []  # where each tensor's offset was read, for error messages
        seen: set[str] = set()
        for i in range(n_tensors):
            start = self.pos
            name = self.string(f"tensor #{i} name")
            field = f"tensor {name!r}"
            if not name:
                raise self.fail(f"tensor #{i} name", "empty tensor name", start)
            if name in seen:
                raise self.fail(field, f"duplicate tensor name (tensor #{i})", start)
            seen.add(name)
            dims_at = self.pos
            n_dims = self.u32(f"{field} n_dims")
            if n_dims == 0 or n_dims > _MAX_DIMS:
                raise self.fail(f"{field} n_dims", f"{n_dims} dimensions, must be 1 to {_MAX_DIMS}", dims_at)
            dims_at = self.pos
            dims = tuple(self.u64(f"{field} dims") for _ in range(n_dims))
            n_elements = 1
            for d in dims:
                signed = d - 2**64 if d > _INT64_MAX else d
                if signed <= 0:
                    raise self.fail(f"{field} dims", f"dimension {signed} in {list(dims)} is not positive", dims_at)
                n_elements *= d
                if n_elements > _INT64_MAX:
                    raise self.fail(f"{field} dims", f"element count of {list(dims)} overflows int64", dims_at)
            type_at = self.pos
            type_id = self.u32(f"{field} type")
            try:
                ggml_type = GGMLType(type_id)
                layout = BLOCK_LAYOUTS[ggml_type]
            except (ValueError, KeyError):
                raise self.fail(f"{field} type", f"unknown tensor type id {type_id}", type_at) from None
            if dims[0] % layout.block_size:
                raise self.fail(f"{field} dims", f"ne0={dims[0]} is not a multiple of the "
                                f"{ggml_type.name} block size {layout.block_size}", dims_at)
            offset_fields.append(self.pos)
            rel_offset = self.u64(f"{field} offset")
            nbytes = n_elements // layout.block_size * layout.type_size
            infos.append(TensorInfo(name, ggml_type, dims, n_elements, rel_offset, nbytes))
        return infos, offset_fields

    def place_tensors(self, infos: list[TensorInfo], offset_fields: list[int], data_offset: int,
                      alignment: int) -> dict[str, TensorInfo]:
        """Turn relative offsets into absolute ones; check alignment, bounds and overlap."""
        placed: list[tuple[TensorInfo, int]] = []
        for info, at in zip(infos, offset_fields):
            field = f"tensor {info.name!r} offset"
            if info.offset % alignment:
                raise self.fail(field, f"offset {info.offset} is not a multiple of the alignment {alignment}", at)
            start = data_offset + info.offset
            if start + info.nbytes > self.size:
                raise self.fail(field, f"data [{start}, {start + info.nbytes}) lies outside the file "
                                f"of {self.size} bytes", at)
            placed.append((TensorInfo(info.name, info.ggml_type, info.dims, info.n_elements, start,
                                      info.nbytes), at))
        by_start = sorted(placed, key=lambda p: p[0].offset)
        for (prev, _), (cur, at) in zip(by_start, by_start[1:]):
            if cur.offset < prev.offset + prev.nbytes:
                raise self.fail(f"tensor {cur.name!r} offset", f"data overlaps tensor {prev.name!r}", at)
        return {info.name: info for info, _ in placed}
