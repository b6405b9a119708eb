/* F16 and BF16 prefill on the AVX-512 path as a float GEMM with 512-bit registers: gemm_f32_x86.inc's driver and
 * operands (the AVX2 GEMMs', gemm_f16_bf16_avx2.c) with panels of 32 rows and a zmm micro-kernel of 32 rows x 12
 * vectors: per column 2 panel loads, 12 broadcasts, 24 FMAs of 16 lanes into 24 accumulators (of 32 registers).
 *
 * Why (docs/perf-log.md, entry 28): the AVX-512 F16 tile (tile_f16_avx512.c) converts weights and activations
 * beside its FMAs, on the same two ports on the Xeon it was tuned on: 13.4 MAC per cycle, at parity with llama.cpp.
 * Converted once per panel and pass, the operands leave the FMAs to themselves. Where 512-bit work does not run at
 * full width (ow_wide_tiles() 0: Zen 4 splits it in two) the 256-bit GEMM runs instead.
 *
 * Numerics as the AVX2 GEMM's: operands exact, another summation order than the dot, so equal to
 * vec_dot_f16_f16_avx2's result to float rounding; below OW_FLOAT_GEMM_MIN_VECS vectors, with the float_gemm knob
 * off and for rows not a multiple of 32 long, the tile (bit-identical to the dot).
 * BF16 on CPUs with AVX512-BF16: that path's kernels round the activations to bf16 as llama.cpp does (vdpbf16ps,
 * vec_dot_bf16_avx512.c), so the GEMM's vectors are rounded the same way (vcvtneps2bf16) and then multiply exactly;
 * without full-width 512-bit units it keeps that tile, without AVX512-BF16 the path's BF16 is the AVX2 one (GEMM
 * included). */
#include "vec_dot.h"

#if OW_X86_KERNELS
#include "tile_avx2.h"

#define GZ_TARGET __attribute__((target("avx512f,avx512vl,avx2,fma,f16c")))
#define GF_ROWS 32     /* panel rows: two zmm per column */
#define GF_VECS 12     /* vectors per micro-kernel call: 24 accumulators + 2 panel + 1 broadcast registers */
#define GF_KC 128      /* columns per pass: the panel (16 KiB) in L1, the vectors' floats (64 KiB) in L2 */
#define GF_VGROUP 128
#define GF_INLINE static inline __attribute__((always_inline)) GZ_TARGET

typedef struct { __mmask16 lo, hi; } gf_rows_mask;

GF_INLINE gf_rows_mask gf_rows_mask_of(int rows) {
    const gf_rows_mask m = {(__mmask16)(rows >= 16 ? 0xffff : (1u << rows) - 1),
                            (__mmask16)(rows >= 32 ? 0xffff : rows <= 16 ? 0 : (1u << (rows - 16)) - 1)};
    return m;
}

GF_INLINE void gf_micro(const float *panel, int64_t kc, const float *xf, float *y, int64_t y_stride, int first,
                        gf_rows_mask mask, const int NV) {
    __m512 acc[GF_VECS][2];
    for (int v = 0; v < NV; v++) acc[v][0] = acc[v][1] = _mm512_setzero_ps();
    for (int64_t k = 0; k < kc; k++) {
        const __m512 w0 = _mm512_load_ps(panel + k * GF_ROWS), w1 = _mm512_load_ps(panel + k * GF_ROWS + 16);
        for (int v = 0; v < NV; v++) {
            const __m512 a = _mm512_set1_ps(xf[(int64_t)v * GF_KC + k]);
            acc[v][0] = _mm512_fmadd_ps(w0, a, acc[v][0]);
            acc[v][1] = _mm512_fmadd_ps(w1, a, acc[v][1]);
        }
    }
    for (int v = 0; v < NV; v++) {
        float *yv = y + (int64_t)v * y_stride;
        if (!first) {
            acc[v][0] = _mm512_add_ps(acc[v][0], _mm512_maskz_loadu_ps(mask.lo, yv));
            acc[v][1] = _mm512_add_ps(acc[v][1], _mm512_maskz_loadu_ps(mask.hi, yv + 16));
        }
        _mm512_mask_storeu_ps(yv, mask.lo, acc[v][0]);
        _mm512_mask_storeu_ps(yv + 16, mask.hi, acc[v][1]);
    }
}

#include "gemm_f32_x86.inc"

/* Columns k0..k0+kc of n f32 vectors rounded to bf16 (nearest even, denormals to zero: vec_dot_bf16_avx512.c's
 * rounding), as floats, GF_KC apart */
#define GB_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,avx2,fma,f16c")))
static inline __attribute__((always_inline)) GB_TARGET void bf16r_vectors(const uint8_t *x, size_t x_stride, int n,
                                                                          int64_t k0, int64_t kc, float *out) {
    for (int v = 0; v < n; v++) {
        const float *xv = (const float *)(x + (size_t)v * x_stride) + k0;
        float *o = out + (int64_t)v * GF_KC;
        for (int64_t k = 0; k < kc; k += 16) {
            const __m256i h = (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(xv + k));
            _mm512_store_ps(o + k, _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)));
        }
    }
}

GB_TARGET void vec_dot_bf16_f32_gemm_avx512(OW_TILE_ARGS) {
    if (n_vec < OW_FLOAT_GEMM_MIN_VECS || !ow_float_gemm() || n_cols % OW_QK != 0)
        tile_bf16_f32_avx512(n_cols, w, w_stride, nr, x, x_stride, n_vec, y, y_stride);
    else if (!ow_cpu()->avx512_bf16)
        vec_dot_bf16_f32_gemm_avx2(n_cols, w, w_stride, nr, x, x_stride, n_vec, y, y_stride);
    else if (!ow_wide_tiles())
        tile_bf16_f32_avx512(n_cols, w, w_stride, nr, x, x_stride, n_vec, y, y_stride);
    else
        gf_gemm(bf16r_vectors, bf16_panel_part, n_cols, w, w_stride, nr, x, x_stride, n_vec, y, y_stride);
}

/* the any_rows tile of the F16 slot on the AVX-512 path */
GZ_TARGET void vec_dot_f16_f16_gemm_avx512(OW_TILE_ARGS) {
    if (n_vec < OW_FLOAT_GEMM_MIN_VECS || !ow_float_gemm() || n_cols % OW_QK != 0)
        tile_f16_f16_avx512(n_cols, w, w_stride, nr, x, x_stride, n_vec, y, y_stride);
    else if (!ow_wide_tiles())
        vec_dot_f16_f16_gemm_avx2(n_cols, w, w_stride, nr, x, x_stride, n_vec, y, y_stride);
    else
        gf_gemm(f16_vectors, f16_panel_part, n_cols, w, w_stride, nr, x, x_stride, n_vec, y, y_stride);
}
#endif
