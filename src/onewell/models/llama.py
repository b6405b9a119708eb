"""Llama (SmolLM2 and kin): pre-norm decoder with RMSNorm, grouped-query attention without biases,
"normal" RoPE on adjacent pairs, SwiGLU feed-forward; output projection separate or tied. Llama 3.x files
carry rope_freqs.weight: the converter's llama3 RoPE scaling as per-frequency divisors.

Why "normal" and not NeoX: Hugging Face Llama rotates the two halves of a head, but llama.cpp's converter
permutes the rows of Q and K so that rotating adjacent pairs computes the same thing. GGUF files carry
the permuted weights, so adjacent pairs is right here.
"""
from __future__ import annotations

from typing import Any

from onewell.models.base import ModelSpec
from onewell.models.common import build_decoder_spec

ARCHITECTURE = "llama"


def build_spec(reader: Any) -> ModelSpec:
    return build_decoder_spec(reader, ARCHITECTURE, rope_style="normal", model_features=("rope_freqs",))
