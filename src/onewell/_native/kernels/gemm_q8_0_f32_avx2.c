/* Q8_0 prefill on AVX2 as a float GEMM: weights and activations dequantized to f32, multiplied with FMAs.
 *
 * Why (docs/perf-log.md, entry 25): the int8 tile (tile_q32_x86_256.inc) spends five instructions per (row, vector,
 * 32 elements) on the two pipes that run them all (vpsignb, vpmaddubsw, vpmaddwd, vcvtdq2ps, the FMA), and
 * llama.cpp's the same five. In floats the same 32 products are four FMAs. Dequantizing costs little: a row panel
 * serves every vector of the batch, a vector every row of the chunk. Measured 1.2x the int8 tile at 64 vectors.
 *
 * Numerics: every dequantized value is exact (an int8 times an fp16 scale fits a float's 24 bits), so the only
 * difference from the int8 tile is rounding: one float chain per (row, vector) over the columns, GF_KC at a time,
 * against the int8 kernel's exact block sums, about 1e-7 relative. A vector's result does not depend on which
 * other vectors share its batch (each output is the same chain in its own lane). Through a model the difference
 * grows where it flips the rounding of a later layer's 8-bit activations: Qwen2.5-0.5B logits of a prefill and of
 * the same tokens one at a time then differ by ~0.04 nats mean (top 10), the size of onewell's distance to
 * llama.cpp. So batches below OW_FLOAT_GEMM_MIN_VECS vectors (batched decode of a few sequences) run the int8
 * tile and stay bit-identical to one vector at a time; prompts, 32 tokens and up, run the GEMM.
 *
 * The GEMM itself (panels, micro-kernel, the order of work) is gemm_f32_avx2.h; here is how Q8_0 becomes floats. */
#include "vec_dot.h"

#if OW_X86_KERNELS
#include "gemm_f32_avx2.h"

/* Columns k0..k0+kc of n Q8_0 vectors as floats, GF_KC apart */
GF_INLINE void q8_0_vectors(const uint8_t *x, size_t x_stride, int n, int64_t k0, int64_t kc, float *out) {
    for (int v = 0; v < n; v++) {
        const ow_block_q8_0 *xb = (const ow_block_q8_0 *)(x + (size_t)v * x_stride) + k0 / OW_QK;
        float *o = out + (int64_t)v * GF_KC;
        for (int64_t b = 0; b < kc / OW_QK; b++) {
            const __m256 d = _mm256_set1_ps(_cvtsh_ss(xb[b].d));
            for (int j = 0; j < OW_QK; j += 8) _mm256_store_ps(o + OW_QK * b + j, ta_dequant8_q8(xb[b].qs + j, d));
        }
    }
}

/* Part `part` of a panel: block b (of kc / 32) of rows 8 * half .. 8 * half + 7 (of n, 1..16; rows n..15 are
 * zeros), with part = half * (kc / 32) + b. The whole panel holds columns k0..k0+kc column-major, panel[k * 16 + r];
 * 8 x 8 floats are transposed by shuffles. (Transposing the 16 x 32 quants as bytes first takes fewer shuffles and
 * ran 1.3x faster with the rows in L1, but made prefill 4 % slower with the rows streamed from memory:
 * docs/perf-log.md, entry 25.) */
GF_INLINE void q8_0_panel_part(const uint8_t *w, size_t w_stride, int n, int64_t k0, int64_t kc, int part,
                                float *panel) {
    const int64_t nb = kc / OW_QK, b = part % nb;
    const int half = (int)(part / nb);
    const ow_block_q8_0 *blk[8];
    __m256 d[8];
    for (int i = 0; i < 8; i++) {
        const int r = 8 * half + i;
        blk[i] = r < n ? (const ow_block_q8_0 *)(w + (size_t)r * w_stride) + k0 / OW_QK + b : NULL;
        d[i] = _mm256_set1_ps(blk[i] ? _cvtsh_ss(blk[i]->d) : 0.0f);
    }
    for (int j = 0; j < OW_QK; j += 8) {
        __m256 c[8];
        for (int i = 0; i < 8; i++) c[i] = blk[i] ? ta_dequant8_q8(blk[i]->qs + j, d[i]) : _mm256_setzero_ps();
        gf_store_transposed(c, panel + (OW_QK * b + j) * GF_ROWS + 8 * half);
    }
}

/* any_rows tiles of the AVX2 and AVX2 + AVX-VNNI paths: the GEMM needs nothing past AVX2 + FMA; fewer than
 * OW_FLOAT_GEMM_MIN_VECS vectors, or any batch with the float_gemm knob off, go to the path's int8 tile (which
 * sends one vector to the decode kernel) */
TA_TARGET void vec_dot_q8_0_q8_0_gemm_avx2(OW_TILE_ARGS) {
    if (n_vec < OW_FLOAT_GEMM_MIN_VECS || !ow_float_gemm())
        vec_dot_q8_0_q8_0_tile_avx2(n_cols, w, w_stride, nr, x, x_stride, n_vec, y, y_stride);
    else
        gf_gemm(q8_0_vectors, q8_0_panel_part, n_cols, w, w_stride, nr, x, x_stride, n_vec, y, y_stride);
}

TA_TARGET void vec_dot_q8_0_q8_0_gemm_avx2_vnni(OW_TILE_ARGS) {
    if (n_vec < OW_FLOAT_GEMM_MIN_VECS || !ow_float_gemm())
        vec_dot_q8_0_q8_0_tile_avx2_vnni(n_cols, w, w_stride, nr, x, x_stride, n_vec, y, y_stride);
    else
        gf_gemm(q8_0_vectors, q8_0_panel_part, n_cols, w, w_stride, nr, x, x_stride, n_vec, y, y_stride);
}
#endif
