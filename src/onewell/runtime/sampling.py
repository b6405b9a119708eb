"""Turn logits into the next token: logit bias, repetition penalty, presence/frequency penalties, then top-k,
top-p, min-p, temperature, and a draw.

The order and the meaning of each knob follow llama.cpp's default sampler chain, so the same settings
behave alike: the truncation filters look at the probabilities before temperature, temperature only
reshapes what is left. Temperature 0 means greedy (argmax after the bias and penalties).

logit_bias, presence_penalty and frequency_penalty have OpenAI's meaning: a bias is added to a token's logit
(-100 bans it, +100 all but forces it); the penalties subtract `presence` once from every token the reply
has used so far and `frequency` × its count, counting only generated tokens (not the prompt).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

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
    presence_penalty: float = 0.0   # OpenAI: subtracted once from each token already generated; 0 = off
    frequency_penalty: float = 0.0  # OpenAI: subtracted per occurrence in the generated tokens; 0 = off
    logit_bias: Mapping[int, float] | tuple = ()  # {token id: bias added to its logit}; stored as sorted pairs

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
        for name in ("presence_penalty", "frequency_penalty"):
            if not -2.0 <= number(name) <= 2.0:
                raise ValueError(f"{name} must be in [-2, 2] (0 = off), got {getattr(self, name)}")
        object.__setattr__(self, "logit_bias", _bias_pairs(self.logit_bias))

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0


def _bias_pairs(bias) -> tuple[tuple[int, float], ...]:
    items = bias.items() if isinstance(bias, Mapping) else bias
    pairs = {}
    for token, value in items:
        if isinstance(token, bool) or not isinstance(token, (int, np.integer)) or token < 0:
            raise ValueError(f"logit_bias keys must be token ids (non-negative integers), got {token!r}")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not -100.0 <= value <= 100.0:
            raise ValueError(f"logit_bias values must be numbers in [-100, 100], got {value!r} for token {token}")
        pairs[int(token)] = float(value)
    return tuple(sorted(pairs.items()))


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


def apply_logit_bias(logits: np.ndarray, pairs: Sequence[tuple[int, float]]) -> np.ndarray:
    if not pairs:
        return logits
    ids = np.array([t for t, _ in pairs], dtype=np.int64)
    if ids[-1] >= len(logits):
        raise ValueError(f"logit_bias names token {int(ids[-1])}, outside the vocabulary of {len(logits)}")
    out = logits.copy()
    out[ids] += np.array([b for _, b in pairs], dtype=np.float32)
    return out


def apply_presence_frequency(logits: np.ndarray, counts: Mapping[int, int], presence: float,
                             frequency: float) -> np.ndarray:
    """OpenAI's penalties over the tokens generated so far: logit -= presence + frequency × count."""
    if (presence == 0.0 and frequency == 0.0) or not counts:
        return logits
    ids = np.fromiter(counts.keys(), dtype=np.int64, count=len(counts))
    n = np.fromiter(counts.values(), dtype=np.float32, count=len(counts))
    out = logits.copy()
    out[ids] -= presence + frequency * n
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
        self.counts: dict[int, int] = {}  # generated tokens so far, for the presence/frequency penalties

    def sample(self, logits: np.ndarray, history: Sequence[int] = ()) -> int:
        """Draw the next token; `history` (prompt and reply) feeds the repeat penalty. The drawn token counts
        as generated for the presence/frequency penalties of later draws."""
        token = self._draw(logits, history)
        self.counts[token] = self.counts.get(token, 0) + 1
        return token

    def _draw(self, logits: np.ndarray, history: Sequence[int]) -> int:
        p = self.params
        logits = np.asarray(logits, dtype=np.float32).reshape(-1)
        if logits.size == 0:
            raise ValueError("cannot sample from empty logits")
        if np.isnan(logits).any() or np.isposinf(logits).any() or np.isneginf(logits).all():
            raise ValueError("logits contain NaN or +inf, or are all -inf: nothing valid to sample from")
        logits = apply_logit_bias(logits, p.logit_bias)
        logits = apply_repeat_penalty(logits, history, p.repeat_penalty, p.repeat_last_n)
        logits = apply_presence_frequency(logits, self.counts, p.presence_penalty, p.frequency_penalty)
        if p.greedy:
            return int(np.argmax(logits))

        ids = np.flatnonzero(logits > -np.inf)  # banned (bias, grammar mask) tokens leave before the sort
        ids, cand = top_k_filter(ids, logits[ids], p.top_k)  # sorted best first
        probs = softmax(cand.astype(np.float64))
        n = top_p_keep(probs, p.top_p)
        n = min(n, min_p_keep(probs[:n], p.min_p))
        ids, cand = ids[:n], cand[:n]

        probs = softmax(cand.astype(np.float64) / p.temperature)
        # Inverse-CDF draw with one uniform number per token: same seed, same tokens, on any numpy.
        index = int(np.searchsorted(np.cumsum(probs), self.rng.random() * probs.sum(), side="right"))
        return int(ids[min(index, n - 1)])
