"""GGUFWriter: byte-exact output, type inference, round trips through GGUFReader, validation, atomicity."""
from __future__ import annotations

import os

import numpy as np
import pytest

import gguf_builders as gb
from onewell.errors import GGUFError
from onewell.gguf import GGMLType, GGUFReader, GGUFWriter, ValueType


def files_in(folder) -> list[str]:
    return sorted(os.listdir(folder))


def round_trip(tmp_path, fill) -> GGUFReader:
    w = GGUFWriter(tmp_path / "out.gguf")
    fill(w)
    return GGUFReader(w.write())


def test_output_matches_an_independent_byte_builder(tmp_path):
    w = GGUFWriter(tmp_path / "out.gguf")
    w.add_metadata("general.architecture", "test", ValueType.STRING)
    w.add_metadata("test.count", 7, ValueType.UINT32)
    w.add_metadata("test.flag", True, ValueType.BOOL)
    w.add_metadata("test.eps", 0.5, ValueType.FLOAT32)
    w.add_metadata("test.tokens", ["a", "", "ü"], ValueType.ARRAY, ValueType.STRING)
    w.add_metadata("test.ids", [1, -2, 3], ValueType.ARRAY, ValueType.INT32)
    w.add_metadata("test.nested", [np.array([1, 2], np.uint8), ["x"]], ValueType.ARRAY, ValueType.ARRAY)
    for t in gb.SMALL_TENSORS:
        w.add_tensor(t.name, t.ggml_type, t.dims, t.payload())
    written = w.write().read_bytes()
    expected = gb.small_valid_gguf()
    expected += bytes(gb.pad_to(len(expected), 32) - len(expected))  # the writer pads after the last tensor
    assert written == expected


SCALARS = [
    (ValueType.UINT8, 255), (ValueType.INT8, -128), (ValueType.UINT16, 65535), (ValueType.INT16, -32768),
    (ValueType.UINT32, 2**32 - 1), (ValueType.INT32, -(2**31)), (ValueType.FLOAT32, -1.5),
    (ValueType.BOOL, True), (ValueType.BOOL, False), (ValueType.UINT64, 2**64 - 1), (ValueType.INT64, -(2**63)),
    (ValueType.FLOAT64, 0.1), (ValueType.STRING, "héllo ✓ 漢字 🦙"), (ValueType.STRING, ""),
    (ValueType.STRING, b"\xff\xfe".decode("utf-8", "surrogateescape")),
]


def test_every_scalar_type_round_trips(tmp_path):
    def fill(w):
        for i, (vtype, value) in enumerate(SCALARS):
            w.add_metadata(f"k{i}", value, vtype)

    with round_trip(tmp_path, fill) as r:
        for i, (vtype, value) in enumerate(SCALARS):
            assert r.metadata_types[f"k{i}"] == (vtype, None)
            assert r.metadata[f"k{i}"] == value and type(r.metadata[f"k{i}"]) is type(value)


NUMERIC = [t for t in ValueType if t not in (ValueType.STRING, ValueType.ARRAY)]


def test_every_array_type_round_trips(tmp_path):
    arrays = {t: (np.array([True, False, True]) if t == ValueType.BOOL else
                  np.array([0, 1, 100], dtype=np.dtype(f"<{'f' if t in (ValueType.FLOAT32, ValueType.FLOAT64) else 'i'}8")))
              for t in NUMERIC}
    nested = [np.array([1, 2], np.int16), ["a", ""], [], [np.array([], np.float64), [["deep"]]]]

    def fill(w):
        for t, a in arrays.items():
            w.add_metadata(f"arr.{t.name}", a, ValueType.ARRAY, t)
            w.add_metadata(f"empty.{t.name}", [], ValueType.ARRAY, t)
        w.add_metadata("strings", ["", "x", "🦙" * 3], ValueType.ARRAY, ValueType.STRING)
        w.add_metadata("empty.strings", [], ValueType.ARRAY, ValueType.STRING)
        w.add_metadata("empty.nested", [], ValueType.ARRAY, ValueType.ARRAY)
        w.add_metadata("nested", nested, ValueType.ARRAY, ValueType.ARRAY)

    with round_trip(tmp_path, fill) as r:
        for t, a in arrays.items():
            got = r.metadata[f"arr.{t.name}"]
            assert r.metadata_types[f"arr.{t.name}"] == (ValueType.ARRAY, t)
            assert got.tolist() == a.tolist()
            assert r.metadata[f"empty.{t.name}"].shape == (0,)
        assert r.metadata["strings"] == ["", "x", "🦙" * 3]
        assert r.metadata["empty.strings"] == [] and r.metadata["empty.nested"] == []
        got = r.metadata["nested"]
        assert got[0].dtype == np.int16 and got[0].tolist() == [1, 2]
        assert got[1] == ["a", ""] and got[2] == []
        assert got[3][0].dtype == np.float64 and got[3][0].shape == (0,) and got[3][1] == [["deep"]]


