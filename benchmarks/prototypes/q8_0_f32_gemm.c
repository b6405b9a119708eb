/* Q8_0 prefill as an f32 GEMM (AVX2 + FMA) against the int8 tile, called as the executor calls a tile: chunks of
 * 128 rows, 64 vectors (max_batch), Q8_0 weights and Q8_0 activations in, floats out.
 * The question (docs/perf-log.md, entry 25): the int8 tile spends 5 instructions on the two FMA pipes per (row,
 * vector, 32 elements) (sign, maddubs, madd, cvt, fma); dequantized to floats (exact: int8 x fp16 fits a float)
 * the same work is 4 FMAs. How much of that 1.25x survives the dequantization?
 *   outer: 16 rows dequantized and transposed into a panel (k-major), 6 x 16 micro-kernel: per column 2 panel
 *          loads, 6 broadcast activations, 12 FMAs, no horizontal sums.
 *   dot:   rows and vectors dequantized as they are (row-major), 4 rows x 3 vectors, 12 chains of 8 lanes, one
 *          horizontal sum per (row, vector).
 *   bytes (-DBYTES): the outer form's panel transposed as bytes before widening.
 *   K=src/onewell/_native/kernels
 *   gcc -O3 -std=c11 -mavx2 -mfma -mf16c -DKC=256 [-DBYTES] -I$K -I$K/.. benchmarks/prototypes/q8_0_f32_gemm.c \
 *       $K/vec_dot_tile_avx2.c $K/vec_dot_avx2.c -o /tmp/qf -lm && /tmp/qf 4.0 */
#define _POSIX_C_SOURCE 200809L
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tile_avx2.h"   /* the kernel's dequantize and 8 x 8 transpose */

size_t ow_r16_prefetch(void) { return 0; }
size_t ow_f16_prefetch(void) { return 0; }
int ow_r16_row_stream(void) { return 1; }

#ifndef KC
#define KC 512
#endif
enum { PR = 16, PV = 6, CHUNK = 128, NVEC = 64 };
#define INL static inline __attribute__((always_inline))

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* columns k0..k0+kc of n Q8_0 rows (stride bytes apart) as floats, row-major, ld floats apart */
static void deq_rows(const uint8_t *x, size_t stride, int n, int64_t k0, int64_t kc, float *out, int64_t ld) {
    for (int v = 0; v < n; v++) {
        const ow_block_q8_0 *xb = (const ow_block_q8_0 *)(x + (size_t)v * stride);
        for (int64_t b = k0 / 32; b < (k0 + kc) / 32; b++) {
            const __m256 d = _mm256_set1_ps(_cvtsh_ss(xb[b].d));
            float *o = out + v * ld + b * 32 - k0;
            for (int j = 0; j < 32; j += 8) _mm256_storeu_ps(o + j, ta_dequant8_q8(xb[b].qs + j, d));
        }
    }
}

/* 16 Q8_0 rows, columns k0..k0+kc, as a k-major panel: panel[k * 16 + r] */
static void deq_panel(const uint8_t *w, size_t stride, int64_t k0, int64_t kc, float *panel) {
    for (int64_t b = k0 / 32; b < (k0 + kc) / 32; b++)
        for (int half = 0; half < 2; half++) {
            __m256 d[8];
            for (int i = 0; i < 8; i++)
                d[i] = _mm256_set1_ps(_cvtsh_ss(((const ow_block_q8_0 *)(w + (size_t)(8 * half + i) * stride))[b].d));
            for (int j = 0; j < 32; j += 8) {
                __m256 r[8];
                for (int i = 0; i < 8; i++)
                    r[i] = ta_dequant8_q8(((const ow_block_q8_0 *)(w + (size_t)(8 * half + i) * stride))[b].qs + j, d[i]);
                ta_transpose8_ps(r);
                for (int i = 0; i < 8; i++) _mm256_store_ps(panel + (b * 32 + j + i - k0) * PR + 8 * half, r[i]);
            }
        }
}


/* The same panel, the quants transposed as bytes first (16 rows x 32 columns: 64 unpacks for 512 quants instead
 * of 24 float shuffles per 64), then widened, converted and scaled per column */
static const ow_block_q8_0 zero_block;

