"""Qwen2 / Qwen2.5: pre-norm decoder with RMSNorm, grouped-query attention with q/k/v biases,
NeoX-style RoPE, SwiGLU feed-forward; output projection separate or tied to the embedding table."""
from __future__ import annotations

from typing import Any

from onewell.models.base import LayerWeights, ModelConfig, ModelSpec
from onewell.models.common import WeightTable, read_hyperparameters, vocab_size

ARCHITECTURE = "qwen2"


def build_spec(reader: Any) -> ModelSpec:
    hp = read_hyperparameters(reader, ARCHITECTURE)
    w = WeightTable(reader)
    d, q_dim, kv_dim = hp.n_embd, hp.n_head * hp.head_dim, hp.n_head_kv * hp.head_dim
    n_vocab = vocab_size(reader, ARCHITECTURE, w.rows("token_embd.weight", d))
    tied = not w.has("output.weight")

    config = ModelConfig(
        arch=ARCHITECTURE, n_vocab=n_vocab, n_embd=d, n_layer=hp.n_layer, n_head=hp.n_head,
        n_head_kv=hp.n_head_kv, head_dim=hp.head_dim, n_ff=hp.n_ff, n_ctx_train=hp.n_ctx_train,
        rope_theta=hp.rope_theta, rms_eps=hp.rms_eps, rope_style="neox", tie_embeddings=tied,
    )
    layers = []
    for i in range(hp.n_layer):
        b = f"blk.{i}."
        layers.append(LayerWeights(
            attn_norm=w.get(b + "attn_norm.weight", (d,)),
            wq=w.get(b + "attn_q.weight", (q_dim, d)),
            wk=w.get(b + "attn_k.weight", (kv_dim, d)),
            wv=w.get(b + "attn_v.weight", (kv_dim, d)),
            wo=w.get(b + "attn_output.weight", (d, q_dim)),
            ffn_norm=w.get(b + "ffn_norm.weight", (d,)),
            w_gate=w.get(b + "ffn_gate.weight", (hp.n_ff, d)),
            w_up=w.get(b + "ffn_up.weight", (hp.n_ff, d)),
            w_down=w.get(b + "ffn_down.weight", (d, hp.n_ff)),
            bq=w.get(b + "attn_q.bias", (q_dim,)),
            bk=w.get(b + "attn_k.bias", (kv_dim,)),
            bv=w.get(b + "attn_v.bias", (kv_dim,)),
        ))
    token_embd = w.get("token_embd.weight", (n_vocab, d))
    spec = ModelSpec(
        config=config,
        token_embd=token_embd,
        layers=layers,
        output_norm=w.get("output_norm.weight", (d,)),
        output=token_embd if tied else w.get("output.weight", (n_vocab, d)),
        metadata=reader.metadata,
    )
    w.check_all_used(ARCHITECTURE)
    return spec
