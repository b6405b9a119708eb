"""One Backend per server slot: each slot owns its KV cache, all of them share the model's weights.

On the native backend the slots are the sequences of one NativeMultiBackend, which the scheduler advances
together in one step (serve/scheduler.py, step_sequences): each weight is read once for every active slot.
Other backends get one backend per slot, advanced one after another by the scheduler's worker thread.
"""
from __future__ import annotations

import copy

from onewell.models.base import ModelSpec
from onewell.runtime.backend import Backend


def new_sequence_backend(backend: Backend, spec: ModelSpec, threads: int | None = None) -> Backend:
    """A backend with an empty KV cache of the same size that reads the same weights as `backend`."""
    fork = getattr(backend, "fork", None)
    if callable(fork):  # the clean way: the backend knows what is shared and what is per sequence
        return fork()

    from onewell.runtime.kv_cache import KVCache
    from onewell.runtime.reference import ReferenceBackend

    if isinstance(backend, ReferenceBackend):
        # Its dequantized float32 weights (~4 bytes per parameter) are worth sharing: copy the object
        # shallowly and give the copy a cache of its own.
        clone = copy.copy(backend)
        cfg = spec.config
        clone.cache = KVCache(cfg.n_layer, backend.n_ctx, cfg.n_head_kv, cfg.head_dim, backend.kv_type)
        return clone
    # Backends that read the mmapped GGUF directly share the weights through the page cache anyway.
    kwargs = {"n_ctx": backend.n_ctx}
    if getattr(backend, "kv_type", None) is not None:
        kwargs["kv_type"] = backend.kv_type
    if threads is not None:
        kwargs["threads"] = threads
    return type(backend)(spec, **kwargs)


def slot_backends(backend: Backend, spec: ModelSpec, n_slots: int, threads: int | None = None) -> list[Backend]:
    """Native: n_slots sequences of one multi-sequence executor on `backend`'s weights. Otherwise `backend`
    itself serves slot 0 and slots 1.. get new sequences beside it."""
    if n_slots < 1:
        raise ValueError(f"a server needs at least one slot, got {n_slots}")
    from onewell.runtime.native import NativeBackend

    if isinstance(backend, NativeBackend):
        from onewell.runtime.native_multi import NativeMultiBackend

        multi = NativeMultiBackend.from_backend(backend, n_slots, threads=threads)
        return [multi.sequence(i) for i in range(n_slots)]
    return [backend] + [new_sequence_backend(backend, spec, threads) for _ in range(n_slots - 1)]
