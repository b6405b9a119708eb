/* The float GEMM of the AVX2 paths, shared by the weight types that use it (gemm_q8_0_f32_avx2.c,
 * gemm_f16_f32_avx2.c): weights and activations converted to f32, multiplied with FMAs.
 *
 * Shape: panels of 16 rows, converted and transposed column-major (panel[k][16]), times 6 vectors at a time: per
 * column 2 panel loads, 6 broadcast activations, 12 FMAs into 12 accumulators (BLIS's 6 x 16 on AVX2). A type file
 * supplies how its weights become a panel part (8 rows x 32 columns) and its activations floats; conversions that
 * are exact (int8 x fp16 scale, fp16) leave float rounding as the only difference from the type's dot kernel.
 * A vector's result does not depend on which other vectors share its batch (each output is one float chain in its
 * own lane). Include only from files compiled with OW_X86_KERNELS. */
#ifndef ONEWELL_GEMM_F32_AVX2_H
#define ONEWELL_GEMM_F32_AVX2_H

#include "tile_avx2.h"

#define GF_ROWS 16     /* panel rows: two ymm per column */
#define GF_VECS 6      /* vectors per micro-kernel call: 12 accumulators + 2 panel + 1 broadcast registers */
#define GF_KC 256      /* columns per pass: the panel (16 KiB) stays in L1, the vectors' floats (128 KiB) in L2 */
#define GF_VGROUP 128  /* vectors whose floats are made per pass: each panel serves up to this many */
#define GF_INLINE TA_INLINE

/* columns k0..k0+kc of n activation vectors (x_stride bytes apart) as floats, GF_KC apart in out */
typedef void (*gf_vectors_fn)(const uint8_t *x, size_t x_stride, int n, int64_t k0, int64_t kc, float *out);
/* part `part` of the panel of n (1..16) rows over columns k0..k0+kc: block b (of kc / 32) of rows 8 * half ..
 * 8 * half + 7, part = half * (kc / 32) + b, into panel[k * 16 + r]; rows n..15 are zeros */
typedef void (*gf_part_fn)(const uint8_t *w, size_t w_stride, int n, int64_t k0, int64_t kc, int part, float *panel);

/* parts of a panel of kc columns */
GF_INLINE int gf_panel_parts(int64_t kc) { return (int)(2 * (kc / OW_QK)); }

/* 8 rows of 8 floats (one per row, c[i] = row i) stored as panel columns: transposed, 16 floats apart */
GF_INLINE void gf_store_transposed(__m256 c[8], float *p) {
    ta_transpose8_ps(c);
    for (int i = 0; i < 8; i++) _mm256_store_ps(p + i * GF_ROWS, c[i]);
}

/* NV vectors (floats xf, GF_KC apart) times the panel's kc columns into y[v * y_stride + 0..15] (rows past
 * `rows` left alone: masked); the first pass stores, the later ones add */
GF_INLINE void gf_micro(const float *panel, int64_t kc, const float *xf, float *y, int64_t y_stride, int first,
                        __m256i m0, __m256i m1, const int NV) {
    __m256 acc[GF_VECS][2];
    for (int v = 0; v < NV; v++) acc[v][0] = acc[v][1] = _mm256_setzero_ps();
    for (int64_t k = 0; k < kc; k++) {
        const __m256 w0 = _mm256_load_ps(panel + k * GF_ROWS), w1 = _mm256_load_ps(panel + k * GF_ROWS + 8);
        for (int v = 0; v < NV; v++) {
            const __m256 a = _mm256_broadcast_ss(xf + (int64_t)v * GF_KC + k);
            acc[v][0] = _mm256_fmadd_ps(w0, a, acc[v][0]);
            acc[v][1] = _mm256_fmadd_ps(w1, a, acc[v][1]);
        }
    }
    for (int v = 0; v < NV; v++) {
        float *yv = y + (int64_t)v * y_stride;
        if (!first) {
            acc[v][0] = _mm256_add_ps(acc[v][0], _mm256_maskload_ps(yv, m0));
            acc[v][1] = _mm256_add_ps(acc[v][1], _mm256_maskload_ps(yv + 8, m1));
        }
        _mm256_maskstore_ps(yv, m0, acc[v][0]);
        _mm256_maskstore_ps(yv + 8, m1, acc[v][1]);
    }
}

