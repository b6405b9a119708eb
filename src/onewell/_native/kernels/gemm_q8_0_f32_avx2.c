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
#include "q8_0_r8.h"

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

/* Part `part` of a float-GEMM panel (gf_part_fn) from R8 rows (any stride). A pass of the
 * GEMM covers GF_KC = 256 columns from a multiple of 256, i.e. exactly one R8 group (8 blocks, or a row's last m),
 * and the driver builds a panel's parts in order before it uses the panel: so the part of block 0 converts the
 * whole group for its 8 rows, and the parts of blocks 1.. have nothing left to do.
 * The layout does half the panel's transpose: chunk j of the 8 rows, transposed as 8 x 8 int32, gives per block k
 * the 4 bytes 4j..4j+3 of every row, and each byte position is one panel column (8 rows) after a shift pair, a
 * convert and the scales' multiply: no float transpose. The floats are q8_0_panel_part's (same quants, scales).
 * Not inlined: inlined into gf_gemm it made the whole GEMM 12 % slower on AMD family 0x17 (perf-log entry 42),
 * though this function's own work is a small part of it. */
_Static_assert(GF_KC == OW_R8_GROUP * OW_QK, "a GEMM pass must be one R8 group");
static __attribute__((noinline)) TA_TARGET void r8_panel_part(const uint8_t *w, size_t w_stride, int n, int64_t k0, int64_t kc, int part, float *panel) {
    const int64_t nbp = kc / OW_QK;
    if (part % nbp) return;   /* done by block 0's part */
    const int g8 = (int)(part / nbp), m = (int)nbp;
    const int64_t grp = k0 / OW_QK;
    /* the 8 rows' groups: in place when full, else copied into zero-padded buffers read as full ones */
    uint8_t tail[8][OW_R8_GROUP * OW_R8_BLOCK_BYTES + 32];
    const uint8_t *at[8];
    for (int i = 0; i < 8; i++) {
        const int r = 8 * g8 + i;
        if (r < n && m == OW_R8_GROUP) {
            at[i] = w + (size_t)r * w_stride + ow_r8_group_at(grp);
            continue;
        }
        memset(tail[i], 0, sizeof tail[i]);
        if (r < n) memcpy(tail[i], w + (size_t)r * w_stride + ow_r8_group_at(grp), (size_t)OW_R8_BLOCK_BYTES * m);
        at[i] = tail[i];
    }
    const int scales = 2 * m, stride = 4 * m;
    __m256 d[8];   /* row i's block scales; transposed, d[k] = block k's scale of the 8 rows */
    for (int i = 0; i < 8; i++) d[i] = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)at[i]));
    ta_transpose8_ps(d);
    for (int j = 0; j < 8; j++) {
        __m256 c[8];   /* row i's chunk j; transposed, c[k] = bytes 4j..4j+3 of block k of the 8 rows */
        for (int i = 0; i < 8; i++) c[i] = _mm256_loadu_ps((const float *)(at[i] + scales + stride * j));
        ta_transpose8_ps(c);
        for (int k = 0; k < m; k++) {
            const __m256i b4 = _mm256_castps_si256(c[k]);
            for (int t = 0; t < 4; t++) {   /* byte t, sign-extended: element 4j + t of block k, 8 rows */
                const __m256i q = _mm256_srai_epi32(_mm256_slli_epi32(b4, 24 - 8 * t), 24);
                _mm256_store_ps(panel + (OW_QK * k + 4 * j + t) * GF_ROWS + 8 * g8,
                                _mm256_mul_ps(_mm256_cvtepi32_ps(q), d[k]));
            }
        }
    }
}

/* Q8_0 R8's GEMM (vec_dot_q8_0_r8_avx2.c calls it from OW_FLOAT_GEMM_MIN_VECS vectors), beside the Q8_0 one */
TA_TARGET void vec_dot_q8_0r8_q8_0_gemm_avx2(OW_TILE_ARGS) {
    gf_gemm(q8_0_vectors, r8_panel_part, n_cols, w, w_stride, nr, x, x_stride, n_vec, y, y_stride);
}
#endif
