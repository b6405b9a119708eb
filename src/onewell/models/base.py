"""What every architecture file produces: hyperparameters and weights by role, in one shape for all models.

An architecture module (qwen2.py, llama.py, ...) reads GGUF metadata and tensor names and returns a
`ModelSpec`. Everything downstream (numpy reference forward, native plan builder, bench byte counts)
consumes only this, never raw tensor names.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from onewell.gguf.constants import GGMLType


@dataclass(frozen=True)
class Weight:
    """One tensor as stored in the file: quantized bytes, zero-copy from the mmap."""

    name: str
    ggml_type: GGMLType
    shape: tuple[int, ...]  # numpy order: a matrix is (rows=out_features, cols=in_features)
    raw: np.ndarray         # uint8 view of the tensor's bytes (row-major, rows contiguous)

    @property
    def nbytes(self) -> int:
        return int(self.raw.nbytes)


@dataclass(frozen=True)
class ModelConfig:
    arch: str
    n_vocab: int
    n_embd: int
    n_layer: int
    n_head: int
    n_head_kv: int
    head_dim: int
    n_ff: int
    n_ctx_train: int
    rope_theta: float
    rms_eps: float
    rope_style: Literal["normal", "neox"]  # normal: rotate pairs (2i, 2i+1); neox: pairs (i, i + head_dim/2)
    tie_embeddings: bool                   # output projection is the token-embedding table


@dataclass(frozen=True)
class LayerWeights:
    attn_norm: Weight
    wq: Weight
    wk: Weight
    wv: Weight
    wo: Weight
    ffn_norm: Weight
    w_gate: Weight
    w_up: Weight
    w_down: Weight
    bq: Weight | None = None  # qwen2 has q/k/v biases, llama has none
    bk: Weight | None = None
    bv: Weight | None = None


@dataclass(frozen=True)
class ModelSpec:
    config: ModelConfig
    token_embd: Weight
    layers: list[LayerWeights]
    output_norm: Weight
    output: Weight  # is token_embd when config.tie_embeddings
    metadata: dict = field(repr=False, default_factory=dict)

    def bytes_per_token(self) -> int:
        """Weight bytes read to generate one token: every weight but the embedding gather,
        which counts only when the table is also the output projection."""
        total = self.output_norm.nbytes + self.output.nbytes
        for layer in self.layers:
            for w in vars(layer).values():
                if w is not None:
                    total += w.nbytes
        return total
