/* F16 and BF16 weights for several activation vectors per weight load (AVX2): prefill and encoder steps.
 * 4 rows x 3 vectors run 12 independent chains, and each loaded weight chunk (and its widening to f32) serves 3
 * vectors. F16 weights meet F16 activations, BF16 weights F32 activations (the two dots' operands). Every
 * (row, vector) result is computed with exactly the dot's operations in the dot's order (vec_dot_x86_256.inc's
 * tile_f16 and vec_dot_q23k_bf16_x86_256.inc's tile_bf16: four phase chains, their sum, the last 8-column
 * steps, the same horizontal sum and scalar tail), so the result is bit-identical to vec_dot_f16_f16_avx2 /
 * vec_dot_bf16_f32_avx2: batched = one token at a time.
 * One vector: the dot itself (it streams the rows for decode). */
#include "vec_dot.h"

#if OW_X86_KERNELS
#include "tile_avx2.h"   /* ta_hsum (the dots' horizontal sum), ta_half8, ta_half_acts8 */

#define OW_TGT __attribute__((target("avx2,fma,f16c")))
#define OW_ALWAYS OW_TGT static inline __attribute__((always_inline))
#define TILE_V 3
#define SPAN 512                /* columns per group of the four phase passes (block) */
#define SPAN_BYTES (16 << 10)   /* rows and vectors up to this size (Qwen's 896 columns) go in one group */

/* column j of row times column j of a vector, as the dots' scalar tails compute it */
OW_ALWAYS float product1(const uint8_t *row, const uint8_t *xv, int64_t j, const int BF16) {
    uint16_t h;
    __builtin_memcpy(&h, row + 2 * j, 2);
    if (BF16) return ow_bf16_to_fp32(h) * ((const float *)xv)[j];
    uint16_t a;
    __builtin_memcpy(&a, xv + 2 * j, 2);
    return _cvtsh_ss(h) * _cvtsh_ss(a);
}

/* Columns i..i+7 of R rows x V vectors into acc[r][v]: each weight chunk widened once for the V vectors */
OW_ALWAYS void columns8(int64_t i, const uint8_t *w, size_t stride, const int R, const uint8_t *x, size_t x_stride,
                        const int V, __m256 acc[4][TILE_V], const int BF16) {
    __m256 a[TILE_V];
    for (int v = 0; v < V; v++) a[v] = ta_half_acts8(x + v * x_stride, i, BF16);
    for (int r = 0; r < R; r++) {
        const __m256 wr = ta_half8(w + (size_t)r * stride, i, BF16);
        for (int v = 0; v < V; v++) acc[r][v] = _mm256_fmadd_ps(wr, a[v], acc[r][v]);
    }
}

/* R rows (1..4) x V vectors (1..TILE_V): y[v * y_stride + r]. R, V and BF16 are constants at each call site.
 * The dot's order: four chains per (row, vector), one per 8-column phase of every 32 columns, summed
 * (0 + 1) + (2 + 3), then the last columns 8 and 1 at a time. 4 x 3 x 4 chains do not fit the 16 registers, so
 * the phases are four passes, each with the 12 chains of one phase, parked in `phase` between passes. The passes
 * go over SPAN columns at a time (the rows' and vectors' 7-10 KiB stay in L1; each pass reads a quarter of every
 * line): four passes over whole rows of 4,864 columns (68 KiB) read every line from L2 four times and ran at half
 * the speed (docs/perf-log.md, entry 23). Each chain still takes its columns in order: the same floats. */
OW_ALWAYS void block(int64_t n, const uint8_t *w, size_t stride, const int R, const uint8_t *x, size_t x_stride,
                     const int V, float *y, int64_t y_stride, const int BF16) {
    const int64_t n32 = n & ~(int64_t)31;
    const int64_t bytes = (int64_t)(2 * R + (BF16 ? 4 : 2) * V) * n;
    const int64_t span = bytes <= SPAN_BYTES ? n32 : SPAN;   /* all in L1 already: one group */
    __m256 phase[4][4][TILE_V], acc[4][TILE_V];
    for (int64_t c0 = 0; c0 < n32; c0 += span) {
        const int64_t c1 = n32 - c0 < span ? n32 : c0 + span;
        for (int k = 0; k < 4; k++) {
            for (int r = 0; r < R; r++)
                for (int v = 0; v < V; v++) acc[r][v] = c0 ? phase[k][r][v] : _mm256_setzero_ps();
            for (int64_t i = c0 + 8 * k; i < c1; i += 32) columns8(i, w, stride, R, x, x_stride, V, acc, BF16);
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
    for (; i + 8 <= n; i += 8) columns8(i, w, stride, R, x, x_stride, V, acc, BF16);
    for (int r = 0; r < R; r++)
        for (int v = 0; v < V; v++) {
            float tail = 0.0f;
            for (int64_t j = i; j < n; j++) tail += product1(w + (size_t)r * stride, x + v * x_stride, j, BF16);
            y[(int64_t)v * y_stride + r] = ta_hsum(acc[r][v]) + tail;
        }
}

/* The vectors TILE_V at a time, then 2 or 1; each group over the nr rows */
OW_ALWAYS void tile(OW_TILE_ARGS, const int BF16) {
    const uint8_t *xb = x;
    int v = 0;
#define OW_VECTORS(V)                                                                                          \
    switch (nr) {                                                                                              \
    case 4: block(n_cols, w, w_stride, 4, xb + v * x_stride, x_stride, V, y + v * y_stride, y_stride, BF16); break; \
    case 3: block(n_cols, w, w_stride, 3, xb + v * x_stride, x_stride, V, y + v * y_stride, y_stride, BF16); break; \
    case 2: block(n_cols, w, w_stride, 2, xb + v * x_stride, x_stride, V, y + v * y_stride, y_stride, BF16); break; \
    default: block(n_cols, w, w_stride, 1, xb + v * x_stride, x_stride, V, y + v * y_stride, y_stride, BF16); break; \
    }
    for (; v + TILE_V <= n_vec; v += TILE_V) { OW_VECTORS(TILE_V) }
    if (n_vec - v == 2) { OW_VECTORS(2) }
    else if (n_vec - v == 1) { OW_VECTORS(1) }
#undef OW_VECTORS
}

OW_TGT void tile_f16_f16_avx2(OW_TILE_ARGS) {
    if (n_vec == 1) {   /* decode: the streaming dot */
        float s[OW_ROW_TILE];
        vec_dot_f16_f16_avx2(n_cols, w, w_stride, nr, x, s);
        for (int r = 0; r < nr; r++) y[r] = s[r];
        return;
    }
    tile(n_cols, w, w_stride, nr, x, x_stride, n_vec, y, y_stride, 0);
}

OW_TGT void tile_bf16_f32_avx2(OW_TILE_ARGS) {
    if (n_vec == 1) {
        float s[OW_ROW_TILE];
        vec_dot_bf16_f32_avx2(n_cols, w, w_stride, nr, x, s);
        for (int r = 0; r < nr; r++) y[r] = s[r];
        return;
    }
    tile(n_cols, w, w_stride, nr, x, x_stride, n_vec, y, y_stride, 1);
}
#endif
