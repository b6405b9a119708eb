"""Model definitions (registry, qwen2, llama: hyperparameters, shape checks, refusals) and the numpy
reference forward on tiny random models (KV cache, causality, RoPE, grouped-query attention)."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from onewell.errors import ContextOverflowError, GGUFError, UnsupportedError
from onewell.gguf import GGMLType
from onewell.gguf.reader import TensorInfo
from onewell.models.base import Weight
from onewell.models.registry import load_spec, supported_architectures
from onewell.quant import quantize
from onewell.runtime import reference
from onewell.runtime.reference import ReferenceBackend, apply_rope, causal_attention, gather_rows, rope_angles

# ---------------------------------------------------------------------------------------------------------
# A tiny model as a GGUF reader would present it (F32 tensors, random values)


class FakeReader:
    def __init__(self, metadata: dict, arrays: dict[str, np.ndarray], types: dict[str, GGMLType] | None = None):
        self.path = "tiny.gguf"
        self.metadata = metadata
        self._raw: dict[str, np.ndarray] = {}
        self.tensors: dict[str, TensorInfo] = {}
        for name, a in arrays.items():
            t = (types or {}).get(name, GGMLType.F32)
            raw = quantize(t, a) if t != GGMLType.F32 else np.ascontiguousarray(a, np.float32).view(np.uint8).reshape(-1)
            self._raw[name] = raw
            self.tensors[name] = TensorInfo(name, t, tuple(reversed(a.shape)), a.size, 0, raw.nbytes)

    def tensor_data(self, name: str) -> np.ndarray:
        return self._raw[name]


def tiny_reader(arch="llama", n_vocab=64, d=32, n_layer=2, n_head=4, n_head_kv=2, n_ff=48, tied=True,
                seed=0, extra_meta=None, drop=(), replace=None, types=None) -> FakeReader:
    rng = np.random.default_rng(seed)
    hd = d // n_head

    def w(*shape, scale=0.3):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    arrays = {"token_embd.weight": w(n_vocab, d, scale=1.0), "output_norm.weight": 1 + w(d, scale=0.1)}
    if not tied:
        arrays["output.weight"] = w(n_vocab, d)
    for i in range(n_layer):
        b = f"blk.{i}."
        arrays.update({
            b + "attn_norm.weight": 1 + w(d, scale=0.1), b + "ffn_norm.weight": 1 + w(d, scale=0.1),
            b + "attn_q.weight": w(n_head * hd, d), b + "attn_k.weight": w(n_head_kv * hd, d),
            b + "attn_v.weight": w(n_head_kv * hd, d), b + "attn_output.weight": w(d, n_head * hd),
            b + "ffn_gate.weight": w(n_ff, d), b + "ffn_up.weight": w(n_ff, d), b + "ffn_down.weight": w(d, n_ff),
        })
        if arch == "qwen2":
            arrays.update({b + "attn_q.bias": w(n_head * hd), b + "attn_k.bias": w(n_head_kv * hd),
                           b + "attn_v.bias": w(n_head_kv * hd)})
    for name in drop:
        arrays.pop(name)
    arrays.update(replace or {})
    meta = {
        "general.architecture": arch,
        f"{arch}.embedding_length": d, f"{arch}.block_count": n_layer, f"{arch}.attention.head_count": n_head,
        f"{arch}.attention.head_count_kv": n_head_kv, f"{arch}.feed_forward_length": n_ff,
        f"{arch}.context_length": 128, f"{arch}.rope.freq_base": 10000.0,
        f"{arch}.attention.layer_norm_rms_epsilon": 1e-5,
    }
    meta.update(extra_meta or {})
    return FakeReader(meta, arrays, types)


def tiny_backend(n_ctx=64, **kw) -> ReferenceBackend:
    return ReferenceBackend(load_spec(tiny_reader(**kw)), n_ctx=n_ctx)


# ---------------------------------------------------------------------------------------------------------
# Registry and model definitions


def test_llama_spec_reads_hyperparameters_and_ties_embeddings():
    spec = load_spec(tiny_reader("llama"))
    c = spec.config
    assert (c.arch, c.n_vocab, c.n_embd, c.n_layer, c.n_head, c.n_head_kv, c.head_dim, c.n_ff) == \
        ("llama", 64, 32, 2, 4, 2, 8, 48)
    assert (c.rope_style, c.tie_embeddings, c.rope_theta, c.n_ctx_train) == ("normal", True, 10000.0, 128)
    assert spec.output is spec.token_embd
    assert all(layer.get("bq") is None for layer in spec.layers)


def test_qwen2_spec_has_biases_neox_rope_and_separate_output():
    spec = load_spec(tiny_reader("qwen2", tied=False))
    assert spec.config.rope_style == "neox" and not spec.config.tie_embeddings
    assert spec.output.name == "output.weight"
    assert spec.layers[1]["bk"].shape == (16,)
    # bytes per token counts every weight but the gathered embedding table
    assert spec.bytes_per_token() == sum(t.nbytes for n, t in tiny_reader("qwen2", tied=False).tensors.items()
                                         if n != "token_embd.weight")


def test_unknown_architecture_lists_the_supported_ones():
    reader = tiny_reader()
    reader.metadata["general.architecture"] = "mamba"
    with pytest.raises(UnsupportedError, match="'mamba'.*gemma3, llama, nomic-bert, phi3, qwen2, qwen3"):
        load_spec(reader)
    assert supported_architectures() == ["gemma3", "llama", "nomic-bert", "phi3", "qwen2", "qwen3"]


def test_missing_architecture_key_is_a_gguf_error():
    reader = tiny_reader()
    del reader.metadata["general.architecture"]
    with pytest.raises(GGUFError, match="general.architecture"):
        load_spec(reader)


@pytest.mark.parametrize("kw, error, fragment", [
    (dict(replace={"blk.1.attn_k.weight": np.zeros((8, 32), np.float32)}), GGUFError, "blk.1.attn_k.weight"),
    (dict(replace={"blk.0.ffn_down.weight": np.zeros((48, 32), np.float32)}), GGUFError, "ffn_down"),
    (dict(arch="qwen2", drop=["blk.0.attn_v.bias"]), GGUFError, "blk.0.attn_v.bias.*missing"),
    (dict(drop=["output_norm.weight"]), GGUFError, "output_norm.weight.*missing"),
    (dict(replace={"token_embd.weight": np.zeros((64, 16), np.float32)}), GGUFError, "token_embd"),
    (dict(arch="qwen2", replace={"rope_freqs.weight": np.ones(4, np.float32)}), UnsupportedError, "rope_freqs"),
    (dict(replace={"rope_freqs.weight": np.ones(8, np.float32)}), GGUFError, "rope_freqs.weight.*shape"),
    (dict(replace={"rope_freqs.weight": np.array([1, 2, 0, 4], np.float32)}), GGUFError, "rope_freqs.*<= 0"),
    (dict(extra_meta={"llama.rope.scaling.type": "yarn"}), UnsupportedError, "yarn"),
    (dict(extra_meta={"llama.rope.scaling.type": "linear", "llama.rope.scaling.factor": 4.0}),
     UnsupportedError, "linear"),
    (dict(extra_meta={"llama.rope.dimension_count": 4}), UnsupportedError, "partial RoPE"),
    (dict(extra_meta={"llama.expert_count": 8}), UnsupportedError, "expert"),
    (dict(extra_meta={"llama.attention.head_count_kv": 3}), GGUFError, "head_count_kv"),
    (dict(extra_meta={"llama.embedding_length": "wide"}), GGUFError, "embedding_length"),
    (dict(extra_meta={"llama.block_count": 0}), GGUFError, "block_count"),
    (dict(extra_meta={"llama.attention.layer_norm_rms_epsilon": float("nan")}), GGUFError, "epsilon"),
    (dict(extra_meta={"llama.vocab_size": 65}), GGUFError, "vocab_size"),
    (dict(extra_meta={"llama.rope.dimension_count": "64"}), GGUFError, "dimension_count.*integer"),
    (dict(extra_meta={"llama.rope.scaling.factor": "x"}), GGUFError, "scaling.factor.*number"),
    (dict(extra_meta={"llama.rope.scaling.type": 3}), GGUFError, "scaling.type.*string"),
    (dict(extra_meta={"tokenizer.ggml.tokens": ["t"] * 65}), GGUFError, "65 tokens"),
])
def test_inconsistent_or_unsupported_files_are_refused_by_name(kw, error, fragment):
    with pytest.raises(error, match=fragment):
        load_spec(tiny_reader(**kw))


def test_llama3_rope_freqs_are_the_model_s_frequency_factors():
    factors = np.array([1.0, 1.5, 4.0, 8.0], np.float32)
    spec = load_spec(tiny_reader(replace={"rope_freqs.weight": factors}))
    assert spec.rope_freqs.name == "rope_freqs.weight"
    np.testing.assert_array_equal(reference.dense(spec.rope_freqs), factors)
    assert load_spec(tiny_reader()).rope_freqs is None
    # they change the forward pass (pair i turns factor_i times slower), unlike a file without them
    ids = [1, 5, 9, 2, 7]
    with_factors = ReferenceBackend(spec, n_ctx=8).forward(ids, all_logits=True)
    plain = ReferenceBackend(load_spec(tiny_reader()), n_ctx=8).forward(ids, all_logits=True)
    np.testing.assert_array_equal(with_factors[0], plain[0])  # position 0 has no rotation at all
    assert np.abs(with_factors[1:] - plain[1:]).max() > 1e-2


def qwen3_norms(n_layer=2, hd=8, seed=5) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {f"blk.{i}.attn_{t}_norm.weight": rng.uniform(0.5, 1.5, hd).astype(np.float32)
            for i in range(n_layer) for t in "qk"}


def test_qwen3_spec_has_per_head_qk_norms_and_no_biases():
    spec = load_spec(tiny_reader("qwen3", replace=qwen3_norms()))
    c = spec.config
    assert (c.arch, c.rope_style, c.head_dim) == ("qwen3", "neox", 8)
    assert spec.layers[1]["q_norm"].shape == (8,) and spec.layers[1]["k_norm"].name == "blk.1.attn_k_norm.weight"
    assert all(layer.get("bq") is None for layer in spec.layers)
    with pytest.raises(GGUFError, match="blk.0.attn_k_norm.weight.*missing"):
        load_spec(tiny_reader("qwen3", replace={k: v for k, v in qwen3_norms().items() if "0.attn_k" not in k}))
    biases = {f"blk.{i}.attn_{t}.bias": np.zeros(32 if t == "q" else 16, np.float32) for i in range(2) for t in "qkv"}
    with pytest.raises(UnsupportedError, match="attn_k.bias"):
        load_spec(tiny_reader("qwen3", replace={**qwen3_norms(), **biases}))


def phi3_reader(separate_qkv=False, extra=None, types=None, **kw) -> FakeReader:
    """The tiny llama model with its layers' tensors fused the way phi3 files store them."""
    src = tiny_reader(n_ff=64)
    arrays = {name: dequantize_raw(src, name) for name in src.tensors}
    for i in range(2):
        b = f"blk.{i}."
        if not separate_qkv:
            arrays[b + "attn_qkv.weight"] = np.concatenate([arrays.pop(b + f"attn_{t}.weight") for t in "qkv"])
        arrays[b + "ffn_up.weight"] = np.concatenate([arrays.pop(b + "ffn_gate.weight"), arrays[b + "ffn_up.weight"]])
    arrays.update(extra or {})
    meta = {k.replace("llama.", "phi3."): v for k, v in src.metadata.items()}
    meta.update({"general.architecture": "phi3", **kw})
    return FakeReader(meta, arrays, types)


