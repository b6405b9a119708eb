"""The native backend: the Backend protocol (runtime/backend.py) on the C executor (_native/executor.c).

Each forward step runs in one C call with the GIL released: every layer, the output projection and (for greedy
decoding) the argmax. The weights stay quantized in the GGUF mapping; activations are quantized to 8 bits inside
the matmuls, as llama.cpp does. On the AVX-512 kernel path, Q8_0 and Q5_0 matrices are repacked once at load into
the Q8_0 R16 layout and Q4_1 ones into Q4_1 R16 (lossless; Q4_1's min term is taken from f32 d_x * sum(x_q)
instead of ggml's fp16 s, a ~2^-11 relative difference of that term), which that path streams far faster; the
copies cost memory,
shown by info()["repacked"]. Inputs longer than max_batch are run in chunks of max_batch tokens; chunks
before the last skip the output projection unless every token's logits are wanted.

    backend = NativeBackend(spec, n_ctx=4096, threads=None, max_batch=64)
    logits = backend.forward(prompt_ids)       # (n_vocab,) float32, read-only, valid until the next call
    token = backend.forward_argmax([token])    # greedy: no logits copied out
"""
from __future__ import annotations

import os
from typing import Sequence

import numpy as np

from onewell._native import _core
from onewell.models.base import ModelSpec
from onewell.runtime.memory import check_kv_cache_fits
from onewell.runtime.native_kernels import repacks_by_default, resolve_path
from onewell.runtime.plan import build_plan, check_room, check_tokens

# logits modes of ow_executor_forward (executor.h)
_LAST, _ALL, _ARGMAX, _NONE = 0, 1, 2, 3


def physical_cores() -> int:
    """Cores this process may run on, counting SMT siblings once (Linux sysfs; else the logical count)."""
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
    cores = set()
    for cpu in cpus:
        topology = f"/sys/devices/system/cpu/cpu{cpu}/topology/"
        try:
            with open(topology + "physical_package_id") as f1, open(topology + "core_id") as f2:
                cores.add((f1.read().strip(), f2.read().strip()))
        except OSError:
            return max(1, len(cpus))
    return max(1, len(cores))


def _positive_int(name: str, value, allow_none: bool = False) -> int | None:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
        raise ValueError(f"{name} must be a positive integer{' or None' if allow_none else ''}, got {value!r}")
    return int(value)


class NativeBackend:
    """Backend protocol on the native executor; plus forward_argmax, profiling and the thread count."""

    def __init__(self, spec: ModelSpec, n_ctx: int = 4096, threads: int | None = None, max_batch: int = 64,
                 isa: str | None = None, chunk_rows: int | None = None, repack: bool | None = None):
        """isa: kernel path of the matmuls ("generic", "avx2", "avx2-vnni", "avx512"; None = the best this CPU
        has, capped by ONEWELL_ISA). chunk_rows: matmul rows per claimed chunk (a tuning knob; None = default).
        repack: convert Q8_0, Q5_0 and Q4_1 matrices (all but the embedding table of the token gather) to their R16
        layout at load; None = on the avx512 path (native_kernels.R16_PATHS), True/False force it.
        Every path computes it correctly; the others just gain nothing from it."""
        self.n_ctx = _positive_int("n_ctx", n_ctx)
        threads = _positive_int("threads", threads, allow_none=True)
        self.max_batch = min(_positive_int("max_batch", max_batch), self.n_ctx)
        chunk_rows = _positive_int("chunk_rows", chunk_rows, allow_none=True)
        path = resolve_path(isa) if isa is not None else None
        if repack is not None and not isinstance(repack, bool):
            raise ValueError(f"repack must be True, False or None, got {repack!r}")
        self.repack = repacks_by_default(path) if repack is None else repack
        self.spec = spec
        self.config = spec.config
        check_kv_cache_fits(spec.config, self.n_ctx)  # before the plan copies weights or C reserves the cache
        self.plan = build_plan(spec, repack=self.repack)
        self._ex = _core.executor_create(*self.plan.native_args(), threads or physical_cores(), self.n_ctx,
                                         self.max_batch)
        if path is not None or chunk_rows is not None:
            _core.executor_configure(self._ex, path, chunk_rows or 0, -1)
        self._logits = np.empty(self.config.n_vocab, dtype=np.float32)
        self._logits_view = self._logits.view()
        self._logits_view.flags.writeable = False
        self._profile = False
        self.n_past = 0

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

    def truncate(self, n_past: int) -> None:
        if isinstance(n_past, bool) or not isinstance(n_past, (int, np.integer)) or not 0 <= n_past <= self.n_past:
            raise ValueError(f"cannot truncate the KV cache to {n_past!r}: it holds {self.n_past} tokens")
        self.n_past = int(n_past)  # stale entries past n_past are overwritten before they are read again

    def reset(self) -> None:
        self.n_past = 0

    # ---- tuning and measurement ----

    @property
    def threads(self) -> int:
        return self.info()["threads"]

    @property
    def isa(self) -> str:
        """Kernel path of the matmuls."""
        return self.info()["kpath"]

    def info(self) -> dict:
        """threads, kpath (matmul kernel path), ops_isa, chunk_rows, n_ctx, max_batch, and repacked: the R16
        copies made at load ({"matrices", "bytes" of memory they take, "source_bytes" of the originals})."""
        return {**_core.executor_info(self._ex), "repacked": self.plan.repacked}

    @property
    def profile(self) -> bool:
        return self._profile

    @profile.setter
    def profile(self, on: bool) -> None:
        _core.executor_configure(self._ex, None, 0, 1 if on else 0)
        self._profile = bool(on)

    def profile_stats(self, reset: bool = False) -> dict:
        """Seconds per op category accumulated while profiling was on (see executor.h, ow_prof_cat), with
        "calls" (forward steps) and "tokens"; reset=True zeroes the counters after reading."""
        return _core.executor_profile(self._ex, reset)

    # ---- steps ----

    def _last_chunk_start(self, ids: np.ndarray) -> int:
        return (len(ids) - 1) // self.max_batch * self.max_batch

    def _prefill_all_but_last_chunk(self, ids: np.ndarray) -> None:
        for start in range(0, self._last_chunk_start(ids), self.max_batch):
            self._step(ids[start:start + self.max_batch], None, _NONE)

    def _step(self, ids: np.ndarray, logits: np.ndarray | None, mode: int) -> int:
        result = _core.executor_forward(self._ex, ids, self.n_past, logits, mode)
        self.n_past += len(ids)
        return int(result)
