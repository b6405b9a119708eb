"""What generation needs from an engine, and the one place that picks an engine.

Both the numpy reference (runtime/reference.py) and the native executor implement `Backend`; everything
above (generate, api, serve) sees only this protocol.
"""
from __future__ import annotations

from typing import Protocol, Sequence, runtime_checkable

import numpy as np

from onewell.models.base import ModelSpec

BACKEND_KINDS = ("native", "reference")


@runtime_checkable
class Backend(Protocol):
    n_ctx: int
    n_past: int  # tokens in the KV cache

    def forward(self, tokens: Sequence[int], all_logits: bool = False) -> np.ndarray:
        """Append `tokens` at positions n_past.. and return the logits of the last one, shape (n_vocab,)
        float32, or of every one, (len(tokens), n_vocab), with all_logits."""
        ...

    def truncate(self, n_past: int) -> None:
        """Forget cache entries from position n_past on (to reuse a common prompt prefix)."""
        ...

    def reset(self) -> None:
        ...


def create_backend(kind: str, spec: ModelSpec, n_ctx: int, threads: int | None = None) -> Backend:
    if kind not in BACKEND_KINDS:
        raise ValueError(f"unknown backend {kind!r}; choose one of {', '.join(BACKEND_KINDS)}")
    if kind == "native":
        from onewell.runtime.native import NativeBackend

        return NativeBackend(spec, n_ctx=n_ctx, threads=threads)
    from onewell.runtime.reference import ReferenceBackend

    return ReferenceBackend(spec, n_ctx=n_ctx)