def load_weight(reader: FakeReader, name: str) -> Weight:
    info = reader.tensors[name]
    return Weight(name, info.ggml_type, info.shape, reader.tensor_data(name))


def dequantize_raw(reader: FakeReader, name: str) -> np.ndarray:
    return reference.dense(load_weight(reader, name))


@pytest.mark.parametrize("wt", [GGMLType.F32, GGMLType.Q8_0])
def test_phi3_fused_tensors_become_zero_copy_row_views(wt):
    fused = [f"blk.{i}.{n}" for i in range(2) for n in ("attn_qkv.weight", "ffn_up.weight")]
    reader = phi3_reader(types={name: wt for name in fused})
    spec = load_spec(reader)
    assert (spec.config.arch, spec.config.rope_style) == ("phi3", "neox")
    layer = spec.layers[1]
    qkv, gate_up = reader.tensor_data("blk.1.attn_qkv.weight"), reader.tensor_data("blk.1.ffn_up.weight")
    assert [layer[r].shape for r in ("wq", "wk", "wv", "w_gate", "w_up")] == [(32, 32), (16, 32), (16, 32),
                                                                              (64, 32), (64, 32)]
    assert all(np.shares_memory(layer[r].raw, qkv) for r in ("wq", "wk", "wv"))
    assert all(np.shares_memory(layer[r].raw, gate_up) for r in ("w_gate", "w_up"))
    # the views hold exactly the rows of the fused matrix, in the order Q, K, V and gate, up
    whole = reference.dense(load_weight(reader, "blk.1.attn_qkv.weight"))
    np.testing.assert_array_equal(np.concatenate([reference.dense(layer[r]) for r in ("wq", "wk", "wv")]), whole)
    whole = reference.dense(load_weight(reader, "blk.1.ffn_up.weight"))
    np.testing.assert_array_equal(reference.dense(layer["w_gate"]), whole[:64])
    np.testing.assert_array_equal(reference.dense(layer["w_up"]), whole[64:])
    assert spec.bytes_per_token() == sum(t.nbytes for t in reader.tensors.values())  # tied: the table is read