INFERENCE = [
    (True, (ValueType.BOOL, None)),
    (7, (ValueType.INT32, None)),
    (-(2**31), (ValueType.INT32, None)),
    (2**31, (ValueType.INT64, None)),
    (2**63, (ValueType.UINT64, None)),
    (0.25, (ValueType.FLOAT32, None)),
    ("s", (ValueType.STRING, None)),
    (np.uint16(3), (ValueType.UINT16, None)),
    (np.float64(0.1), (ValueType.FLOAT64, None)),
    ([1, 2, 3], (ValueType.ARRAY, ValueType.INT32)),
    ([1, 2**40], (ValueType.ARRAY, ValueType.INT64)),
    ([1, 2.5], (ValueType.ARRAY, ValueType.FLOAT32)),
    ([True, False], (ValueType.ARRAY, ValueType.BOOL)),
    (["a", "b"], (ValueType.ARRAY, ValueType.STRING)),
    ([], (ValueType.ARRAY, ValueType.STRING)),
    ([[1], ["a"]], (ValueType.ARRAY, ValueType.ARRAY)),
    (np.arange(4, dtype=np.int8), (ValueType.ARRAY, ValueType.INT8)),
    (np.zeros(2, dtype=np.float64), (ValueType.ARRAY, ValueType.FLOAT64)),
]


@pytest.mark.parametrize("value,types", INFERENCE, ids=[str(i) for i in range(len(INFERENCE))])
def test_type_inference(tmp_path, value, types):
    with round_trip(tmp_path, lambda w: w.add_metadata("k", value)) as r:
        assert r.metadata_types["k"] == types
        got = r.metadata["k"]
        if isinstance(got, np.ndarray):
            assert got.tolist() == list(value)
        elif isinstance(got, list) and got and isinstance(got[0], np.ndarray):
            assert got[0].tolist() == value[0] and got[1] == value[1]
        else:
            assert got == value


def test_tensors_round_trip_with_alignment(tmp_path):
    f32 = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    q8 = np.arange(34 * 2, dtype=np.uint8)
    w = GGUFWriter(tmp_path / "out.gguf", alignment=64)
    w.add_tensor("a", GGMLType.F32, [4, 3], f32)                  # any numpy array: its raw bytes
    w.add_tensor("b", GGMLType.Q8_0, [64], q8)
    w.add_tensor("c", GGMLType.F16, [3], lambda: b"\x01\x02" * 3)  # produced at write time
    with GGUFReader(w.write()) as r:
        assert r.alignment == 64 and r.metadata["general.alignment"] == 64
        assert [t.offset % 64 for t in r.tensors.values()] == [0, 0, 0]
        assert r.tensors["a"].shape == (3, 4)
        assert np.array_equal(r.tensor_data("a").view(np.float32).reshape(3, 4), f32)
        assert r.tensor_data("b").tobytes() == q8.tobytes()
        assert r.tensor_data("c").tobytes() == b"\x01\x02" * 3
        assert (tmp_path / "out.gguf").stat().st_size % 64 == 0


