"""The native backend: the Backend protocol (runtime/backend.py) on the C executor (_native/executor.c), as
the one-sequence case of the multi-sequence engine (runtime/native_multi.py).

Each forward step runs in one C call with the GIL released: every layer, the output projection and (for greedy
decoding) the argmax. The weights stay quantized in the GGUF mapping; activations are quantized to 8 bits inside
the matmuls, as llama.cpp does. On the AVX-512 kernel path, Q8_0 matrices are repacked once at load into
the Q8_0 R16 layout and Q4_1 ones into Q4_1 R16 (lossless; Q4_1's min term is taken from f32 d_x * sum(x_q)
instead of ggml's fp16 s, a ~2^-11 relative difference of that term), which that path streams far faster; the
copies cost memory, shown by info()["repacked"]. On the AVX2 path of AMD family 0x17 CPUs, Q8_0 matrices become
Q8_0 R8 instead (the same bytes reordered, onewell.quant.repack_r8; decode 1.24-1.31x there). Inputs longer than max_batch are run in chunks of max_batch tokens; chunks
before the last skip the output projection unless every token's logits are wanted.

    backend = NativeBackend(spec, n_ctx=4096, threads=None, max_batch=128)
    logits = backend.forward(prompt_ids)       # (n_vocab,) float32, read-only, valid until the next call
    token = backend.forward_argmax([token])    # greedy: no logits copied out
"""
from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np

from onewell._native import _core
from onewell.models.base import ModelSpec
from onewell.runtime.native_multi import DEFAULT_MAX_BATCH, NativeMultiBackend, NativeSequence, physical_cores
from onewell.runtime.plan import check_room, check_tokens

__all__ = ["NativeBackend", "physical_cores"]

# logits modes of ow_executor_forward (executor.h)
_LAST, _ALL, _ARGMAX, _NONE = 0, 1, 2, 3


class NativeBackend(NativeSequence):
    """Sequence 0 of a one-sequence NativeMultiBackend, stepped through the executor's single-sequence entry
    (no per-token sequence and position arrays, greedy argmax inside C, last-token logits in one reused buffer);
    plus the engine's profiling, info and thread count."""

    def __init__(self, spec: ModelSpec, n_ctx: int = 4096, threads: int | None = None, max_batch: int = DEFAULT_MAX_BATCH,
                 isa: str | None = None, chunk_rows: int | None = None, repack: bool | Iterable[str] | None = None,
                 kv_type: str | None = None):
        """Arguments as NativeMultiBackend's (n_seq = 1); kv_type: "f32", "f16" (None: the default), "q8_0"."""
        super().__init__(NativeMultiBackend(spec, 1, n_ctx=n_ctx, threads=threads, max_batch=max_batch, isa=isa,
                                            chunk_rows=chunk_rows, repack=repack, kv_type=kv_type), 0)
        self.max_batch = self.multi.max_batch
        self.plan = self.multi.plan
        self._ex = self.multi._ex
        self._logits = np.empty(self.config.n_vocab, dtype=np.float32)
        self._logits_view = self._logits.view()
        self._logits_view.flags.writeable = False

    # ---- the protocol ----

    def forward(self, tokens: Sequence[int], all_logits: bool = False, copy: bool = False) -> np.ndarray:
        """Append tokens at positions n_past.. and return the last token's logits (n_vocab,) or, with
        all_logits, every token's (n, n_vocab) (a new array). The last-token logits are a read-only view of a
        buffer the next call overwrites, unless copy=True."""
        ids = check_tokens(tokens, self.config.n_vocab)
        check_room(self.n_past, len(ids), self.n_ctx)
        if all_logits:
            out = np.empty((len(ids), self.config.n_vocab), dtype=np.float32)
            for start in range(0, len(ids), self.max_batch):
                self._step(ids[start:start + self.max_batch], out[start:start + self.max_batch], _ALL)
            return out
        self._prefill_all_but_last_chunk(ids)
        self._step(ids[self._last_chunk_start(ids):], self._logits, _LAST)
        return self._logits.copy() if copy else self._logits_view

    def forward_argmax(self, tokens: Sequence[int]) -> int:
        """forward, then the id of the largest logit of the last token (the first one on ties): greedy decoding
        without copying logits out of C."""
        ids = check_tokens(tokens, self.config.n_vocab)
        check_room(self.n_past, len(ids), self.n_ctx)
        self._prefill_all_but_last_chunk(ids)
        return self._step(ids[self._last_chunk_start(ids):], None, _ARGMAX)

    # ---- tuning and measurement: the engine's ----

    @property
    def threads(self) -> int:
        return self.multi.threads

    @property
    def isa(self) -> str:
        """Kernel path of the matmuls."""
        return self.multi.isa

    def info(self) -> dict:
        return self.multi.info()

    @property
    def profile(self) -> bool:
        return self.multi.profile

    @profile.setter
    def profile(self, on: bool) -> None:
        self.multi.profile = on

    def profile_stats(self, reset: bool = False) -> dict:
        return self.multi.profile_stats(reset)

    # ---- steps ----

    def _last_chunk_start(self, ids: np.ndarray) -> int:
        return (len(ids) - 1) // self.max_batch * self.max_batch

    def _prefill_all_but_last_chunk(self, ids: np.ndarray) -> None:
        for start in range(0, self._last_chunk_start(ids), self.max_batch):
            self._step(ids[start:start + self.max_batch], None, _NONE)

    def _step(self, ids: np.ndarray, logits: np.ndarray | None, mode: int) -> int:
        result = _core.executor_forward(self._ex, ids, self.n_past, logits, mode)
        self.multi.advance(0, len(ids))
        return int(result)
