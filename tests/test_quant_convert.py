"""`onewell quantize` (onewell.quant.convert): llama-quantize's choices on small synthetic files, the golden
per-tensor hashes of llama.cpp's own Q8_0 and F16 conversions of the default Qwen model, and a full file
conversion of SmolLM2 read back with the GGUF reader."""
from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

from conftest import DATA
from onewell.errors import UnsupportedError
from onewell.gguf import GGUFReader
from onewell.gguf.constants import FILE_TYPE, GGMLType, ValueType
from onewell.gguf.writer import GGUFWriter
from onewell.quant import dequantize, quantize
from onewell.quant.convert import convert_file, convert_tensor, plan_conversion

T = GGMLType


def write_model(path, tensors: dict[str, tuple[GGMLType, tuple[int, ...]]], metadata=None, seed=0):
    """A small GGUF file; `tensors` maps name → (type, GGUF dims). Values are random normals."""
    rng = np.random.default_rng(seed)
    writer = GGUFWriter(path)
    for key, (value, vtype) in (metadata or {"general.architecture": ("llama", ValueType.STRING)}).items():
        writer.add_metadata(key, value, vtype)
    for name, (ggml_type, dims) in tensors.items():
        values = rng.standard_normal(tuple(reversed(dims))).astype(np.float32)
        writer.add_tensor(name, ggml_type, dims, quantize(ggml_type, values))
    return writer.write()


def planned_types(path, target) -> dict[str, str]:
    with GGUFReader(path) as reader:
        return {p.info.name: p.new_type.name for p in plan_conversion(reader, target)}


# ---------------------------------------------------------------------------------------------------------------
# Which tensors change, and to what

SMALL_MODEL = {
    "token_embd.weight": (T.F16, (64, 10)),
    "blk.0.attn_norm.weight": (T.F32, (64,)),
    "blk.0.attn_q.weight": (T.F32, (64, 64)),
    "blk.0.attn_q.bias": (T.F32, (64,)),
    "blk.0.ffn_gate_inp.weight": (T.F32, (64, 4)),     # expert router: never quantized
    "blk.0.post_norm.weight": (T.F32, (64, 2)),        # 2-D, but a norm
    "blk.0.ffn_up.weight": (T.Q8_0, (64, 32)),
    "output.weight": (T.F32, (64, 10)),
}


def test_q8_0_plan(tmp_path):
    types = planned_types(write_model(tmp_path / "m.gguf", SMALL_MODEL), "q8_0")
    assert types == {
        "token_embd.weight": "Q8_0", "blk.0.attn_norm.weight": "F32", "blk.0.attn_q.weight": "Q8_0",
        "blk.0.attn_q.bias": "F32", "blk.0.ffn_gate_inp.weight": "F32", "blk.0.post_norm.weight": "F32",
        "blk.0.ffn_up.weight": "Q8_0", "output.weight": "Q8_0",
    }


def test_f16_plan_converts_matrices_only(tmp_path):
    types = planned_types(write_model(tmp_path / "m.gguf", SMALL_MODEL), "F16")
    assert types["token_embd.weight"] == "F16" and types["blk.0.ffn_up.weight"] == "F16"
    assert types["output.weight"] == "F16"                       # no output-projection rule for float targets
    assert types["blk.0.attn_norm.weight"] == "F32" and types["blk.0.ffn_gate_inp.weight"] == "F32"


def test_q4_0_output_projection_gets_q8_0_when_rows_are_not_super_blocks(tmp_path):
    types = planned_types(write_model(tmp_path / "m.gguf", SMALL_MODEL), "q4_0")
    assert types["output.weight"] == "Q8_0"              # Q6_K wanted, but 64 % 256 != 0
    assert types["token_embd.weight"] == "Q4_0"          # separate output: the embedding is a normal weight
    assert types["blk.0.attn_q.weight"] == "Q4_0"


def test_q4_0_tied_embedding_takes_the_output_rule(tmp_path):
    tied = {k: v for k, v in SMALL_MODEL.items() if k != "output.weight"}
    assert planned_types(write_model(tmp_path / "m.gguf", tied), "q4_0")["token_embd.weight"] == "Q8_0"


