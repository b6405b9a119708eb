"""Malformed and hostile GGUF files: each must raise GGUFError naming the file, the field and the
byte offset, quickly and without large allocations. Files are built byte by byte (gguf_builders)."""
from __future__ import annotations

import time
import tracemalloc

import pytest

import gguf_builders as gb
from onewell.errors import GGUFError
from onewell.gguf import GGMLType, GGUFReader, ValueType

HUGE = 2**60
F32 = GGMLType.F32


def one_tensor(info: bytes, data_len: int = 64, kvs: list[bytes] | None = None) -> bytes:
    return gb.assemble(kvs or [], [info], bytes(data_len))


def two_tensors(offset_a: int, offset_b: int, name_b: str = "b") -> bytes:
    infos = [gb.tensor_info("a", [16], F32, offset_a), gb.tensor_info(name_b, [16], F32, offset_b)]
    return gb.assemble([], infos, bytes(128))


def kv_file(*kvs: bytes) -> bytes:
    return gb.assemble(list(kvs), [])


# (id, file bytes, fragments the message must contain)
CASES = [
    ("bad-magic", b"GGML" + gb.small_valid_gguf()[4:], ["magic", "not a GGUF file"]),
    ("big-endian-magic", b"FUGG" + gb.small_valid_gguf()[4:], ["magic", "big-endian"]),
    ("big-endian-version", b"GGUF" + (3).to_bytes(4, "big") + gb.small_valid_gguf()[8:], ["version", "big-endian"]),
    ("version-1", gb.header(0, 0, version=1), ["version", "unsupported GGUF version 1"]),
    ("version-4", gb.header(0, 0, version=4), ["version", "unsupported GGUF version 4"]),
    ("empty-file", b"", ["truncated"]),
    ("short-header", b"GGUF\x03\x00\x00\x00\x01", ["header", "truncated"]),
    ("short-non-gguf-file", b"hello", ["magic", "not a GGUF file"]),
    ("huge-tensor-count", gb.header(HUGE, 0) + bytes(64), ["tensor count", str(HUGE)]),
    ("huge-kv-count", gb.header(0, HUGE) + bytes(64), ["metadata kv count", str(HUGE)]),
    ("counts-together-too-big", gb.header(3, 3) + bytes(100), ["tensor count", "cannot fit"]),
    ("kv-count-past-entries", gb.header(0, 2) + gb.kv_scalar("k", ValueType.UINT8, 1) + b"\xff" * 12,
     ["metadata key #1", "string length"]),
    ("empty-key", kv_file(gb.kv_scalar("", ValueType.UINT8, 1)), ["metadata key #0", "empty"]),
    ("empty-tensor-name", one_tensor(gb.tensor_info("", [8], F32, 0)), ["tensor #0 name", "empty"]),
    ("huge-key-length", gb.header(0, 1) + gb.gstr("k", length=HUGE) + bytes(16), ["metadata key #0", "string length"]),
    ("huge-string-value", kv_file(gb.kv("k", ValueType.STRING, gb.gstr("v", length=HUGE))),
     ["metadata key #0 'k'", "string length"]),
    ("huge-numeric-array", kv_file(gb.kv_array("k", ValueType.UINT64, [1], count=HUGE)),
     ["metadata key #0 'k' array length", str(HUGE)]),
    ("huge-string-array", kv_file(gb.kv_array("k", ValueType.STRING, ["a"], count=HUGE)),
     ["metadata key #0 'k' array length"]),
    ("huge-nested-array", kv_file(gb.kv_array("k", ValueType.ARRAY, [], count=HUGE)),
     ["metadata key #0 'k' array length"]),
    ("huge-inner-array", kv_file(gb.kv("k", ValueType.ARRAY, gb.u32(ValueType.ARRAY) + gb.u64(1)
                                       + gb.array(ValueType.INT32, [1], count=HUGE))),
     ["metadata key #0 'k' element 0 array length"]),
    ("huge-element-string", kv_file(gb.kv("tokenizer.ggml.tokens", ValueType.ARRAY, gb.u32(ValueType.STRING)
                                          + gb.u64(3) + gb.gstr("a") + gb.gstr("b", length=HUGE) + gb.gstr("c"))),
     ["metadata key #0 'tokenizer.ggml.tokens' element 1", "string length"]),
    ("huge-tensor-name", gb.header(1, 0) + gb.gstr("w", length=HUGE) + bytes(40), ["tensor #0 name"]),
    ("duplicate-key", kv_file(gb.kv_scalar("a", ValueType.UINT8, 1), gb.kv_scalar("a", ValueType.UINT8, 2)),
     ["metadata key #1 'a'", "duplicate"]),
    ("invalid-value-type", kv_file(gb.kv("k", 13, gb.u32(0))), ["metadata key #0 'k' value type", "13"]),
    ("invalid-element-type", kv_file(gb.kv("k", ValueType.ARRAY, gb.u32(99) + gb.u64(0))),
     ["metadata key #0 'k' array element type", "99"]),
    ("bool-byte-2", kv_file(gb.kv("flag", ValueType.BOOL, b"\x02")), ["metadata key #0 'flag'", "bool byte is 2"]),
    ("bool-array-byte-7", kv_file(gb.kv_array("flags", ValueType.BOOL, [1, 0, 7])),
     ["metadata key #0 'flags' element 2", "bool byte is 7"]),
    ("too-deep-nesting", kv_file(gb.kv("k", ValueType.ARRAY, b"".join(gb.u32(ValueType.ARRAY) + gb.u64(1)
                                                                      for _ in range(40)) + gb.u32(0) + gb.u64(0))),
     ["metadata key #0 'k'", "nested"]),
    ("alignment-zero", gb.assemble([gb.kv_scalar("general.alignment", ValueType.UINT32, 0)], []),
     ["general.alignment", "power of two"]),
    ("alignment-not-power-of-two", gb.assemble([gb.kv_scalar("general.alignment", ValueType.UINT32, 48)], []),
     ["general.alignment", "48"]),
    ("alignment-is-string", gb.assemble([gb.kv_scalar("general.alignment", ValueType.STRING, "32")], []),
     ["general.alignment", "integer"]),
    ("n-dims-0", one_tensor(gb.tensor_info("w", [], F32, 0)), ["tensor 'w' n_dims", "0 dimensions"]),
    ("n-dims-5", one_tensor(gb.tensor_info("w", [1, 1, 1, 1, 1], F32, 0)), ["tensor 'w' n_dims", "5 dimensions"]),
    ("dim-zero", one_tensor(gb.tensor_info("blk.0.attn_q.weight", [4, 0], F32, 0)),
     ["tensor 'blk.0.attn_q.weight' dims", "not positive"]),
    ("dim-negative", one_tensor(gb.tensor_info("w", [2**64 - 1], F32, 0)), ["tensor 'w' dims", "-1"]),
    ("dims-overflow-int64", one_tensor(gb.tensor_info("w", [2**32, 2**32], F32, 0)), ["tensor 'w' dims", "overflows"]),
    ("unknown-type-99", one_tensor(gb.tensor_info("w", [8], 99, 0)), ["tensor 'w' type", "unknown tensor type id 99"]),
    ("removed-type-4", one_tensor(gb.tensor_info("w", [32], 4, 0)), ["tensor 'w' type", "unknown tensor type id 4"]),
    ("ne0-not-whole-blocks", one_tensor(gb.tensor_info("w", [33, 2], GGMLType.Q4_0, 0), 128),
     ["tensor 'w' dims", "block size 32"]),
    ("data-past-end", one_tensor(gb.tensor_info("w", [32], F32, 0), data_len=127),
     ["tensor 'w' offset", "outside the file"]),
    ("offset-far-past-end", one_tensor(gb.tensor_info("w", [8], F32, 2**63)), ["tensor 'w' offset", "outside"]),
    ("offset-unaligned", one_tensor(gb.tensor_info("w", [8], F32, 4)), ["tensor 'w' offset", "alignment 32"]),
    ("overlapping-tensors", two_tensors(32, 0), ["offset", "overlaps tensor"]),
    ("same-offset-tensors", two_tensors(0, 0), ["offset", "overlaps"]),
    ("duplicate-tensor-name", two_tensors(0, 32, name_b="a"), ["tensor 'a'", "duplicate tensor name"]),
    ("tensor-count-past-entries", gb.header(2, 0) + gb.tensor_info("w", [8], F32, 0) + b"\xff" * 31,
     ["tensor #1 name", "string length"]),
]


