"""Memory the engine will need, checked against what the machine has, before anything is allocated.

The KV cache is the one allocation that grows with a setting (context length × sequences) rather than with the
model: a context of 300,000 tokens on Qwen2.5-0.5B asks for ~14 GB per sequence. The executor reserves it at
creation and touches pages as positions fill, so an oversized setting would not fail at start but later, by
running out of memory in the middle of a generation. Refusing up front turns that into a clear error.
"""
from __future__ import annotations

import warnings

from onewell.errors import OnewellError
from onewell.models.base import ModelConfig
from onewell.runtime.kv_cache import kv_bytes


class ResourceLimitError(OnewellError, MemoryError):
    """A setting (context length, number of sequences) needs more memory than this machine has."""


def kv_cache_bytes(config: ModelConfig, n_ctx: int, n_seq: int = 1, kv_type: str | None = None) -> int:
    """K and V for every layer, position and sequence, in the cache's element type (None = the default, f16)."""
    return n_seq * n_ctx * config.n_layer * 2 * kv_bytes(kv_type, config.n_head_kv * config.head_dim)


def available_memory_bytes() -> int | None:
    """MemAvailable from /proc/meminfo (free + reclaimable cache), or None where that is not known."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def check_kv_cache_fits(config: ModelConfig, n_ctx: int, n_seq: int = 1, available: int | None = None,
                        kv_type: str | None = None) -> int:
    """Raise ResourceLimitError when the KV cache cannot fit in available memory; warn past the trained
    context length. Returns the KV cache bytes."""
    need = kv_cache_bytes(config, n_ctx, n_seq, kv_type)
    have = available_memory_bytes() if available is None else available
    if have is not None and need > have:
        per_token = kv_cache_bytes(config, 1, n_seq, kv_type)
        raise ResourceLimitError(
            f"a KV cache for {n_seq} sequence(s) x {n_ctx} tokens needs {need / 1e9:.1f} GB, but only "
            f"{have / 1e9:.1f} GB of memory is available; use a context of at most {have // per_token} tokens "
            f"(or fewer parallel sequences, or a smaller --kv-type)")
    if n_ctx > config.n_ctx_train:
        warnings.warn(f"context of {n_ctx} tokens is longer than the {config.n_ctx_train} the model was trained "
                      f"on; quality degrades past it", RuntimeWarning, stacklevel=3)
    return need
