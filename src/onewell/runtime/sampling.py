"""Turn logits into the next token: repetition penalty, then top-k, top-p, min-p, temperature, and a draw.

The order and the meaning of each knob follow llama.cpp's default sampler chain, so the same settings
behave alike: the truncation filters look at the probabilities before temperature, temperature only
reshapes what is left. Temperature 0 means greedy (argmax after the penalty).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np


@dataclass(frozen=True)
class SamplingParams:
    temperature: float = 0.8
    top_k: int = 40           # keep the k most likely; 0 = off
    top_p: float = 0.95       # keep the smallest set whose probability reaches p; 1 = off
    min_p: float = 0.05       # drop tokens below min_p × the best token's probability; 0 = off
    repeat_penalty: float = 1.0  # > 1 discourages tokens seen in the last repeat_last_n; 1 = off
    repeat_last_n: int = 64   # history window of the penalty; 0 = off, -1 = whole history
    seed: int | None = None   # None: a fresh random stream; an int: the same tokens every time

    def __post_init__(self) -> None:
        def number(name: str) -> float:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
                raise ValueError(f"sampling parameter {name} must be a number, got {value!r}")
            return float(value)

        def integer(name: str) -> int:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
                raise ValueError(f"sampling parameter {name} must be an integer, got {value!r}")
            return int(value)

        if not 0.0 <= number("temperature") < math.inf:
            raise ValueError(f"temperature must be >= 0 and finite (0 = greedy), got {self.temperature}")
        if integer("top_k") < 0:
            raise ValueError(f"top_k must be >= 0 (0 = off), got {self.top_k}")
        if not 0.0 < number("top_p") <= 1.0:
            raise ValueError(f"top_p must be in (0, 1] (1 = off), got {self.top_p}")
        if not 0.0 <= number("min_p") <= 1.0:
            raise ValueError(f"min_p must be in [0, 1] (0 = off), got {self.min_p}")
        if not 0.0 < number("repeat_penalty") < math.inf:
            raise ValueError(f"repeat_penalty must be > 0 and finite (1 = off), got {self.repeat_penalty}")
        if integer("repeat_last_n") < -1:
            raise ValueError(f"repeat_last_n must be >= -1 (-1 = whole history, 0 = off), got {self.repeat_last_n}")
        if self.seed is not None and (integer("seed") < 0):
            raise ValueError(f"seed must be a non-negative integer or None, got {self.seed}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0


# ----------------------------------------------------------------------------------------------------------
# The filters: each takes candidate ids and their logits (or probabilities) and returns the survivors.


def apply_repeat_penalty(logits: np.ndarray, history: Sequence[int], penalty: float, last_n: int) -> np.ndarray:
    """Penalize every token seen in the last `last_n` of `history` once (not per occurrence): a positive
    logit is divided by the penalty, a negative one multiplied, so both move towards less likely."""
    if penalty == 1.0 or last_n == 0 or len(history) == 0:
        return logits
    window = history if last_n < 0 else history[-last_n:]
    seen = np.unique(np.asarray(window, dtype=np.int64))
    seen = seen[(seen >= 0) & (seen < len(logits))]
    out = logits.copy()
    values = out[seen]
    out[seen] = np.where(values > 0, values / penalty, values * penalty)
    return out


def top_k_filter(ids: np.ndarray, logits: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The k largest logits, sorted best first (ties broken towards the lower id, for determinism)."""
    if k <= 0 or k >= len(ids):
        order = np.lexsort((ids, -logits))
    else:
        part = np.argpartition(-logits, k - 1)[:k]
        order = part[np.lexsort((ids[part], -logits[part]))]
    return ids[order], logits[order]


def softmax(logits: np.ndarray) -> np.ndarray:
    e = np.exp(logits - np.max(logits))
    return e / e.sum()


def top_p_keep(sorted_probs: np.ndarray, p: float) -> int:
    """How many of the best-first probabilities make up the smallest set with total >= p (at least 1)."""
    if p >= 1.0:
        return len(sorted_probs)
    cumulative = np.cumsum(sorted_probs)
    return min(int(np.searchsorted(cumulative, p, side="left")) + 1, len(sorted_probs))


def min_p_keep(sorted_probs: np.ndarray, min_p: float) -> int:
    """How many of the best-first probabilities are at least min_p × the best one (at least 1)."""
    if min_p <= 0.0:
        return len(sorted_probs)
    return max(1, int(np.count_nonzero(sorted_probs >= min_p * sorted_probs[0])))


# ----------------------------------------------------------------------------------------------------------


class Sampler:
    """Draws tokens with one SamplingParams; a seeded sampler repeats its sequence exactly."""

    def __init__(self, params: SamplingParams | None = None):
        self.params = params or SamplingParams()
        self.rng = np.random.default_rng(self.params.seed)

    def sample(self, logits: np.ndarray, history: Sequence[int] = ()) -> int:
        p = self.params
        logits = np.asarray(logits, dtype=np.float32).reshape(-1)
        if logits.size == 0:
            raise ValueError("cannot sample from empty logits")
        if np.isnan(logits).any() or np.isposinf(logits).any() or np.isneginf(logits).all():
            raise ValueError("logits contain NaN or +inf, or are all -inf: nothing valid to sample from")
        logits = apply_repeat_penalty(logits, history, p.repeat_penalty, p.repeat_last_n)
        if p.greedy:
            return int(np.argmax(logits))

        ids, cand = top_k_filter(np.arange(len(logits)), logits, p.top_k)  # sorted best first
        probs = softmax(cand.astype(np.float64))
        n = top_p_keep(probs, p.top_p)
        n = min(n, min_p_keep(probs[:n], p.min_p))
        ids, cand = ids[:n], cand[:n]

        probs = softmax(cand.astype(np.float64) / p.temperature)
        # Inverse-CDF draw with one uniform number per token: same seed, same tokens, on any numpy.
        index = int(np.searchsorted(np.cumsum(probs), self.rng.random() * probs.sum(), side="right"))
        return int(ids[min(index, n - 1)])
