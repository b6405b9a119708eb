"""Every feature flag of the model description (models/base.py) on the native executor, against the numpy
emulation of the executor's arithmetic (test_native_backend.py: the float reference forward with each matmul
input quantized as the kernels do), on tiny random models.

Each case switches on a group of features; the test also switches each feature off again in the emulation and
checks that the native logits are then far from it, so a feature the executor silently ignored would fail.
Tolerances as in test_native_backend.py for models without Q8_1 activations: only float32 summation order and
the odd activation rounding step differ (mean 3e-5 / max 1e-3 of the largest logit)."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from test_native_backend import IDS, LLAMA_TYPES, QWEN_TYPES, emulated_logits, tiny_spec

from onewell.errors import UnsupportedError
from onewell.gguf.constants import GGMLType
from onewell.models.base import ModelSpec, Weight
from onewell.quant import quantize
from onewell.runtime.native import NativeBackend
from onewell.runtime.native_kernels import available_paths
from onewell.runtime.native_ops import available_isas, ops_isa, set_ops_isa


def vector(rng, name: str, values: np.ndarray) -> Weight:
    return Weight(name, GGMLType.F32, values.shape, quantize(GGMLType.F32, values.astype(np.float32)))


def with_features(spec: ModelSpec, *, layer_roles=(), windows=None, thetas=None, rope_freqs=False,
                  seed: int = 1, **flags) -> ModelSpec:
    """spec with extra optional tensors (random norms around 1) in every layer, per-layer windows and RoPE
    bases, RoPE frequency factors, and config flags."""
    rng = np.random.default_rng(seed)
    cfg = dataclasses.replace(spec.config, **flags)
    sizes = {"q_norm": cfg.head_dim, "k_norm": cfg.head_dim, "attn_post_norm": cfg.n_embd, "ffn_post_norm": cfg.n_embd}
    layers = []
    for i, layer in enumerate(spec.layers):
        extra = {role: vector(rng, f"blk.{i}.{role}", rng.uniform(0.5, 1.5, sizes[role])) for role in layer_roles}
        layers.append(dataclasses.replace(layer.with_tensors(**extra),
                                          sliding_window=windows[i] if windows else layer.sliding_window,
                                          rope_theta=thetas[i] if thetas else layer.rope_theta))
    tensors = dict(spec.tensors)
    if rope_freqs:
        tensors["rope_freqs"] = vector(rng, "rope_freqs", rng.uniform(1.0, 8.0, cfg.rope_dims // 2))
    return ModelSpec(cfg, tensors, layers)


def without(spec: ModelSpec, feature: str) -> ModelSpec:
    """The same model with one feature switched off (a layer role, a config flag, windows or rope_freqs)."""
    if feature in ("q_norm", "k_norm", "attn_post_norm", "ffn_post_norm"):
        return dataclasses.replace(spec, layers=[layer.with_tensors(**{feature: None}) for layer in spec.layers])
    if feature == "sliding_window":
        return dataclasses.replace(spec, layers=[dataclasses.replace(layer, sliding_window=0) for layer in spec.layers])
    if feature == "rope_theta":
        base = spec.layers[-1].rope_theta
        return dataclasses.replace(spec, layers=[dataclasses.replace(layer, rope_theta=base) for layer in spec.layers])
    if feature == "n_rot":   # the factors are per rotated pair: full RoPE cannot keep them
        spec = without(spec, "rope_freqs")
    if feature == "rope_freqs":
        return dataclasses.replace(spec, tensors={k: v for k, v in spec.tensors.items() if k != "rope_freqs"})
    defaults = {"activation": "silu", "embd_scale": 1.0, "attn_scale": 0.0, "attn_softcap": 0.0,
                "final_logit_softcap": 0.0, "n_rot": 0}
    return dataclasses.replace(spec, config=dataclasses.replace(spec.config, **{feature: defaults[feature]}))


def gemma_like():
    """Gemma 3's set: q/k norms, post-norms, GeGLU, sqrt(n_embd) embedding scale, a local layer (window 4, base
    1e4) before a global one (base 1e6), NeoX RoPE."""
    base = tiny_spec("qwen2", QWEN_TYPES, seed=3)
    base = dataclasses.replace(base, layers=[layer.with_tensors(bq=None, bk=None, bv=None) for layer in base.layers])
    spec = with_features(base, layer_roles=("q_norm", "k_norm", "attn_post_norm", "ffn_post_norm"),
                         windows=[4, 0], thetas=[1e4, 1e6], activation="gelu_tanh", embd_scale=16.0)
    return spec, ("q_norm", "k_norm", "attn_post_norm", "ffn_post_norm", "sliding_window", "rope_theta",
                  "activation", "embd_scale")


def capped():
    """Gemma 2's soft-capping of attention scores and logits, with an attention scale override."""
    spec = with_features(tiny_spec("llama", LLAMA_TYPES, seed=4), attn_scale=0.3, attn_softcap=3.0,
                         final_logit_softcap=3.0)
    return spec, ("attn_scale", "attn_softcap", "final_logit_softcap")


