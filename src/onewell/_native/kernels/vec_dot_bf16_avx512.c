/* BF16 weights on CPUs with AVX512-BF16 (Zen 4 and later, Intel Sapphire Rapids and later), the AVX-512 path's
 * BF16 kernels: vdpbf16ps multiplies 32 bf16 pairs per instruction, where the AVX2 kernels widen every weight to
 * float and spend an FMA per 8 (docs/perf-log.md, entry 23).
 *
 * vdpbf16ps takes bf16 on both sides, so the F32 activations are rounded to bf16 as they are loaded (vcvtne2ps2bf16:
 * round to nearest even, denormals to zero): llama.cpp rounds them so for every BF16 dot. Per (row, vector) one
 * chain of vdpbf16ps over 32-column groups, the last group masked (zeros add nothing), then _mm512_reduce_add_ps;
 * products of two bf16 are exact in float32. Decode and the prefill tile compute each (row, vector) with those same
 * steps, so a batch equals its tokens one by one. Twin: onewell.quant.floats.dot_bf16_avx512 (tolerance: the
 * instruction's two rounded adds per lane are not specified bit for bit across vendors).
 *
 * CPUs on the AVX-512 path without AVX512-BF16 (Skylake-X, Ice Lake) run the AVX2 kernels instead: F32 activations,
 * exact. */
#include "vec_dot.h"

#if OW_X86_KERNELS
#include <immintrin.h>

#include "../cpu_features.h"

#define BF_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))
#define BF_INLINE static inline __attribute__((always_inline)) BF_TARGET
#define BF_ROWS 4   /* prefill tile: 4 rows x BF_VECS vectors, 16 chains in registers */
#define BF_VECS 4
#define BF_XH_COLS 32768   /* bf16 activation columns converted once per call (64 KiB of stack), at most */
#define BF_XH_PITCH(n) (((n) + 31) / 32 * 32)             /* a converted vector's length: whole 32-column groups */

/* columns i..i+31 of an f32 activation row as 32 bf16; n_left (>= 1) columns remain from i */
BF_INLINE __m512bh acts32(const float *x, int64_t i, int64_t n_left) {
    const __mmask16 lo = n_left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << n_left) - 1);
    const __mmask16 hi = n_left >= 32 ? (__mmask16)0xffff : n_left > 16 ? (__mmask16)((1u << (n_left - 16)) - 1) : 0;
    return _mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(hi, x + i + 16), _mm512_maskz_loadu_ps(lo, x + i));
}

/* columns i..i+31 of a vector: from its bf16 copy xh (converted once), or converted from x as read */
BF_INLINE __m512bh acts_at(const uint16_t *xh, const float *x, int64_t i, int64_t n_left) {
    return xh ? (__m512bh)_mm512_load_si512((const void *)(xh + i)) : acts32(x, i, n_left);
}

/* columns i..i+31 of a bf16 weight row */
BF_INLINE __m512bh weights32(const uint8_t *row, int64_t i, int64_t n_left) {
    if (n_left >= 32) return (__m512bh)_mm512_loadu_si512((const void *)(row + 2 * i));
    return (__m512bh)_mm512_maskz_loadu_epi16((__mmask32)((1u << n_left) - 1), row + 2 * i);
}

/* R rows x V vectors: y[v * y_stride + r]. xh: the V vectors already in bf16 (n each, 64-byte aligned), or NULL
 * to convert them as they are read */
BF_INLINE void tile(int64_t n, const uint8_t *w, size_t stride, const int R, const uint8_t *x, size_t x_stride,
                    const int V, float *y, int64_t y_stride, const uint16_t *xh) {
    __m512 acc[BF_ROWS][BF_VECS];
    for (int r = 0; r < R; r++)
        for (int v = 0; v < V; v++) acc[r][v] = _mm512_setzero_ps();
    for (int64_t i = 0; i < n; i += 32) {   /* the last, partial group: masked loads */
        __m512bh a[BF_VECS];
        for (int v = 0; v < V; v++)
            a[v] = acts_at(xh ? xh + (size_t)v * BF_XH_PITCH(n) : NULL, (const float *)(x + (size_t)v * x_stride), i,
                           n - i);
        for (int r = 0; r < R; r++) {
            const __m512bh q = weights32(w + (size_t)r * stride, i, n - i);
            for (int v = 0; v < V; v++) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], q, a[v]);
        }
    }
    for (int r = 0; r < R; r++)
        for (int v = 0; v < V; v++) y[(int64_t)v * y_stride + r] = _mm512_reduce_add_ps(acc[r][v]);
}

/* n f32 activations as bf16 into xh (whole 32-column groups, the last zero-padded) */
BF_INLINE void convert(const float *x, int64_t n, uint16_t *xh) {
    for (int64_t i = 0; i < n; i += 32) _mm512_store_si512((void *)(xh + i), (__m512i)acts32(x, i, n - i));
}

