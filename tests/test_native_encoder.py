"""The native encoder step (ow_executor_encode: post-norm layers, LayerNorm, bidirectional attention within each
sequence of a step) against the numpy reference encoder, on a tiny random-weight nomic-bert-shaped model built
in memory (no model file): F32 weights (F32 activations: agreement to float32 rounding) and F16 weights (F16
activations, as llama.cpp pairs them), several sequences per step, every kernel path this CPU has."""
from __future__ import annotations

import numpy as np
import pytest

from onewell.errors import UnsupportedError, WrongModelKindError
from onewell.gguf.constants import GGMLType
from onewell.models.base import LayerSpec, ModelConfig, ModelSpec, Weight
from onewell.runtime.embedding import NativeEncoder, ReferenceEncoder, mean_pool_normalize
from onewell.runtime.native_kernels import available_paths
from onewell.runtime.native_ops import KERNEL_PATH_OPS_ISA, available_isas, ops_isa, set_ops_isa

N_VOCAB, N_EMBD, N_HEAD, N_FF, N_LAYER = 97, 64, 4, 96, 2


def weight(rng, name: str, shape, dtype=np.float32, scale=0.2, offset=0.0) -> Weight:
    values = (rng.standard_normal(shape) * scale + offset).astype(dtype)
    return Weight(name, GGMLType.F16 if dtype == np.float16 else GGMLType.F32, tuple(shape),
                  np.frombuffer(values.tobytes(), np.uint8).copy())


def tiny_encoder(dtype=np.float32, seed=0) -> ModelSpec:
    rng = np.random.default_rng(seed)
    d = N_EMBD
    cfg = ModelConfig(arch="nomic-bert", n_vocab=N_VOCAB, n_embd=d, n_layer=N_LAYER, n_head=N_HEAD, n_head_kv=N_HEAD,
                      head_dim=d // N_HEAD, n_ff=N_FF, n_ctx_train=64, rope_theta=1000.0, rms_eps=1e-12,
                      rope_style="neox", tie_embeddings=False, causal=False, pooling="mean", norm_eps=1e-12)
    layers = []
    for i in range(N_LAYER):
        w = {role: weight(rng, f"{i}.{role}", shape, dtype) for role, shape in
             [("wq", (d, d)), ("wk", (d, d)), ("wv", (d, d)), ("wo", (d, d)), ("w_gate", (N_FF, d)),
              ("w_up", (N_FF, d)), ("w_down", (d, N_FF))]}
        for norm in ("attn_out_norm", "layer_out_norm"):   # vectors stay F32, as in the GGUF
            w[norm] = weight(rng, f"{i}.{norm}", (d,), offset=1.0)
            w[norm + "_b"] = weight(rng, f"{i}.{norm}_b", (d,))
        layers.append(LayerSpec(w, rope_theta=1000.0))
    tensors = {"token_embd": weight(rng, "token_embd", (N_VOCAB, d), dtype, scale=1.0),
               "token_types": weight(rng, "token_types", (2, d)),
               "embd_norm": weight(rng, "embd_norm", (d,), offset=1.0), "embd_norm_b": weight(rng, "embd_norm_b", (d,))}
    return ModelSpec(cfg, tensors, layers)


def batch(seed=1, lengths=(5, 1, 12, 7)) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.integers(0, N_VOCAB, n).astype(np.int32) for n in lengths]


# kernel paths whose ops path this process may run (ONEWELL_ISA caps the ops, not the kernel paths a test can name)
PAIRED_PATHS = [p for p in available_paths() if KERNEL_PATH_OPS_ISA[p] in available_isas()]


