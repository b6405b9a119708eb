"""Gemma 3: the shared pre-norm decoder plus RMSNorm of each query/key head before RoPE, RMSNorm of the attention
and FFN outputs before their residual adds, GeGLU (GELU-tanh gated) feed-forward, embeddings scaled by
sqrt(n_embd), NeoX RoPE, tied output, and local (sliding-window) layers interleaved with global ones.

What is read as llama.cpp (build 11434, src/models/gemma3.cpp) reads it:
- `gemma3.attention.sliding_window` (n_swa): when present and > 0, layer i is local iff i % p < p - 1 for the
  pattern p (`gemma3.attention.sliding_window_pattern`, default 6: five local layers, then a global one), or as
  that key's per-layer array says. A local query at p sees keys j with p - j < n_swa.
- RoPE base: `rope.freq_base` for global layers, `rope.freq_base_swa` (default 10000) for local ones.
- attention scale 1/sqrt(head_dim), except for the 62-layer 27B model: 1/sqrt(n_embd / n_head) (Gemma's
  query_pre_attn_scalar; the GGUF does not carry it).
- `gemma3.final_logit_softcapping` when present.
Norm weights: Gemma computes x * (1 + w); llama.cpp's converter stores 1 + w in the GGUF (its graph multiplies
by the stored weight, like every other RMSNorm), so nothing is added here.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from onewell.errors import GGUFError
from onewell.models.base import ModelSpec
from onewell.models.common import build_decoder_spec, metadata

ARCHITECTURE = "gemma3"
DEFAULT_SWA_PATTERN = 6
DEFAULT_SWA_ROPE_BASE = 10000.0


def local_layers(md: Any, n_layer: int) -> list[bool]:
    """Which layers use the sliding window (llama.cpp's set_swa_pattern with dense_first = false)."""
    key = f"{ARCHITECTURE}.attention.sliding_window_pattern"
    pattern = md.meta.get(key, DEFAULT_SWA_PATTERN)
    if isinstance(pattern, (list, tuple, np.ndarray)):
        flags = [bool(v) for v in pattern]
        if len(flags) != n_layer:
            raise GGUFError(f"{md.where}: {key} has {len(flags)} entries for {n_layer} layers")
        return flags
    period = md.integer("attention.sliding_window_pattern", DEFAULT_SWA_PATTERN, minimum=0)
    return [period == 0 or i % period < period - 1 for i in range(n_layer)]


def build_spec(reader: Any) -> ModelSpec:
    md = metadata(reader, ARCHITECTURE)
    n_embd, n_layer, n_head = md.integer("embedding_length"), md.integer("block_count"), md.integer("attention.head_count")
    window = md.integer("attention.sliding_window", 0, minimum=0)
    local = local_layers(md, n_layer) if window else [False] * n_layer
    global_base = md.real("rope.freq_base", 10000.0)
    local_base = md.real("rope.freq_base_swa", DEFAULT_SWA_ROPE_BASE)
    flags: dict[str, Any] = {}
    if n_layer == 62:   # Gemma 3 27B: query_pre_attn_scalar = n_embd / n_head
        flags["attn_scale"] = 1.0 / math.sqrt(n_embd / n_head)
    if md.has("final_logit_softcapping"):
        flags["final_logit_softcap"] = md.real("final_logit_softcapping")
    return build_decoder_spec(
        reader, ARCHITECTURE, rope_style="neox",
        layer_features=("q_norm", "k_norm", "attn_post_norm", "ffn_post_norm"),
        layer_attention=lambda i: ({"rope_theta": local_base, "sliding_window": window} if local[i]
                                   else {"rope_theta": global_base}),
        activation="gelu_tanh", embd_scale=math.sqrt(n_embd), **flags)