def test_q4_0_output_with_super_block_rows_gets_q6_k(tmp_path):
    path = write_model(tmp_path / "m.gguf", {"output.weight": (T.F32, (256, 4))})
    assert planned_types(path, "q4_0") == {"output.weight": "Q6_K"}
    out = convert_file(path, tmp_path / "out.gguf", "q4_0", progress=False)
    with GGUFReader(path) as src, GGUFReader(out) as dst:
        values = dequantize(T.F32, src.tensor_data("output.weight"), (4, 256))
        np.testing.assert_array_equal(dst.tensor_data("output.weight"), quantize(T.Q6_K, values))


def mix_model(n_layers: int, n_embd: int = 256, n_ff: int = 512) -> dict:
    tensors = {"token_embd.weight": (T.F32, (n_embd, 8)), "output.weight": (T.F32, (n_embd, 8))}
    for i in range(n_layers):
        tensors |= {f"blk.{i}.attn_q.weight": (T.F32, (n_embd, n_embd)),
                    f"blk.{i}.attn_v.weight": (T.F32, (n_embd, 32)),
                    f"blk.{i}.ffn_down.weight": (T.F32, (n_ff, n_embd)),
                    f"blk.{i}.attn_norm.weight": (T.F32, (n_embd,))}
    return tensors


def test_use_more_bits_matches_llama_cpp_layer_choice():
    from onewell.quant.convert import use_more_bits

    # llama.cpp: i < n/8 || i >= 7n/8 || (i - n/8) % 3 == 2, integer division
    assert [i for i in range(16) if use_more_bits(i, 16)] == [0, 1, 4, 7, 10, 13, 14, 15]
    assert [i for i in range(30) if use_more_bits(i, 30)] == [0, 1, 2, 5, 8, 11, 14, 17, 20, 23, 26, 27, 28, 29]


def test_q4_k_m_mix(tmp_path):
    types = planned_types(write_model(tmp_path / "m.gguf", mix_model(16)), "q4_k_m")
    more = {0, 1, 4, 7, 10, 13, 14, 15}
    for i in range(16):
        assert types[f"blk.{i}.attn_q.weight"] == "Q4_K"
        assert types[f"blk.{i}.attn_v.weight"] == types[f"blk.{i}.ffn_down.weight"] == ("Q6_K" if i in more else "Q4_K")
        assert types[f"blk.{i}.attn_norm.weight"] == "F32"
    assert types["output.weight"] == "Q6_K" and types["token_embd.weight"] == "Q4_K"


def test_q4_k_m_falls_back_for_rows_that_are_not_super_blocks(tmp_path):
    """SmolLM2's 576-wide rows: Q4_K -> Q5_0, Q6_K -> Q8_0, output -> Q8_0; the 1536-wide ffn_down stays K."""
    types = planned_types(write_model(tmp_path / "m.gguf", mix_model(2, n_embd=576, n_ff=1536)), "q4_k_m")
    assert types["blk.0.attn_q.weight"] == "Q5_0" and types["blk.1.attn_q.weight"] == "Q5_0"
    assert types["blk.0.attn_v.weight"] == "Q5_0"   # of 2 layers, use_more_bits picks the last only
    assert types["blk.1.attn_v.weight"] == "Q8_0"   # Q6_K falls back to Q8_0
    assert types["blk.0.ffn_down.weight"] == "Q4_K" and types["blk.1.ffn_down.weight"] == "Q6_K"
    assert types["output.weight"] == "Q8_0" and types["token_embd.weight"] == "Q5_0"
    odd = write_model(tmp_path / "w.gguf", {"a.weight": (T.F32, (48, 2))})
    assert planned_types(odd, "q4_k_m") == {"a.weight": "F16"}   # not even 32 divides 48


def test_q4_k_m_stores_a_fused_qkv_as_q5_k_or_q5_1(tmp_path):
    path = write_model(tmp_path / "m.gguf", {"blk.0.attn_qkv.weight": (T.F32, (256, 8)),
                                             "blk.1.attn_qkv.weight": (T.F32, (96, 8))})
    assert planned_types(path, "q4_k_m") == {"blk.0.attn_qkv.weight": "Q5_K", "blk.1.attn_qkv.weight": "Q5_1"}


