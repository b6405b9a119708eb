"""Log-probabilities of the model's distribution (the raw logits, before bias, penalties, grammar and
temperature): the chosen token's and the k most likely alternatives, as OpenAI's `logprobs` reports them."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def log_softmax(logits: np.ndarray) -> np.ndarray:
    x = np.asarray(logits, dtype=np.float64).reshape(-1)
    peak = x.max()
    return x - (peak + np.log(np.exp(x - peak).sum()))


def top_alternatives(logp: np.ndarray, k: int) -> list[tuple[int, float]]:
    """The k most likely (token id, logprob), best first; ties go to the lower id."""
    if k <= 0:
        return []
    k = min(k, len(logp))
    best = np.argpartition(-logp, k - 1)[:k]
    best = best[np.lexsort((best, -logp[best]))]
    return [(int(i), float(logp[i])) for i in best]


@dataclass(frozen=True)
class TokenLogprobs:
    """One generated token: its id, text, logprob, and the `top` alternatives (id, text, logprob)."""
    token: int
    text: str
    logprob: float
    top: tuple[tuple[int, str, float], ...] = ()


def token_logprobs(tokenizer, logits: np.ndarray, token: int, k: int) -> TokenLogprobs:
    logp = log_softmax(logits)

    def text(i: int) -> str:
        return tokenizer.token_bytes(i).decode("utf-8", errors="replace")

    top = tuple((i, text(i), lp) for i, lp in top_alternatives(logp, k))
    return TokenLogprobs(int(token), text(token), float(logp[token]), top)
