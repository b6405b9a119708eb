"""Qwen3: Qwen2 without the q/k/v biases, with an RMSNorm over each query and key head before RoPE
(attn_q_norm / attn_k_norm, one [head_dim] weight shared by all heads). The head size comes from
attention.key_length and need not be n_embd / n_head."""
from __future__ import annotations

from typing import Any

from onewell.models.base import ModelSpec
from onewell.models.common import build_decoder_spec

ARCHITECTURE = "qwen3"


def build_spec(reader: Any) -> ModelSpec:
    return build_decoder_spec(reader, ARCHITECTURE, rope_style="neox", layer_features=("q_norm", "k_norm"))
