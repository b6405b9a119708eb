"""Phi-3 / Phi-3.5 / Phi-4 (arch `phi3`): the Llama decoder with NeoX RoPE and fused tensors: attn_qkv stacks the
Q, K and V rows (in that order), ffn_up stacks the gate rows and then the up rows (llama.cpp's ggml_swiglu takes
SiLU of the first half). The fused matrices become row views, so the engine sees plain wq/wk/wv/w_gate/w_up.

Refused by name: LongRoPE (Phi-3.5 / 128k models: rope_factors_long/short tensors, rope.scaling.attn_factor).
A sliding-window key is ignored, as llama.cpp does (it disables Phi-3's SWA).
"""
from __future__ import annotations

from typing import Any

from onewell.errors import UnsupportedError
from onewell.models.base import ModelSpec
from onewell.models.common import build_decoder_spec

ARCHITECTURE = "phi3"
FUSED = {"attn_qkv.weight": ("wq", "wk", "wv"), "ffn_up.weight": ("w_gate", "w_up")}


def build_spec(reader: Any) -> ModelSpec:
    where = getattr(reader, "path", "GGUF file")
    longrope = [n for n in reader.tensors if n.endswith(("rope_factors_long.weight", "rope_factors_short.weight"))]
    attn_factor = reader.metadata.get(f"{ARCHITECTURE}.rope.scaling.attn_factor")
    if longrope or (attn_factor is not None and attn_factor != 1.0):
        raise UnsupportedError(f"{where}: LongRoPE scaling (Phi-3.5 / 128k-context phi3 models: "
                               f"{', '.join(longrope) or f'rope.scaling.attn_factor={attn_factor}'}) is not implemented")
    return build_decoder_spec(reader, ARCHITECTURE, rope_style="neox", fused=FUSED)