/* lanes 0..n-1 of 8 set */
GF_INLINE __m256i gf_mask(int n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* A panel's place in a call's sequence: rows r0.. (rows of them) of the pass over columns k0..k0+kc */
typedef struct {
    int64_t k0, kc, r0;
    int rows;
} gf_step;

GF_INLINE gf_step gf_first_step(int64_t n_cols, int64_t nr) {
    gf_step s = {0, n_cols < GF_KC ? n_cols : GF_KC, 0, nr < GF_ROWS ? (int)nr : GF_ROWS};
    return s;
}

/* the next panel: the next 16 rows of this pass, else the first 16 of the next pass; kc = 0 after the last */
GF_INLINE gf_step gf_next_step(gf_step s, int64_t n_cols, int64_t nr) {
    s.r0 += GF_ROWS;
    if (s.r0 >= nr) {
        s.r0 = 0;
        s.k0 += s.kc;
        s.kc = n_cols - s.k0 < GF_KC ? n_cols - s.k0 : GF_KC;
    }
    s.rows = nr - s.r0 < GF_ROWS ? (int)(nr - s.r0) : GF_ROWS;
    return s;
}

/* The GEMM of n_vec >= OW_FLOAT_GEMM_MIN_VECS vectors: `vectors` writes columns k0..k0+kc of n vectors as floats
 * (GF_KC apart), `part` one part of a panel (gf_panel_parts of them: 8 rows x 32 columns each, see the type files).
 * With ow_gemm_overlap() the next panel is built while this one is used, a part after each micro-kernel call: its
 * loads and shuffles then run beside the FMAs instead of in a phase of their own, and its rows' memory latency
 * hides behind them (1.02-1.03x, docs/perf-log.md entry 28). Two 16 KiB panels and the vectors' lines then share
 * L1, so CPUs with a 32 KiB L1 build each panel after the last micro-kernel call of the one before. */
GF_INLINE void gf_gemm(gf_vectors_fn vectors, gf_part_fn part_fn, OW_TILE_ARGS) {
    float xf[GF_VGROUP * GF_KC] __attribute__((aligned(32)));
    float panels[2][GF_ROWS * GF_KC] __attribute__((aligned(32)));
    const int overlap = ow_gemm_overlap();
    for (int v0 = 0; v0 < n_vec; v0 += GF_VGROUP) {
        const int nv = n_vec - v0 < GF_VGROUP ? n_vec - v0 : GF_VGROUP;
        const int calls = (nv + GF_VECS - 1) / GF_VECS;
        gf_step cur = gf_first_step(n_cols, nr);
        for (int p = 0; p < gf_panel_parts(cur.kc); p++) part_fn(w, w_stride, cur.rows, 0, cur.kc, p, panels[0]);
        for (int i = 0; cur.kc > 0; i++) {
            const float *panel = panels[i & 1];
            float *next_panel = panels[(i + 1) & 1];
            const gf_step nxt = gf_next_step(cur, n_cols, nr);
            const uint8_t *nw = w + (size_t)nxt.r0 * w_stride;
            const int parts = nxt.kc > 0 ? gf_panel_parts(nxt.kc) : 0;
            const int per_call = overlap ? (parts + calls - 1) / calls : 0;
            if (cur.r0 == 0) vectors((const uint8_t *)x + (size_t)v0 * x_stride, x_stride, nv, cur.k0, cur.kc, xf);
            const __m256i m0 = gf_mask(cur.rows), m1 = gf_mask(cur.rows - 8);
            float *yv = y + (int64_t)v0 * y_stride + cur.r0;
            const int first = cur.k0 == 0;
            int part = 0;
            for (int v = 0; v < nv; v += GF_VECS) {
                const float *xr = xf + (int64_t)v * GF_KC;
                float *yr = yv + v * y_stride;
                switch (nv - v) {
                case 1: gf_micro(panel, cur.kc, xr, yr, y_stride, first, m0, m1, 1); break;
                case 2: gf_micro(panel, cur.kc, xr, yr, y_stride, first, m0, m1, 2); break;
                case 3: gf_micro(panel, cur.kc, xr, yr, y_stride, first, m0, m1, 3); break;
                case 4: gf_micro(panel, cur.kc, xr, yr, y_stride, first, m0, m1, 4); break;
                case 5: gf_micro(panel, cur.kc, xr, yr, y_stride, first, m0, m1, 5); break;
                default: gf_micro(panel, cur.kc, xr, yr, y_stride, first, m0, m1, GF_VECS); break;
                }
                for (int e = part + per_call; part < e && part < parts; part++)
                    part_fn(nw, w_stride, nxt.rows, nxt.k0, nxt.kc, part, next_panel);
            }
            for (; part < parts; part++) part_fn(nw, w_stride, nxt.rows, nxt.k0, nxt.kc, part, next_panel);
            cur = nxt;
        }
    }
}

#endif