def test_phi3_ignores_its_sliding_window_as_llama_cpp_does():
    spec = load_spec(phi3_reader(**{"phi3.attention.sliding_window": 8}))
    assert all(layer.sliding_window == 0 for layer in spec.layers)


def test_phi3_with_separate_qkv_loads_and_a_short_fused_tensor_is_refused():
    spec = load_spec(phi3_reader(separate_qkv=True))
    assert spec.layers[0]["wq"].name == "blk.0.attn_q.weight" and spec.layers[0]["w_up"].shape == (64, 32)
    short = phi3_reader(extra={"blk.0.ffn_up.weight": np.zeros((64, 32), np.float32)})  # up only, no gate half
    with pytest.raises(GGUFError, match="blk.0.ffn_up.weight.*shape"):
        load_spec(short)


@pytest.mark.parametrize("kw, fragment", [
    (dict(extra={"rope_factors_long.weight": np.ones(4, np.float32),
                 "rope_factors_short.weight": np.ones(4, np.float32)}), "LongRoPE.*rope_factors_long.weight"),
    ({"phi3.rope.scaling.attn_factor": 1.19}, "LongRoPE.*attn_factor=1.19"),
    ({"phi3.rope.scaling.type": "longrope"}, "longrope"),
    ({"phi3.rope.dimension_count": 6}, "partial RoPE"),
])
def test_phi3_variants_we_do_not_implement_are_refused_by_name(kw, fragment):
    with pytest.raises(UnsupportedError, match=fragment):
        load_spec(phi3_reader(**kw))


