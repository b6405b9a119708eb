/* F16 x F16 for several activation vectors on CPUs that run 512-bit work at full width (ow_wide_tiles; an Intel
 * Xeon with AMX, docs/perf-log.md entry 24): tile_f16_bf16_avx2.c's tile with two rows per zmm register, row r
 * in the low half and r + 1 in the high half, each vector's 8 columns converted once into both halves. On that
 * CPU a conversion costs as much as an FMA and both run on the same two ports, so the tile is as large as the 32
 * registers allow: 8 rows x 6 vectors, per 8 columns 4 weight and 6 activation conversions for 24 FMAs of 16
 * lanes (the 256-bit tile: 4 + 3 for 12 of 8). Each half runs exactly the 256-bit tile's chains (four phases over
 * SPAN-column groups, their sum (0 + 1) + (2 + 3), the 8-column steps, the same horizontal sum and scalar tail),
 * so every result is bit-identical to it and to vec_dot_f16_f16_avx2. One vector, the last odd row and CPUs
 * without full-width 512-bit units take the 256-bit tile. */
#include "vec_dot.h"

#if OW_X86_KERNELS
#include "tile_avx2.h"   /* ta_hsum: the dots' horizontal sum */

#define TZ_TGT __attribute__((target("avx512f,avx512vl,avx2,fma,f16c")))
#define TZ_ALWAYS TZ_TGT static inline __attribute__((always_inline))
#define TZ_V 6                  /* vectors per block (measured: 3, 4, 5, 6 gave 1.15, 1.25, 1.31, 1.34x) */
#define TZ_P 4                  /* row pairs per block: each activation conversion serves 8 rows */
#define SPAN 512                /* the 256-bit tile's column groups and its one-group limit */
#define SPAN_BYTES (16 << 10)

TZ_ALWAYS __m256 high8(__m512 v) { return _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)); }

/* columns i..i+7 of rows r (low half) and r + 1 (high half) as floats */
TZ_ALWAYS __m512 pair16(const uint8_t *row, size_t stride, int64_t i) {
    const __m128i lo = _mm_loadu_si128((const __m128i *)(row + 2 * i));
    const __m128i hi = _mm_loadu_si128((const __m128i *)(row + stride + 2 * i));
    return _mm512_cvtph_ps(_mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1));
}

/* columns i..i+7 of a vector in both halves */
TZ_ALWAYS __m512 acts16(const uint8_t *xv, int64_t i) {
    return _mm512_cvtph_ps(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(xv + 2 * i))));
}

TZ_ALWAYS void columns8(int64_t i, const uint8_t *w, size_t stride, const int P, const uint8_t *x, size_t x_stride,
                        const int V, __m512 acc[TZ_P][TZ_V]) {
    __m512 a[TZ_V];
    for (int v = 0; v < V; v++) a[v] = acts16(x + v * x_stride, i);
    for (int p = 0; p < P; p++) {
        const __m512 wp = pair16(w + (size_t)(2 * p) * stride, stride, i);
        for (int v = 0; v < V; v++) acc[p][v] = _mm512_fmadd_ps(wp, a[v], acc[p][v]);
    }
}

/* 2P rows (P = 1, 2 or 4 pairs) x V vectors: y[v * y_stride + r], as tile_f16_bf16_avx2.c's block: the four
 * phases are four passes over SPAN-column groups, each with its P x V chains. */