def test_q6_k_and_bf16_targets(tmp_path):
    path = write_model(tmp_path / "m.gguf", mix_model(1, n_embd=576))
    q6 = planned_types(path, "q6_k")
    assert q6["blk.0.attn_q.weight"] == "Q8_0" and q6["blk.0.ffn_down.weight"] == "Q6_K"
    bf16 = planned_types(path, "bf16")
    assert bf16["blk.0.attn_q.weight"] == bf16["output.weight"] == "BF16" and bf16["blk.0.attn_norm.weight"] == "F32"


def test_rows_that_are_not_whole_blocks_are_refused(tmp_path):
    path = write_model(tmp_path / "m.gguf", {"blk.0.attn_q.weight": (T.F32, (48, 4))})
    with pytest.raises(UnsupportedError, match="rows of 48 values cannot be stored as Q8_0"):
        planned_types(path, "q8_0")
    assert planned_types(path, "f16") == {"blk.0.attn_q.weight": "F16"}


def test_unknown_target_and_same_file(tmp_path):
    path = write_model(tmp_path / "m.gguf", {"a.weight": (T.F32, (32, 2))})
    with pytest.raises(UnsupportedError, match="q5_k"):
        convert_file(path, tmp_path / "o.gguf", "q5_k", progress=False)
    with pytest.raises(ValueError, match="must not replace the input"):
        convert_file(path, path, "q8_0", progress=False)


def test_split_files_are_refused(tmp_path):
    meta = {"general.architecture": ("llama", ValueType.STRING), "split.count": (2, ValueType.UINT16)}
    path = write_model(tmp_path / "m.gguf", {"a.weight": (T.F32, (32, 2))}, metadata=meta)
    with pytest.raises(UnsupportedError, match="split"):
        convert_file(path, tmp_path / "o.gguf", "q8_0", progress=False)


def test_small_file_round_trip(tmp_path):
    meta = {
        "general.architecture": ("llama", ValueType.STRING),
        "general.file_type": (0, ValueType.UINT32),
        "llama.block_count": (1, ValueType.UINT32),
        "tokenizer.ggml.scores": (np.arange(3, dtype=np.float32), None),
    }
    src = write_model(tmp_path / "m.gguf", SMALL_MODEL, metadata=meta)
    dst = convert_file(src, tmp_path / "out.gguf", "q8_0", progress=False)
    with GGUFReader(src) as before, GGUFReader(dst) as after:
        assert list(after.metadata) == ["general.architecture", "llama.block_count", "tokenizer.ggml.scores",
                                        "general.quantization_version", "general.file_type"]
        assert after.metadata["general.file_type"] == FILE_TYPE["q8_0"] == 7
        assert after.metadata_types["general.file_type"] == (ValueType.UINT32, None)
        assert after.metadata["general.quantization_version"] == 2
        np.testing.assert_array_equal(after.metadata["tokenizer.ggml.scores"], [0, 1, 2])
        assert list(after.tensors) == list(before.tensors)
        q = after.tensors["blk.0.attn_q.weight"]
        assert q.ggml_type == T.Q8_0 and q.dims == (64, 64)
        expected = quantize(T.Q8_0, dequantize(T.F32, before.tensor_data(q.name), q.shape))
        np.testing.assert_array_equal(after.tensor_data(q.name), expected)
        np.testing.assert_array_equal(after.tensor_data("blk.0.ffn_up.weight"),       # already Q8_0: copied
                                      before.tensor_data("blk.0.ffn_up.weight"))


# ---------------------------------------------------------------------------------------------------------------
# The acceptance proof: llama.cpp's own conversions of the default Qwen2.5-Coder Q4_K_M model

GOLDEN = {target: json.loads((DATA / f"{target}_from_q4_k_m_tensor_sha256.json").read_text())
          for target in ("q8_0", "f16")}


@pytest.fixture(scope="module")
def qwen_conversions(qwen_q4km_path) -> dict[str, dict[str, dict]]:
    """{target: {tensor: {type, shape, sha256}}} of our in-memory conversion, one tensor at a time."""
    result: dict[str, dict[str, dict]] = {}
    with GGUFReader(qwen_q4km_path) as reader:
        for target in GOLDEN:
            result[target] = {}
            for plan in plan_conversion(reader, target):
                data = convert_tensor(reader, plan)
                result[target][plan.info.name] = {"type": plan.new_type.name, "shape": list(plan.info.dims),
                                                  "sha256": hashlib.sha256(data).hexdigest()}
                del data
    return result


