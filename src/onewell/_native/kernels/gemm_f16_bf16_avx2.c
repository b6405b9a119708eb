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