/* Decode of a whole chunk (the tile is any_rows): the activation converted to bf16 once (into xh, when it fits),
 * then rows r and r + nr/2 together, two chains and two sequential streams far apart (as the Q8_0 decode kernels;
 * one row's chain alone bounded it), an odd row last and alone. Each row's steps are the tile's for one vector. */

/* row w0 into *s0 and, unless w1 is NULL, row w1 into *s1, group by group */
BF_INLINE void decode_pair(int64_t n, const uint8_t *w0, const uint8_t *w1, size_t stride, const float *x,
                           const uint16_t *xh, float *s0, float *s1, size_t distance) {
    if (distance)
        for (size_t off = 0; off < stride; off += 64) {
            _mm_prefetch((const char *)(w0 + distance + off), _MM_HINT_T0);
            if (w1) _mm_prefetch((const char *)(w1 + distance + off), _MM_HINT_T0);
        }
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
    for (int64_t i = 0; i < n; i += 32) {
        const __m512bh a = acts_at(xh, x, i, n - i);
        acc0 = _mm512_dpbf16_ps(acc0, weights32(w0, i, n - i), a);
        if (w1) acc1 = _mm512_dpbf16_ps(acc1, weights32(w1, i, n - i), a);
    }
    *s0 = _mm512_reduce_add_ps(acc0);
    if (w1) *s1 = _mm512_reduce_add_ps(acc1);
}

BF_INLINE void decode_rows(int64_t n, const uint8_t *w, size_t stride, int nr, const float *x, float *s,
                           uint16_t *xh_buf) {
    const uint16_t *xh = NULL;
    if (BF_XH_PITCH(n) <= BF_XH_COLS) {
        convert(x, n, xh_buf);
        xh = xh_buf;
    }
    const size_t distance = ow_r16_prefetch();
    const int half = nr / 2;
    for (int r = 0; r < half; r++)
        decode_pair(n, w + (size_t)r * stride, w + (size_t)(r + half) * stride, stride, x, xh, s + r, s + r + half,
                    distance);
    if (nr % 2) decode_pair(n, w + (size_t)(nr - 1) * stride, NULL, stride, x, xh, s + nr - 1, NULL, distance);
}

/* The AVX-512 path's BF16 kernel, any_rows: a matmul chunk per call; decode as above, prefill in 4-row x 4-vector
 * tiles. (No dot slot: the type's tile serves decode too.) */
BF_TARGET void tile_bf16_f32_avx512(OW_TILE_ARGS) {
    if (!ow_cpu()->avx512_bf16) {   /* the AVX2 tile takes at most 4 rows per call */
        for (int r = 0; r < nr; r += BF_ROWS)
            tile_bf16_f32_avx2(n_cols, w + (size_t)r * w_stride, w_stride, nr - r < BF_ROWS ? nr - r : BF_ROWS, x,
                               x_stride, n_vec, y + r, y_stride);
        return;
    }
    __attribute__((aligned(64))) uint16_t xh_buf[BF_XH_COLS];
    if (n_vec == 1) {
        decode_rows(n_cols, w, w_stride, nr, x, y, xh_buf);
        return;
    }
    /* each group of 4 vectors converted once for the chunk's rows when they fit (up to 8,192 columns) */
    const int convert_once = (int64_t)BF_VECS * BF_XH_PITCH(n_cols) <= BF_XH_COLS;
    const uint8_t *xb = x;
    for (int v = 0; v < n_vec; v += BF_VECS) {
        const int nv = n_vec - v < BF_VECS ? n_vec - v : BF_VECS;
        const uint8_t *xv = xb + (size_t)v * x_stride;
        float *yv = y + (int64_t)v * y_stride;
        const uint16_t *xh = NULL;
        if (convert_once) {
            for (int k = 0; k < nv; k++)
                convert((const float *)(xv + (size_t)k * x_stride), n_cols, xh_buf + (size_t)k * BF_XH_PITCH(n_cols));
            xh = xh_buf;
        }
        int r = 0;
#define BF_CASE(V)                                                                                           \
    case V:                                                                                                  \
        for (; r + BF_ROWS <= nr; r += BF_ROWS)                                                              \
            tile(n_cols, w + (size_t)r * w_stride, w_stride, BF_ROWS, xv, x_stride, V, yv + r, y_stride, xh); \
        for (; r < nr; r++)                                                                                  \
            tile(n_cols, w + (size_t)r * w_stride, w_stride, 1, xv, x_stride, V, yv + r, y_stride, xh);      \
        break;
        switch (nv) { BF_CASE(4) BF_CASE(3) BF_CASE(2) BF_CASE(1) }
#undef BF_CASE
    }
}
#endif
