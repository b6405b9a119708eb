/* Q8_0 prefill tile, AVX2: is an int16 inner loop (vpmaddwd only) faster than the sign + vpmaddubsw + vpmaddwd
 * one the tile uses (vec_dot_tile_avx2.c, ta_dots_signed)? On Zen 4 vpsignb, vpmaddubsw, vpmaddwd and vfmadd share
 * FP0/FP1 (docs/perf-log.md, entry 20): 4 of them per (row, vector, 32 elements) now; with both operands widened
 * to int16 ahead of time it is 2 vpmaddwd + 1 vfmadd (3), at the cost of twice the bytes loaded per block.
 * Lanes: the 32 bytes go to two int16 vectors A = elements {4i, 4i+1}, B = {4i+2, 4i+3} (i = 0..7), so
 * vpmaddwd(A) + vpmaddwd(B) holds in lane i the sum of elements 4i..4i+3, the same int32 lanes as the byte
 * kernel's: the results must be bit-identical, and are checked.
 *   gcc -O3 -mavx2 -mfma -mf16c benchmarks/prototypes/q8_0_int16_tile.c -o /tmp/q16 && /tmp/q16 [cols] [nvec]
 * Prints ns per (row, vector, 32 elements) for each variant, interleaved, median of 11 rounds. */
#define _POSIX_C_SOURCE 200809L
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define QK 32
#define NV_MAX 4
enum { ROWS = 32, ROUNDS = 11 };

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* scale products of 8 blocks for NR rows x NV vectors (as ta_scale_products) */
static inline void products(const float *dw0, const float *dw1, const float *xs, int64_t nb, int64_t b0,
                            float prod[2][NV_MAX][8], int NV) {
    const __m256 d0 = _mm256_loadu_ps(dw0 + b0), d1 = _mm256_loadu_ps(dw1 + b0);
    for (int v = 0; v < NV; v++) {
        const __m256 x = _mm256_loadu_ps(xs + v * nb + b0);
        _mm256_store_ps(prod[0][v], _mm256_mul_ps(d0, x));
        _mm256_store_ps(prod[1][v], _mm256_mul_ps(d1, x));
    }
}

/* today's tile: 2 rows of int8 quants x NV int8 vectors (32 bytes per block, nb blocks, contiguous) */
static void dots_i8(const int8_t *w0, const int8_t *w1, const float *dw0, const float *dw1, const int8_t *x,
                    const float *xs, int64_t nb, float *y, const int NV) {
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[2][NV_MAX];
    float prod[2][NV_MAX][8] __attribute__((aligned(32)));
    for (int v = 0; v < NV; v++) acc[0][v] = acc[1][v] = _mm256_setzero_ps();
    for (int64_t b0 = 0; b0 < nb; b0 += 8) {
        products(dw0, dw1, xs, nb, b0, prod, NV);
        for (int64_t b = b0; b < b0 + 8 && b < nb; b++) {
            const __m256i q0 = _mm256_load_si256((const __m256i *)(w0 + QK * b));
            const __m256i q1 = _mm256_load_si256((const __m256i *)(w1 + QK * b));
            const __m256i a0 = _mm256_sign_epi8(q0, q0), a1 = _mm256_sign_epi8(q1, q1);
            for (int v = 0; v < NV; v++) {
                const __m256i a = _mm256_load_si256((const __m256i *)(x + (v * nb + b) * QK));
                const __m256i p0 = _mm256_madd_epi16(_mm256_maddubs_epi16(a0, _mm256_sign_epi8(a, q0)), ones);
                const __m256i p1 = _mm256_madd_epi16(_mm256_maddubs_epi16(a1, _mm256_sign_epi8(a, q1)), ones);
                acc[0][v] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p0), _mm256_broadcast_ss(&prod[0][v][b - b0]), acc[0][v]);
                acc[1][v] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p1), _mm256_broadcast_ss(&prod[1][v][b - b0]), acc[1][v]);
            }
        }
    }
    for (int v = 0; v < NV; v++) { y[2 * v] = hsum(acc[0][v]); y[2 * v + 1] = hsum(acc[1][v]); }
}

