"""models/gemma3.py on tiny in-memory readers: the metadata keys read as llama.cpp 11434 reads them (sliding
window and its per-layer pattern, the local RoPE base, final soft-capping), the feature flags, and refusals."""
from __future__ import annotations

import math

import numpy as np
import pytest
from test_models import tiny_reader

from onewell.errors import GGUFError, UnsupportedError
from onewell.models.registry import load_spec
from onewell.runtime.reference import ReferenceBackend

D, N_HEAD, HEAD_DIM = 32, 4, 16   # Gemma's key_length is not n_embd / n_head


def gemma_reader(n_layer=7, extra_meta=None, drop=()):
    rng = np.random.default_rng(1)
    extra = {}
    for i in range(n_layer):
        extra.update({f"blk.{i}.attn_q_norm.weight": 1 + 0.1 * rng.standard_normal(HEAD_DIM, dtype=np.float32),
                      f"blk.{i}.attn_k_norm.weight": 1 + 0.1 * rng.standard_normal(HEAD_DIM, dtype=np.float32),
                      f"blk.{i}.post_attention_norm.weight": 1 + 0.1 * rng.standard_normal(D, dtype=np.float32),
                      f"blk.{i}.post_ffw_norm.weight": 1 + 0.1 * rng.standard_normal(D, dtype=np.float32),
                      f"blk.{i}.attn_q.weight": 0.3 * rng.standard_normal((N_HEAD * HEAD_DIM, D), dtype=np.float32),
                      f"blk.{i}.attn_k.weight": 0.3 * rng.standard_normal((HEAD_DIM, D), dtype=np.float32),
                      f"blk.{i}.attn_v.weight": 0.3 * rng.standard_normal((HEAD_DIM, D), dtype=np.float32),
                      f"blk.{i}.attn_output.weight": 0.3 * rng.standard_normal((D, N_HEAD * HEAD_DIM), dtype=np.float32)})
    for name in drop:
        extra.pop(name)
    meta = {"gemma3.attention.key_length": HEAD_DIM, "gemma3.attention.value_length": HEAD_DIM,
            "gemma3.rope.freq_base": 1e6, "gemma3.attention.sliding_window": 4, **(extra_meta or {})}
    return tiny_reader("gemma3", d=D, n_layer=n_layer, n_head=N_HEAD, n_head_kv=1, extra_meta=meta, replace=extra)


def attention_of(spec):
    return [(layer.rope_theta, layer.sliding_window) for layer in spec.layers]


def test_every_sixth_layer_is_global_with_the_metadata_base_the_others_local_with_10000():
    spec = load_spec(gemma_reader())
    assert attention_of(spec) == [(1e4, 4)] * 5 + [(1e6, 0)] + [(1e4, 4)]
    cfg = spec.config
    assert (cfg.activation, cfg.rope_style, cfg.head_dim, cfg.tie_embeddings) == ("gelu_tanh", "neox", HEAD_DIM, True)
    assert cfg.embd_scale == math.sqrt(D) and cfg.attn_scale == 0 and cfg.final_logit_softcap == 0
    assert set(spec.layers[0].tensors) >= {"q_norm", "k_norm", "attn_post_norm", "ffn_post_norm"}


def test_pattern_and_local_base_from_metadata():
    spec = load_spec(gemma_reader(extra_meta={"gemma3.attention.sliding_window_pattern": 3,
                                              "gemma3.rope.freq_base_swa": 5e4}))
    assert attention_of(spec) == [(5e4, 4), (5e4, 4), (1e6, 0)] * 2 + [(5e4, 4)]
    per_layer = [True, False, False, True, True, True, False]
    spec = load_spec(gemma_reader(extra_meta={"gemma3.attention.sliding_window_pattern": per_layer}))
    assert [w > 0 for _, w in attention_of(spec)] == per_layer
    with pytest.raises(GGUFError, match="sliding_window_pattern has 2 entries for 7 layers"):
        load_spec(gemma_reader(extra_meta={"gemma3.attention.sliding_window_pattern": [True, False]}))


def test_no_sliding_window_key_means_every_layer_global():
    spec = load_spec(gemma_reader(extra_meta={"gemma3.attention.sliding_window": 0}))
    assert attention_of(spec) == [(1e6, 0)] * 7


def test_final_soft_capping_is_read_attention_soft_capping_refused():
    spec = load_spec(gemma_reader(extra_meta={"gemma3.final_logit_softcapping": 30.0}))
    assert spec.config.final_logit_softcap == 30.0
    with pytest.raises(UnsupportedError, match="attn_logit_softcapping"):
        load_spec(gemma_reader(extra_meta={"gemma3.attn_logit_softcapping": 50.0}))
    # the shared refusal still holds for architectures that do not read the key
    with pytest.raises(UnsupportedError, match="final_logit_softcapping"):
        load_spec(tiny_reader(extra_meta={"llama.final_logit_softcapping": 30.0}))


def test_missing_gemma_tensor_is_named():
    with pytest.raises(GGUFError, match="blk.3.post_ffw_norm.weight"):
        load_spec(gemma_reader(drop=("blk.3.post_ffw_norm.weight",)))


def test_local_layers_see_only_the_window():
    """Position 5 of a window-4 layer must not see position 0: changing token 0 changes nothing there when every
    layer is local (one token's influence reaches back one window per layer)."""
    per_layer = [True] * 7
    spec = load_spec(gemma_reader(extra_meta={"gemma3.attention.sliding_window_pattern": per_layer,
                                              "gemma3.attention.sliding_window": 30}))
    ids = [5, 9, 11, 3, 7, 2, 8, 1, 4, 6]
    a = ReferenceBackend(spec, n_ctx=16).forward(ids, all_logits=True)
    b = ReferenceBackend(spec, n_ctx=16).forward([12] + ids[1:], all_logits=True)
    assert np.abs(a[-1] - b[-1]).max() > 1e-4          # window 30: token 0 is seen
    spec = load_spec(gemma_reader(n_layer=1, extra_meta={"gemma3.attention.sliding_window_pattern": [True]}))
    a = ReferenceBackend(spec, n_ctx=16).forward(ids, all_logits=True)
    b = ReferenceBackend(spec, n_ctx=16).forward([12] + ids[1:], all_logits=True)
    np.testing.assert_array_equal(a[4:], b[4:])          # window 4, one layer: positions >= 4 never see 0
    assert np.abs(a[3] - b[3]).max() > 1e-4
