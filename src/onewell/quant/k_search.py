"""The scale searches of ggml's K-quant reference encoders, vectorized over groups of weights (one group a row).

    fit_scale_min(x, weights, nmax, rmin, rdelta, nstep)  ggml's make_qkx2_quants (use_mad = false): q in 0..nmax,
                                                          x ~ scale * q - min, weighted least squares
    fit_symmetric_scale(x, nmax)                          ggml's make_qx_quants with rmse_type 1: q in -nmax..nmax-1,
                                                          x ~ scale * q, weights x^2

Both try a few candidate inverse scales, refit scale (and min) by least squares on each candidate's quants and keep
the best. They return float32 scales exactly as ggml's C does, which needs its float32 operations in its order:
sums are sequential (np.add.accumulate), products are grouped as written in C, and nearest_int is round-half-even.
"""
from __future__ import annotations

import numpy as np

from ._blocks import F32

GROUP_MAX_EPS = F32(1e-15)


def seq_sum(terms: np.ndarray) -> np.ndarray:
    """Row sums added left to right in float32, as a C loop does (numpy's sum would add pairwise): one
    vector add per column, over a transposed copy so each add streams a contiguous row."""
    columns = np.ascontiguousarray(terms.T, dtype=F32)
    acc = columns[0].copy()
    for column in columns[1:]:
        acc += column
    return acc


def nearest_int(v: np.ndarray) -> np.ndarray:
    """ggml's nearest_int: round half to even (the float32 magic-number trick), as int32."""
    return np.rint(v).astype(np.int32)


def _divide(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return (a / b).astype(F32)


def fit_scale_min(x: np.ndarray, weights: np.ndarray, nmax: int, rmin: float, rdelta: float,
                  nstep: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(scale (n,), min (n,) as ggml's *the_min (>= 0, subtracted), quants (n, k) uint8) per row of x (n, k)."""
    x = x.astype(F32, copy=False)
    w = weights.astype(F32, copy=False)
    lo = np.minimum.accumulate(x, axis=1)[:, -1]
    hi = np.maximum.accumulate(x, axis=1)[:, -1]
    lo = np.where(lo > 0, F32(0), lo)
    sum_w = seq_sum(w)
    sum_x = seq_sum(w * x)
    flat = hi == lo
    span = np.where(flat, F32(1), hi - lo)          # flat rows are finished below; avoid dividing by zero
    fnmax = F32(nmax)

    def quants(iscale: np.ndarray, low: np.ndarray) -> np.ndarray:
        return np.clip(nearest_int(iscale[:, None] * (x - low[:, None])), 0, nmax)

    def error(scale: np.ndarray, offset: np.ndarray, q: np.ndarray) -> np.ndarray:
        diff = (scale[:, None] * q.astype(F32) + offset[:, None]) - x
        return seq_sum(w * (diff * diff))

    iscale = fnmax / span
    scale = F32(1) / iscale
    q_best = quants(iscale, lo)
    best_error = error(scale, lo, q_best)
    offset = lo.copy()
    for step in range(nstep + 1):
        # as in ggml, the candidates after an improvement start from the improved min (max - min grows)
        span = np.where(flat, F32(1), hi - offset)
        iscale = (F32(rmin) + F32(rdelta) * F32(step) + fnmax) / span
        q = quants(iscale, offset)
        lf = q.astype(F32)
        wl = w * lf
        sum_l, sum_l2, sum_xl = seq_sum(wl), seq_sum(wl * lf), seq_sum(wl * x)
        det = sum_w * sum_l2 - sum_l * sum_l
        this_scale = _divide(sum_w * sum_xl - sum_x * sum_l, det)
        this_min = _divide(sum_l2 * sum_x - sum_l * sum_xl, det)
        positive = this_min > 0
        this_scale = np.where(positive, _divide(sum_xl, sum_l2), this_scale)
        this_min = np.where(positive, F32(0), this_min)
        cur_error = error(this_scale, this_min, q)
        better = (det > 0) & (cur_error < best_error)
        q_best = np.where(better[:, None], q, q_best)
        best_error = np.where(better, cur_error, best_error)
        scale = np.where(better, this_scale, scale)
        offset = np.where(better, this_min, offset)
    scale = np.where(flat, F32(0), scale)
    q_best = np.where(flat[:, None], 0, q_best)
    offset = np.where(flat, lo, offset)
    return scale.astype(F32), (-offset).astype(F32), q_best.astype(np.uint8)


def fit_symmetric_scale(x: np.ndarray, nmax: int) -> tuple[np.ndarray, np.ndarray]:
    """(scale (n,), quants + nmax (n, k) uint8 in 0..2 nmax - 1) per row of x (n, k); all-zero rows give 0."""
    x = x.astype(F32, copy=False)
    n = x.shape[0]
    first_largest = np.abs(x).argmax(axis=1)   # the first of equal magnitudes, as ggml's strict '>' scan
    signed_max = x[np.arange(n), first_largest]
    zero = np.abs(signed_max) < GROUP_MAX_EPS
    signed_max = np.where(zero, F32(1), signed_max)
    w = x * x

    def fit(iscale: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        q = np.clip(nearest_int(iscale[:, None] * x), -nmax, nmax - 1)
        lf = q.astype(F32)
        return q, seq_sum((w * x) * lf), seq_sum((w * lf) * lf)

    q_best, sumlx, suml2 = fit(F32(-nmax) / signed_max)
    scale = np.where(suml2 != 0, _divide(sumlx, suml2), F32(0))
    best = scale * sumlx
    for step in range(-9, 10):
        if step == 0:
            continue
        iscale = -(F32(nmax) + F32(0.1) * F32(step)) / signed_max
        q, sumlx, suml2 = fit(iscale)
        better = (suml2 > 0) & (sumlx * sumlx > best * suml2)
        q_best = np.where(better[:, None], q, q_best)
        scale = np.where(better, _divide(sumlx, suml2), scale)
        best = np.where(better, scale * sumlx, best)
    scale = np.where(zero, F32(0), scale).astype(F32)
    q_best = np.where(zero[:, None], 0, q_best + nmax)
    return scale, q_best.astype(np.uint8)