def test_copy_a_file_from_reader_views(tmp_path):
    src = tmp_path / "src.gguf"
    src.write_bytes(gb.small_valid_gguf(alignment=16))
    with GGUFReader(src) as r:
        w = GGUFWriter(tmp_path / "copy.gguf", alignment=r.alignment)
        for key, value in r.metadata.items():
            w.add_metadata(key, value, *r.metadata_types[key])
        for name, info in r.tensors.items():
            w.add_tensor(name, info.ggml_type, info.dims, r.tensor_data(name))
        w.write()
        with GGUFReader(tmp_path / "copy.gguf") as c:
            assert c.metadata_types == r.metadata_types
            assert list(c.tensors) == list(r.tensors)
            for key, value in r.metadata.items():
                other = c.metadata[key]
                if key == "test.nested":
                    assert other[0].tolist() == value[0].tolist() and other[1] == value[1]
                elif isinstance(value, np.ndarray):
                    assert other.dtype == value.dtype and other.tolist() == value.tolist()
                else:
                    assert other == value
            for name, info in r.tensors.items():
                assert c.tensors[name].dims == info.dims and c.tensors[name].ggml_type == info.ggml_type
                assert np.array_equal(c.tensor_data(name), r.tensor_data(name))


@pytest.mark.model
def test_qwen_metadata_round_trips(tmp_path, qwen_q4km_path):
    with GGUFReader(qwen_q4km_path) as r:
        w = GGUFWriter(tmp_path / "meta.gguf")
        for key, value in r.metadata.items():
            w.add_metadata(key, value, *r.metadata_types[key])
        w.add_tensor("output_norm.weight", GGMLType.F32, r.tensors["output_norm.weight"].dims,
                     r.tensor_data("output_norm.weight"))
        with GGUFReader(w.write()) as c:
            assert c.metadata_types == r.metadata_types
            assert c.metadata["tokenizer.ggml.tokens"] == r.metadata["tokenizer.ggml.tokens"]
            assert c.metadata["tokenizer.ggml.merges"] == r.metadata["tokenizer.ggml.merges"]
            assert np.array_equal(c.metadata["tokenizer.ggml.token_type"], r.metadata["tokenizer.ggml.token_type"])
            assert c.metadata["tokenizer.chat_template"] == r.metadata["tokenizer.chat_template"]
            assert c.tensor_data("output_norm.weight").tobytes() == r.tensor_data("output_norm.weight").tobytes()


# ---- validation ----------------------------------------------------------------------------------

BAD_METADATA = [
    (dict(key="", value=1), "non-empty"),
    (dict(key="k", value=2**64), "fits no GGUF integer type"),
    (dict(key="k", value=-(2**63) - 1), "fits no GGUF integer type"),
    (dict(key="k", value=300, value_type=ValueType.UINT8), "out of range for UINT8"),
    (dict(key="k", value=1.5, value_type=ValueType.INT32), "must be an integer"),
    (dict(key="k", value=1, value_type=ValueType.BOOL), "must be a bool"),
    (dict(key="k", value=3, value_type=ValueType.STRING), "must be str"),
    (dict(key="k", value=1, value_type=13), "invalid value type 13"),
    (dict(key="k", value=1, value_type=ValueType.UINT8, element_type=ValueType.UINT8), "only meaningful for ARRAY"),
    (dict(key="k", value=[1, "a"]), "mixes element kinds"),
    (dict(key="k", value=[1, 2**70]), "fits no GGUF integer type"),
    (dict(key="k", value=[1, -1], element_type=ValueType.UINT32), "out of range for UINT32"),
    (dict(key="k", value=np.array([1.5]), element_type=ValueType.INT32), "cannot store a float64 array as INT32"),
    (dict(key="k", value=[1, 2], element_type=ValueType.STRING), "element 0"),
    (dict(key="k", value=np.zeros((2, 2))), "must be 1-D"),
    (dict(key="k", value=np.zeros(2, np.complex64)), "has no GGUF value type"),
    (dict(key="k", value={"a": 1}), "cannot store a value of type dict"),
    (dict(key="k", value=5, value_type=ValueType.ARRAY), "must be a list"),
    (dict(key="general.alignment", value=64), "alignment=64"),
]


@pytest.mark.parametrize("kwargs,fragment", BAD_METADATA, ids=[str(i) for i in range(len(BAD_METADATA))])
def test_bad_metadata_is_refused(tmp_path, kwargs, fragment):
    w = GGUFWriter(tmp_path / "out.gguf")
    with pytest.raises(GGUFError, match=None) as exc:
        w.add_metadata(**kwargs)
    assert fragment in str(exc.value) and "out.gguf" in str(exc.value)


def test_duplicate_metadata_key(tmp_path):
    w = GGUFWriter(tmp_path / "out.gguf")
    w.add_metadata("k", 1)
    with pytest.raises(GGUFError, match="duplicate metadata key"):
        w.add_metadata("k", 2)


