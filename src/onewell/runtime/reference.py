"""The numpy reference backend: the transformer forward pass written to be read, the oracle the native
executor is tested against. Float32 throughout (the KV cache rounds what it stores through its element type, f16
by default, as the native one does), like llama2.c's run.c: sections in data-flow order.
Every feature of the model description (models/base.py) is here: q/k norms, post-norms, GeGLU, embedding
scale, attention scale and soft-capping, sliding windows, per-layer RoPE bases, partial RoPE with frequency
factors, final logit soft-capping, bidirectional attention.

Memory: every weight is dequantized once at load to float32, about 4 bytes per parameter (~2 GB for
Qwen2.5-0.5B with its separate output matrix, ~0.5 GB for SmolLM2-135M). The token-embedding table is
the exception: only the rows of the tokens being fed are dequantized, unless the table is also the output
projection (tied embeddings), in which case it is needed whole anyway.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from onewell.models.base import ModelSpec, Weight
from onewell.quant import dequantize
from onewell.runtime.kv_cache import KVCache
from onewell.runtime.plan import check_room, check_tokens

# Tokens per internal batch: bounds the attention-score and logit buffers of a long prefill.
MAX_BATCH = 256


# ----------------------------------------------------------------------------------------------------------
# Weights, dequantized once


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


def rope_angles(positions: np.ndarray, n_rot: int, theta: float,
                freq_factors: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """cos and sin of position * theta^(-2i/n_rot) / factor_i for each pair i: (n, 1, n_rot/2), broadcast over
    heads. freq_factors (Llama 3.x rope_freqs) divide each frequency; None = 1."""
    inv_freq = theta ** (-np.arange(0, n_rot, 2, dtype=np.float64) / n_rot)
    if freq_factors is not None:
        inv_freq = inv_freq / freq_factors.astype(np.float64)
    angles = positions.astype(np.float64)[:, None] * inv_freq[None, :]
    return (np.cos(angles).astype(np.float32)[:, None, :], np.sin(angles).astype(np.float32)[:, None, :])


def apply_rope(x: np.ndarray, cos: np.ndarray, sin: np.ndarray, style: str) -> np.ndarray:
    """Rotate each pair of the first n_rot = 2 * cos.shape[-1] dims of a head (x: (n, n_heads, head_dim)) by its
    angle; the other dims pass through. neox pairs element i with i + n_rot/2; normal pairs 2i and 2i+1."""
    half = cos.shape[-1]
    rot, rest = x[..., :2 * half], x[..., 2 * half:]
    if style == "neox":
        a, b = rot[..., :half], rot[..., half:]
        out = np.concatenate([a * cos - b * sin, b * cos + a * sin], axis=-1)
    else:
        a, b = rot[..., 0::2], rot[..., 1::2]
        out = np.empty_like(rot)
        out[..., 0::2] = a * cos - b * sin
        out[..., 1::2] = b * cos + a * sin
    return np.concatenate([out, rest], axis=-1) if rest.shape[-1] else out


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - np.max(x, axis=-1, keepdims=True))
    return e / np.sum(e, axis=-1, keepdims=True)


def softcap(x: np.ndarray, cap: float) -> np.ndarray:
    """cap * tanh(x / cap): squashes values smoothly into (-cap, cap) (Gemma 2's logit soft-capping)."""
    return (np.float32(cap) * np.tanh(x / np.float32(cap))).astype(np.float32)


def causal_attention(q: np.ndarray, keys: np.ndarray, values: np.ndarray, first_pos: int, *,
                     scale: float | None = None, cap: float = 0.0, window: int = 0,
                     causal: bool = True) -> np.ndarray:
    """q: (n, n_head, hd) for positions first_pos..first_pos+n-1; keys/values: (T, n_head_kv, hd) for
    positions 0..T-1. Grouped-query: query head h reads kv head h // (n_head / n_head_kv). A query at p sees
    keys j <= p (all T when not causal) with p - j < window (when window > 0). Scores are scaled (default
    1/sqrt(hd)) and then soft-capped (cap > 0). Returns (n, n_head * hd)."""
    n, n_head, hd = q.shape
    n_kv = keys.shape[1]
    group = n_head // n_kv
    q_by_kv = q.reshape(n, n_kv, group, hd).transpose(1, 2, 0, 3)           # (n_kv, group, n, hd)
    scores = q_by_kv @ keys.transpose(1, 2, 0)[:, None]                     # (n_kv, group, n, T)
    scores *= np.float32(1.0 / np.sqrt(hd) if scale is None else scale)
    if cap:
        scores = softcap(scores, cap)
    query_pos = first_pos + np.arange(n)[:, None]
    key_pos = np.arange(keys.shape[0])[None, :]
    hidden = np.zeros((n, keys.shape[0]), dtype=bool)                       # (n, T): keys a query may not see
    if causal:
        hidden |= key_pos > query_pos
    if window:
        hidden |= query_pos - key_pos >= window
    scores = np.where(hidden, np.float32(-np.inf), scores)
    out = softmax(scores) @ values.transpose(1, 0, 2)[:, None]              # (n_kv, group, n, hd)
    return out.transpose(2, 0, 1, 3).reshape(n, n_head * hd)


def silu(x: np.ndarray) -> np.ndarray:
    return x * (0.5 * (1.0 + np.tanh(0.5 * x)))  # = x * sigmoid(x), without exp overflow warnings


def gelu_tanh(x: np.ndarray) -> np.ndarray:
    """GELU, tanh approximation (Gemma's gelu_pytorch_tanh, ggml_gelu)."""
    return 0.5 * x * (1.0 + np.tanh(np.float32(np.sqrt(2.0 / np.pi)) * (x + np.float32(0.044715) * x * x * x)))


ACTIVATIONS = {"silu": silu, "gelu_tanh": gelu_tanh}


# ----------------------------------------------------------------------------------------------------------
# The backend


class ReferenceBackend:
    """Backend protocol (runtime/backend.py) in numpy. Not fast: it is the readable oracle."""

    def __init__(self, spec: ModelSpec, n_ctx: int = 4096, kv_type: str | None = None):
        """kv_type: the KV cache's element type (runtime/kv_cache.py; None = f16, the native default): stored
        keys and values are rounded through it, as the native executor's cache stores them."""
        if isinstance(n_ctx, bool) or not isinstance(n_ctx, (int, np.integer)) or n_ctx <= 0:
            raise ValueError(f"n_ctx must be a positive integer, got {n_ctx!r}")
        self.spec = spec
        self.config = cfg = spec.config
        if cfg.activation not in ACTIVATIONS:
            raise ValueError(f"unknown activation {cfg.activation!r} (known: {', '.join(ACTIVATIONS)})")
        self.n_ctx = int(n_ctx)
        self.layers = [{role: dense(w) for role, w in layer.tensors.items()} for layer in spec.layers]
        self.output_norm = dense(spec.output_norm)
        self.output = dense(spec.output)  # (n_vocab, n_embd); for tied models also the embedding table
        self.rope_freqs = dense(spec.rope_freqs)
        self.cache = KVCache(cfg.n_layer, self.n_ctx, cfg.n_head_kv, cfg.head_dim, kv_type)

    @property
    def kv_type(self) -> str:
        return self.cache.kv_type

    @property
    def n_past(self) -> int:
        return self.cache.n_past

    @property
    def dense_bytes(self) -> int:
        """Memory the dequantized weights take."""
        arrays = [self.output_norm, self.output, self.rope_freqs] + [a for layer in self.layers for a in layer.values()]
        return sum(a.nbytes for a in arrays if a is not None)

    def fork(self, kv_type: str | None = None) -> ReferenceBackend:
        """A backend on the same dequantized weights with an empty KV cache of its own (another sequence), of
        this one's element type unless kv_type names another."""
        clone = object.__new__(ReferenceBackend)
        clone.__dict__.update(self.__dict__)
        cfg = self.config
        clone.cache = KVCache(cfg.n_layer, self.n_ctx, cfg.n_head_kv, cfg.head_dim, kv_type or self.kv_type)
        return clone

    def truncate(self, n_past: int) -> None:
        self.cache.truncate(n_past)

    def reset(self) -> None:
        self.cache.reset()

    def forward(self, tokens: Sequence[int], all_logits: bool = False) -> np.ndarray:
        ids = check_tokens(tokens, self.config.n_vocab).astype(np.int64)
        check_room(self.n_past, len(ids), self.n_ctx)
        logits = [self._forward_batch(ids[i:i + MAX_BATCH], all_logits) for i in range(0, len(ids), MAX_BATCH)]
        return np.concatenate(logits, axis=0) if all_logits else logits[-1]

    def project(self, h: np.ndarray, layer: int | None, role: str) -> np.ndarray:
        """h @ W.T for the role's matrix (layer None: the output projection). The emulation of the native
        executor in the tests overrides this with the kernels' quantized arithmetic."""
        w = self.output if layer is None else self.layers[layer][role]
        return h @ w.T

    def _forward_batch(self, ids: np.ndarray, all_logits: bool) -> np.ndarray:
        cfg = self.config
        n = len(ids)
        first_pos = self.cache.n_past
        positions = np.arange(first_pos, first_pos + n)
        hd = cfg.head_dim

        # 1. token embeddings: (n, n_embd)
        x = self.output[ids] if cfg.tie_embeddings else gather_rows(self.spec.token_embd, ids)
        if cfg.embd_scale != 1.0:
            x = x * np.float32(cfg.embd_scale)

        angles: dict[float, tuple[np.ndarray, np.ndarray]] = {}  # rotary angles by RoPE base, shared by layers
        for index, (layer, spec) in enumerate(zip(self.layers, self.spec.layers)):
            if spec.rope_theta not in angles:
                angles[spec.rope_theta] = rope_angles(positions, cfg.rope_dims, spec.rope_theta, self.rope_freqs)
            cos, sin = angles[spec.rope_theta]

            # 2. attention block: norm, q/k/v projections (+ bias, + per-head norm), RoPE, cache the new
            #    keys/values, attend, project (+ post-norm), residual
            h = rms_norm(x, layer["attn_norm"], cfg.rms_eps)
            q, k, v = (self.project(h, index, role) for role in ("wq", "wk", "wv"))
            if "bq" in layer:
                q, k, v = q + layer["bq"], k + layer["bk"], v + layer["bv"]
            q, k = q.reshape(n, cfg.n_head, hd), k.reshape(n, cfg.n_head_kv, hd)
            if "q_norm" in layer:
                q = rms_norm(q, layer["q_norm"], cfg.rms_eps)
            if "k_norm" in layer:
                k = rms_norm(k, layer["k_norm"], cfg.rms_eps)
            q, k = apply_rope(q, cos, sin, cfg.rope_style), apply_rope(k, cos, sin, cfg.rope_style)
            self.cache.store(index, k, v.reshape(n, cfg.n_head_kv, hd))
            keys, values = self.cache.window(index, n)
            attn = causal_attention(q, keys, values, first_pos, scale=cfg.attn_scale or None, cap=cfg.attn_softcap,
                                    window=spec.sliding_window, causal=cfg.causal)
            out = self.project(attn, index, "wo")
            if "attn_post_norm" in layer:
                out = rms_norm(out, layer["attn_post_norm"], cfg.rms_eps)
            x = x + out

            # 3. feed-forward block (gated): down(act(gate(h)) * up(h)) (+ post-norm), residual
            h = rms_norm(x, layer["ffn_norm"], cfg.rms_eps)
            gated = ACTIVATIONS[cfg.activation](self.project(h, index, "w_gate")) * self.project(h, index, "w_up")
            out = self.project(gated, index, "w_down")
            if "ffn_post_norm" in layer:
                out = rms_norm(out, layer["ffn_post_norm"], cfg.rms_eps)
            x = x + out

        self.cache.commit(n)  # only now are positions first_pos.. valid in every layer

        # 4. final norm and output projection (of the last token only, unless all are wanted), soft-capped
        if not all_logits:
            x = x[-1:]
        logits = self.project(rms_norm(x, self.output_norm, cfg.rms_eps), None, "output")
        if cfg.final_logit_softcap:
            logits = softcap(logits, cfg.final_logit_softcap)
        return logits if all_logits else logits[0]