TZ_ALWAYS void block(int64_t n, const uint8_t *w, size_t stride, const int P, const uint8_t *x, size_t x_stride,
                     const int V, float *y, int64_t y_stride) {
    const int64_t n32 = n & ~(int64_t)31;
    const int64_t bytes = (int64_t)(2 * 2 * P + 2 * V) * n;
    const int64_t span = bytes <= SPAN_BYTES ? n32 : SPAN;
    __m512 phase[4][TZ_P][TZ_V], acc[TZ_P][TZ_V];
    for (int64_t c0 = 0; c0 < n32; c0 += span) {
        const int64_t c1 = n32 - c0 < span ? n32 : c0 + span;
        for (int k = 0; k < 4; k++) {
            for (int p = 0; p < P; p++)
                for (int v = 0; v < V; v++) acc[p][v] = c0 ? phase[k][p][v] : _mm512_setzero_ps();
            for (int64_t i = c0 + 8 * k; i < c1; i += 32) columns8(i, w, stride, P, x, x_stride, V, acc);
            for (int p = 0; p < P; p++)
                for (int v = 0; v < V; v++) phase[k][p][v] = acc[p][v];
        }
    }
    for (int p = 0; p < P; p++)
        for (int v = 0; v < V; v++)
            acc[p][v] = n32 ? _mm512_add_ps(_mm512_add_ps(phase[0][p][v], phase[1][p][v]),
                                            _mm512_add_ps(phase[2][p][v], phase[3][p][v]))
                            : _mm512_setzero_ps();
    int64_t i = n32;
    for (; i + 8 <= n; i += 8) columns8(i, w, stride, P, x, x_stride, V, acc);
    for (int p = 0; p < P; p++)
        for (int v = 0; v < V; v++)
            for (int h = 0; h < 2; h++) {
                const uint8_t *row = w + (size_t)(2 * p + h) * stride, *xv = x + v * x_stride;
                float tail = 0.0f;
                for (int64_t j = i; j < n; j++) {   /* the dots' scalar tail */
                    uint16_t wh, xh;
                    __builtin_memcpy(&wh, row + 2 * j, 2);
                    __builtin_memcpy(&xh, xv + 2 * j, 2);
                    tail += _cvtsh_ss(wh) * _cvtsh_ss(xh);
                }
                const __m256 half = h ? high8(acc[p][v]) : _mm512_castps512_ps256(acc[p][v]);
                y[(int64_t)v * y_stride + 2 * p + h] = ta_hsum(half) + tail;
            }
}

/* rows 2P at a time against every vector, TZ_V at a time */
TZ_ALWAYS void rows_all_vectors(int64_t n, const uint8_t *w, size_t stride, const int P, const uint8_t *x,
                                size_t x_stride, int n_vec, float *y, int64_t y_stride) {
    int v = 0;
    for (; v + TZ_V <= n_vec; v += TZ_V)
        block(n, w, stride, P, x + v * x_stride, x_stride, TZ_V, y + v * y_stride, y_stride);
    switch (n_vec - v) {
    case 5: block(n, w, stride, P, x + v * x_stride, x_stride, 5, y + v * y_stride, y_stride); break;
    case 4: block(n, w, stride, P, x + v * x_stride, x_stride, 4, y + v * y_stride, y_stride); break;
    case 3: block(n, w, stride, P, x + v * x_stride, x_stride, 3, y + v * y_stride, y_stride); break;
    case 2: block(n, w, stride, P, x + v * x_stride, x_stride, 2, y + v * y_stride, y_stride); break;
    case 1: block(n, w, stride, P, x + v * x_stride, x_stride, 1, y + v * y_stride, y_stride); break;
    default: break;
    }
}

/* An any_rows tile: a whole matmul chunk. One vector (decode), and CPUs without full-width 512-bit units, run the
 * 256-bit tile 4 rows at a time, as the matmul loop calls it on the other paths. */
TZ_TGT void tile_f16_f16_avx512(OW_TILE_ARGS) {
    int r = 0;
    if (n_vec >= 2 && ow_wide_tiles()) {
        for (; r + 2 * TZ_P <= nr; r += 2 * TZ_P)
            rows_all_vectors(n_cols, w + (size_t)r * w_stride, w_stride, TZ_P, x, x_stride, n_vec, y + r, y_stride);
        for (; r + 2 <= nr; r += 2)
            rows_all_vectors(n_cols, w + (size_t)r * w_stride, w_stride, 1, x, x_stride, n_vec, y + r, y_stride);
    }
    for (; r < nr; r += OW_ROW_TILE) {
        const int n = nr - r < OW_ROW_TILE ? nr - r : OW_ROW_TILE;
        tile_f16_f16_avx2(n_cols, w + (size_t)r * w_stride, w_stride, n, x, x_stride, n_vec, y + r, y_stride);
    }
}
#endif
