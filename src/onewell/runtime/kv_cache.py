"""The key/value cache of the reference backend: every layer's keys and values for positions 0..n_past-1.

Layout (n_layer, n_ctx, n_head_kv, head_dim), float32: one layer's keys for the first T positions are a
contiguous slice, which is what attention reads. np.zeros maps pages lazily, so a long context costs
memory only as far as it is used.
"""
from __future__ import annotations

import numpy as np

from onewell.errors import ContextOverflowError


class KVCache:
    def __init__(self, n_layer: int, n_ctx: int, n_head_kv: int, head_dim: int):
        if n_ctx <= 0:
            raise ValueError(f"n_ctx must be positive, got {n_ctx}")
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
        """Write one layer's keys/values (n_new, n_head_kv, head_dim) at positions n_past.. ."""
        start = self.n_past
        self.keys[layer, start:start + len(k)] = k
        self.values[layer, start:start + len(v)] = v

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
