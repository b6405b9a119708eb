/* F16 weights x F16 activations for several activation vectors per weight load (AVX2): prefill and encoder
 * steps. Here 4 rows x 3 vectors run 12 independent chains and each loaded weight chunk (and its fp16 -> f32
 * conversion) serves 3 vectors. Every (row, vector) result is computed with exactly the dot's operations in the
 * dot's order (vec_dot_x86_256.inc, tile_f16: four phase chains, their sum, the last 8-column steps, the same
 * horizontal sum and scalar tail), so the result is bit-identical to vec_dot_f16_f16_avx2: batched = one token
 * at a time.
 * One vector: the dot itself (it prefetches ahead for the decode stream). */
#include "vec_dot.h"

#if OW_X86_KERNELS
#include <immintrin.h>

#define OW_TGT __attribute__((target("avx2,fma,f16c")))
#define TILE_V 3

OW_TGT static inline float hsum(__m256 v) {   /* = vec_dot_x86_256.inc's hsum_ps */
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static inline uint16_t read_u16(const uint8_t *p) {
    uint16_t v;
    __builtin_memcpy(&v, p, 2);
    return v;
}

/* Columns i..i+7 of R rows x V vectors into acc[r][v]: each weight chunk converted once for the V vectors */
OW_TGT static inline __attribute__((always_inline)) void columns8(int64_t i, const uint8_t *w, size_t stride, const int R,
                                                                  const uint16_t *x, size_t x_stride, const int V,
                                                                  __m256 acc[4][TILE_V]) {
    __m256 a[TILE_V];
    for (int v = 0; v < V; v++) a[v] = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + v * x_stride + i)));
    for (int r = 0; r < R; r++) {
        const __m256 wr = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(w + (size_t)r * stride + 2 * i)));
        for (int v = 0; v < V; v++) acc[r][v] = _mm256_fmadd_ps(wr, a[v], acc[r][v]);
    }
}

/* R rows (1..4) x V vectors (1..TILE_V): y[v * y_stride + r]. R and V are constants at each call site.
 * The dot's order: four chains per (row, vector), one per 8-column phase of every 32 columns, summed
 * (0 + 1) + (2 + 3), then the last columns 8 and 1 at a time. 4 x 3 x 4 chains do not fit the 16 registers, so
 * the phases are four passes, each with the 12 chains of one phase, parked in `phase` between passes. The passes
 * go over SPAN columns at a time (the rows' and vectors' 7 KiB stay in L1; each pass reads a quarter of every
 * line): four passes over whole rows of 4,864 columns (68 KiB) read every line from L2 four times and ran at half
 * the speed (docs/perf-log.md, entry 23). Each chain still takes its columns in order: the same floats. */
#define SPAN 512              /* columns per group of the four passes */
#define SPAN_BYTES (16 << 10)   /* rows and vectors up to this size (Qwen's 896 columns) go in one group */
OW_TGT static inline __attribute__((always_inline)) void block(int64_t n, const uint8_t *w, size_t stride, const int R,
                                                               const uint16_t *x, size_t x_stride, const int V,
                                                               float *y, int64_t y_stride) {
    const int64_t n32 = n & ~(int64_t)31;
    __m256 phase[4][4][TILE_V], acc[4][TILE_V];
    const int64_t span = (int64_t)(R + V) * n * 2 <= SPAN_BYTES ? n32 : SPAN;   /* all in L1 already: one span */
    for (int64_t c0 = 0; c0 < n32; c0 += span) {
        const int64_t c1 = n32 - c0 < span ? n32 : c0 + span;
        for (int k = 0; k < 4; k++) {
            for (int r = 0; r < R; r++)
                for (int v = 0; v < V; v++) acc[r][v] = c0 ? phase[k][r][v] : _mm256_setzero_ps();
            for (int64_t i = c0 + 8 * k; i < c1; i += 32) columns8(i, w, stride, R, x, x_stride, V, acc);
            for (int r = 0; r < R; r++)
                for (int v = 0; v < V; v++) phase[k][r][v] = acc[r][v];
        }
    }
    for (int r = 0; r < R; r++)   /* below 32 columns no phase ran: the 8-column steps start from zero */
        for (int v = 0; v < V; v++)
            acc[r][v] = n32 ? _mm256_add_ps(_mm256_add_ps(phase[0][r][v], phase[1][r][v]),
                                            _mm256_add_ps(phase[2][r][v], phase[3][r][v]))
                            : _mm256_setzero_ps();
    int64_t i = n32;
    for (; i + 8 <= n; i += 8) columns8(i, w, stride, R, x, x_stride, V, acc);
    for (int r = 0; r < R; r++)
        for (int v = 0; v < V; v++) {
            const uint16_t *xv = x + v * x_stride;
            float tail = 0.0f;
            for (int64_t j = i; j < n; j++) tail += _cvtsh_ss(read_u16(w + (size_t)r * stride + 2 * j)) * _cvtsh_ss(xv[j]);
            y[(int64_t)v * y_stride + r] = hsum(acc[r][v]) + tail;
        }
}

#define ROWS_CASES(V)                                                                                        \
    switch (nr) {                                                                                            \
    case 4: block(n_cols, w, w_stride, 4, xv, xs, V, yv, y_stride); break;                                   \
    case 3: block(n_cols, w, w_stride, 3, xv, xs, V, yv, y_stride); break;                                   \
    case 2: block(n_cols, w, w_stride, 2, xv, xs, V, yv, y_stride); break;                                   \
    default: block(n_cols, w, w_stride, 1, xv, xs, V, yv, y_stride); break;                                  \
    }

OW_TGT void tile_f16_f16_avx2(OW_TILE_ARGS) {
    if (n_vec == 1) {   /* decode: the streaming dot */
        float s[OW_ROW_TILE];
        vec_dot_f16_f16_avx2(n_cols, w, w_stride, nr, x, s);
        for (int r = 0; r < nr; r++) y[r] = s[r];
        return;
    }
    const size_t xs = x_stride / sizeof(uint16_t);   /* activation rows are 64-byte aligned: even byte strides */
    int v = 0;
    for (; v + TILE_V <= n_vec; v += TILE_V) {
        const uint16_t *xv = (const uint16_t *)((const uint8_t *)x + (size_t)v * x_stride);
        float *yv = y + (int64_t)v * y_stride;
        ROWS_CASES(TILE_V)
    }
    const uint16_t *xv = (const uint16_t *)((const uint8_t *)x + (size_t)v * x_stride);
    float *yv = y + (int64_t)v * y_stride;
    if (n_vec - v == 2) { ROWS_CASES(2) }
    else if (n_vec - v == 1) { ROWS_CASES(1) }
}
#endif
