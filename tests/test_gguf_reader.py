"""GGUFReader on valid files: synthetic ones built byte by byte, and the real default models."""
from __future__ import annotations

import mmap
import time

import numpy as np
import pytest

import gguf_builders as gb
from conftest import scaled
from onewell.gguf import GGMLType, GGUFReader, ValueType


def write(tmp_path, data: bytes, name: str = "t.gguf"):
    path = tmp_path / name
    path.write_bytes(data)
    return path


def test_small_file_header_and_metadata(tmp_path):
    with GGUFReader(write(tmp_path, gb.small_valid_gguf())) as r:
        assert r.version == 3
        assert r.alignment == 32
        assert r.data_offset % 32 == 0
        assert r.metadata["general.architecture"] == "test"
        assert r.get("test.count") == 7 and r.get("missing", 42) == 42
        assert r.metadata["test.flag"] is True
        assert r.metadata["test.eps"] == 0.5
        assert r.metadata["test.tokens"] == ["a", "", "ü"]
        ids = r.metadata["test.ids"]
        assert isinstance(ids, np.ndarray) and ids.dtype == np.int32 and ids.tolist() == [1, -2, 3]
        nested = r.metadata["test.nested"]
        assert isinstance(nested, list) and nested[0].dtype == np.uint8
        assert nested[0].tolist() == [1, 2] and nested[1] == ["x"]
        assert r.metadata_types["test.count"] == (ValueType.UINT32, None)
        assert r.metadata_types["test.tokens"] == (ValueType.ARRAY, ValueType.STRING)
        assert r.metadata_types["test.nested"] == (ValueType.ARRAY, ValueType.ARRAY)


def test_small_file_tensors(tmp_path):
    with GGUFReader(write(tmp_path, gb.small_valid_gguf())) as r:
        assert list(r.tensors) == [t.name for t in gb.SMALL_TENSORS]
        for spec in gb.SMALL_TENSORS:
            info = r.tensors[spec.name]
            assert info.ggml_type == spec.ggml_type
            assert info.dims == tuple(spec.dims)
            assert info.shape == tuple(reversed(spec.dims))
            assert info.n_elements == int(np.prod(spec.dims))
            assert info.nbytes == spec.nbytes
            assert info.offset >= r.data_offset and info.offset % r.alignment == 0
            data = r.tensor_data(spec.name)
            assert data.dtype == np.uint8 and data.shape == (spec.nbytes,)
            assert data.tobytes() == spec.payload()
        with pytest.raises(KeyError, match="nope"):
            r.tensor_data("nope")


def test_tensor_data_is_a_view_of_the_mapping(tmp_path):
    r = GGUFReader(write(tmp_path, gb.small_valid_gguf()))
    view = r.tensor_data("norm.weight")
    assert np.shares_memory(view, r.file_bytes)
    assert not view.flags.writeable
    base = view
    while isinstance(base, np.ndarray):
        base = base.base
    assert isinstance(base, (memoryview, mmap.mmap))
    # Closing must not invalidate views already handed out, and later access must fail cleanly.
    expected = gb.SMALL_TENSORS[1].payload()
    r.close()
    assert view.tobytes() == expected
    with pytest.raises(ValueError, match="closed"):
        r.tensor_data("norm.weight")


@pytest.mark.parametrize("alignment", [1, 8, 64, 4096])
def test_alignment_from_metadata(tmp_path, alignment):
    with GGUFReader(write(tmp_path, gb.small_valid_gguf(alignment))) as r:
        assert r.alignment == alignment
        assert r.data_offset % alignment == 0
        for spec in gb.SMALL_TENSORS:
            assert r.tensor_data(spec.name).tobytes() == spec.payload()


def test_version_2_reads_like_version_3(tmp_path):
    infos, data = gb.tensor_section(gb.SMALL_TENSORS)
    raw = gb.assemble(gb.small_kvs(), infos, data, version=2)
    with GGUFReader(write(tmp_path, raw)) as r:
        assert r.version == 2
        assert r.tensor_data("blk.0.w").tobytes() == gb.SMALL_TENSORS[2].payload()


SCALARS = [
    (ValueType.UINT8, 255), (ValueType.INT8, -128), (ValueType.UINT16, 65535), (ValueType.INT16, -32768),
    (ValueType.UINT32, 2**32 - 1), (ValueType.INT32, -(2**31)), (ValueType.FLOAT32, -1.5),
    (ValueType.BOOL, 0), (ValueType.UINT64, 2**64 - 1), (ValueType.INT64, -(2**63)),
    (ValueType.FLOAT64, 0.1), (ValueType.STRING, "héllo ✓ 漢字"), (ValueType.STRING, ""),
]


@pytest.mark.parametrize("vtype,value", SCALARS, ids=[f"{t.name}-{i}" for i, (t, _) in enumerate(SCALARS)])
def test_every_scalar_type(tmp_path, vtype, value):
    raw = gb.assemble([gb.kv_scalar("k", vtype, value)], [])
    with GGUFReader(write(tmp_path, raw)) as r:
        got = r.metadata["k"]
        assert r.metadata_types["k"] == (vtype, None)
        if vtype == ValueType.BOOL:
            assert got is False
        else:
            assert got == value and type(got) is type(value)


