"""Amdahl's law fitted to measured times: how much of the work more threads can speed up.

    t(n) = t1 * ((1 - p) + p / n)

p is the parallel fraction; 1 - p is what does not shrink with more threads: serial code, synchronization, and
(for decode) waiting on the one memory bus all threads share. The seed article's 8 threads gave 1.48x, which
fits p ~ 0.3 ("70% memory + 30% compute"), and its ceiling 1 / (1 - p) ~ 1.4x at any core count.

The model is linear in (a, b) = (t1 (1 - p), t1 p) as t(n) = a + b / n, so the fit is an ordinary least
squares solve, on relative residuals (every thread count weighs the same whatever its time). Two thread counts
give p exactly with nothing left over to test the model, so such a result is marked underdetermined; one
thread count cannot give p at all.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from onewell.errors import OnewellError


class UnderdeterminedFitError(OnewellError, ValueError):
    """Fewer distinct thread counts than the two parameters of Amdahl's law."""


@dataclass(frozen=True)
class AmdahlFit:
    p: float                  # parallel fraction (outside [0, 1] means the data does not follow Amdahl's law)
    t1: float                 # fitted time at 1 thread (seconds, or whatever unit the times came in)
    threads: tuple[int, ...]  # distinct thread counts fitted
    rms_rel_residual: float   # sqrt(mean(((t_fit - t) / t)^2)); 0 when underdetermined (nothing to test)
    underdetermined: bool     # exactly 2 thread counts: p solved, not fitted
    notes: list[str] = field(default_factory=list)

    @property
    def serial_fraction(self) -> float:
        return 1.0 - self.p

    def time(self, n: float) -> float:
        return self.t1 * ((1.0 - self.p) + self.p / n)

    def speedup(self, n: float) -> float:
        """Predicted speed-up of n threads over 1 thread."""
        return self.t1 / self.time(n)

    @property
    def max_speedup(self) -> float:
        """The ceiling as n grows without bound: 1 / (1 - p); infinite when p >= 1."""
        return float("inf") if self.p >= 1.0 else 1.0 / (1.0 - self.p)


def fit_amdahl(threads: list[int], seconds: list[float]) -> AmdahlFit:
    """Least-squares Amdahl fit of times `seconds` measured at `threads` (repeated counts are allowed: every
    sample counts). Raises UnderdeterminedFitError with fewer than 2 distinct thread counts."""
    if len(threads) != len(seconds):
        raise ValueError(f"{len(threads)} thread counts but {len(seconds)} times")
    n = np.asarray(threads, dtype=np.float64)
    t = np.asarray(seconds, dtype=np.float64)
    if np.any(n < 1) or np.any(n != np.round(n)):
        raise ValueError(f"thread counts must be whole numbers >= 1, got {threads}")
    if np.any(~np.isfinite(t)) or np.any(t <= 0):
        raise ValueError(f"times must be positive and finite, got {seconds}")
    distinct = tuple(sorted({int(x) for x in n}))
    if len(distinct) < 2:
        raise UnderdeterminedFitError(
            f"cannot fit Amdahl's law to one thread count ({distinct[0] if distinct else 'none'}): "
            f"it has two unknowns (t1 and p); measure at least 3 thread counts")
    # relative residuals: divide each row of [1, 1/n] a,b = t by t
    design = np.stack([np.ones_like(n), 1.0 / n], axis=1) / t[:, None]
    (a, b), *_ = np.linalg.lstsq(design, np.ones_like(t), rcond=None)
    t1 = float(a + b)
    if t1 <= 0:
        raise UnderdeterminedFitError(f"times {seconds} at threads {threads} give a non-positive 1-thread time "
                                      f"({t1:.3g}); they do not follow Amdahl's law")
    p = float(b / t1)
    predicted = a + b / n
    rms = float(np.sqrt(np.mean(((predicted - t) / t) ** 2)))
    underdetermined = len(distinct) == 2
    notes = []
    if underdetermined:
        notes.append(f"underdetermined: 2 thread counts ({distinct[0]}, {distinct[1]}) solve p exactly and leave "
                     f"nothing to test the model with; measure 3 or more")
    if p > 1.0:
        notes.append(f"p = {p:.2f} > 1: more threads sped up more than linearly (cache effects or noise), "
                     f"not Amdahl's law")
    elif p < 0.0:
        notes.append(f"p = {p:.2f} < 0: more threads made it slower (oversubscription, contention or noise)")
    return AmdahlFit(p=p, t1=t1, threads=distinct, rms_rel_residual=0.0 if underdetermined else rms,
                     underdetermined=underdetermined, notes=notes)


def next_thread_counts(measured: tuple[int, ...], how_many: int = 2) -> list[int]:
    """Thread counts beyond those measured to predict for: the next powers of two past the largest."""
    n = 1
    while n <= max(measured):
        n *= 2
    return [n * 2 ** i for i in range(how_many)]
