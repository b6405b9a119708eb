"""Timed prompt-processing (pp) and generation (tg) runs of one engine, at each thread count, with repetitions.

pp N: one forward of N prompt tokens from an empty cache (the time to first token, minus sampling).
tg N: N single-token greedy steps after a 1-token prompt; each step feeds back the argmax of the last. Only
      the N steps are timed. Decode reads every weight once per token, so tg is the memory-bound test.
@dD:  the same after a context of D tokens (llama-bench's -d/--n-depth; it prints "tg32 @ d4096"): the cache
      holds D positions first, untimed, so attention reads D keys and values per layer and token. The D
      tokens are evaluated once per backend and kept; each repetition truncates the cache back to them.

Token ids are fixed pseudo-random numbers (seeded): speed does not depend on what the tokens say, and no
tokenizer is needed. Order within a thread count: read bandwidth first (nothing else running), then the
engine's warm-up (a full pp and one tg token, as llama-bench does), then for each repetition every test once,
followed by the other engine's run if comparing (A B A B ...: both see the same machine state, whatever the
host does meanwhile). Only one engine backend exists at a time, so idle thread pools never compete.
"""
from __future__ import annotations

import gc
import time
from dataclasses import dataclass, field
from typing import Callable, Literal, Sequence

import numpy as np

TG_PROMPT_TOKENS = 1  # positions of tg N are 1..N, next to llama-bench's 0..N-1


@dataclass(frozen=True)
class BenchTest:
    kind: Literal["pp", "tg"]
    n_tokens: int
    depth: int = 0  # tokens in the cache before the test

    @property
    def name(self) -> str:
        """pp128, tg32, tg32@d4096 (the names onewell.bench.llamacpp gives llama-bench's rows)."""
        return f"{self.kind}{self.n_tokens}" + (f"@d{self.depth}" if self.depth else "")

    @classmethod
    def parse(cls, name: str) -> BenchTest:
        base, sep, depth = name.partition("@d")
        kind, digits = base[:2], base[2:]
        if (kind not in ("pp", "tg") or not digits.isdigit() or int(digits) <= 0
                or (sep and not (depth.isdigit() and int(depth) > 0))):
            raise ValueError(f"test names look like pp128, tg32 or tg32@d4096, got {name!r}")
        return cls(kind, int(digits), int(depth) if sep else 0)  # type: ignore[arg-type]


def make_tests(n_prompt: Sequence[int], n_gen: Sequence[int], depths: Sequence[int] = (0,)) -> list[BenchTest]:
    """Per depth (ascending), pp tests then tg tests; 0 in either size list means none of that kind (as
    llama-bench's -p 0 / -n 0). The tests of one depth are neighbours, so a repetition evaluates each depth's
    context at most once (a depth-0 test overwrites it)."""
    depths = sorted(set(depths)) or [0]
    if min(depths) < 0:
        raise ValueError(f"depths must be >= 0, got {depths}")
    tests = [BenchTest(kind, n, d) for d in depths for kind, sizes in (("pp", n_prompt), ("tg", n_gen))
             for n in sizes if n > 0]
    if not tests:
        raise ValueError("nothing to measure: every prompt and generation size is 0")
    return tests


def context_needed(tests: Sequence[BenchTest]) -> int:
    return max(t.depth + (t.n_tokens if t.kind == "pp" else (0 if t.depth else TG_PROMPT_TOKENS) + t.n_tokens)
               for t in tests)


def token_ids(n_vocab: int, n: int, seed: int) -> list[int]:
    return np.random.default_rng(seed).integers(0, n_vocab, size=n).tolist()


def _greedy_step(backend, token: int) -> int:
    """Evaluate one token and return the most likely next one (the native backend does the argmax in C)."""
    argmax = getattr(backend, "forward_argmax", None)
    if argmax is not None:
        return int(argmax([token]))
    return int(np.argmax(backend.forward([token])))


class EngineTimer:
    """Runs the tests on one backend (one thread count)."""

    def __init__(self, backend, n_vocab: int, seed: int = 0):
        self.backend = backend
        self.n_vocab = n_vocab
        self.seed = seed
        self._context: tuple[int, int] | None = None  # (depth, next token) the cache's first positions hold

    def run(self, test: BenchTest) -> float:
        """Seconds the test took."""
        if test.kind == "pp":
            return self.time_pp(test.n_tokens, test.depth)
        return self.time_tg(test.n_tokens, test.depth)

    def time_pp(self, n: int, depth: int = 0) -> float:
        ids = token_ids(self.n_vocab, n, self.seed)
        self.fill_context(depth)
        start = time.perf_counter_ns()
        self.backend.forward(ids)
        return (time.perf_counter_ns() - start) * 1e-9

    def time_tg(self, n: int, depth: int = 0) -> float:
        return self.tg_steps(self.start_tg(depth), n)

    def start_tg(self, depth: int = 0) -> int:
        """Depth 0: empty the cache and evaluate the short prompt. Else the depth's context. Returns the first
        token to feed (untimed)."""
        if depth:
            return self.fill_context(depth)
        prompt = token_ids(self.n_vocab, TG_PROMPT_TOKENS, self.seed + 1)
        self.backend.reset()
        self._context = None
        return int(np.argmax(self.backend.forward(prompt)))

    def fill_context(self, depth: int) -> int:
        """Leave exactly `depth` context tokens in the cache (evaluated once, then kept by truncating back to
        them); returns the greedy token after them (0 at depth 0)."""
        if depth == 0:
            self.backend.reset()
            self._context = None  # positions from 0 on are about to be overwritten
            return 0
        if self._context is None or self._context[0] != depth or self.backend.n_past < depth:
            self.backend.reset()
            ids = token_ids(self.n_vocab, depth, self.seed + 2)
            self._context = (depth, int(np.argmax(self.backend.forward(ids))))
        self.backend.truncate(depth)
        return self._context[1]

    def tg_steps(self, token: int, n: int) -> float:
        """Seconds of n greedy single-token steps starting from `token`."""
        start = time.perf_counter_ns()
        for _ in range(n):
            token = _greedy_step(self.backend, token)
        return (time.perf_counter_ns() - start) * 1e-9

    def warm_up(self, tests: Sequence[BenchTest]) -> None:
        """Page in the weights, start the pool's threads, allocate scratch: what a first run pays once."""
        pp = [t for t in tests if t.kind == "pp"]
        if pp:
            self.time_pp(max(t.n_tokens for t in pp))
        if any(t.kind == "tg" for t in tests):
            self.time_tg(1)
        for depth in sorted({t.depth for t in tests if t.depth}):
            self.fill_context(depth)  # the contexts' evaluation is not part of any timed test