@pytest.mark.model
@pytest.mark.parametrize("target", sorted(GOLDEN))
def test_qwen_tensor_set_matches_llama_cpp(qwen_conversions, target):
    assert set(qwen_conversions[target]) == set(GOLDEN[target])


@pytest.mark.model
@pytest.mark.parametrize("target,name", [(t, n) for t in sorted(GOLDEN) for n in GOLDEN[t]])
def test_qwen_tensor_matches_llama_cpp(qwen_conversions, target, name):
    assert qwen_conversions[target][name] == GOLDEN[target][name]


# ---------------------------------------------------------------------------------------------------------------
# A whole file: SmolLM2 (tied embeddings, Q4_1 + Q8_0 + F32) to Q8_0, read back

@pytest.mark.model
def test_smollm_file_conversion(smollm_path, tmp_path):
    dst = convert_file(smollm_path, tmp_path / "smollm-q8_0.gguf", "q8_0", progress=False)
    with GGUFReader(smollm_path) as src, GGUFReader(dst) as out:
        assert list(out.tensors) == list(src.tensors)
        moved = {"general.file_type", "general.quantization_version"}
        assert [k for k in out.metadata if k not in moved] == [k for k in src.metadata if k not in moved]
        assert list(out.metadata)[-2:] == ["general.quantization_version", "general.file_type"]
        assert out.metadata["general.file_type"] == 7
        for key in src.metadata:
            if key not in moved:
                assert out.metadata_types[key] == src.metadata_types[key], key
                a, b = out.metadata[key], src.metadata[key]
                assert np.array_equal(a, b) if isinstance(b, np.ndarray) else a == b, key
        for name, before in src.tensors.items():
            after = out.tensors[name]
            assert after.dims == before.dims
            if len(before.dims) == 1:
                assert after.ggml_type == T.F32
                np.testing.assert_array_equal(out.tensor_data(name), src.tensor_data(name))
                continue
            assert after.ggml_type == T.Q8_0, name
            x = dequantize(before.ggml_type, src.tensor_data(name), before.shape)
            y = dequantize(T.Q8_0, out.tensor_data(name), after.shape)
            step = np.abs(x.reshape(-1, 32)).max(axis=1, keepdims=True) / 127
            assert (np.abs(x.reshape(-1, 32) - y.reshape(-1, 32)) <= 0.57 * step).all(), name
        assert (src.tensors["token_embd.weight"].ggml_type == T.Q8_0
                and np.array_equal(out.tensor_data("token_embd.weight"), src.tensor_data("token_embd.weight")))


# llama-quantize's Q4_K_M of SmolLM2's F16 conversion (tests/data/README.md): every tensor's type, and the bytes
# of the layers that hold each of its types (Q4_K, Q6_K, Q5_0, Q8_0, F32), are llama.cpp's bit for bit
Q4_K_M_GOLDEN = json.loads((DATA / "q4_k_m_from_smollm2_f16_tensor_sha256.json").read_text())
Q4_K_M_CHECKED = [n for n in Q4_K_M_GOLDEN if n.startswith(("blk.0.", "blk.3.", "blk.29.")) or "blk." not in n]


@pytest.fixture(scope="module")
def smollm_f16(smollm_path, tmp_path_factory):
    return convert_file(smollm_path, tmp_path_factory.mktemp("f16") / "smollm2-f16.gguf", "f16", progress=False)


@pytest.mark.model
def test_smollm_q4_k_m_matches_llama_quantize(smollm_f16):
    with GGUFReader(smollm_f16) as reader:
        plans = {p.info.name: p for p in plan_conversion(reader, "q4_k_m")}
        assert {n: (p.new_type.name, list(p.info.dims)) for n, p in plans.items()} == \
               {n: (g["type"], g["shape"]) for n, g in Q4_K_M_GOLDEN.items()}
        checked = {p.new_type for n, p in plans.items() if n in Q4_K_M_CHECKED}
        assert checked == {T.Q4_K, T.Q6_K, T.Q5_0, T.Q8_0, T.F32}
        for name in Q4_K_M_CHECKED:
            data = np.ascontiguousarray(convert_tensor(reader, plans[name]))
            assert hashlib.sha256(data.tobytes()).hexdigest() == Q4_K_M_GOLDEN[name]["sha256"], name
