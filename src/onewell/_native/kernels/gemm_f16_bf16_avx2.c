/* F16 and BF16 prefill on AVX2 as a float GEMM (gemm_f32_avx2.h): the weights (and F16's fp16 activations;
 * BF16's are f32 already) converted to f32 once, exactly (every fp16 and every bf16 is a float), multiplied with
 * FMAs.
 *
 * Why (docs/perf-log.md, entry 28): the tiles (tile_f16_bf16_avx2.c, 4 rows x 3 vectors) convert every weight
 * chunk (and F16 every activation chunk) in their inner loop, up to 7 conversions beside 12 FMAs, and on Intel
 * vcvtph2ps takes an FMA port: F16 ran 7.7-9.7 MAC per cycle against the GEMM's ~13-14, where each conversion
 * serves a whole batch.
 *
 * Numerics as the Q8_0 GEMM's: the operands are the dot kernel's exactly, the sums run in another order (one chain
 * per (row, vector), GF_KC columns a pass), so a result equals vec_dot_f16_f16_avx2's (vec_dot_bf16_f32_avx2's)
 * to float rounding, not bit for bit. Batches below OW_FLOAT_GEMM_MIN_VECS (batched decode), the float_gemm knob
 * off, and rows whose length is not a multiple of 32 go to the tile, bit-identical to one vector at a time. */
#include "vec_dot.h"

#if OW_X86_KERNELS
#include "gemm_f32_avx2.h"

/* Columns k0..k0+kc of n F16 vectors as floats, GF_KC apart */
GF_INLINE void f16_vectors(const uint8_t *x, size_t x_stride, int n, int64_t k0, int64_t kc, float *out) {
    for (int v = 0; v < n; v++) {
        const uint16_t *xv = (const uint16_t *)(x + (size_t)v * x_stride) + k0;
        float *o = out + (int64_t)v * GF_KC;
        for (int64_t k = 0; k < kc; k += 8) _mm256_store_ps(o + k, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(xv + k))));
    }
}

/* Part `part` of a panel (gemm_f32_avx2.h's gf_part_fn): columns 32 b .. 32 b + 31 of rows 8 half .. 8 half + 7 */
GF_INLINE void f16_panel_part(const uint8_t *w, size_t w_stride, int n, int64_t k0, int64_t kc, int part,
                              float *panel) {
    const int64_t nb = kc / OW_QK, b = part % nb;
    const int half = (int)(part / nb);
    const uint16_t *row[8];
    for (int i = 0; i < 8; i++) {
        const int r = 8 * half + i;
        row[i] = r < n ? (const uint16_t *)(w + (size_t)r * w_stride) + k0 + OW_QK * b : NULL;
    }
    for (int j = 0; j < OW_QK; j += 8) {
        __m256 c[8];
        for (int i = 0; i < 8; i++)
            c[i] = row[i] ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(row[i] + j))) : _mm256_setzero_ps();
        gf_store_transposed(c, panel + (OW_QK * b + j) * GF_ROWS + 8 * half);
    }
}

/* Columns k0..k0+kc of n f32 vectors (BF16's activations), GF_KC apart */
GF_INLINE void f32_vectors(const uint8_t *x, size_t x_stride, int n, int64_t k0, int64_t kc, float *out) {
    for (int v = 0; v < n; v++) {
        const float *xv = (const float *)(x + (size_t)v * x_stride) + k0;
        float *o = out + (int64_t)v * GF_KC;
        for (int64_t k = 0; k < kc; k += 8) _mm256_store_ps(o + k, _mm256_loadu_ps(xv + k));
    }
}

/* ... of BF16 weights: a bf16 is the top half of a float32 */
GF_INLINE void bf16_panel_part(const uint8_t *w, size_t w_stride, int n, int64_t k0, int64_t kc, int part,
                               float *panel) {
    const int64_t nb = kc / OW_QK, b = part % nb;
    const int half = (int)(part / nb);
    const uint16_t *row[8];
    for (int i = 0; i < 8; i++) {
        const int r = 8 * half + i;
        row[i] = r < n ? (const uint16_t *)(w + (size_t)r * w_stride) + k0 + OW_QK * b : NULL;
    }
    for (int j = 0; j < OW_QK; j += 8) {
        __m256 c[8];
        for (int i = 0; i < 8; i++)
            c[i] = row[i] ? _mm256_castsi256_ps(_mm256_slli_epi32(
                                _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(row[i] + j))), 16))
                          : _mm256_setzero_ps();
        gf_store_transposed(c, panel + (OW_QK * b + j) * GF_ROWS + 8 * half);
    }
}

/* The any_rows tiles of the F16 and BF16 slots on the AVX2 and AVX2 + AVX-VNNI paths; their tiles take OW_ROW_TILE
 * rows a call */
#define GF_HALF_GEMM(name, tile, vectors, part)                                                                     \
    TA_TARGET void name(OW_TILE_ARGS) {                                                                             \
        if (n_vec < OW_FLOAT_GEMM_MIN_VECS || !ow_float_gemm() || n_cols % OW_QK != 0) {                            \
            for (int r = 0; r < nr; r += OW_ROW_TILE)                                                               \
                tile(n_cols, w + (size_t)r * w_stride, w_stride, nr - r < OW_ROW_TILE ? nr - r : OW_ROW_TILE, x,     \
                     x_stride, n_vec, y + r, y_stride);                                                             \
            return;                                                                                                 \
        }                                                                                                           \
        gf_gemm(vectors, part, n_cols, w, w_stride, nr, x, x_stride, n_vec, y, y_stride);                           \
    }
GF_HALF_GEMM(vec_dot_f16_f16_gemm_avx2, tile_f16_f16_avx2, f16_vectors, f16_panel_part)
GF_HALF_GEMM(vec_dot_bf16_f32_gemm_avx2, tile_bf16_f32_avx2, f32_vectors, bf16_panel_part)
#endif
