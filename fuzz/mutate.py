"""Structure-aware mutations of GGUF bytes.

Blind byte flips in a length-prefixed format mostly break the first string they hit, so the reader's early
checks see almost everything and the later stages almost nothing. Here a lenient walk of the file finds its
fields (counts, string lengths, value type ids, array lengths, dims, tensor types, offsets, scalar values,
tensor data); a mutation then puts a boundary value into one field, or edits bytes, cuts, splices or
duplicates. Used on its own by the smoke test (deterministic for a seed) and beside libFuzzer's own
mutations by the atheris target.
"""
from __future__ import annotations

import random
import struct
from dataclasses import dataclass

from onewell.gguf.constants import GGMLType, ValueType

_FIXED_SIZES = {ValueType.UINT8: 1, ValueType.INT8: 1, ValueType.UINT16: 2, ValueType.INT16: 2,
                ValueType.UINT32: 4, ValueType.INT32: 4, ValueType.FLOAT32: 4, ValueType.BOOL: 1,
                ValueType.UINT64: 8, ValueType.INT64: 8, ValueType.FLOAT64: 8}
_MAX_WALK_FIELDS = 4000  # a long vocabulary array contributes this many fields at most


@dataclass(frozen=True)
class Field:
    offset: int
    size: int   # 1, 2, 4 or 8 (a little-endian integer or float) or the byte length of a blob
    kind: str   # "count", "length", "vtype", "dims", "ggml_type", "offset", "int", "float", "bytes", "data"


def walk(data: bytes) -> list[Field]:
    """The fields of a GGUF file as far as it can be parsed; stops quietly at the first inconsistency."""
    fields: list[Field] = []
    try:
        _walk(data, fields)
    except (struct.error, ValueError, IndexError, _Stop):
        pass
    return fields


class _Stop(Exception):
    pass


def _walk(data: bytes, fields: list[Field]) -> None:
    u64 = lambda at: struct.unpack_from("<Q", data, at)[0]  # noqa: E731
    u32 = lambda at: struct.unpack_from("<I", data, at)[0]  # noqa: E731
    n_tensors, n_kv = u64(8), u64(16)
    fields.extend([Field(4, 4, "int"), Field(8, 8, "count"), Field(16, 8, "count")])
    pos = 24

    def string(pos: int) -> int:
        n = u64(pos)
        fields.append(Field(pos, 8, "length"))
        if pos + 8 + n > len(data):
            raise _Stop
        if n:
            fields.append(Field(pos + 8, n, "bytes"))
        return pos + 8 + n

    def value(pos: int, vtype: int, depth: int) -> int:
        if len(fields) > _MAX_WALK_FIELDS:
            raise _Stop
        if vtype == ValueType.STRING:
            return string(pos)
        if vtype == ValueType.ARRAY:
            if depth > 3:
                raise _Stop
            elem = u32(pos)
            fields.extend([Field(pos, 4, "vtype"), Field(pos + 4, 8, "count")])
            count = u64(pos + 4)
            pos += 12
            if elem in _FIXED_SIZES:
                size = _FIXED_SIZES[ValueType(elem)]
                if pos + count * size > len(data):
                    raise _Stop
                for j in range(min(count, 16)):  # the first elements stand for the rest
                    fields.append(Field(pos + j * size, size, "float" if elem in (6, 12) else "int"))
                return pos + count * size
            for _ in range(count):
                pos = value(pos, elem, depth + 1)
            return pos
        size = _FIXED_SIZES[ValueType(vtype)]
        fields.append(Field(pos, size, "float" if vtype in (6, 12) else "int"))
        return pos + size

    for _ in range(min(n_kv, 10_000)):
        pos = string(pos)
        vtype = u32(pos)
        fields.append(Field(pos, 4, "vtype"))
        pos = value(pos + 4, vtype, 0)
    for _ in range(min(n_tensors, 10_000)):
        pos = string(pos)
        n_dims = u32(pos)
        fields.append(Field(pos, 4, "dims"))
        pos += 4
        for _ in range(min(n_dims, 8)):
            fields.append(Field(pos, 8, "dims"))
            pos += 8
        fields.extend([Field(pos, 4, "ggml_type"), Field(pos + 4, 8, "offset")])
        pos += 12
    if pos < len(data):
        fields.append(Field(pos, len(data) - pos, "data"))


