/* The float GEMM of the AVX2 paths, shared by the weight types that use it (gemm_q8_0_f32_avx2.c,
 * gemm_f16_bf16_avx2.c): weights and activations converted to f32, multiplied with FMAs.
 *
 * Shape: panels of 16 rows, converted and transposed column-major (panel[k][16]), times 6 vectors at a time: per
 * column 2 panel loads, 6 broadcast activations, 12 FMAs into 12 accumulators (BLIS's 6 x 16 on AVX2). A type file
 * supplies how its weights become a panel part (8 rows x 32 columns) and its activations floats; conversions that
 * are exact (int8 x fp16 scale, fp16) leave float rounding as the only difference from the type's dot kernel.
 * A vector's result does not depend on which other vectors share its batch (each output is one float chain in its
 * own lane). The driver and the operands are gemm_f32_x86.inc's (shared with the zmm GEMM,
 * gemm_f16_bf16_avx512.c); this header sets their sizes and gives the ymm micro-kernel. Include only from files
 * compiled with OW_X86_KERNELS. */
#ifndef ONEWELL_GEMM_F32_AVX2_H
#define ONEWELL_GEMM_F32_AVX2_H

#include "tile_avx2.h"

#define GF_ROWS 16     /* panel rows: two ymm per column */
#define GF_VECS 6      /* vectors per micro-kernel call: 12 accumulators + 2 panel + 1 broadcast registers */
#define GF_KC 256      /* columns per pass: the panel (16 KiB) stays in L1, the vectors' floats (128 KiB) in L2 */
#define GF_VGROUP 128  /* vectors whose floats are made per pass: each panel serves up to this many */
#define GF_INLINE TA_INLINE

/* the panel rows a call writes: lanes of its two ymm; `full` when all 16 are (every panel but a chunk's last) */
typedef struct { __m256i lo, hi; int full; } gf_rows_mask;

/* NV vectors (floats xf, GF_KC apart) times the panel's kc columns into y[v * y_stride + 0..15] (rows past
 * `rows` left alone: masked); the first pass stores, the later ones add */
GF_INLINE void gf_micro(const float *panel, int64_t kc, const float *xf, float *y, int64_t y_stride, int first,
                        gf_rows_mask mask, const int NV) {
    const __m256i m0 = mask.lo, m1 = mask.hi;
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
    /* Full panels store plainly: vmaskmovps to memory is microcoded on AMD (docs/perf-log.md, entry 47). Two loops
     * on purpose: one loop choosing per store compiled to a longer body that GCC did not unswitch */
    if (mask.full) {
        for (int v = 0; v < NV; v++) {
            float *yv = y + (int64_t)v * y_stride;
            if (!first) {
                acc[v][0] = _mm256_add_ps(acc[v][0], _mm256_loadu_ps(yv));
                acc[v][1] = _mm256_add_ps(acc[v][1], _mm256_loadu_ps(yv + 8));
            }
            _mm256_storeu_ps(yv, acc[v][0]);
            _mm256_storeu_ps(yv + 8, acc[v][1]);
        }
        return;
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

GF_INLINE gf_rows_mask gf_rows_mask_of(int rows) {
    const gf_rows_mask m = {gf_mask(rows), gf_mask(rows - 8), rows >= GF_ROWS};
    return m;
}

#include "gemm_f32_x86.inc"

#endif