/* int16: 64 bytes per block (A then B), both operands widened ahead of time */
static void dots_i16(const int16_t *w0, const int16_t *w1, const float *dw0, const float *dw1, const int16_t *x,
                     const float *xs, int64_t nb, float *y, const int NV) {
    __m256 acc[2][NV_MAX];
    float prod[2][NV_MAX][8] __attribute__((aligned(32)));
    for (int v = 0; v < NV; v++) acc[0][v] = acc[1][v] = _mm256_setzero_ps();
    for (int64_t b0 = 0; b0 < nb; b0 += 8) {
        products(dw0, dw1, xs, nb, b0, prod, NV);
        for (int64_t b = b0; b < b0 + 8 && b < nb; b++) {
            const __m256i wa0 = _mm256_load_si256((const __m256i *)(w0 + 2 * QK * b));
            const __m256i wb0 = _mm256_load_si256((const __m256i *)(w0 + 2 * QK * b + 16));
            const __m256i wa1 = _mm256_load_si256((const __m256i *)(w1 + 2 * QK * b));
            const __m256i wb1 = _mm256_load_si256((const __m256i *)(w1 + 2 * QK * b + 16));
            for (int v = 0; v < NV; v++) {
                const int16_t *xv = x + (v * nb + b) * 2 * QK;
                const __m256i xa = _mm256_load_si256((const __m256i *)xv);
                const __m256i xb = _mm256_load_si256((const __m256i *)(xv + 16));
                const __m256i p0 = _mm256_add_epi32(_mm256_madd_epi16(wa0, xa), _mm256_madd_epi16(wb0, xb));
                const __m256i p1 = _mm256_add_epi32(_mm256_madd_epi16(wa1, xa), _mm256_madd_epi16(wb1, xb));
                acc[0][v] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p0), _mm256_broadcast_ss(&prod[0][v][b - b0]), acc[0][v]);
                acc[1][v] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p1), _mm256_broadcast_ss(&prod[1][v][b - b0]), acc[1][v]);
            }
        }
    }
    for (int v = 0; v < NV; v++) { y[2 * v] = hsum(acc[0][v]); y[2 * v + 1] = hsum(acc[1][v]); }
}

/* int16 rows (widened once per row), int8 vectors widened in the loop: vpmovsxbw per (vector, block), shared by
 * the two rows; the rows' layout is permuted to match the plain widening (lo = elements 0-15, hi = 16-31), so the
 * int32 lanes are {2i, 2i+1, 16+2i, 17+2i}: NOT the byte kernel's lanes (not bit-identical; timing only) */
static void dots_i16_widen_x(const int16_t *w0, const int16_t *w1, const float *dw0, const float *dw1,
                             const int8_t *x, const float *xs, int64_t nb, float *y, const int NV) {
    __m256 acc[2][NV_MAX];
    float prod[2][NV_MAX][8] __attribute__((aligned(32)));
    for (int v = 0; v < NV; v++) acc[0][v] = acc[1][v] = _mm256_setzero_ps();
    for (int64_t b0 = 0; b0 < nb; b0 += 8) {
        products(dw0, dw1, xs, nb, b0, prod, NV);
        for (int64_t b = b0; b < b0 + 8 && b < nb; b++) {
            const __m256i wa0 = _mm256_load_si256((const __m256i *)(w0 + 2 * QK * b));
            const __m256i wb0 = _mm256_load_si256((const __m256i *)(w0 + 2 * QK * b + 16));
            const __m256i wa1 = _mm256_load_si256((const __m256i *)(w1 + 2 * QK * b));
            const __m256i wb1 = _mm256_load_si256((const __m256i *)(w1 + 2 * QK * b + 16));
            for (int v = 0; v < NV; v++) {
                const int8_t *xv = x + (v * nb + b) * QK;
                const __m256i xa = _mm256_cvtepi8_epi16(_mm_load_si128((const __m128i *)xv));
                const __m256i xb = _mm256_cvtepi8_epi16(_mm_load_si128((const __m128i *)(xv + 16)));
                const __m256i p0 = _mm256_add_epi32(_mm256_madd_epi16(wa0, xa), _mm256_madd_epi16(wb0, xb));
                const __m256i p1 = _mm256_add_epi32(_mm256_madd_epi16(wa1, xa), _mm256_madd_epi16(wb1, xb));
                acc[0][v] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p0), _mm256_broadcast_ss(&prod[0][v][b - b0]), acc[0][v]);
                acc[1][v] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p1), _mm256_broadcast_ss(&prod[1][v][b - b0]), acc[1][v]);
            }
        }
    }
    for (int v = 0; v < NV; v++) { y[2 * v] = hsum(acc[0][v]); y[2 * v + 1] = hsum(acc[1][v]); }
}

/* 32 bytes -> A (elements 4i, 4i+1) and B (4i+2, 4i+3) as int16 */
static void widen_ab(const int8_t *q, int16_t *out) {
    for (int i = 0; i < 8; i++) {
        out[2 * i] = q[4 * i]; out[2 * i + 1] = q[4 * i + 1];
        out[16 + 2 * i] = q[4 * i + 2]; out[16 + 2 * i + 1] = q[4 * i + 3];
    }
}

