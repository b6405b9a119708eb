"""The numpy reference backend: the transformer forward pass written to be read, the oracle the native
executor is tested against. Float32 throughout, like llama2.c's run.c: sections in data-flow order.

Memory: every weight is dequantized once at load to float32, about 4 bytes per parameter (~2 GB for
Qwen2.5-0.5B with its separate output matrix, ~0.5 GB for SmolLM2-135M). The token-embedding table is
the exception: only the rows of the tokens being fed are dequantized, unless the table is also the output
projection (tied embeddings), in which case it is needed whole anyway.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from onewell.models.base import ModelSpec, Weight
from onewell.quant import dequantize
from onewell.runtime.kv_cache import KVCache

# Tokens per internal batch: bounds the attention-score and logit buffers of a long prefill.
MAX_BATCH = 256


# ----------------------------------------------------------------------------------------------------------
# Weights, dequantized once


@dataclass
class DenseLayer:
    attn_norm: np.ndarray
    wq: np.ndarray
    wk: np.ndarray
    wv: np.ndarray
    wo: np.ndarray
    ffn_norm: np.ndarray
    w_gate: np.ndarray
    w_up: np.ndarray
    w_down: np.ndarray
    bq: np.ndarray | None
    bk: np.ndarray | None
    bv: np.ndarray | None


def dense(weight: Weight | None) -> np.ndarray | None:
    if weight is None:
        return None
    return np.ascontiguousarray(dequantize(weight.ggml_type, weight.raw, weight.shape), dtype=np.float32)


def gather_rows(table: Weight, ids: np.ndarray) -> np.ndarray:
    """Dequantize only rows `ids` of a quantized (n_rows, n_cols) table: rows are contiguous byte runs."""
    n_rows, n_cols = table.shape
    row_bytes = table.raw.size // n_rows
    picked = table.raw.reshape(n_rows, row_bytes)[ids]  # fancy indexing copies just these rows
    return dequantize(table.ggml_type, picked.reshape(-1), (len(ids), n_cols)).astype(np.float32, copy=False)


# ----------------------------------------------------------------------------------------------------------
# The building blocks


def rms_norm(x: np.ndarray, weight: np.ndarray, eps: float) -> np.ndarray:
    mean_square = np.mean(x * x, axis=-1, keepdims=True)
    return x / np.sqrt(mean_square + np.float32(eps)) * weight


def rope_angles(positions: np.ndarray, head_dim: int, theta: float) -> tuple[np.ndarray, np.ndarray]:
    """cos and sin of position * theta^(-2i/head_dim) for each pair i: (n, 1, head_dim/2), broadcast over heads."""
    inv_freq = theta ** (-np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    angles = positions.astype(np.float64)[:, None] * inv_freq[None, :]
    return (np.cos(angles).astype(np.float32)[:, None, :], np.sin(angles).astype(np.float32)[:, None, :])


def apply_rope(x: np.ndarray, cos: np.ndarray, sin: np.ndarray, style: str) -> np.ndarray:
    """Rotate each pair of a head (x: (n, n_heads, head_dim)) by its angle.
    neox pairs element i with i + head_dim/2; normal pairs adjacent elements 2i and 2i+1."""
    half = x.shape[-1] // 2
    if style == "neox":
        a, b = x[..., :half], x[..., half:]
        return np.concatenate([a * cos - b * sin, b * cos + a * sin], axis=-1)
    a, b = x[..., 0::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., 0::2] = a * cos - b * sin
    out[..., 1::2] = b * cos + a * sin
    return out


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - np.max(x, axis=-1, keepdims=True))
    return e / np.sum(e, axis=-1, keepdims=True)


def causal_attention(q: np.ndarray, keys: np.ndarray, values: np.ndarray, first_pos: int) -> np.ndarray:
    """q: (n, n_head, hd) for positions first_pos..first_pos+n-1; keys/values: (T, n_head_kv, hd) for
    positions 0..T-1. Grouped-query: query head h reads kv head h // (n_head / n_head_kv).
    Returns (n, n_head * hd)."""
    n, n_head, hd = q.shape
    n_kv = keys.shape[1]
    group = n_head // n_kv
    q_by_kv = q.reshape(n, n_kv, group, hd).transpose(1, 2, 0, 3)           # (n_kv, group, n, hd)
    scores = q_by_kv @ keys.transpose(1, 2, 0)[:, None]                     # (n_kv, group, n, T)
    scores *= np.float32(1.0 / np.sqrt(hd))
    query_pos = first_pos + np.arange(n)
    future = np.arange(keys.shape[0])[None, :] > query_pos[:, None]         # (n, T): keys not yet seen
    scores = np.where(future, np.float32(-np.inf), scores)
    out = softmax(scores) @ values.transpose(1, 0, 2)[:, None]              # (n_kv, group, n, hd)
    return out.transpose(2, 0, 1, 3).reshape(n, n_head * hd)


def silu(x: np.ndarray) -> np.ndarray:
    return x * (0.5 * (1.0 + np.tanh(0.5 * x)))  # = x * sigmoid(x), without exp overflow warnings


# ----------------------------------------------------------------------------------------------------------
# The backend


class ReferenceBackend:
    """Backend protocol (runtime/backend.py) in numpy. Not fast: it is the readable oracle."""

    def __init__(self, spec: ModelSpec, n_ctx: int = 4096):
        if n_ctx <= 0:
            raise ValueError(f"n_ctx must be positive, got {n_ctx}")
        self.spec = spec
        self.config = cfg = spec.config
        self.n_ctx = n_ctx
        self.layers = [
            DenseLayer(**{name: dense(getattr(lw, name)) for name in DenseLayer.__dataclass_fields__})
            for lw in spec.layers
        ]
        self.output_norm = dense(spec.output_norm)
        self.output = dense(spec.output)  # (n_vocab, n_embd); for tied models also the embedding table
        self.cache = KVCache(cfg.n_layer, n_ctx, cfg.n_head_kv, cfg.head_dim)

    @property
    def n_past(self) -> int:
        return self.cache.n_past

    @property
    def dense_bytes(self) -> int:
        """Memory the dequantized weights take."""
        arrays = [self.output_norm, self.output] + [a for layer in self.layers for a in vars(layer).values()]
        return sum(a.nbytes for a in arrays if a is not None)

    def truncate(self, n_past: int) -> None:
        self.cache.truncate(n_past)

    def reset(self) -> None:
        self.cache.reset()

    def forward(self, tokens: Sequence[int], all_logits: bool = False) -> np.ndarray:
        ids = self._check_tokens(tokens)
        self.cache.check_room(len(ids))
        logits = [self._forward_batch(ids[i:i + MAX_BATCH], all_logits) for i in range(0, len(ids), MAX_BATCH)]
        return np.concatenate(logits, axis=0) if all_logits else logits[-1]

    def _check_tokens(self, tokens: Sequence[int]) -> np.ndarray:
        ids = np.asarray(tokens)
        if ids.ndim != 1 or len(ids) == 0:
            raise ValueError(f"forward needs a non-empty 1-D sequence of token ids, got shape {ids.shape}")
        if not np.issubdtype(ids.dtype, np.integer):
            raise ValueError(f"token ids must be integers, got dtype {ids.dtype}")
        bad = (ids < 0) | (ids >= self.config.n_vocab)
        if bad.any():
            raise ValueError(f"token id {int(ids[bad][0])} is outside the vocabulary [0, {self.config.n_vocab})")
        return ids.astype(np.int64)

    def _forward_batch(self, ids: np.ndarray, all_logits: bool) -> np.ndarray:
        cfg = self.config
        n = len(ids)
        first_pos = self.cache.n_past

        # 1. token embeddings: (n, n_embd)
        if cfg.tie_embeddings:
            x = self.output[ids]
        else:
            x = gather_rows(self.spec.token_embd, ids)

        # 2. rotary angles of the new positions, shared by every layer
        cos, sin = rope_angles(np.arange(first_pos, first_pos + n), cfg.head_dim, cfg.rope_theta)

        for index, layer in enumerate(self.layers):
            # 3. attention block: norm, q/k/v projections, RoPE, cache the new keys/values, attend, project
            h = rms_norm(x, layer.attn_norm, cfg.rms_eps)
            q, k, v = h @ layer.wq.T, h @ layer.wk.T, h @ layer.wv.T
            if layer.bq is not None:
                q, k, v = q + layer.bq, k + layer.bk, v + layer.bv
            q = apply_rope(q.reshape(n, cfg.n_head, cfg.head_dim), cos, sin, cfg.rope_style)
            k = apply_rope(k.reshape(n, cfg.n_head_kv, cfg.head_dim), cos, sin, cfg.rope_style)
            self.cache.store(index, k, v.reshape(n, cfg.n_head_kv, cfg.head_dim))
            keys, values = self.cache.window(index, n)
            x = x + causal_attention(q, keys, values, first_pos) @ layer.wo.T

            # 4. feed-forward block (SwiGLU): down(silu(gate(h)) * up(h))
            h = rms_norm(x, layer.ffn_norm, cfg.rms_eps)
            x = x + (silu(h @ layer.w_gate.T) * (h @ layer.w_up.T)) @ layer.w_down.T

        self.cache.commit(n)  # only now are positions first_pos.. valid in every layer

        # 5. final norm and output projection (of the last token only, unless all are wanted)
        if not all_logits:
            x = x[-1:]
        logits = rms_norm(x, self.output_norm, cfg.rms_eps) @ self.output.T
        return logits if all_logits else logits[0]
