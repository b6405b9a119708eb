"""What every architecture file produces: hyperparameters, feature flags and weights by role, in one shape for
all models (the named model description).

An architecture module (qwen2.py, llama.py, ...) reads GGUF metadata and tensor names and returns a
`ModelSpec`. Everything downstream (numpy reference forward, native plan builder, bench byte counts)
consumes only this, never raw tensor names. A feature is on when its flag is set or its optional tensor is
present; the defaults describe Llama / Qwen2.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from onewell.gguf.constants import GGMLType


@dataclass(frozen=True)
class Weight:
    """One tensor as stored in the file: quantized bytes, zero-copy from the mmap (or a row slice of one)."""

    name: str
    ggml_type: GGMLType
    shape: tuple[int, ...]  # numpy order: a matrix is (rows=out_features, cols=in_features)
    raw: np.ndarray         # uint8 view of the tensor's bytes (row-major, rows contiguous)

    @property
    def nbytes(self) -> int:
        return int(self.raw.nbytes)


ACTIVATIONS = ("silu", "gelu_tanh")   # gated FFN: SwiGLU, GeGLU (tanh-approximated GELU)
POOLINGS = ("none", "mean")


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
    rope_theta: float                      # the default RoPE base; each LayerSpec carries its own
    rms_eps: float
    rope_style: Literal["normal", "neox"]  # normal: rotate pairs (2i, 2i+1); neox: pairs (i, i + n_rot/2)
    tie_embeddings: bool                   # output projection is the token-embedding table
    # feature flags; the defaults mean "as Llama / Qwen2"
    activation: str = "silu"               # gated FFN activation: "silu" (SwiGLU) | "gelu_tanh" (GeGLU)
    embd_scale: float = 1.0                # token embeddings are multiplied by this (Gemma: sqrt(n_embd))
    attn_scale: float = 0.0                # 0 = 1/sqrt(head_dim); else the attention score scale
    attn_softcap: float = 0.0              # 0 = off; else scores = c * tanh(scores / c) before the softmax
    final_logit_softcap: float = 0.0       # 0 = off; else logits = c * tanh(logits / c)
    n_rot: int = 0                         # 0 = head_dim; else RoPE rotates only the first n_rot dims of a head
    causal: bool = True                    # False: bidirectional attention (encoders)
    # encoders (BERT family): the embedding model's output is a pooled hidden state, not logits
    pooling: str = "none"                  # "none" (a generative model) | "mean" (an embedding model)
    norm_eps: float = 0.0                  # LayerNorm epsilon (embedding norm, post-norm layers); 0 = unused

    @property
    def is_embedding(self) -> bool:
        """An encoder whose result is one vector per input (pooled), with no vocabulary projection."""
        return self.pooling != "none"

    @property
    def rope_dims(self) -> int:
        """Dimensions of each head RoPE rotates."""
        return self.n_rot or self.head_dim


# Roles of a layer's tensors. Optional ones switch a feature on by being present.
LAYER_REQUIRED = ("attn_norm", "wq", "wk", "wv", "wo", "ffn_norm", "w_gate", "w_up", "w_down")
# A post-norm (BERT) layer: no norms before attention / FFN; LayerNorms (weight, bias) after each residual add:
# x = LN(x + wo(attn(x))) with attn_out_norm(_b), then x = LN(x + ffn(x)) with layer_out_norm(_b).
LAYER_REQUIRED_POST_NORM = ("wq", "wk", "wv", "wo", "attn_out_norm", "attn_out_norm_b", "w_gate", "w_up", "w_down",
                            "layer_out_norm", "layer_out_norm_b")
LAYER_OPTIONAL = (
    "bq", "bk", "bv",                    # q/k/v biases, all or none (Qwen2)
    "q_norm", "k_norm",                  # [head_dim] RMSNorm of each query / key head before RoPE (Qwen3, Gemma 3)
    "attn_post_norm", "ffn_post_norm",   # [n_embd] RMSNorm of the attention / FFN output before its residual add
)
MODEL_REQUIRED = ("token_embd", "output_norm", "output")
MODEL_OPTIONAL = ("rope_freqs",)         # [n_rot/2] RoPE frequency factors (Llama 3.x): frequency i is divided by it
# An embedding model (config.is_embedding): no output norm or projection; its embeddings may get token type 0's
# row added (token_types: [n_types, n_embd], BERT's "sentence A") and a LayerNorm (embd_norm, embd_norm_b).
MODEL_REQUIRED_ENCODER = ("token_embd",)
MODEL_OPTIONAL_ENCODER = ("token_types", "embd_norm", "embd_norm_b", "rope_freqs")


def _check_roles(what: str, tensors: dict, required: tuple[str, ...], optional: tuple[str, ...]) -> None:
    unknown = sorted(set(tensors) - set(required) - set(optional))
    missing = [r for r in required if tensors.get(r) is None]
    if unknown:
        raise ValueError(f"{what}: unknown tensor roles {unknown} (known: {', '.join(required + optional)})")
    if missing:
        raise ValueError(f"{what}: required tensor roles missing: {missing}")


@dataclass(frozen=True)
class LayerSpec:
    """One decoder layer: tensors by role (an absent optional role = that feature off) and its attention setup."""

    tensors: dict[str, Weight]
    rope_theta: float                      # this layer's RoPE base
    sliding_window: int = 0                # 0 = full attention; else position p sees j with p - j < sliding_window

    def __post_init__(self):
        object.__setattr__(self, "tensors", {k: v for k, v in self.tensors.items() if v is not None})
        if self.post_norm:
            _check_roles("post-norm layer", self.tensors, LAYER_REQUIRED_POST_NORM, ())
        else:
            _check_roles("layer", self.tensors, LAYER_REQUIRED, LAYER_OPTIONAL)

    @property
    def post_norm(self) -> bool:
        return "attn_out_norm" in self.tensors

    def __getitem__(self, role: str) -> Weight:
        return self.tensors[role]

    def get(self, role: str) -> Weight | None:
        return self.tensors.get(role)

    def with_tensors(self, **changes: Weight | None) -> LayerSpec:
        """A copy with some roles replaced (None removes a role)."""
        return LayerSpec({**self.tensors, **changes}, self.rope_theta, self.sliding_window)


@dataclass(frozen=True)
class ModelSpec:
    config: ModelConfig
    tensors: dict[str, Weight]             # token_embd, output_norm, output (token_embd's Weight when tied), rope_freqs?
    layers: list[LayerSpec]
    metadata: dict = field(repr=False, default_factory=dict)

    def __post_init__(self):
        object.__setattr__(self, "tensors", {k: v for k, v in self.tensors.items() if v is not None})
        if self.config.is_embedding:
            _check_roles("embedding model", self.tensors, MODEL_REQUIRED_ENCODER, MODEL_OPTIONAL_ENCODER)
        else:
            _check_roles("model", self.tensors, MODEL_REQUIRED, MODEL_OPTIONAL)

    @property
    def token_embd(self) -> Weight:
        return self.tensors["token_embd"]

    @property
    def output_norm(self) -> Weight:
        return self.tensors["output_norm"]

    @property
    def output(self) -> Weight:
        return self.tensors["output"]

    @property
    def rope_freqs(self) -> Weight | None:
        return self.tensors.get("rope_freqs")

    def bytes_per_token(self) -> int:
        """Weight bytes read to generate one token: every weight but the embedding gather,
        which counts only when the table is also the output projection."""
        total = sum(w.nbytes for role, w in self.tensors.items() if role != "token_embd")
        for layer in self.layers:
            total += sum(w.nbytes for w in layer.tensors.values())
        return total