def profile_tokens(backend, n_vocab: int, n_tokens: int, seed: int = 0) -> dict | None:
    """Where the time of generated tokens goes, from the native backend's timers: {"ops": {category: ns},
    "tokens", "steps", "wall_ns"} over n_tokens greedy steps (the prompt before them is not counted); None when
    the backend has no timers (the reference backend). Profiling is off during the timed runs: timers cost."""
    if not (hasattr(backend, "profile_stats") and hasattr(backend, "profile")):
        return None
    timer = EngineTimer(backend, n_vocab, seed)
    token = timer.start_tg()
    backend.profile = True
    try:
        backend.profile_stats(reset=True)  # drop whatever came before
        wall = timer.tg_steps(token, n_tokens)
        raw = backend.profile_stats(reset=True)
    finally:
        backend.profile = False
    return {**split_profile(raw), "wall_ns": wall * 1e9}


def split_profile(raw: dict) -> dict:
    """profile_stats() -> {"ops": {category: ns} (categories that took time), "tokens", "steps"}.
    The native form: {category: seconds, ..., "calls": forward steps, "tokens": tokens evaluated}."""
    stats = dict(raw)
    tokens, steps = int(stats.pop("tokens")), int(stats.pop("calls"))
    ops = {str(op): float(seconds) * 1e9 for op, seconds in stats.items() if seconds > 0}
    return {"ops": ops, "tokens": tokens, "steps": steps}


@dataclass
class RunResult:
    """Raw measurements: seconds per repetition by (engine, test name, threads)."""
    seconds: dict[tuple[str, str, int], list[float]] = field(default_factory=dict)
    bandwidth: dict[int, dict[str, float]] = field(default_factory=dict)  # threads -> read GB/s median/min/max
    profile: dict | None = None
    profile_threads: int | None = None

    def add(self, engine: str, test: str, threads: int, seconds: float) -> None:
        self.seconds.setdefault((engine, test, threads), []).append(seconds)


def run_benchmark(
    make_backend: Callable[[int], object],
    n_vocab: int,
    tests: Sequence[BenchTest],
    threads: Sequence[int],
    reps: int,
    *,
    warmup: bool = True,
    seed: int = 0,
    bandwidth: Callable[[int], dict[str, float]] | None = None,
    other: Callable[[int], dict[str, float]] | None = None,
    other_name: str = "llama.cpp",
    profile_threads: int | None = None,
    profile_n_tokens: int = 16,
    log: Callable[[str], None] = lambda _msg: None,
) -> RunResult:
    """Measure every test at every thread count, `reps` times. `other(threads)` runs the comparison engine
    once per repetition and returns {test name: seconds}; `bandwidth(threads)` returns read GB/s stats."""
    if reps <= 0:
        raise ValueError(f"reps must be at least 1, got {reps}")
    result = RunResult()
    for t in threads:
        if bandwidth is not None:
            log(f"read bandwidth, {t} thread(s)")
            result.bandwidth[t] = bandwidth(t)
        backend = make_backend(t)
        timer = None
        try:
            timer = EngineTimer(backend, n_vocab, seed)
            if warmup:
                log(f"onewell warm-up, {t} thread(s)")
                timer.warm_up(tests)
            for rep in range(reps):
                log(f"{t} thread(s), repetition {rep + 1}/{reps}")
                for test in tests:
                    result.add("onewell", test.name, t, timer.run(test))
                if other is not None:
                    for name, secs in other(t).items():
                        result.add(other_name, name, t, secs)
            if profile_threads == t:
                log(f"per-op profile, {t} thread(s)")
                result.profile = profile_tokens(backend, n_vocab, profile_n_tokens, seed)
                result.profile_threads = t if result.profile is not None else None
        finally:
            close = getattr(backend, "close", None)
            if close is not None:
                close()
            backend = timer = None
            gc.collect()  # free this thread count's pool and buffers before the next one starts
    return result