@pytest.mark.parametrize("path", PAIRED_PATHS)
@pytest.mark.parametrize("dtype, atol", [(np.float32, 2e-4), (np.float16, 2e-2)])
def test_native_hidden_states_match_the_reference(path, dtype, atol):
    spec = tiny_encoder(dtype)
    inputs = batch()
    ops_path = KERNEL_PATH_OPS_ISA[path]
    previous = ops_isa()
    set_ops_isa(ops_path)
    try:
        native = NativeEncoder(spec, n_ctx=32, threads=2, isa=path).hidden(inputs)
    finally:
        set_ops_isa(previous)
    reference = ReferenceEncoder(spec, n_ctx=32).hidden(inputs)
    for n, r in zip(native, reference):
        assert n.shape == r.shape
        np.testing.assert_allclose(n, r, atol=atol)   # LayerNorm outputs are O(1)
        assert float(np.dot(mean_pool_normalize(n), mean_pool_normalize(r))) > 0.9999


def test_sequences_do_not_see_each_other_and_steps_split_at_max_batch():
    spec = tiny_encoder()
    enc = NativeEncoder(spec, n_ctx=32, threads=2)
    inputs = batch()
    together = enc.hidden(inputs)                     # 25 tokens: one step
    assert enc.steps(inputs) == [[0, 1, 2, 3]]
    for ids, h in zip(inputs, together):
        np.testing.assert_array_equal(enc.hidden([ids])[0], h)   # bit-identical: per-row kernels, per-sequence attention
    enc.max_batch = 13
    assert enc.steps(inputs) == [[0, 1], [2], [3]]
    for a, b in zip(enc.hidden(inputs), together):
        np.testing.assert_array_equal(a, b)
    # bidirectional: changing the last token changes the first token's state (it would not under a causal mask)
    changed = inputs[2].copy()
    changed[-1] = (changed[-1] + 1) % N_VOCAB
    assert not np.allclose(enc.hidden([changed])[0][0], together[2][0])


def test_the_encoder_executor_refuses_bad_steps():
    from onewell._native import _core

    spec = tiny_encoder()
    enc = NativeEncoder(spec, n_ctx=16, threads=1)
    hidden = np.empty((4, N_EMBD), np.float32)
    with pytest.raises(ValueError, match="add up to"):
        _core.executor_encode(enc._ex, np.zeros(4, np.int32), np.array([3], np.int32), hidden)
    with pytest.raises(ValueError, match=">= 1"):
        _core.executor_encode(enc._ex, np.zeros(4, np.int32), np.array([4, 0], np.int32), hidden)
    with pytest.raises(ValueError, match="outside the vocabulary"):
        _core.executor_encode(enc._ex, np.full(4, N_VOCAB, np.int32), np.array([4], np.int32), hidden)
    with pytest.raises(ValueError, match="max_batch"):
        _core.executor_encode(enc._ex, np.zeros(17, np.int32), np.array([17], np.int32),
                              np.empty((17, N_EMBD), np.float32))
    with pytest.raises(ValueError, match="hidden must be"):
        _core.executor_encode(enc._ex, np.zeros(4, np.int32), np.array([4], np.int32), np.empty(3, np.float32))
    with pytest.raises(ValueError, match="bad arguments"):   # an encoder has no logits step
        _core.executor_forward(enc._ex, np.zeros(2, np.int32), 0, np.empty(N_VOCAB, np.float32), 0)


def test_generative_specs_and_causal_encoders_are_refused():
    from onewell.runtime.plan import build_plan
    import dataclasses

    spec = tiny_encoder()
    causal = dataclasses.replace(spec, config=dataclasses.replace(spec.config, causal=True))
    with pytest.raises(UnsupportedError, match="bidirectional"):
        build_plan(causal)
    not_embedding = dataclasses.replace(spec.config, pooling="none")
    with pytest.raises(ValueError, match="unknown tensor roles"):
        ModelSpec(not_embedding, spec.tensors, spec.layers)   # encoder roles in a generative model
    generative = ModelSpec(not_embedding, {**spec.tensors, "output_norm": spec.tensors["embd_norm"],
                                           "output": spec.tensors["token_embd"]} | {"token_types": None,
                                                                                    "embd_norm": None,
                                                                                    "embd_norm_b": None},
                           spec.layers)
    with pytest.raises(WrongModelKindError, match="generative model"):
        ReferenceEncoder(generative, n_ctx=8)
