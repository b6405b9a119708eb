/* IQ4_NL prefill on AVX2 as a float GEMM (gemm_f32_avx2.h): Q8_0's (gemm_q8_0_f32_avx2.c) after a codebook lookup.
 *
 * Why: IQ4_NL's values are signed, so its int8 GEMM with rows in the lanes (gemm_i8_rows.inc) puts them on the
 * activations by vpsignb as Q8_0's does: three instructions per 32 products on the integer-multiply pipe. Where
 * that pipe is one and the FMA pipes two (AMD family 0x17), Q8_0 runs 1.13-1.17x faster in floats (perf-log entry
 * 41), and IQ4_NL is the same arithmetic after its lookup (measured: perf-log entry 45). ow_rows_gemm mode 3 (that
 * CPU family's default) sends both signed types to floats and the unsigned ones to their int8 GEMMs.
 *
 * Numerics: a codebook value (|v| <= 127) times an fp16 scale is exact in a float, so only rounding differs from the
 * int8 GEMM, as for Q8_0. */
#include "vec_dot.h"

#if OW_X86_KERNELS
#include "gemm_f32_avx2.h"

/* Part `part` of an IQ4_NL panel (gf_part_fn): each row's block looked up into its 32 values, then as Q8_0's.
 * Not inlined into the driver, as the Q8_0 R8 panels (gemm_q8_0_f32_avx2.c); inlined, the same speed on AMD family
 * 0x17 (28.3 against 28.4 ms per 4096 x 1024 x 128, five processes each, perf-log entry 45) */
static __attribute__((noinline)) TA_TARGET void iq4_nl_panel_part(const uint8_t *w, size_t w_stride, int n,
                                                                   int64_t k0, int64_t kc, int part, float *panel) {
    const int64_t nb = kc / OW_QK, b = part % nb;
    const int g = (int)(part / nb);
    int8_t values[8][OW_QK] __attribute__((aligned(32)));
    __m256 d[8];
    for (int i = 0; i < 8; i++) {
        const int r = 8 * g + i;
        const ow_block_iq4_nl *blk = r < n ? (const ow_block_iq4_nl *)(w + (size_t)r * w_stride) + k0 / OW_QK + b : NULL;
        _mm256_store_si256((__m256i *)values[i], blk ? ta_iq4_values(blk->qs) : _mm256_setzero_si256());
        d[i] = _mm256_set1_ps(blk ? _cvtsh_ss(blk->d) : 0.0f);
    }
    for (int j = 0; j < OW_QK; j += 8) {
        __m256 c[8];
        for (int i = 0; i < 8; i++) c[i] = ta_dequant8_q8(values[i] + j, d[i]);
        gf_store_transposed(c, panel + (OW_QK * b + j) * GF_ROWS + 8 * g);
    }
}

/* From OW_FLOAT_GEMM_MIN_VECS vectors (the caller checks): Q8_0 activations as floats, the panels above */
TA_TARGET void vec_dot_iq4_nl_q8_0_fgemm_avx2(OW_TILE_ARGS) {
    gf_gemm(q8_0_vectors, iq4_nl_panel_part, n_cols, w, w_stride, nr, x, x_stride, n_vec, y, y_stride);
}
#endif
