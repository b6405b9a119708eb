"""Several independent sequences on one native executor, advanced together: every weight is read once per step
for the tokens of all of them (on a memory-bound CPU, 4 sequences cost little more than 1).

Each sequence (slot) has its own KV cache of n_ctx positions inside the executor; memory for the caches is
n_seq * n_ctx * n_layer * 2 * (n_head_kv * head_dim) * bytes per value (f16: 2, f32: 4, q8_0: 34/32), touched
only as positions fill (SmolLM2-135M, f16: 23 KiB per position, so 4 slots of 4096 positions reserve 377 MB).

    multi = NativeMultiBackend(spec, n_seq=4, n_ctx=4096)
    logits = multi.forward_batch([(0, prompt_a), (1, prompt_b)])   # one (n_vocab,) array per request
    slot = multi.sequence(2)                                        # the single-sequence Backend protocol

This is the native engine; NativeBackend (runtime/native.py) is its one-sequence case. It implements the
batched step of runtime/backend.py (BatchedBackend), which the server's scheduler drives.
"""
from __future__ import annotations

import os
from typing import Iterable, Sequence

import numpy as np

from onewell._native import _core
from onewell.models.base import ModelSpec
from onewell.runtime.kv_cache import KV_TYPE_IDS, check_kv_type
from onewell.runtime.memory import check_kv_cache_fits, kv_cache_bytes
from onewell.runtime.native_kernels import default_repack, resolve_path
from onewell.runtime.plan import ExecutorPlan, build_plan, check_room, check_tokens, repack_type_set

_LAST, _ALL, _NONE = 0, 1, 3  # logits modes of ow_executor_forward_batch (executor.h)


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


# Tokens per native step. 128 (was 64): each prefill panel or decoded row then serves twice the tokens; Qwen Q8_0
# pp128 on the AVX2 path 1.065x / 1.067x faster at 1 / 2 threads (docs/perf-log.md, entry 25), for about 10 MB more
# scratch at Qwen2.5-0.5B's sizes (docs/architecture.md: ~max_batch x (3 n_embd + 2 n_q + 3 n_ff) x 4 bytes).
DEFAULT_MAX_BATCH = 128


