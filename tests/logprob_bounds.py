"""Bounds on how far a path's teacher-forced log-probs may sit from llama.cpp's (or the reference's), over
llama.cpp's top-10 ids per step, split where the differences come from; and the two helpers every such test uses
(log_softmax, aligned_steps).

Below e^-6 (0.25 %), in a confident step, a log-prob is a difference of logits ~10 nats apart and moves by up to
a nat with float order alone, so every path's largest differences are in that tail; the ids that carry
probability (the head) are held tighter. Measured, SmolLM2 row 0, step 18 (top-1 at -0.001), id 93: llama.cpp
-10.34; the numpy reference -9.39; generic -9.97, avx2 -10.09, avx512 -10.04 (Zen 4); neon -9.88, neon-dotprod
-9.03 (qemu). Per-model figures are beside each test's bounds."""
from __future__ import annotations

import dataclasses

import numpy as np

HEAD_LOGPROB = -6.0


def log_softmax(logits: np.ndarray) -> np.ndarray:
    """Log-probs over the last axis, in float64"""
    x = logits.astype(np.float64)
    x = x - x.max(axis=-1, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))


def aligned_steps(row: dict):
    """(completion index, top-10 list) pairs of a golden row. llama.cpp reports probabilities only for tokens that
    complete a UTF-8 character (a multi-byte character split over tokens shows up once, at its last token), so
    the entries are matched to completion positions in order by their top-1 id (greedy: the chosen token)."""
    j = 0
    for step in row["top_logprobs"]:
        while row["completion_ids"][j] != step[0]["id"]:
            j += 1
        yield j, step
        j += 1


@dataclasses.dataclass(frozen=True)
class Bounds:
    """On |a - b| log-prob over llama.cpp's top-10 ids: its mean; its max where llama.cpp's log-prob is at least
    HEAD_LOGPROB; its max over all ids."""
    mean: float
    head_max: float
    max: float

    def check(self, diffs, head) -> str:
        """Asserts the three bounds; returns the measured figures for the test's printout."""
        d = np.asarray(diffs, dtype=np.float64)
        head_max = float(np.max(d[np.asarray(head, dtype=bool)]))
        assert np.mean(d) < self.mean and head_max < self.head_max and np.max(d) < self.max, \
            (f"mean {np.mean(d):.4f} head max {head_max:.3f} max {np.max(d):.3f}", self)
        return f"mean {np.mean(d):.4f} max {np.max(d):.3f} (head {head_max:.3f})"
