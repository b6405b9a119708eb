"""What generation needs from an engine, and the one place that picks an engine.

Both the numpy reference (runtime/reference.py) and the native executor implement `Backend`; everything
above (generate, api, serve) sees only this protocol. Several sequences advance together through the batched
step, `BatchedBackend.forward_batch`: a Backend that is one sequence of such an engine names it as its `group`
(and its `seq_id` there); `batch_groups` puts any list of backends into groups, lone backends into a
`SequentialGroup` that runs them one after another, so callers (the server's scheduler) need only this step.
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


@runtime_checkable
class BatchedBackend(Protocol):
    """n_seq sequences advanced in one step: every weight is read once for the tokens of all of them."""
    n_seq: int

    def check_request(self, seq_id: int, tokens: Sequence[int]) -> np.ndarray:
        """What forward_batch would refuse for this one request (raises), else the tokens as an array."""
        ...

    def forward_batch(self, requests: Sequence[tuple[int, Sequence[int]]],
                      all_logits: bool = False) -> list[np.ndarray]:
        """Append each request's tokens to its sequence (each sequence at most once); per request, the logits of
        its last token (n_vocab,) or, with all_logits, of every token."""
        ...


class SequentialGroup:
    """A BatchedBackend over independent single-sequence backends: its batched step runs them in turn."""

    def __init__(self, backends: Sequence[Backend]):
        self.backends = list(backends)
        self.n_seq = len(self.backends)

    def check_request(self, seq_id: int, tokens: Sequence[int]) -> np.ndarray:
        return np.asarray(tokens)  # each backend checks its own input in forward

    def forward_batch(self, requests: Sequence[tuple[int, Sequence[int]]],
                      all_logits: bool = False) -> list[np.ndarray]:
        return [self.backends[s].forward(tokens, all_logits=all_logits) for s, tokens in requests]


def batch_groups(backends: Sequence[Backend]) -> list[tuple[BatchedBackend, list[tuple[int, int]]]]:
    """The engines to step for `backends`: (group, [(index into backends, seq_id in group), ...]), one group per
    engine that several of them share, one SequentialGroup per backend that has none."""
    groups: dict[int, tuple[BatchedBackend, list[tuple[int, int]]]] = {}
    for i, backend in enumerate(backends):
        group = getattr(backend, "group", None)
        if group is None:
            groups[id(backend)] = (SequentialGroup([backend]), [(i, 0)])
        else:
            groups.setdefault(id(group), (group, []))[1].append((i, backend.seq_id))
    return list(groups.values())


def create_backend(kind: str, spec: ModelSpec, n_ctx: int, threads: int | None = None,
                   kv_type: str | None = None) -> Backend:
    """kv_type: the KV cache's element type ("f32", "f16", "q8_0"; None = f16), the same for both kinds."""
    if kind not in BACKEND_KINDS:
        raise ValueError(f"unknown backend {kind!r}; choose one of {', '.join(BACKEND_KINDS)}")
    if kind == "native":
        from onewell.runtime.native import NativeBackend

        return NativeBackend(spec, n_ctx=n_ctx, threads=threads, kv_type=kv_type)
    from onewell.runtime.reference import ReferenceBackend

    return ReferenceBackend(spec, n_ctx=n_ctx, kv_type=kv_type)