class NativeMultiBackend:
    """n_seq sequences sharing the weights and one thread pool; steps take tokens of any of them at once."""

    def __init__(self, spec: ModelSpec, n_seq: int, n_ctx: int = 4096, threads: int | None = None,
                 max_batch: int = DEFAULT_MAX_BATCH, isa: str | None = None, chunk_rows: int | None = None,
                 repack: bool | Iterable[str] | None = None, plan: ExecutorPlan | None = None,
                 kv_type: str | None = None):
        """n_ctx: positions per sequence. threads: None = the physical cores. max_batch: tokens per native
        step (longer inputs run in several). isa: kernel path of the matmuls ("generic", "avx2", "avx2-vnni",
        "avx512"; None = the best this CPU has, capped by ONEWELL_ISA). chunk_rows: matmul rows per claimed
        chunk (a tuning knob; None = default). repack: convert Q8_0, Q5_0 and Q4_1 matrices (all but the
        embedding table of the token gather) to their R16 layouts at load; None = the path's choice
        (native_kernels.default_repack: DEFAULT_REPACK and the CPU's own), True / False all or none, or a
        collection of the types to convert ("q8_0", ...) and of layouts built on request ("q8_0_r8": Q8_0 to
        Q8_0 R8). Every path computes every layout correctly. plan: reuse one
        built for these weights (and its repacked copies) instead. kv_type: the KV caches' element type, "f32",
        "f16" (None: the default) or "q8_0" (head_dim a multiple of 32); runtime/kv_cache.py."""
        self.n_seq = _positive_int("n_seq", n_seq)
        self.n_ctx = _positive_int("n_ctx", n_ctx)
        threads = _positive_int("threads", threads, allow_none=True)
        self.max_batch = min(_positive_int("max_batch", max_batch), self.n_ctx)
        chunk_rows = _positive_int("chunk_rows", chunk_rows, allow_none=True)
        path = resolve_path(isa) if isa is not None else None
        if repack is not None:
            repack = repack_type_set(repack)  # ValueError for anything but a bool or known types, before C
        self.spec = spec
        self.config = spec.config
        self.kv_type = check_kv_type(kv_type, spec.config.head_dim)
        # refuse before C reserves n_seq caches
        check_kv_cache_fits(spec.config, self.n_ctx, self.n_seq, kv_type=self.kv_type)
        if plan is None:
            plan = build_plan(spec, repack=default_repack(path) if repack is None else repack)
        self.plan = plan
        self._ex = _core.executor_create(*plan.native_args(), threads or physical_cores(), self.n_ctx,
                                         self.max_batch, self.n_seq, KV_TYPE_IDS[self.kv_type])
        if path is not None or chunk_rows is not None:
            _core.executor_configure(self._ex, path, chunk_rows or 0, -1)
        self._n_past = [0] * self.n_seq
        self._profile = False

    @classmethod
    def from_backend(cls, backend, n_seq: int, threads: int | None = None,
                     n_ctx: int | None = None) -> NativeMultiBackend:
        """Sequences beside `backend`'s: same weights (its plan, no second repack), kernel path and tuning."""
        info = backend.info()
        return cls(backend.spec, n_seq, n_ctx=n_ctx or backend.n_ctx, threads=threads or info["threads"],
                   max_batch=backend.max_batch, isa=info["kpath"], chunk_rows=info["chunk_rows"],
                   plan=backend.plan, kv_type=backend.kv_type)

    # ---- sequences ----

    def sequence(self, seq_id: int) -> NativeSequence:
        return NativeSequence(self, self._seq(seq_id))

    def n_past(self, seq_id: int) -> int:
        return self._n_past[self._seq(seq_id)]

    def truncate(self, seq_id: int, n_past: int) -> None:
        """Forget sequence seq_id's cache from position n_past on; the other sequences are untouched."""
        s = self._seq(seq_id)
        if isinstance(n_past, bool) or not isinstance(n_past, (int, np.integer)) or not 0 <= n_past <= self._n_past[s]:
            raise ValueError(f"cannot truncate sequence {s} to {n_past!r}: it holds {self._n_past[s]} tokens")
        self._n_past[s] = int(n_past)  # stale rows past n_past are overwritten before they are read again

    def reset(self, seq_id: int) -> None:
        self._n_past[self._seq(seq_id)] = 0

    # ---- tuning and measurement ----

    @property
    def threads(self) -> int:
        return self.info()["threads"]

    @property
    def isa(self) -> str:
        """Kernel path of the matmuls."""
        return self.info()["kpath"]

    def info(self) -> dict:
        """threads, kpath (matmul kernel path), ops_isa, chunk_rows, n_ctx, max_batch, n_seq, kv_type, kv_bytes
        (the KV caches reserved for n_seq x n_ctx positions), kv_bytes_per_token (of one sequence), and
        repacked: the R16 copies made at load ({"matrices", "bytes" of memory they take, "source_bytes" of the
        originals})."""
        return {**_core.executor_info(self._ex), "repacked": self.plan.repacked,
                "kv_bytes": kv_cache_bytes(self.config, self.n_ctx, self.n_seq, self.kv_type),
                "kv_bytes_per_token": kv_cache_bytes(self.config, 1, kv_type=self.kv_type)}

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

    def check_request(self, seq_id: int, tokens: Sequence[int]) -> np.ndarray:
        """What forward_batch refuses for one request: ValueError (sequence id, token ids) or
        ContextOverflowError. Returns the tokens as int32."""
        s = self._seq(seq_id)
        ids = check_tokens(tokens, self.config.n_vocab)
        check_room(self._n_past[s], len(ids), self.n_ctx)
        return ids

    def forward_batch(self, requests: Sequence[tuple[int, Sequence[int]]],
                      all_logits: bool = False) -> list[np.ndarray]:
        """Append each request's tokens to its sequence (each sequence at most once) and return, per request, the
        logits of its last token (n_vocab,) or, with all_logits, of every token (n, n_vocab); new arrays.
        Everything is checked before anything runs. More than max_batch tokens in all run in several steps."""
        if not requests:
            raise ValueError("forward_batch needs at least one (seq_id, tokens) request")
        checked = [(self._seq(s), self.check_request(s, t)) for s, t in requests]
        seqs = [s for s, _ in checked]
        if len(set(seqs)) != len(seqs):
            raise ValueError(f"a sequence appears more than once in one batch: {seqs}")

        tokens = np.concatenate([ids for _, ids in checked])
        seq_of = np.concatenate([np.full(len(ids), s, np.int32) for s, ids in checked])
        pos_of = np.concatenate([np.arange(self._n_past[s], self._n_past[s] + len(ids), dtype=np.int32)
                                 for s, ids in checked])
        ends = np.cumsum([len(ids) for _, ids in checked])  # flat index after each request's last token
        nv = self.config.n_vocab
        if all_logits:
            flat = np.empty((len(tokens), nv), dtype=np.float32)
        else:
            out = [np.empty(nv, dtype=np.float32) for _ in checked]
        for a in range(0, len(tokens), self.max_batch):
            b = min(a + self.max_batch, len(tokens))
            if all_logits:
                self._step(tokens[a:b], seq_of[a:b], pos_of[a:b], flat[a:b], _ALL)
                continue
            # one row per sequence present in [a, b), in order; keep those holding a request's last token
            present = [r for r in range(len(checked)) if ends[r] > a and ends[r] - len(checked[r][1]) < b]
            finishing = [r for r in present if ends[r] <= b]
            if not finishing:
                self._step(tokens[a:b], seq_of[a:b], pos_of[a:b], None, _NONE)
                continue
            rows = np.empty((len(present), nv), dtype=np.float32)
            self._step(tokens[a:b], seq_of[a:b], pos_of[a:b], rows, _LAST)
            for row, r in enumerate(present):
                if r in finishing:
                    out[r] = rows[row]
        if all_logits:
            return np.split(flat, ends[:-1])
        return out

    def _step(self, tokens: np.ndarray, seq_of: np.ndarray, pos_of: np.ndarray, logits, mode: int) -> None:
        _core.executor_forward_batch(self._ex, tokens, seq_of, pos_of, logits, mode)
        for s, count in zip(*np.unique(seq_of, return_counts=True)):
            self.advance(int(s), int(count))

    def advance(self, seq_id: int, n: int) -> None:
        """Count n tokens the executor just stored for sequence seq_id (a step run outside forward_batch)."""
        self._n_past[seq_id] += n

    def _seq(self, seq_id) -> int:
        if isinstance(seq_id, bool) or not isinstance(seq_id, (int, np.integer)) or not 0 <= seq_id < self.n_seq:
            raise ValueError(f"sequence id {seq_id!r} is outside [0, {self.n_seq})")
        return int(seq_id)


class NativeSequence:
    """One sequence of a NativeMultiBackend as a single-sequence Backend (runtime/backend.py); its `group` is
    the engine, for batched steps with the other sequences."""

    def __init__(self, multi: NativeMultiBackend, seq_id: int):
        self.multi = self.group = multi
        self.seq_id = seq_id
        self.n_ctx = multi.n_ctx
        self.spec = multi.spec
        self.config = multi.config
        self.kv_type = multi.kv_type

    @property
    def n_past(self) -> int:
        return self.multi.n_past(self.seq_id)

    def forward(self, tokens: Sequence[int], all_logits: bool = False, copy: bool = False) -> np.ndarray:
        """Like NativeBackend.forward; the logits are always a new array (copy is accepted for the protocol)."""
        return self.multi.forward_batch([(self.seq_id, tokens)], all_logits=all_logits)[0]

    def forward_argmax(self, tokens: Sequence[int]) -> int:
        return int(np.argmax(self.forward(tokens)))

    def truncate(self, n_past: int) -> None:
        self.multi.truncate(self.seq_id, n_past)

    def reset(self) -> None:
        self.multi.reset(self.seq_id)
