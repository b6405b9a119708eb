"""The generation loop: prefill the prompt, then decode one token at a time, streaming text.

Prefill and decode are separate functions because they are different workloads (one big batch that is
compute-bound, many single-token steps that are memory-bound) and the native backend has separate entry
points for them.
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Callable, Iterator, Sequence

import numpy as np

from onewell.errors import ContextOverflowError
from onewell.runtime.backend import Backend
from onewell.runtime.sampling import Sampler
from onewell.tokenizer import IncrementalDecoder


@dataclass
class GenerationStats:
    prompt_tokens: int = 0      # tokens in the prompt
    cached_tokens: int = 0      # of those, reused from the KV cache instead of evaluated again
    gen_tokens: int = 0         # tokens sampled (an end-of-generation token counts: it cost a step)
    prompt_seconds: float = 0.0  # prefill
    gen_seconds: float = 0.0     # decode steps and sampling, not the time the caller spends between chunks
    stop_reason: str | None = None  # "eog", "stop" (a stop string), "length" (max_tokens); None if abandoned

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)

    def get(self, key: str, default=None):
        """Mapping-style read, for report code written against a dict of stats."""
        return getattr(self, key, default)

    @property
    def prompt_tokens_per_second(self) -> float:
        evaluated = self.prompt_tokens - self.cached_tokens
        return evaluated / self.prompt_seconds if self.prompt_seconds > 0 else 0.0

    @property
    def gen_tokens_per_second(self) -> float:
        return self.gen_tokens / self.gen_seconds if self.gen_seconds > 0 else 0.0


def check_fits(n_ctx: int, n_prompt: int, max_tokens: int) -> None:
    if n_prompt == 0:
        raise ValueError("the prompt is empty: there is no token to generate from")
    if max_tokens < 1:
        raise ValueError(f"max_tokens must be at least 1, got {max_tokens}")
    if n_prompt > n_ctx:
        raise ContextOverflowError(f"the prompt has {n_prompt} tokens, more than the context of {n_ctx}")
    if n_prompt + max_tokens > n_ctx:
        raise ContextOverflowError(
            f"prompt ({n_prompt} tokens) + max_tokens ({max_tokens}) = {n_prompt + max_tokens} tokens "
            f"do not fit the context of {n_ctx}; shorten the prompt, lower max_tokens or load with a larger n_ctx")


def common_prefix_length(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def prefill(backend: Backend, prompt_ids: Sequence[int], cache_ids: list[int]) -> tuple[np.ndarray, int]:
    """Evaluate the prompt, reusing the prefix the KV cache already holds. `cache_ids` (the tokens in the
    cache, kept by the caller) is updated. Returns the logits of the last prompt token and the reused count."""
    reuse = common_prefix_length(cache_ids[:backend.n_past], prompt_ids)
    reuse = min(reuse, len(prompt_ids) - 1)  # at least one token must be evaluated to get logits
    backend.truncate(reuse)
    try:
        logits = backend.forward(prompt_ids[reuse:])
    finally:
        cache_ids[:] = list(prompt_ids[:backend.n_past])  # the backend's count is the truth, even after errors
    return logits, reuse


def decode_step(backend: Backend, token: int, cache_ids: list[int]) -> np.ndarray:
    """Append one token; returns the logits for the next."""
    try:
        return backend.forward([token])
    finally:
        if backend.n_past == len(cache_ids) + 1:
            cache_ids.append(token)


class StopStringFilter:
    """Passes text through until a stop string appears; never releases any part of a stop string.

    Text that could be the start of a stop string is held back until the next chunk shows it is not.
    Held text is always a suffix of what arrived, so a stop string can only begin in the held part.
    """

    def __init__(self, stop: Sequence[str]):
        self.stop = [s for s in stop if s]
        self.held = ""
        self.stopped = False

    def push(self, chunk: str) -> str:
        if self.stopped:
            return ""
        text = self.held + chunk
        hits = [i for i in (text.find(s) for s in self.stop) if i >= 0]
        if hits:
            self.stopped = True
            self.held = ""
            return text[:min(hits)]
        keep = self._longest_suffix_that_starts_a_stop(text)
        self.held = text[len(text) - keep:] if keep else ""
        return text[:len(text) - keep]

    def flush(self) -> str:
        text, self.held = self.held, ""
        return "" if self.stopped else text

    def _longest_suffix_that_starts_a_stop(self, text: str) -> int:
        best = 0
        for s in self.stop:
            for n in range(min(len(s) - 1, len(text)), best, -1):
                if s.startswith(text[len(text) - n:]):
                    best = n
                    break
        return best


def generate_tokens(
    backend: Backend,
    tokenizer,
    prompt_ids: Sequence[int],
    max_tokens: int,
    sampler: Sampler,
    stop: Sequence[str] = (),
    stats: GenerationStats | None = None,
    cache_ids: list[int] | None = None,
    constraint=None,
    observe: Callable[[int, np.ndarray], None] | None = None,
) -> Iterator[str]:
    """Yield the text of up to `max_tokens` new tokens. Stops at an end-of-generation token (not emitted)
    or a stop string (neither it nor anything after it emitted). `stats` is filled as it goes.

    `cache_ids`: the tokens the backend's KV cache holds, kept by the caller across calls; the common
    prefix with this prompt is not evaluated again. None starts from an empty cache.

    `constraint` (onewell.structured Constraint): the grammar masks the logits before each draw, and the
    generation ends (stop_reason "eog") as soon as the grammar is complete. `observe(token, logits)` sees
    every drawn token with the model's raw logits (logprobs are computed there)."""
    prompt_ids = [int(t) for t in prompt_ids]
    check_fits(backend.n_ctx, len(prompt_ids), max_tokens)
    stats = stats if stats is not None else GenerationStats()
    if cache_ids is None:
        cache_ids = []
        backend.reset()
    stats.prompt_tokens = len(prompt_ids)

    started = time.perf_counter()
    logits, stats.cached_tokens = prefill(backend, prompt_ids, cache_ids)
    stats.prompt_seconds = time.perf_counter() - started

    eog = tokenizer.eog_ids
    decoder = IncrementalDecoder(tokenizer, skip_special=True)
    stop_filter = StopStringFilter(stop)
    history = list(prompt_ids)  # what the repetition penalty looks back over
    for step in range(max_tokens):
        started = time.perf_counter()
        if step > 0:
            logits = decode_step(backend, history[-1], cache_ids)
        token = sampler.sample(constraint.mask(logits) if constraint is not None else logits, history)
        if observe is not None:
            observe(token, logits)
        stats.gen_seconds += time.perf_counter() - started
        stats.gen_tokens += 1
        if token in eog:
            stats.stop_reason = "eog"
            break
        if constraint is not None:
            constraint.accept(token)
        history.append(token)
        text = stop_filter.push(decoder.add(token))
        if text:
            yield text
        if stop_filter.stopped:
            stats.stop_reason = "stop"
            return
        if constraint is not None and constraint.finished:  # nothing but an end token could follow
            stats.stop_reason = "eog"
            break
    else:
        stats.stop_reason = "length"
    tail = stop_filter.push(decoder.flush())
    tail += stop_filter.flush()
    if stop_filter.stopped:
        stats.stop_reason = "stop"
    if tail:
        yield tail
