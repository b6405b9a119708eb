"""Build GGUF files byte by byte, independently of onewell's writer, so tests can make valid and
malformed files alike. Every helper takes raw integers (ids, counts, lengths) so a test can lie in
any field. Reused by the reader tests and by fuzzing."""
from __future__ import annotations

import struct
from dataclasses import dataclass

from onewell.gguf.constants import BLOCK_LAYOUTS, GGMLType, ValueType

_SCALAR_FORMATS = {
    ValueType.UINT8: "<B", ValueType.INT8: "<b", ValueType.UINT16: "<H", ValueType.INT16: "<h",
    ValueType.UINT32: "<I", ValueType.INT32: "<i", ValueType.FLOAT32: "<f", ValueType.BOOL: "<B",
    ValueType.UINT64: "<Q", ValueType.INT64: "<q", ValueType.FLOAT64: "<d",
}


def u32(v: int) -> bytes:
    return struct.pack("<I", v)


def u64(v: int) -> bytes:
    return struct.pack("<Q", v)


def gstr(s: str | bytes, length: int | None = None) -> bytes:
    """A GGUF string: u64 length, then the bytes. `length` overrides the stated length."""
    raw = s.encode("utf-8", "surrogateescape") if isinstance(s, str) else s
    return u64(len(raw) if length is None else length) + raw


def scalar(vtype: ValueType, value) -> bytes:
    """The encoding of one non-array value (no type id)."""
    if vtype == ValueType.STRING:
        return gstr(value)
    return struct.pack(_SCALAR_FORMATS[vtype], value)


def array(elem_type: int, items: list, count: int | None = None) -> bytes:
    """An array value (no ARRAY type id): element type, count, elements. Items of a nested array
    (elem_type ARRAY) are (inner element type, inner items) pairs."""
    if elem_type == ValueType.ARRAY:
        body = b"".join(array(t, inner) for t, inner in items)
    else:
        body = b"".join(scalar(ValueType(elem_type), v) for v in items)
    return u32(elem_type) + u64(len(items) if count is None else count) + body


def kv(key: str | bytes, value_type: int, payload: bytes) -> bytes:
    """One metadata entry: key, value type id, encoded value."""
    return gstr(key) + u32(value_type) + payload


def kv_scalar(key: str, vtype: ValueType, value) -> bytes:
    return kv(key, vtype, scalar(vtype, value))


def kv_array(key: str, elem_type: int, items: list, count: int | None = None) -> bytes:
    return kv(key, ValueType.ARRAY, array(elem_type, items, count))


def tensor_info(name: str | bytes, dims: list[int], type_id: int, offset: int, n_dims: int | None = None) -> bytes:
    """One tensor-table entry; `offset` is relative to the start of the data section."""
    return (gstr(name) + u32(len(dims) if n_dims is None else n_dims)
            + b"".join(u64(d) for d in dims) + u32(type_id) + u64(offset))


def header(n_tensors: int, n_kv: int, version: int = 3, magic: bytes = b"GGUF") -> bytes:
    return magic + u32(version) + u64(n_tensors) + u64(n_kv)


def pad_to(n: int, alignment: int) -> int:
    return -(-n // alignment) * alignment


def assemble(kvs: list[bytes], infos: list[bytes], data: bytes = b"", *, alignment: int = 32,
             n_tensors: int | None = None, n_kv: int | None = None, version: int = 3,
             magic: bytes = b"GGUF") -> bytes:
    """Header, metadata, tensor table, zero padding to `alignment`, then `data` (the data section)."""
    head = header(len(infos) if n_tensors is None else n_tensors, len(kvs) if n_kv is None else n_kv,
                  version, magic) + b"".join(kvs) + b"".join(infos)
    return head + bytes(pad_to(len(head), alignment) - len(head)) + data


@dataclass
class Tensor:
    name: str
    ggml_type: GGMLType
    dims: list[int]  # GGUF order, ne0 first

    @property
    def nbytes(self) -> int:
        layout = BLOCK_LAYOUTS[self.ggml_type]
        n = 1
        for d in self.dims:
            n *= d
        return n // layout.block_size * layout.type_size

    def payload(self) -> bytes:
        """Deterministic, tensor-specific bytes, so a test can tell tensors apart."""
        seed = sum(self.name.encode())
        return bytes((seed + i * 7) & 0xFF for i in range(self.nbytes))


def tensor_section(tensors: list[Tensor], alignment: int = 32) -> tuple[list[bytes], bytes]:
    """Tensor-table entries and data section laid out back to back, each start aligned.
    No padding after the last tensor, so cutting the file anywhere makes it invalid."""
    infos, data = [], b""
    for t in tensors:
        data += bytes(pad_to(len(data), alignment) - len(data))
        infos.append(tensor_info(t.name, t.dims, t.ggml_type, len(data)))
        data += t.payload()
    return infos, data


SMALL_TENSORS = [
    Tensor("tok.weight", GGMLType.Q8_0, [32, 3]),
    Tensor("norm.weight", GGMLType.F32, [5]),
    Tensor("blk.0.w", GGMLType.Q4_K, [256, 2]),
]


def small_kvs() -> list[bytes]:
    """A handful of metadata entries covering scalars, a string array, a numeric and a nested array."""
    return [
        kv_scalar("general.architecture", ValueType.STRING, "test"),
        kv_scalar("test.count", ValueType.UINT32, 7),
        kv_scalar("test.flag", ValueType.BOOL, 1),
        kv_scalar("test.eps", ValueType.FLOAT32, 0.5),
        kv_array("test.tokens", ValueType.STRING, ["a", "", "ü"]),
        kv_array("test.ids", ValueType.INT32, [1, -2, 3]),
        kv_array("test.nested", ValueType.ARRAY, [(ValueType.UINT8, [1, 2]), (ValueType.STRING, ["x"])]),
    ]


def small_valid_gguf(alignment: int = 32) -> bytes:
    """A small, valid file with metadata of several kinds and three tensors; its data ends exactly
    at the end of the file."""
    kvs = small_kvs()
    if alignment != 32:
        kvs.append(kv_scalar("general.alignment", ValueType.UINT32, alignment))
    infos, data = tensor_section(SMALL_TENSORS, alignment)
    return assemble(kvs, infos, data, alignment=alignment)