def test_unscaled_rope_keys_are_accepted():
    spec = load_spec(tiny_reader(extra_meta={"llama.rope.scaling.type": "none", "llama.rope.dimension_count": 8,
                                             "llama.rope.scaling.factor": 1.0}))
    assert spec.config.head_dim == 8


@pytest.mark.model
def test_real_model_specs_match_their_metadata(qwen_q4km_path, smollm_path):
    from onewell.gguf import GGUFReader

    qwen = load_spec(GGUFReader(qwen_q4km_path))
    c = qwen.config
    assert (c.arch, c.n_layer, c.n_embd, c.n_head, c.n_head_kv, c.head_dim, c.n_ff, c.n_vocab) == \
        ("qwen2", 24, 896, 14, 2, 64, 4864, 151936)
    assert c.rope_style == "neox" and not c.tie_embeddings and c.rope_theta == 1e6
    smol = load_spec(GGUFReader(smollm_path))
    c = smol.config
    assert (c.arch, c.n_layer, c.n_embd, c.n_head, c.n_head_kv, c.head_dim, c.n_ff, c.n_vocab) == \
        ("llama", 30, 576, 9, 3, 64, 1536, 49152)
    assert c.rope_style == "normal" and c.tie_embeddings and smol.output is smol.token_embd
    # Bytes read per generated token, as measured for llama.cpp in shared/anchors.md (391.9 MB, 96.6 MB).
    assert round(qwen.bytes_per_token() / 1e6, 1) == 391.9
    assert round(smol.bytes_per_token() / 1e6, 1) == 96.6


# ---------------------------------------------------------------------------------------------------------
# Building blocks of the reference forward