@pytest.mark.parametrize("raw,fragments", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_malformed_file_raises_clear_error(tmp_path, raw, fragments):
    path = tmp_path / "bad.gguf"
    path.write_bytes(raw)
    with pytest.raises(GGUFError) as exc:
        GGUFReader(path)
    message = str(exc.value)
    assert str(path) in message
    assert "at byte" in message
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"


@pytest.mark.parametrize("payload", [
    gb.kv_array("k", ValueType.UINT64, [], count=HUGE),
    gb.kv_array("k", ValueType.STRING, [], count=HUGE),
    gb.kv_array("k", ValueType.ARRAY, [], count=HUGE),
])
def test_hostile_count_fails_fast_without_allocating(tmp_path, payload):
    path = tmp_path / "hostile.gguf"
    path.write_bytes(gb.header(0, 1) + payload + bytes(4096))
    tracemalloc.start()
    start = time.perf_counter()
    try:
        with pytest.raises(GGUFError, match="array length"):
            GGUFReader(path)
        elapsed = time.perf_counter() - start
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert elapsed < 0.5
    assert peak < 1 << 20, f"peak allocation {peak} bytes"


def test_many_small_strings_are_bounded_by_file_size(tmp_path):
    # Zero-length strings are 8 bytes each: a count just above what fits must fail, one that fits must pass.
    n = 1000
    body = b"".join(gb.gstr("") for _ in range(n))
    ok = gb.header(0, 1) + gb.kv("k", ValueType.ARRAY, gb.u32(ValueType.STRING) + gb.u64(n) + body)
    (tmp_path / "ok.gguf").write_bytes(ok)
    with GGUFReader(tmp_path / "ok.gguf") as r:
        assert r.metadata["k"] == [""] * n
    bad = gb.header(0, 1) + gb.kv("k", ValueType.ARRAY, gb.u32(ValueType.STRING) + gb.u64(n + 1) + body)
    (tmp_path / "bad.gguf").write_bytes(bad)
    with pytest.raises(GGUFError, match="'k'"):
        GGUFReader(tmp_path / "bad.gguf")


def test_truncation_sweep(tmp_path):
    """Cut a valid file at every byte: always GGUFError, never anything else."""
    raw = gb.small_valid_gguf()
    path = tmp_path / "cut.gguf"
    path.write_bytes(raw)
    GGUFReader(path).close()  # the uncut file is valid
    accepted = []
    for cut in range(len(raw)):
        path.write_bytes(raw[:cut])
        try:
            GGUFReader(path).close()
            accepted.append(cut)
        except GGUFError:
            pass
    assert accepted == []


def test_byte_corruption_sweep_only_raises_gguf_error(tmp_path):
    """Overwrite each header byte with a few values: the reader either accepts the file or raises GGUFError."""
    raw = gb.small_valid_gguf()
    path = tmp_path / "corrupt.gguf"
    header_end = raw.index(gb.SMALL_TENSORS[0].payload()[:8])
    for pos in range(header_end):
        for byte in (0x00, 0xFF):
            if raw[pos] == byte:
                continue
            path.write_bytes(raw[:pos] + bytes([byte]) + raw[pos + 1:])
            try:
                GGUFReader(path).close()
            except GGUFError:
                pass


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(GGUFError, match="cannot open"):
        GGUFReader(tmp_path / "nope.gguf")
    with pytest.raises(GGUFError, match="cannot open"):
        GGUFReader(tmp_path)