int main(int argc, char **argv) {
    const int64_t cols = argc > 1 ? atoll(argv[1]) : 896, nvec = argc > 2 ? atoll(argv[2]) : 64;
    const int64_t nb = cols / QK;
    int8_t *w8 = aligned_alloc(64, ROWS * cols), *x8 = aligned_alloc(64, nvec * cols);
    int16_t *w16 = aligned_alloc(64, 4 * ROWS * cols), *x16 = aligned_alloc(64, 4 * nvec * cols);
    int16_t *w16p = aligned_alloc(64, 4 * ROWS * cols);
    float *dw = malloc(sizeof(float) * (ROWS * nb + 8)), *xs = malloc(sizeof(float) * (nvec * nb + 8));
    float *y[3];
    for (int k = 0; k < 3; k++) y[k] = malloc(sizeof(float) * ROWS * nvec);
    srand(1);
    for (int64_t i = 0; i < ROWS * cols; i++) w8[i] = (int8_t)(rand() % 255 - 127);
    for (int64_t i = 0; i < nvec * cols; i++) x8[i] = (int8_t)(rand() % 255 - 127);
    for (int64_t i = 0; i < ROWS * nb + 8; i++) dw[i] = (float)(rand() % 1000) * 1e-5f;
    for (int64_t i = 0; i < nvec * nb + 8; i++) xs[i] = (float)(rand() % 1000) * 1e-4f;
    for (int64_t b = 0; b < ROWS * nb; b++) {
        widen_ab(w8 + QK * b, w16 + 2 * QK * b);
        for (int j = 0; j < QK; j++) w16p[2 * QK * b + j] = w8[QK * b + j];
    }
    for (int64_t b = 0; b < nvec * nb; b++) widen_ab(x8 + QK * b, x16 + 2 * QK * b);
    /* one pass of a variant: every row pair against every vector, 4 at a time */
#define PASS(k, call)                                                                                        \
    for (int r = 0; r < ROWS; r += 2)                                                                        \
        for (int64_t v = 0; v < nvec; v += NV_MAX) {                                                         \
            float out[2 * NV_MAX];                                                                           \
            call;                                                                                            \
            for (int j = 0; j < NV_MAX; j++) { y[k][(v + j) * ROWS + r] = out[2 * j]; y[k][(v + j) * ROWS + r + 1] = out[2 * j + 1]; } \
        }
#define RUN_I8 PASS(0, dots_i8(w8 + r * cols, w8 + (r + 1) * cols, dw + r * nb, dw + (r + 1) * nb, x8 + v * cols, xs + v * nb, nb, out, NV_MAX))
#define RUN_I16 PASS(1, dots_i16(w16 + 2 * r * cols, w16 + 2 * (r + 1) * cols, dw + r * nb, dw + (r + 1) * nb, x16 + 2 * v * cols, xs + v * nb, nb, out, NV_MAX))
#define RUN_WX PASS(2, dots_i16_widen_x(w16p + 2 * r * cols, w16p + 2 * (r + 1) * cols, dw + r * nb, dw + (r + 1) * nb, x8 + v * cols, xs + v * nb, nb, out, NV_MAX))
    RUN_I8 RUN_I16 RUN_WX
    if (memcmp(y[0], y[1], sizeof(float) * ROWS * nvec)) { printf("i16 NOT bit-identical to i8\n"); return 1; }
    double t[3][ROUNDS];
    const int iters = (int)(1e8 / ((double)ROWS * cols * nvec)) + 1;
    for (int round = 0; round < ROUNDS; round++) {
        double t0 = now();
        for (int it = 0; it < iters; it++) { RUN_I8 }
        double t1 = now();
        for (int it = 0; it < iters; it++) { RUN_I16 }
        double t2 = now();
        for (int it = 0; it < iters; it++) { RUN_WX }
        double t3 = now();
        const double per = (double)iters * ROWS * nvec * nb;
        t[0][round] = (t1 - t0) / per * 1e9; t[1][round] = (t2 - t1) / per * 1e9; t[2][round] = (t3 - t2) / per * 1e9;
    }
    const char *names[3] = {"i8 (today)", "i16 both widened", "i16 rows, x widened in loop"};
    for (int k = 0; k < 3; k++) {   /* median */
        for (int i = 0; i < ROUNDS; i++)
            for (int j = i + 1; j < ROUNDS; j++)
                if (t[k][j] < t[k][i]) { double s = t[k][i]; t[k][i] = t[k][j]; t[k][j] = s; }
        printf("%-30s %.3f ns per (row, vector, block)  (%.2fx of today)\n", names[k], t[k][ROUNDS / 2],
               t[0][ROUNDS / 2] / t[k][ROUNDS / 2]);
    }
    printf("cols %lld, %lld vectors, %d rows; i16 bit-identical to i8: yes\n", (long long)cols, (long long)nvec, ROWS);
    return 0;
}