static void deq_panel_bytes(const uint8_t *w, size_t stride, int64_t k0, int64_t kc, float *panel) {
    uint8_t t[16][32] __attribute__((aligned(32)));
    for (int64_t b = k0 / 32; b < (k0 + kc) / 32; b++) {
        const ow_block_q8_0 *blk[16];
        uint16_t h[16];
        for (int i = 0; i < 16; i++) {
            blk[i] = (const ow_block_q8_0 *)(w + (size_t)i * stride) + b;
            h[i] = blk[i]->d;
        }
        __m256i r[16], a[8], bb[8], x[16];
        for (int i = 0; i < 16; i++) r[i] = _mm256_loadu_si256((const __m256i *)blk[i]->qs);
        for (int p = 0; p < 8; p++) {
            a[p] = _mm256_unpacklo_epi8(r[2 * p], r[2 * p + 1]);
            bb[p] = _mm256_unpackhi_epi8(r[2 * p], r[2 * p + 1]);
        }
        __m256i q4[4][4];   /* [column quarter][row quad]: dwords = 4 rows of one column */
        for (int q = 0; q < 4; q++) {
            q4[0][q] = _mm256_unpacklo_epi16(a[2 * q], a[2 * q + 1]);
            q4[1][q] = _mm256_unpackhi_epi16(a[2 * q], a[2 * q + 1]);
            q4[2][q] = _mm256_unpacklo_epi16(bb[2 * q], bb[2 * q + 1]);
            q4[3][q] = _mm256_unpackhi_epi16(bb[2 * q], bb[2 * q + 1]);
        }
        for (int c = 0; c < 4; c++)
            for (int t2 = 0; t2 < 2; t2++) {   /* columns 4c + 2 t2, +1 */
                __m256i g[2];
                for (int s2 = 0; s2 < 2; s2++)
                    g[s2] = t2 ? _mm256_unpackhi_epi32(q4[c][2 * s2], q4[c][2 * s2 + 1])
                               : _mm256_unpacklo_epi32(q4[c][2 * s2], q4[c][2 * s2 + 1]);
                x[4 * c + 2 * t2] = _mm256_unpacklo_epi64(g[0], g[1]);
                x[4 * c + 2 * t2 + 1] = _mm256_unpackhi_epi64(g[0], g[1]);
            }
        for (int j = 0; j < 16; j++) _mm256_store_si256((__m256i *)t[j], x[j]);
        const __m256 d0 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)h));
        const __m256 d1 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(h + 8)));
        for (int k = 0; k < 32; k++) {
            const int8_t *col = (const int8_t *)t[k % 16] + 16 * (k / 16);
            float *p = panel + (b * 32 + k - k0) * PR;
            _mm256_store_ps(p, ta_dequant8_q8(col, d0));
            _mm256_store_ps(p + 8, ta_dequant8_q8(col + 8, d1));
        }
    }
}

INL void micro(const float *panel, int64_t kc, const float *x, int64_t ld, float *y, int64_t ys, int first,
               const int NV) {
    __m256 acc[PV][2];
    for (int v = 0; v < NV; v++) acc[v][0] = acc[v][1] = _mm256_setzero_ps();
    for (int64_t k = 0; k < kc; k++) {
        const __m256 w0 = _mm256_load_ps(panel + k * PR), w1 = _mm256_load_ps(panel + k * PR + 8);
        for (int v = 0; v < NV; v++) {
            const __m256 a = _mm256_broadcast_ss(x + v * ld + k);
            acc[v][0] = _mm256_fmadd_ps(w0, a, acc[v][0]);
            acc[v][1] = _mm256_fmadd_ps(w1, a, acc[v][1]);
        }
    }
    for (int v = 0; v < NV; v++) {
        float *yv = y + v * ys;
        if (!first) {
            acc[v][0] = _mm256_add_ps(acc[v][0], _mm256_loadu_ps(yv));
            acc[v][1] = _mm256_add_ps(acc[v][1], _mm256_loadu_ps(yv + 8));
        }
        _mm256_storeu_ps(yv, acc[v][0]);
        _mm256_storeu_ps(yv + 8, acc[v][1]);
    }
}

static float xf[NVEC * KC] __attribute__((aligned(64)));
static float panel[PR * KC] __attribute__((aligned(64)));

static void tile_outer(OW_TILE_ARGS) {   /* nr a multiple of 16, n_vec <= NVEC, n_cols a multiple of 32 */
    for (int64_t k0 = 0; k0 < n_cols; k0 += KC) {
        const int64_t kc = n_cols - k0 < KC ? n_cols - k0 : KC;
        deq_rows(x, x_stride, n_vec, k0, kc, xf, KC);
        for (int r0 = 0; r0 < nr; r0 += PR) {
#ifdef BYTES
            deq_panel_bytes(w + (size_t)r0 * w_stride, w_stride, k0, kc, panel);
#else
            deq_panel(w + (size_t)r0 * w_stride, w_stride, k0, kc, panel);
#endif
            int v = 0;
            for (; v + PV <= n_vec; v += PV) micro(panel, kc, xf + v * KC, KC, y + v * y_stride + r0, y_stride, k0 == 0, PV);
            float *yv = y + v * y_stride + r0;
            switch (n_vec - v) {
            case 5: micro(panel, kc, xf + v * KC, KC, yv, y_stride, k0 == 0, 5); break;
            case 4: micro(panel, kc, xf + v * KC, KC, yv, y_stride, k0 == 0, 4); break;
            case 3: micro(panel, kc, xf + v * KC, KC, yv, y_stride, k0 == 0, 3); break;
            case 2: micro(panel, kc, xf + v * KC, KC, yv, y_stride, k0 == 0, 2); break;
            case 1: micro(panel, kc, xf + v * KC, KC, yv, y_stride, k0 == 0, 1); break;
            }
        }
    }
}

/* ---- dot form ---- */
static float wf[4 * KC] __attribute__((aligned(64)));

INL float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

