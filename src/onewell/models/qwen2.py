"""Qwen2 / Qwen2.5: pre-norm decoder with RMSNorm, grouped-query attention with q/k/v biases,
NeoX-style RoPE, SwiGLU feed-forward; output projection separate or tied to the embedding table."""
from __future__ import annotations

from typing import Any

from onewell.models.base import ModelSpec
from onewell.models.common import build_decoder_spec

ARCHITECTURE = "qwen2"


def build_spec(reader: Any) -> ModelSpec:
    return build_decoder_spec(reader, ARCHITECTURE, rope_style="neox", layer_features=("bq", "bk", "bv"))