@pytest.mark.parametrize("elem", [t for t in ValueType if t not in (ValueType.STRING, ValueType.ARRAY)])
def test_numeric_arrays_keep_their_dtype(tmp_path, elem):
    items = [0, 1, 1] if elem == ValueType.BOOL else [0, 1, 100]
    raw = gb.assemble([gb.kv_array("a", elem, items), gb.kv_array("empty", elem, [])], [])
    with GGUFReader(write(tmp_path, raw)) as r:
        a, empty = r.metadata["a"], r.metadata["empty"]
        assert r.metadata_types["a"] == (ValueType.ARRAY, elem)
        expected_kind = "b" if elem == ValueType.BOOL else ("f" if elem in (ValueType.FLOAT32, ValueType.FLOAT64) else "iu")
        assert a.dtype.kind in expected_kind and empty.dtype == a.dtype
        assert a.tolist() == ([False, True, True] if elem == ValueType.BOOL else items)
        assert empty.shape == (0,)


def test_empty_string_and_nested_arrays(tmp_path):
    raw = gb.assemble([
        gb.kv_array("strings", ValueType.STRING, []),
        gb.kv_array("nested", ValueType.ARRAY, []),
        gb.kv_array("deep", ValueType.ARRAY, [(ValueType.ARRAY, [(ValueType.INT16, [-1])]), (ValueType.STRING, [])]),
    ], [])
    with GGUFReader(write(tmp_path, raw)) as r:
        assert r.metadata["strings"] == [] and r.metadata["nested"] == []
        deep = r.metadata["deep"]
        assert deep[0][0].dtype == np.int16 and deep[0][0].tolist() == [-1]
        assert deep[1] == []


def test_invalid_utf8_is_kept_with_surrogateescape(tmp_path):
    raw = gb.assemble([gb.kv("bad", ValueType.STRING, gb.gstr(b"a\xff\xfeb")),
                       gb.kv("arr", ValueType.ARRAY, gb.u32(ValueType.STRING) + gb.u64(1) + gb.gstr(b"\x80"))], [])
    with GGUFReader(write(tmp_path, raw)) as r:
        assert r.metadata["bad"].encode("utf-8", "surrogateescape") == b"a\xff\xfeb"
        assert r.metadata["arr"][0].encode("utf-8", "surrogateescape") == b"\x80"


def test_file_without_tensors_needs_no_padding(tmp_path):
    head = gb.header(0, 1) + gb.kv_scalar("k", ValueType.UINT8, 1)  # 24 + 14 bytes, not a multiple of 32
    with GGUFReader(write(tmp_path, head)) as r:
        assert r.tensors == {} and r.metadata == {"k": 1}


def test_trailing_bytes_after_data_are_allowed(tmp_path):
    with GGUFReader(write(tmp_path, gb.small_valid_gguf() + bytes(100))) as r:
        assert len(r.tensors) == 3


# ---- the real default models -------------------------------------------------------------------

@pytest.mark.model
def test_qwen_file(qwen_q4km_path):
    start = time.perf_counter()
    r = GGUFReader(qwen_q4km_path)
    elapsed = time.perf_counter() - start
    with r:
        # a wall-time budget (the header and 151,936 token strings parsed, the tensor data only mapped): scaled
        # under emulation, where it took 2.3 s (qemu-aarch64 -cpu max, 2026-12-04; 0.3 s natively)
        assert elapsed < scaled(1.0), f"opening took {elapsed:.2f} s"
        assert len(r.tensors) == 291
        assert r.get("general.architecture") == "qwen2"
        assert r.metadata["qwen2.block_count"] == 24
        assert r.metadata["qwen2.embedding_length"] == 896
        tokens = r.metadata["tokenizer.ggml.tokens"]
        assert len(tokens) == 151936 and all(isinstance(t, str) for t in tokens[:100])
        assert len(r.metadata["tokenizer.ggml.token_type"]) == 151936
        assert r.metadata_types["tokenizer.ggml.merges"] == (ValueType.ARRAY, ValueType.STRING)
        emb = r.tensors["token_embd.weight"]
        assert emb.dims == (896, 151936) and emb.shape == (151936, 896)
        types = {t.ggml_type for t in r.tensors.values()}
        assert types == {GGMLType.F32, GGMLType.Q4_K, GGMLType.Q5_0, GGMLType.Q6_K, GGMLType.Q8_0}
        norm = r.tensors["output_norm.weight"]
        assert norm.ggml_type == GGMLType.F32 and norm.shape == (896,)
        weights = r.tensor_data("output_norm.weight").view(np.float32)
        assert np.isfinite(weights).all() and np.abs(weights).max() > 0
        view = r.tensor_data("token_embd.weight")
        assert view.nbytes == emb.nbytes and np.shares_memory(view, r.file_bytes)
        last_end = max(t.offset + t.nbytes for t in r.tensors.values())
        assert last_end <= qwen_q4km_path.stat().st_size


@pytest.mark.model
def test_smollm_file(smollm_path):
    with GGUFReader(smollm_path) as r:
        assert len(r.tensors) == 272
        assert r.get("general.architecture") == "llama"
        assert "output.weight" not in r.tensors  # tied embeddings
        assert len(r.metadata["tokenizer.ggml.tokens"]) == r.metadata["llama.vocab_size"] == 49152
        q = r.tensors["blk.0.attn_q.weight"]
        assert q.ggml_type == GGMLType.Q4_1 and q.shape == (576, 576)
        assert {t.ggml_type for t in r.tensors.values()} == {GGMLType.F32, GGMLType.Q4_1, GGMLType.Q8_0}
        assert np.shares_memory(r.tensor_data("blk.0.attn_q.weight"), r.file_bytes)