INL void dots(const float *wr, const float *xv, int64_t kc, float *y, int64_t ys, int first, const int NR, const int NV) {
    __m256 acc[4][3];
    for (int r = 0; r < NR; r++)
        for (int v = 0; v < NV; v++) acc[r][v] = _mm256_setzero_ps();
    for (int64_t k = 0; k < kc; k += 8) {
        __m256 a[3];
        for (int v = 0; v < NV; v++) a[v] = _mm256_load_ps(xv + v * KC + k);
        for (int r = 0; r < NR; r++) {
            const __m256 wv = _mm256_load_ps(wr + r * KC + k);
            for (int v = 0; v < NV; v++) acc[r][v] = _mm256_fmadd_ps(wv, a[v], acc[r][v]);
        }
    }
    for (int v = 0; v < NV; v++)
        for (int r = 0; r < NR; r++) y[v * ys + r] = (first ? 0.0f : y[v * ys + r]) + hsum(acc[r][v]);
}

static void tile_dot(OW_TILE_ARGS) {   /* nr a multiple of 4 */
    for (int64_t k0 = 0; k0 < n_cols; k0 += KC) {
        const int64_t kc = n_cols - k0 < KC ? n_cols - k0 : KC;
        deq_rows(x, x_stride, n_vec, k0, kc, xf, KC);
        for (int r0 = 0; r0 < nr; r0 += 4) {
            deq_rows(w + (size_t)r0 * w_stride, w_stride, 4, k0, kc, wf, KC);
            int v = 0;
            for (; v + 3 <= n_vec; v += 3) dots(wf, xf + v * KC, kc, y + v * y_stride + r0, y_stride, k0 == 0, 4, 3);
            if (n_vec - v == 2) dots(wf, xf + v * KC, kc, y + v * y_stride + r0, y_stride, k0 == 0, 4, 2);
            if (n_vec - v == 1) dots(wf, xf + v * KC, kc, y + v * y_stride + r0, y_stride, k0 == 0, 4, 1);
        }
    }
}

typedef void (*tile_fn)(OW_TILE_ARGS);

static double run(tile_fn f, const uint8_t *w, size_t ws, int64_t rows, int64_t cols, const uint8_t *x, size_t xs,
                  float *y) {
    double best = 1e9;
    for (int rep = 0; rep < 7; rep++) {
        const double t0 = now();
        for (int64_t r = 0; r < rows; r += CHUNK) f(cols, w + (size_t)r * ws, ws, CHUNK, x, xs, NVEC, y + r, rows);
        const double t = now() - t0;
        best = t < best ? t : best;
    }
    return best;
}

static void shape(int64_t rows, int64_t cols, double ghz) {
    const int64_t nb = cols / 32;
    const size_t ws = (size_t)nb * sizeof(ow_block_q8_0);
    uint8_t *w = malloc(ws * (size_t)rows), *x = malloc(ws * NVEC);
    float *y0 = malloc(sizeof(float) * rows * NVEC), *y1 = malloc(sizeof(float) * rows * NVEC);
    for (int64_t i = 0; i < rows * nb; i++) {
        ow_block_q8_0 *b = (ow_block_q8_0 *)w + i;
        b->d = _cvtss_sh(0.001f * (float)(1 + rand() % 50), 0);
        for (int j = 0; j < 32; j++) b->qs[j] = (int8_t)(rand() % 255 - 127);
    }
    for (int64_t i = 0; i < NVEC * nb; i++) {
        ow_block_q8_0 *b = (ow_block_q8_0 *)x + i;
        b->d = _cvtss_sh(0.01f * (float)(1 + rand() % 50), 0);
        for (int j = 0; j < 32; j++) b->qs[j] = (int8_t)(rand() % 255 - 127);
    }
    const double macs = (double)rows * cols * NVEC;
    const char *names[] = {"int8 tile", "f32 outer", "f32 dot"};
    const tile_fn fns[] = {vec_dot_q8_0_q8_0_tile_avx2, tile_outer, tile_dot};
    double t_int8 = 0;
    for (int i = 0; i < 3; i++) {
        const double t = run(fns[i], w, ws, rows, cols, x, ws, i ? y1 : y0);
        double err = 0, scale = 0;
        for (int64_t j = 0; j < rows * NVEC; j++) {
            err = fmax(err, fabs((double)y1[j] - y0[j]));
            scale = fmax(scale, fabs(y0[j]));
        }
        if (!i) t_int8 = t;
        printf("%5ld x %5ld, %d vectors, %-9s: %5.2f MAC/cycle, %6.2f ms, %.2fx the int8 tile, max |diff| / max |y| %.2g\n",
               (long)rows, (long)cols, NVEC, names[i], macs / (t * ghz * 1e9), t * 1e3, t_int8 / t, i ? err / scale : 0.0);
    }
    free(w); free(x); free(y0); free(y1);
}

int main(int argc, char **argv) {
    const double ghz = argc > 1 ? atof(argv[1]) : 3.0;
    shape(4864, 896, ghz);    /* Qwen2.5-0.5B gate / up */
    shape(896, 4864, ghz);    /* down */
    shape(1152, 896, ghz);    /* qkv */
    return 0;
}