@pytest.mark.parametrize("style", ["normal", "neox"])
def test_rope_scores_depend_only_on_relative_position(style):
    rng = np.random.default_rng(1)
    q, k = rng.standard_normal((2, 1, 1, 16)).astype(np.float32)

    def score(m, n):
        cq, sq = rope_angles(np.array([m]), 16, 10000.0)
        ck, sk = rope_angles(np.array([n]), 16, 10000.0)
        return float(np.sum(apply_rope(q, cq, sq, style) * apply_rope(k, ck, sk, style)))

    assert score(7, 3) == pytest.approx(score(104, 100), rel=1e-4)
    assert score(7, 3) != pytest.approx(score(7, 4), rel=1e-3)
    cos, sin = rope_angles(np.array([5]), 16, 10000.0)
    assert np.linalg.norm(apply_rope(q, cos, sin, style)) == pytest.approx(np.linalg.norm(q), rel=1e-5)


def test_rope_styles_pair_different_elements():
    x = np.zeros((1, 1, 8), np.float32)
    x[0, 0, 0] = 1.0
    cos, sin = rope_angles(np.array([1]), 8, 10000.0)  # pair 0 turns by 1 radian
    assert np.flatnonzero(apply_rope(x, cos, sin, "normal")[0, 0]).tolist() == [0, 1]
    assert np.flatnonzero(apply_rope(x, cos, sin, "neox")[0, 0]).tolist() == [0, 4]


def test_grouped_query_attention_matches_a_per_head_loop():
    rng = np.random.default_rng(2)
    n, n_head, n_kv, hd, first = 3, 6, 2, 4, 2
    q = rng.standard_normal((n, n_head, hd)).astype(np.float32)
    keys = rng.standard_normal((first + n, n_kv, hd)).astype(np.float32)
    values = rng.standard_normal((first + n, n_kv, hd)).astype(np.float32)
    expected = np.zeros((n, n_head, hd), np.float32)
    for i in range(n):
        for h in range(n_head):
            kv = h // (n_head // n_kv)
            visible = first + i + 1
            s = np.array([q[i, h] @ keys[t, kv] for t in range(visible)]) / np.sqrt(hd)
            p = np.exp(s - s.max())
            expected[i, h] = (p / p.sum()) @ values[:visible, kv]
    got = causal_attention(q, keys, values, first)
    np.testing.assert_allclose(got, expected.reshape(n, -1), rtol=1e-5, atol=1e-6)


def test_embedding_rows_are_gathered_without_dequantizing_the_table():
    rng = np.random.default_rng(3)
    table = rng.standard_normal((10, 64)).astype(np.float32)
    reader = FakeReader({}, {"t": table}, {"t": GGMLType.Q8_0})
    from onewell.models.base import Weight
    from onewell.quant import dequantize

    w = Weight("t", GGMLType.Q8_0, (10, 64), reader.tensor_data("t"))
    ids = np.array([7, 2, 7])
    np.testing.assert_array_equal(gather_rows(w, ids), dequantize(GGMLType.Q8_0, w.raw, (10, 64))[ids])


# ---------------------------------------------------------------------------------------------------------
# The reference backend end to end on tiny models


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_decoding_one_token_at_a_time_matches_the_batched_forward(arch):
    backend = tiny_backend(arch=arch, tied=arch == "llama")
    tokens = [3, 17, 42, 5, 9, 60, 1]
    batched = backend.forward(tokens, all_logits=True)
    assert batched.shape == (7, 64) and batched.dtype == np.float32
    backend.reset()
    stepwise = np.stack([backend.forward([t]) for t in tokens])
    np.testing.assert_allclose(stepwise, batched, rtol=1e-4, atol=1e-4)
    assert backend.n_past == 7