BAD_TENSORS = [
    (dict(name="", ggml_type=GGMLType.F32, dims=[1], data=bytes(4)), "non-empty"),
    (dict(name="w", ggml_type=99, dims=[1], data=bytes(4)), "unknown tensor type 99"),
    (dict(name="w", ggml_type=GGMLType.F32, dims=[], data=b""), "0 dims"),
    (dict(name="w", ggml_type=GGMLType.F32, dims=[1, 1, 1, 1, 1], data=bytes(4)), "5 dims"),
    (dict(name="w", ggml_type=GGMLType.F32, dims=[0], data=b""), "positive integers"),
    (dict(name="w", ggml_type=GGMLType.F32, dims=[-2], data=b""), "positive integers"),
    (dict(name="w", ggml_type=GGMLType.F32, dims=[2**32, 2**32], data=b""), "overflows int64"),
    (dict(name="w", ggml_type=GGMLType.Q4_0, dims=[16], data=bytes(9)), "block size 32"),
    (dict(name="w", ggml_type=GGMLType.F32, dims=[4], data=bytes(15)), "has 15 bytes"),
    (dict(name="w", ggml_type=GGMLType.F32, dims=[4], data=np.zeros(4, np.float64)), "has 32 bytes"),
    (dict(name="w", ggml_type=GGMLType.F32, dims=[1], data=np.array([None])), "object array"),
    (dict(name="w", ggml_type=GGMLType.F32, dims=[1], data=1.0), "bytes-like"),
]


@pytest.mark.parametrize("kwargs,fragment", BAD_TENSORS, ids=[str(i) for i in range(len(BAD_TENSORS))])
def test_bad_tensor_is_refused(tmp_path, kwargs, fragment):
    w = GGUFWriter(tmp_path / "out.gguf")
    with pytest.raises(GGUFError) as exc:
        w.add_tensor(**kwargs)
    assert fragment in str(exc.value)


def test_duplicate_tensor_and_bad_alignment(tmp_path):
    w = GGUFWriter(tmp_path / "out.gguf")
    w.add_tensor("w", GGMLType.F32, [1], bytes(4))
    with pytest.raises(GGUFError, match="duplicate tensor name"):
        w.add_tensor("w", GGMLType.F32, [1], bytes(4))
    for alignment in (0, 3, -8, True, 32.0):
        with pytest.raises(GGUFError, match="power of two"):
            GGUFWriter(tmp_path / "x.gguf", alignment=alignment)


# ---- atomicity -----------------------------------------------------------------------------------

def test_failure_while_streaming_leaves_nothing_behind(tmp_path):
    target = tmp_path / "model.gguf"
    target.write_bytes(b"previous contents")

    def explode():
        raise RuntimeError("producer failed")

    w = GGUFWriter(target)
    w.add_metadata("k", 1)
    w.add_tensor("a", GGMLType.F32, [4], bytes(16))
    w.add_tensor("b", GGMLType.F32, [4], explode)
    with pytest.raises(RuntimeError, match="producer failed"):
        w.write()
    assert files_in(tmp_path) == ["model.gguf"]
    assert target.read_bytes() == b"previous contents"


def test_wrong_size_from_producer_leaves_nothing_behind(tmp_path):
    w = GGUFWriter(tmp_path / "new.gguf")
    w.add_tensor("b", GGMLType.F32, [4], lambda: bytes(12))
    with pytest.raises(GGUFError, match="has 12 bytes, the type and dims need 16"):
        w.write()
    assert files_in(tmp_path) == []


def test_unwritable_destination(tmp_path):
    w = GGUFWriter(tmp_path / "missing-folder" / "out.gguf")
    with pytest.raises(GGUFError, match="cannot create"):
        w.write()


def test_successful_write_replaces_and_leaves_no_temp(tmp_path):
    target = tmp_path / "model.gguf"
    target.write_bytes(b"old")
    w = GGUFWriter(target)
    w.add_metadata("general.architecture", "x")
    assert w.write() == target
    assert files_in(tmp_path) == ["model.gguf"]
    with GGUFReader(target) as r:
        assert r.metadata == {"general.architecture": "x"} and r.tensors == {}