def partial_rope():
    """Phi-style partial RoPE (16 of 32 dims) with Llama 3 frequency factors on the rotated pairs."""
    spec = with_features(tiny_spec("llama", LLAMA_TYPES, seed=5), rope_freqs=True, n_rot=16)
    return spec, ("n_rot", "rope_freqs")


CASES = {"gemma_like": gemma_like, "capped": capped, "partial_rope": partial_rope}


@pytest.fixture(scope="module", params=list(CASES))
def case(request):
    return request.param, *CASES[request.param]()


def relative_error(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.abs(a - b) / np.abs(b).max()


def test_native_matches_the_emulation_and_every_feature_matters(case):
    name, spec, features = case
    native = NativeBackend(spec, n_ctx=32).forward(IDS, all_logits=True)
    err = relative_error(native, emulated_logits(spec, IDS))
    print(f"\n{name}: |native - emulated| mean {err.mean():.2e} max {err.max():.2e}")
    assert err.mean() < 3e-5 and err.max() < 1e-3
    for feature in features:
        off = relative_error(native, emulated_logits(without(spec, feature), IDS))
        print(f"  {feature} off in the emulation: mean {off.mean():.2e} max {off.max():.2e}")
        assert off.max() > 3e-3, f"{feature}: switching it off changes nothing measurable"   # 3x the bound


def test_bit_identical_for_any_thread_count_and_token_by_token(case):
    _, spec, _ = case
    runs = [NativeBackend(spec, n_ctx=32, threads=t, chunk_rows=4).forward(IDS, all_logits=True) for t in (1, 2, 3)]
    np.testing.assert_array_equal(runs[0], runs[1])
    np.testing.assert_array_equal(runs[0], runs[2])
    backend = NativeBackend(spec, n_ctx=32)
    steps = np.stack([backend.forward([t], copy=True) for t in IDS])
    np.testing.assert_allclose(steps, runs[0], rtol=0, atol=1e-5 * np.abs(runs[0]).max())


def test_every_isa_path_gives_the_same_greedy_tokens(case):
    _, spec, _ = case
    before = ops_isa()
    tokens = set()
    try:
        for isa in available_isas():
            set_ops_isa(isa)
            for path in available_paths():
                tokens.add(tuple(NativeBackend(spec, n_ctx=32, isa=path).forward(IDS, all_logits=True).argmax(axis=1)))
    finally:
        set_ops_isa(before)
    assert len(tokens) == 1, tokens


def test_plan_refuses_what_the_executor_cannot_do_by_name():
    spec, _ = gemma_like()
    bidirectional = dataclasses.replace(spec, config=dataclasses.replace(spec.config, causal=False))
    with pytest.raises(UnsupportedError, match="bidirectional"):
        NativeBackend(bidirectional, n_ctx=16)
    relu = dataclasses.replace(spec, config=dataclasses.replace(spec.config, activation="relu"))
    with pytest.raises(UnsupportedError, match="activation 'relu'"):
        NativeBackend(relu, n_ctx=16)
    for bad in (dict(n_rot=3), dict(n_rot=64), dict(attn_softcap=-1.0), dict(embd_scale=0.0),
                dict(final_logit_softcap=float("nan"))):
        broken = dataclasses.replace(spec, config=dataclasses.replace(spec.config, **bad))
        with pytest.raises(ValueError, match=next(iter(bad)).replace("final_logit_softcap", "final_logit")):
            NativeBackend(broken, n_ctx=16)
    negative = dataclasses.replace(spec, layers=[dataclasses.replace(spec.layers[0], sliding_window=-1)]
                                   + spec.layers[1:])
    with pytest.raises(ValueError, match="sliding_window"):
        NativeBackend(negative, n_ctx=16)