def test_prefill_then_decode_matches_and_last_logits_are_the_last_row():
    backend = tiny_backend()
    full = backend.forward([1, 2, 3, 4, 5], all_logits=True)
    backend.reset()
    last = backend.forward([1, 2, 3])
    np.testing.assert_allclose(last, full[2], rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(backend.forward([4, 5], all_logits=True), full[3:], rtol=1e-4, atol=1e-4)


def test_truncate_reuses_the_prefix():
    backend = tiny_backend()
    original = backend.forward([1, 2, 3, 4, 5, 6], all_logits=True)
    backend.forward([9, 9])  # extend with something else, then go back
    backend.truncate(3)
    assert backend.n_past == 3
    np.testing.assert_allclose(backend.forward([4, 5, 6], all_logits=True), original[3:], rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match="truncate"):
        backend.truncate(7)


def test_attention_is_causal():
    backend = tiny_backend()
    a = backend.forward([1, 2, 3, 4], all_logits=True)
    backend.reset()
    b = backend.forward([1, 2, 30, 40], all_logits=True)
    np.testing.assert_array_equal(a[:2], b[:2])  # earlier positions cannot see later tokens
    assert not np.allclose(a[2:], b[2:])


def test_long_prompts_are_split_into_batches_with_the_same_result(monkeypatch):
    backend = tiny_backend()
    tokens = list(range(1, 12))
    whole = backend.forward(tokens, all_logits=True)
    backend.reset()
    monkeypatch.setattr(reference, "MAX_BATCH", 4)
    np.testing.assert_allclose(backend.forward(tokens, all_logits=True), whole, rtol=1e-4, atol=1e-4)
    backend.reset()
    np.testing.assert_allclose(backend.forward(tokens), whole[-1], rtol=1e-4, atol=1e-4)


def test_normal_rope_on_permuted_weights_equals_neox_rope():
    """Why llama GGUFs use "normal" RoPE: the converter interleaves the two halves of each Q/K head, and
    rotating adjacent pairs of the interleaved head is the NeoX rotation of the original one.

    The two models are equal in exact arithmetic, not in float32: q.k sums the head dims in the interleaved
    order in one and the split order in the other, so from layer 1 on their inputs differ by ulps (measured:
    ~55 of 80 layer-1 keys and values). The cache is f32 here, not the default f16: rounding to f16 turns an
    ulp into a step of 2^-11 wherever a value sits that close to a boundary (numpy on aarch64 under qemu: one
    layer-1 value, 5.3e-4 at the logits, beyond the bound), while float32 alone moves the logits (|x| <= 16)
    by at most 1.1e-5 (x86) and 9.5e-6 (aarch64): 1/20 of rtol = atol = 1e-4 (docs/kernels.md)."""
    spec = load_spec(tiny_reader("llama", n_head=4, n_head_kv=2))
    hd = spec.config.head_dim
    interleave = np.stack([np.arange(hd // 2), np.arange(hd // 2) + hd // 2], axis=1).reshape(-1)  # 0,h,1,h+1..

    def permuted(weight, n_heads):
        m = np.frombuffer(weight.raw, np.float32).reshape(n_heads, hd, -1)[:, interleave].copy()
        return dataclasses.replace(weight, raw=m.reshape(-1).view(np.uint8))

    neox = dataclasses.replace(spec, config=dataclasses.replace(spec.config, rope_style="neox"))
    normal = dataclasses.replace(spec, layers=[
        l.with_tensors(wq=permuted(l["wq"], 4), wk=permuted(l["wk"], 2)) for l in spec.layers])
    tokens = [5, 6, 7, 8, 9]
    a = ReferenceBackend(neox, n_ctx=16, kv_type="f32").forward(tokens, all_logits=True)
    b = ReferenceBackend(normal, n_ctx=16, kv_type="f32").forward(tokens, all_logits=True)
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)
    c = ReferenceBackend(spec, n_ctx=16, kv_type="f32").forward(tokens, all_logits=True)  # unpermuted: another model
    assert not np.allclose(a[1:], c[1:], atol=1e-3)


def test_quantized_embedding_table_with_separate_output():
    backend = tiny_backend(arch="qwen2", tied=False, types={"token_embd.weight": GGMLType.Q8_0})
    logits = backend.forward([0, 63])
    assert logits.shape == (64,) and np.isfinite(logits).all()


def test_context_overflow_is_refused_and_leaves_the_cache_alone():
    backend = tiny_backend(n_ctx=8)
    backend.forward([1, 2, 3, 4, 5])
    with pytest.raises(ContextOverflowError, match="5 tokens cached \\+ 4 new = 9 > n_ctx 8"):
        backend.forward([1, 2, 3, 4])
    assert backend.n_past == 5
    backend.forward([6, 7, 8])
    assert backend.n_past == 8


@pytest.mark.parametrize("tokens, fragment", [([], "non-empty"), ([64], "outside the vocabulary"),
                                              ([-1], "outside"), ([1.5], "integers")])
def test_bad_tokens_are_refused(tokens, fragment):
    backend = tiny_backend()
    with pytest.raises(ValueError, match=fragment):
        backend.forward(tokens)
    assert backend.n_past == 0