def _interesting(size: int, old: int, n: int) -> list[int]:
    top = (1 << (8 * size)) - 1
    values = {0, 1, 2, 3, 4, 7, 8, 16, 31, 32, 33, 64, 255, 256, 257, 4096, 65535, 65536,
              top, top >> 1, (top >> 1) + 1, old + 1, old - 1, old * 2, old // 2, old + 32, n, n - old, n * 8}
    return sorted(v & top for v in values)


_FLOATS = [float("nan"), float("inf"), float("-inf"), 0.0, -0.0, -1.0, 1e-45, 1e38, 3.4e38, 65504.0]
_FLOATS64 = _FLOATS + [1e300, 5e-324]


def _set_field(buf: bytearray, f: Field, rng: random.Random) -> None:
    if f.offset + f.size > len(buf):
        return
    if f.kind == "vtype":
        struct.pack_into("<I", buf, f.offset, rng.choice([*range(14), 2**31, 2**32 - 1]))
    elif f.kind == "ggml_type":
        choices = [int(t) for t in GGMLType] + [4, 5, 31, 39, 2**32 - 1]
        struct.pack_into("<I", buf, f.offset, rng.choice(choices))
    elif f.kind == "float" and f.size in (4, 8):
        struct.pack_into("<f" if f.size == 4 else "<d", buf, f.offset, rng.choice(_FLOATS if f.size == 4 else _FLOATS64))
    elif f.kind in ("bytes", "data"):
        _edit_blob(buf, f, rng)
    else:
        fmt = {1: "<B", 2: "<H", 4: "<I", 8: "<Q"}[f.size]
        old = struct.unpack_from(fmt, buf, f.offset)[0]
        struct.pack_into(fmt, buf, f.offset, rng.choice(_interesting(f.size, old, len(buf))))


def _edit_blob(buf: bytearray, f: Field, rng: random.Random) -> None:
    """Inside a string or tensor data: a bad UTF-8 byte, a float32 NaN/inf, or random bytes."""
    at = f.offset + rng.randrange(f.size)
    choice = rng.randrange(3)
    if choice == 0:
        buf[at] = rng.choice([0x00, 0x80, 0xC0, 0xED, 0xF8, 0xFF, ord("{"), ord("%"), ord(" ")])
    elif choice == 1 and at + 4 <= f.offset + f.size:
        struct.pack_into("<f", buf, at - (at - f.offset) % 4, rng.choice(_FLOATS[:3] + [1e30]))
    else:
        for i in range(at, min(at + rng.randint(1, 8), f.offset + f.size)):
            buf[i] = rng.randrange(256)


def mutate(data: bytes, rng: random.Random, others: list[bytes] = (), max_size: int = 1 << 20) -> bytes:
    """One to three mutations of `data`; `others` are splice partners."""
    buf = bytearray(data)
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        buf = _mutate_once(buf, rng, others)
    return bytes(buf[:max_size])


def _mutate_once(buf: bytearray, rng: random.Random, others) -> bytearray:
    fields = walk(bytes(buf))
    kind = rng.random()
    if fields and kind < 0.6:
        # kind first, then a field of it: the thousands of vocabulary string lengths would drown the few
        # hyperparameters, dims and type ids otherwise
        by_kind: dict[str, list[Field]] = {}
        for f in fields:
            by_kind.setdefault(f.kind, []).append(f)
        _set_field(buf, rng.choice(by_kind[rng.choice(sorted(by_kind))]), rng)
        return buf
    if not buf:
        return bytearray(rng.randbytes(rng.randint(1, 64)))
    if kind < 0.7:  # flip bits
        for _ in range(rng.randint(1, 4)):
            buf[rng.randrange(len(buf))] ^= 1 << rng.randrange(8)
        return buf
    if kind < 0.78:  # cut the file
        return buf[:rng.randrange(len(buf))]
    if kind < 0.86:  # drop or repeat a chunk
        a = rng.randrange(len(buf))
        b = min(len(buf), a + rng.randint(1, 64))
        return buf[:a] + buf[b:] if rng.random() < 0.5 else buf[:b] + buf[a:b] + buf[b:]
    if kind < 0.94 and others:  # splice with another input
        other = rng.choice(others)
        return buf[:rng.randrange(len(buf) + 1)] + other[rng.randrange(len(other) + 1):]
    at = rng.randrange(len(buf) + 1)  # insert random bytes
    return buf[:at] + bytearray(rng.randbytes(rng.randint(1, 16))) + buf[at:]
