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

/* any_rows tiles of the AVX2 and AVX2 + AVX-VNNI paths: the GEMM needs nothing past AVX2 + FMA; fewer than
 * OW_FLOAT_GEMM_MIN_VECS vectors, or any batch with the float_gemm knob off, go to the path's int8 tile (which
 * sends one vector to the decode kernel) */
TA_TARGET void vec_dot_q8_0_q8_0_gemm_avx2(OW_TILE_ARGS) {
    const int rows = ow_rows_gemm(OW_ROWS_GEMM_AVX2);
    if (n_vec < OW_FLOAT_GEMM_MIN_VECS || !ow_float_gemm())
        vec_dot_q8_0_q8_0_tile_avx2(n_cols, w, w_stride, nr, x, x_stride, n_vec, y, y_stride);
    else if (rows == 2)
        vec_dot_q8_0_q8_0_rows_avx2_mask(n_cols, w, w_stride, nr, x, x_stride, n_vec, y, y_stride);
    else if (rows == 1)
        vec_dot_q8_0_q8_0_rows_avx2(n_cols, w, w_stride, nr, x, x_stride, n_vec, y, y_stride);
    else
        gf_gemm(q8_0_vectors, q8_0_panel_part, n_cols, w, w_stride, nr, x, x_stride, n_vec, y, y_stride);
}

/* (each path runs the int8 GEMM with rows in the lanes instead while ow_rows_gemm(path) is 1 or 2,
 * gemm_i8_rows.inc; 3 keeps Q8_0 in floats while the other types run their int8 GEMMs: on a CPU whose integer
 * multiplies have one pipe and FMAs two, perf-log 41) */
TA_TARGET void vec_dot_q8_0_q8_0_gemm_avx2_vnni(OW_TILE_ARGS) {
    const int rows = ow_rows_gemm(OW_ROWS_GEMM_AVX2_VNNI);
    if (n_vec < OW_FLOAT_GEMM_MIN_VECS || !ow_float_gemm())
        vec_dot_q8_0_q8_0_tile_avx2_vnni(n_cols, w, w_stride, nr, x, x_stride, n_vec, y, y_stride);
    else if (rows == 1 || rows == 2)
        vec_dot_q8_0_q8_0_rows_avx2_vnni(n_cols, w, w_stride, nr, x, x_stride, n_vec, y, y_stride);
    else
        gf_gemm(q8_0_vectors, q8_0_panel_part, n_cols, w, w_stride, nr, x, x_stride, n_vec, y, y_stride);
}
#endif
