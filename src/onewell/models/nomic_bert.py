"""nomic-bert (nomic-embed-text): a BERT-style encoder for embeddings, read as llama.cpp (build 11434,
src/models/bert.cpp, LLM_ARCH_NOMIC_BERT) reads it:

- token embeddings + row 0 of `token_types.weight` (token types are all 0, "sentence A"), then LayerNorm with
  bias (`token_embd_norm`); no position embeddings: RoPE (NeoX style, `rope.freq_base`) on Q and K instead;
- per layer, post-norm: fused QKV without bias (`attn_qkv`: Q rows, then K, then V), bidirectional attention
  scaled by 1/sqrt(head_dim), `attn_output`, residual add, LayerNorm (`attn_output_norm`); SwiGLU FFN
  (silu(ffn_gate) * ffn_up, then ffn_down), residual add, LayerNorm (`layer_output_norm`);
- no output norm or vocabulary projection: the last layer's hidden states are pooled (`pooling_type` 1 = mean)
  and L2-normalized by the caller (runtime/embedding.py).
LayerNorm epsilon: `attention.layer_norm_epsilon`. A file saying `attention.causal = true` or another pooling
type is refused by name.
"""
from __future__ import annotations

from typing import Any

from onewell.errors import GGUFError, UnsupportedError
from onewell.models.base import LayerSpec, ModelConfig, ModelSpec
from onewell.models.common import WeightTable, metadata, split_rows, vocab_size

ARCHITECTURE = "nomic-bert"
POOLING_TYPES = {1: "mean"}   # llama.cpp's LLAMA_POOLING_TYPE_MEAN; CLS (2) and last (3) are not implemented


def build_spec(reader: Any) -> ModelSpec:
    md = metadata(reader, ARCHITECTURE)
    n_embd, n_layer = md.integer("embedding_length"), md.integer("block_count")
    n_head = md.integer("attention.head_count")
    n_head_kv = md.integer("attention.head_count_kv", n_head)
    n_ff = md.integer("feed_forward_length")
    if n_embd % n_head or n_head % n_head_kv or (n_embd // n_head) % 2:
        raise GGUFError(f"{md.where}: {n_embd} embedding dims do not split into {n_head} heads of even size "
                        f"(with {n_head_kv} kv heads)")
    head_dim = n_embd // n_head
    if md.meta.get(f"{ARCHITECTURE}.attention.causal", False):
        raise UnsupportedError(f"{md.where}: {ARCHITECTURE}.attention.causal = true is not implemented "
                               f"(nomic-bert is bidirectional)")
    pooling = md.integer("pooling_type", 1, minimum=0)
    if pooling not in POOLING_TYPES:
        raise UnsupportedError(f"{md.where}: {ARCHITECTURE}.pooling_type {pooling} is not implemented "
                               f"(supported: 1 = mean)")
    rope_dims = md.integer("rope.dimension_count", head_dim)
    if rope_dims != head_dim:
        raise UnsupportedError(f"{md.where}: partial RoPE ({rope_dims} of {head_dim} dims) is not implemented")
    eps = md.real("attention.layer_norm_epsilon", maximum=1.0)
    rope_theta = md.real("rope.freq_base", 10000.0, maximum=1e30)

    w = WeightTable(reader)
    n_vocab = vocab_size(reader, ARCHITECTURE, w.rows("token_embd.weight", n_embd))
    config = ModelConfig(
        arch=ARCHITECTURE, n_vocab=n_vocab, n_embd=n_embd, n_layer=n_layer, n_head=n_head, n_head_kv=n_head_kv,
        head_dim=head_dim, n_ff=n_ff, n_ctx_train=md.integer("context_length"), rope_theta=rope_theta,
        rms_eps=eps, rope_style="neox", tie_embeddings=False, causal=False, pooling=POOLING_TYPES[pooling],
        norm_eps=eps)
    kv_dim = n_head_kv * head_dim
    d = (n_embd,)
    layers = []
    for i in range(n_layer):
        b = f"blk.{i}."
        tensors = split_rows(w.get(b + "attn_qkv.weight", (n_embd + 2 * kv_dim, n_embd)),
                             {"wq": n_embd, "wk": kv_dim, "wv": kv_dim})
        tensors |= {
            "wo": w.get(b + "attn_output.weight", (n_embd, n_embd)),
            "attn_out_norm": w.get(b + "attn_output_norm.weight", d),
            "attn_out_norm_b": w.get(b + "attn_output_norm.bias", d),
            "w_gate": w.get(b + "ffn_gate.weight", (n_ff, n_embd)),
            "w_up": w.get(b + "ffn_up.weight", (n_ff, n_embd)),
            "w_down": w.get(b + "ffn_down.weight", (n_embd, n_ff)),
            "layer_out_norm": w.get(b + "layer_output_norm.weight", d),
            "layer_out_norm_b": w.get(b + "layer_output_norm.bias", d),
        }
        layers.append(LayerSpec(tensors, rope_theta=rope_theta))
    n_types = w.rows("token_types.weight", n_embd) if w.has("token_types.weight") else 0
    spec = ModelSpec(
        config=config,
        tensors={"token_embd": w.get("token_embd.weight", (n_vocab, n_embd)),
                 "token_types": w.get("token_types.weight", (n_types, n_embd)) if n_types else None,
                 "embd_norm": w.get("token_embd_norm.weight", d), "embd_norm_b": w.get("token_embd_norm.bias", d)},
        layers=layers,
        metadata=reader.metadata,
    )
    w.check_all_used(ARCHITECTURE)
    return spec
