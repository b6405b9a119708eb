"""The key/value cache: its element types, their numpy twins, and the reference backend's cache.

Element types (the native store is onewell/_native/kv_cache.c, which these twin bit for bit):
  f32   4 bytes per value.
  f16   2 bytes: IEEE binary16, round to nearest even (numpy astype(float16)); the default, as llama.cpp's.
  q8_0  34 bytes per 32 values along head_dim: ggml's Q8_0 block (fp16 d, 32 int8), quantized as the activation
        quantizer does (q = rint(x * 127/amax), onewell.quant.act_formats); head_dim must be a multiple of 32.

The reference cache keeps float32 arrays but rounds every stored row through its element type (round_trip), so
the reference forward sees exactly the values the native executor's attention reads.

Layout (n_layer, n_ctx, n_head_kv, head_dim): one layer's keys for the first T positions are a contiguous slice,
which is what attention reads. np.zeros maps pages lazily, so a long context costs memory only as far as used.
"""
from __future__ import annotations

import numpy as np

from onewell.errors import ContextOverflowError
from onewell.quant.act_formats import dequantize_q8_0_act, quantize_q8_0_act

KV_TYPES = ("f32", "f16", "q8_0")
KV_TYPE_IDS = {"f32": 0, "f16": 1, "q8_0": 2}  # ow_kv_type (ops.h)
DEFAULT_KV_TYPE = "f16"
Q8_0_BLOCK, Q8_0_BLOCK_BYTES = 32, 34


def check_kv_type(kv_type, head_dim: int | None = None) -> str:
    """kv_type as one of KV_TYPES (None = the default), or ValueError naming the problem."""
    if kv_type is None:
        kv_type = DEFAULT_KV_TYPE
    if not isinstance(kv_type, str) or kv_type.lower() not in KV_TYPES:
        raise ValueError(f"kv_type must be one of {', '.join(KV_TYPES)}, got {kv_type!r}")
    kv_type = kv_type.lower()
    if kv_type == "q8_0" and head_dim is not None and head_dim % Q8_0_BLOCK:
        raise ValueError(f"kv_type q8_0 needs a head size that is a multiple of {Q8_0_BLOCK}; this model's is "
                         f"{head_dim} (use f16 or f32)")
    return kv_type


def kv_bytes(kv_type: str, n_values: int) -> int:
    """Bytes n_values (whole heads) take in the cache."""
    kv_type = check_kv_type(kv_type)
    if kv_type == "q8_0":
        return n_values // Q8_0_BLOCK * Q8_0_BLOCK_BYTES
    return n_values * (2 if kv_type == "f16" else 4)


def to_bytes(x: np.ndarray, kv_type: str) -> np.ndarray:
    """The stored form of x (..., head_dim) float32: float32, float16, or uint8 (..., head_dim / 32 * 34)."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    kv_type = check_kv_type(kv_type, x.shape[-1])
    if kv_type == "f32":
        return x.copy()
    if kv_type == "f16":
        return x.astype(np.float16)
    blocks = quantize_q8_0_act(x.reshape(-1, Q8_0_BLOCK))
    return blocks.reshape(*x.shape[:-1], x.shape[-1] // Q8_0_BLOCK * Q8_0_BLOCK_BYTES)


def from_bytes(stored: np.ndarray, kv_type: str) -> np.ndarray:
    """to_bytes' inverse, as float32 (..., head_dim)."""
    kv_type = check_kv_type(kv_type)
    if kv_type != "q8_0":
        return stored.astype(np.float32)
    width = stored.shape[-1]
    if width % Q8_0_BLOCK_BYTES:
        raise ValueError(f"q8_0 rows are whole {Q8_0_BLOCK_BYTES}-byte blocks, got {width} bytes")
    values = dequantize_q8_0_act(np.ascontiguousarray(stored, dtype=np.uint8).reshape(-1, Q8_0_BLOCK_BYTES))
    return values.reshape(*stored.shape[:-1], width // Q8_0_BLOCK_BYTES * Q8_0_BLOCK)


def round_trip(x: np.ndarray, kv_type: str) -> np.ndarray:
    """The values attention reads back after x was stored as kv_type."""
    if check_kv_type(kv_type, np.shape(x)[-1]) == "f32":
        return np.asarray(x, dtype=np.float32)
    return from_bytes(to_bytes(x, kv_type), kv_type)


class KVCache:
    def __init__(self, n_layer: int, n_ctx: int, n_head_kv: int, head_dim: int, kv_type: str | None = None):
        if n_ctx <= 0:
            raise ValueError(f"n_ctx must be positive, got {n_ctx}")
        self.kv_type = check_kv_type(kv_type, head_dim)
        self.n_ctx = n_ctx
        self.keys = np.zeros((n_layer, n_ctx, n_head_kv, head_dim), dtype=np.float32)
        self.values = np.zeros((n_layer, n_ctx, n_head_kv, head_dim), dtype=np.float32)
        self.n_past = 0  # positions filled in every layer; advanced only when a whole batch is done

    def check_room(self, n_new: int) -> None:
        if self.n_past + n_new > self.n_ctx:
            raise ContextOverflowError(
                f"context overflow: {self.n_past} tokens cached + {n_new} new = {self.n_past + n_new} "
                f"> n_ctx {self.n_ctx}")

    def store(self, layer: int, k: np.ndarray, v: np.ndarray) -> None:
        """Write one layer's keys/values (n_new, n_head_kv, head_dim) at positions n_past.., rounded as kv_type."""
        start = self.n_past
        self.keys[layer, start:start + len(k)] = round_trip(k, self.kv_type)
        self.values[layer, start:start + len(v)] = round_trip(v, self.kv_type)

    def window(self, layer: int, n_new: int) -> tuple[np.ndarray, np.ndarray]:
        """Keys and values of positions 0..n_past+n_new-1 of one layer (views, no copy)."""
        end = self.n_past + n_new
        return self.keys[layer, :end], self.values[layer, :end]

    def commit(self, n_new: int) -> None:
        self.n_past += n_new

    def truncate(self, n_past: int) -> None:
        if not 0 <= n_past <= self.n_past:
            raise ValueError(f"cannot truncate the KV cache to {n_past}: it holds {self.n_past} tokens")
        self.n_past = n_past  # stale entries past n_past are overwritten before they are read again

    def reset(self) -> None:
        self.n_past = 0
