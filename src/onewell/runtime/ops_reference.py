"""numpy twins of the native ops (onewell/_native/ops.h): the readable definition each C op is tested against.

Inputs and outputs are float32 like the C ops; where a reduction is involved the twin computes in float64, so it
is the more accurate side of a comparison. Shapes follow the C layouts:

    rmsnorm(x[..., dim], w[dim], eps)
    layernorm(x[..., dim], w[dim], b[dim], eps)   (ops_layernorm.h)
    rope_table(pos[n_tok], n_rot, freq_base, freq_factors=None) -> cs[n_tok, n_rot/2, 2]
                                            ({cos, sin} of pos * base^(-2i/n_rot) / freq_factors[i])
    rope(x[n_tok, n_head, head_dim], pos, freq_base, style, n_rot=None)   style "normal" (2i, 2i+1) or "neox" (i, i+n_rot/2)
    attention(q[n_head, hd], k[n_ctx, n_head_kv, hd], v[...], scale=None, softcap=0) -> out[n_head, hd]
    swiglu(g, u), geglu(g, u), softcap(x, cap), add(a, b), add_bias(x[..., dim], bias[dim]), softmax(x[..., n]), argmax(x)
"""
from __future__ import annotations

import numpy as np

ROPE_STYLES = ("normal", "neox")


def rmsnorm(x: np.ndarray, w: np.ndarray, eps: float) -> np.ndarray:
    x64 = x.astype(np.float64)
    scale = 1.0 / np.sqrt(np.mean(x64 * x64, axis=-1, keepdims=True) + eps)
    return (x64 * scale * w.astype(np.float64)).astype(np.float32)


def layernorm(x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float) -> np.ndarray:
    """(x - mean) / sqrt(var + eps) * w + b per row, the biased variance (ggml_norm, then weight and bias)."""
    x64 = x.astype(np.float64)
    centered = x64 - np.mean(x64, axis=-1, keepdims=True)
    scale = 1.0 / np.sqrt(np.mean(centered * centered, axis=-1, keepdims=True) + eps)
    return (centered * scale * w.astype(np.float64) + b.astype(np.float64)).astype(np.float32)


def rope_table(pos: np.ndarray, n_rot: int, freq_base: float, freq_factors: np.ndarray | None = None) -> np.ndarray:
    inv_freq = float(np.float32(freq_base)) ** (-2.0 * np.arange(n_rot // 2, dtype=np.float64) / n_rot)
    if freq_factors is not None:
        inv_freq = inv_freq / np.asarray(freq_factors, dtype=np.float32).astype(np.float64)
    theta = np.asarray(pos, dtype=np.float64)[:, None] * inv_freq[None, :]
    return np.stack([np.cos(theta), np.sin(theta)], axis=-1).astype(np.float32)


def rope(x: np.ndarray, pos: np.ndarray, freq_base: float, style: str, n_rot: int | None = None) -> np.ndarray:
    """Rotary position embedding of x[n_tok, n_head, head_dim] (a copy); dims >= n_rot are left as they are."""
    if style not in ROPE_STYLES:
        raise ValueError(f"rope style must be one of {ROPE_STYLES}, got {style!r}")
    n_rot = x.shape[-1] if n_rot is None else n_rot
    cs = rope_table(pos, n_rot, freq_base)
    c, s = cs[:, None, :, 0], cs[:, None, :, 1]  # (n_tok, 1, n_rot/2): broadcast over heads
    out = x.astype(np.float32, copy=True)
    half = n_rot // 2
    if style == "neox":
        i0, i1 = np.arange(half), np.arange(half) + half
    else:
        i0, i1 = 2 * np.arange(half), 2 * np.arange(half) + 1
    x0, x1 = x[..., i0], x[..., i1]
    out[..., i0] = x0 * c - x1 * s
    out[..., i1] = x0 * s + x1 * c
    return out


def softmax(x: np.ndarray) -> np.ndarray:
    x64 = x.astype(np.float64)
    e = np.exp(x64 - np.max(x64, axis=-1, keepdims=True))
    return (e / np.sum(e, axis=-1, keepdims=True)).astype(np.float32)


def attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, scale: float | None = None, softcap: float = 0.0) -> np.ndarray:
    """One query position over n_ctx cached positions, grouped-query: head h reads kv head h // (n_head/n_head_kv)."""
    n_head, hd = q.shape
    n_kv = k.shape[1]
    scale = 1.0 / np.sqrt(hd) if scale is None else scale
    kv_of = np.arange(n_head) // (n_head // n_kv)
    k64 = k.astype(np.float64)[:, kv_of, :]  # (n_ctx, n_head, hd)
    v64 = v.astype(np.float64)[:, kv_of, :]
    scores = np.einsum("hd,thd->ht", q.astype(np.float64), k64) * float(np.float32(scale))
    if softcap:
        scores = softcap * np.tanh(scores / softcap)
    w = np.exp(scores - scores.max(axis=-1, keepdims=True))
    w /= w.sum(axis=-1, keepdims=True)
    return np.einsum("ht,thd->hd", w, v64).astype(np.float32)


def silu(x: np.ndarray) -> np.ndarray:
    x64 = x.astype(np.float64)
    return x64 * (0.5 * (1.0 + np.tanh(0.5 * x64)))  # = x * sigmoid(x) without overflow


def swiglu(g: np.ndarray, u: np.ndarray) -> np.ndarray:
    return (silu(g) * u.astype(np.float64)).astype(np.float32)


def gelu_tanh(x: np.ndarray) -> np.ndarray:
    x64 = x.astype(np.float64)
    return 0.5 * x64 * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x64 + 0.044715 * x64 ** 3)))


def geglu(g: np.ndarray, u: np.ndarray) -> np.ndarray:
    return (gelu_tanh(g) * u.astype(np.float64)).astype(np.float32)


def softcap(x: np.ndarray, cap: float) -> np.ndarray:
    return (cap * np.tanh(x.astype(np.float64) / cap)).astype(np.float32)


def add(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a + b).astype(np.float32)


def add_bias(x: np.ndarray, bias: np.ndarray) -> np.ndarray:
    return (x + bias).astype(np.float32)


def argmax(x: np.ndarray) -> int:
    return int(np.argmax(x))
