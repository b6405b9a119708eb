/* The per-path kernels behind matvec.c's dispatch table (internal to the kernels directory).
 *
 * A dot kernel computes s[r] = dot(W row r, x) for the nr (1..OW_ROW_TILE) rows at w, w + w_stride, ...
 * against one quantized activation vector x of n_cols elements. Names are ggml-style:
 * vec_dot_<weight type>_<activation type>_<path>. */
#ifndef ONEWELL_VEC_DOT_H
#define ONEWELL_VEC_DOT_H

#include <stddef.h>
#include <stdint.h>

#include "matvec.h"
#include "q8_0_r16.h"
#include "quant_blocks.h"
#include "type_traits.h"

#define OW_DOT_ARGS int64_t n_cols, const uint8_t *w, size_t w_stride, int nr, const void *x, float *s

/* A tile kernel (ow_tile_fn) does the same for n_vec activation vectors at once. */
#define OW_TILE_ARGS \
    int64_t n_cols, const uint8_t *w, size_t w_stride, int nr, const void *x, size_t x_stride, int n_vec, float *y, \
        int64_t y_stride

/* every weight type with a dot kernel, with the activation type it pairs with */
#define OW_FOR_EACH_DOT(X) \
    X(f32_f32) X(f16_f16) X(q4_0_q8_0) X(q4_1_q8_1) X(q5_0_q8_0) X(q5_1_q8_1) X(q8_0_q8_0) \
    X(q4_K_q8_K) X(q5_K_q8_K) X(q6_K_q8_K) X(iq4_nl_q8_0) X(iq4_xs_q8_K)

/* the types added for issue 10 (vec_dot_q23k_iq4_bf16_generic.c, vec_dot_q23k_bf16_x86_256.inc): generic and AVX2
 * kernels, and Q2_K / Q3_K with AVX-VNNI and 256-bit EVEX VNNI (IQ4_NL and IQ4_XS joined the list above; perf-log
 * 33) */
#define OW_FOR_EACH_DOT_Q23K_IQ4_BF16(X) X(q2_K_q8_K) X(q3_K_q8_K) X(bf16_f32)
#define OW_FOR_EACH_DOT_Q23K(X) X(q2_K_q8_K) X(q3_K_q8_K)

#define OW_DECLARE_DOT(name, path) void vec_dot_##name##_##path(OW_DOT_ARGS);
#define OW_DECLARE_GENERIC(name) OW_DECLARE_DOT(name, generic)
OW_FOR_EACH_DOT(OW_DECLARE_GENERIC)
OW_FOR_EACH_DOT_Q23K_IQ4_BF16(OW_DECLARE_GENERIC)
OW_DECLARE_GENERIC(q8_0r16_q8_0r16)   /* onewell's repacked Q8_0 (q8_0_r16.h), outside the ggml list */
OW_DECLARE_GENERIC(q4_1r16_q8_0r16)   /* onewell's repacked Q4_1 (q4_1_r16.h) */
OW_DECLARE_GENERIC(q8_0r8_q8_0)       /* onewell's repacked Q8_0 for AVX2 (q8_0_r8.h); plain Q8_0 activations */
OW_DECLARE_GENERIC(q4_1r8_q8_1)       /* ... and Q4_1, Q5_0, Q4_0 (q4_r8.h); plain Q8_1, Q8_0 activations */
OW_DECLARE_GENERIC(q5_0r8_q8_0)
OW_DECLARE_GENERIC(q4_0r8_q8_0)
OW_DECLARE_GENERIC(iq4_nlr8_q8_0)     /* ... IQ4_NL (Q4_0 R8's bytes, codebook values) */
OW_DECLARE_GENERIC(q4_kr8_q8_K)       /* ... and Q4_K, Q5_K, Q6_K (qk_r8.h); plain Q8_K activations */
OW_DECLARE_GENERIC(q5_kr8_q8_K)
OW_DECLARE_GENERIC(q6_kr8_q8_K)
OW_DECLARE_GENERIC(iq4_xsr8_q8_K)     /* ... and IQ4_XS (qk_r8.h) */

void act_quant_f32_generic(const float *x, void *xq, int64_t n);
void act_quant_f16_generic(const float *x, void *xq, int64_t n);
void act_quant_q8_0_generic(const float *x, void *xq, int64_t n);
void act_quant_q8_1_generic(const float *x, void *xq, int64_t n);
void act_quant_q8_K_generic(const float *x, void *xq, int64_t n);
void act_quant_q8_0r16_generic(const float *x, void *xq, int64_t n);

/* row dequantizers (dequant_row.c), one per type with a to_float */
#define OW_FOR_EACH_DEQUANT_ROW(X) X(f32) X(f16) X(q4_0) X(q4_1) X(q5_0) X(q5_1) X(q8_0) X(q4_K) X(q5_K) X(q6_K) \
    X(q2_K) X(q3_K) X(iq4_nl) X(iq4_xs) X(bf16)
#define OW_DECLARE_DEQUANT_ROW(t) void dequant_row_##t(const uint8_t *row, float *out, int64_t n_cols);
OW_FOR_EACH_DEQUANT_ROW(OW_DECLARE_DEQUANT_ROW)

#if OW_X86_KERNELS
#define OW_DECLARE_AVX2(name) OW_DECLARE_DOT(name, avx2)
#define OW_DECLARE_AVX2_VNNI(name) OW_DECLARE_DOT(name, avx2_vnni)
#define OW_DECLARE_AVX512_256(name) OW_DECLARE_DOT(name, avx512_256)
OW_FOR_EACH_DOT(OW_DECLARE_AVX2)
OW_FOR_EACH_DOT_Q23K_IQ4_BF16(OW_DECLARE_AVX2)
OW_FOR_EACH_DOT(OW_DECLARE_AVX2_VNNI)
OW_FOR_EACH_DOT(OW_DECLARE_AVX512_256)   /* the 256-bit kernels built with AVX-512 VNNI (EVEX) */
OW_FOR_EACH_DOT_Q23K(OW_DECLARE_AVX2_VNNI)
OW_FOR_EACH_DOT_Q23K(OW_DECLARE_AVX512_256)
/* The R16 prefill tiles' vectors per block: as many as fit ow_r16_act_bytes() of activations (x_stride bytes each),
 * a multiple of `group` (the vectors per pass over a row), at least one group, at most n_vec; 0 bytes: no blocks. */
static inline int ow_r16_vector_block(size_t x_stride, int n_vec, int group) {
    if (n_vec < 2) return 1;   /* one vector may come with stride 0 (nothing follows it) */
    const size_t budget = ow_r16_act_bytes();
    if (budget == 0) return n_vec;
    const size_t fit = budget / x_stride / (size_t)group * (size_t)group;
    return fit < (size_t)group ? group : (fit > (size_t)n_vec ? n_vec : (int)fit);
}
/* the R16 layouts' own kernels, n_vec vectors per weight load: 256-bit (vec_dot_r16_avx2.c) and 512-bit */
void vec_dot_q8_0r16_q8_0r16_avx2(OW_TILE_ARGS);
void vec_dot_q4_1r16_q8_0r16_avx2(OW_TILE_ARGS);
void vec_dot_q8_0r8_q8_0_avx2(OW_TILE_ARGS);     /* Q8_0 R8: decode in row pairs, prefill the float GEMM */
void vec_dot_q8_0r8_q8_0_gemm_avx2(OW_TILE_ARGS);   /* ... that GEMM (gemm_q8_0_f32_avx2.c) */
void vec_dot_q4_1r8_q8_1_avx2(OW_TILE_ARGS);   /* Q4_1, Q5_0, Q4_0 R8: decode in row pairs, prefill the file GEMMs */
void vec_dot_q5_0r8_q8_0_avx2(OW_TILE_ARGS);
void vec_dot_q4_0r8_q8_0_avx2(OW_TILE_ARGS);
void vec_dot_iq4_nlr8_q8_0_avx2(OW_TILE_ARGS);
void vec_dot_q4_kr8_q8_K_avx2(OW_TILE_ARGS);     /* Q4_K, Q5_K, Q6_K R8: decode in row pairs, prefill the file GEMMs */
void vec_dot_q5_kr8_q8_K_avx2(OW_TILE_ARGS);
void vec_dot_q6_kr8_q8_K_avx2(OW_TILE_ARGS);
void vec_dot_iq4_xsr8_q8_K_avx2(OW_TILE_ARGS);
void vec_dot_q8_0r16_q8_0r16_avx512(OW_TILE_ARGS);
void vec_dot_q4_1r16_q8_0r16_avx512(OW_TILE_ARGS);   /* Q4_1 R16: rows one at a time, n_vec vectors per load */
void tile_f16_f16_avx2(OW_TILE_ARGS);    /* F16 x F16, 4 rows x 3 vectors per load (tile_f16_bf16_avx2.c) */
void tile_f16_f16_avx512(OW_TILE_ARGS);  /* the same, two rows per zmm where ow_wide_tiles (tile_f16_avx512.c) */
void tile_bf16_f32_avx2(OW_TILE_ARGS);   /* BF16 x F32, the same tile */
/* BF16 with AVX512-BF16 (vec_dot_bf16_avx512.c), decode and prefill: activations rounded to bf16; the AVX2 kernels
 * on CPUs without it */
void tile_bf16_f32_avx512(OW_TILE_ARGS);

/* AVX2 prefill tiles of the 32-element ggml types (vec_dot_tile_avx2.c) and K-quants (vec_dot_tile_k_avx2.c): each
 * row decoded once per batch */
#define OW_FOR_EACH_TILE_AVX2(X) X(q8_0_q8_0) X(q4_0_q8_0) X(q5_0_q8_0) X(q4_1_q8_1) X(q5_1_q8_1) \
    X(q4_K_q8_K) X(q6_K_q8_K)
#define OW_DECLARE_TILE_AVX2(name) void vec_dot_##name##_tile_avx2(OW_TILE_ARGS);
OW_FOR_EACH_TILE_AVX2(OW_DECLARE_TILE_AVX2)
/* ... the 32-element ones also with AVX-VNNI (vec_dot_tile_avx2_vnni.c) */
#define OW_FOR_EACH_TILE_AVX2_VNNI(X) X(q8_0_q8_0) X(q4_0_q8_0) X(q5_0_q8_0) X(q4_1_q8_1) X(q5_1_q8_1)
#define OW_DECLARE_TILE_AVX2_VNNI(name) void vec_dot_##name##_tile_avx2_vnni(OW_TILE_ARGS);
OW_FOR_EACH_TILE_AVX2_VNNI(OW_DECLARE_TILE_AVX2_VNNI)
/* Q8_0 prefill on the AVX2 paths, batches of OW_FLOAT_GEMM_MIN_VECS or more as a float GEMM (gemm_q8_0_f32_avx2.c)
 * while ow_float_gemm() (matvec.h): equal to the decode kernel to float rounding, not bit for bit; smaller batches,
 * and every batch with the knob off, run the int8 tile above */
#define OW_FLOAT_GEMM_MIN_VECS 32
void vec_dot_q8_0_q8_0_gemm_avx2(OW_TILE_ARGS);
void vec_dot_q8_0_q8_0_gemm_avx2_vnni(OW_TILE_ARGS);
/* the int8 GEMMs with 8 rows in the lanes (gemm_i8_rows.inc), which the above run instead of the float GEMM
 * while ow_rows_gemm(vnni) (1; 2 on AVX2: the signs by xor + sub): any rows and vectors, n_cols a multiple of 32 */
void vec_dot_q8_0_q8_0_rows_avx2(OW_TILE_ARGS);
void vec_dot_q8_0_q8_0_rows_avx2_mask(OW_TILE_ARGS);
void vec_dot_q8_0r8_q8_0_rows_avx2(OW_TILE_ARGS);        /* the same two on Q8_0 R8 rows */
void vec_dot_q8_0r8_q8_0_rows_avx2_mask(OW_TILE_ARGS);
void vec_dot_q4_0r8_q8_0_rows_avx2(OW_TILE_ARGS);        /* ... and of the nibble R8s (q4_r8.h) */
void vec_dot_q5_0r8_q8_0_rows_avx2(OW_TILE_ARGS);
void vec_dot_q4_1r8_q8_1_rows_avx2(OW_TILE_ARGS);
void vec_dot_iq4_nlr8_q8_0_rows_avx2(OW_TILE_ARGS);
void vec_dot_q4_kr8_q8_K_rows_avx2(OW_TILE_ARGS);        /* ... and of Q4_K R8, Q5_K R8, IQ4_XS R8 (qk_r8.h) */
void vec_dot_q5_kr8_q8_K_rows_avx2(OW_TILE_ARGS);
void vec_dot_iq4_xsr8_q8_K_rows_avx2(OW_TILE_ARGS);
void vec_dot_q8_0_q8_0_rows_avx2_vnni(OW_TILE_ARGS);
/* ... of Q4_0 and Q5_0 (gemm_i8_rows_avx2.c, gemm_i8_rows_vnni.c), and their tile slots on the AVX2 paths: the
 * int8 GEMM from OW_FLOAT_GEMM_MIN_VECS vectors while ow_float_gemm() and ow_rows_gemm(vnni), else the exact tile */
void vec_dot_q4_0_q8_0_rows_avx2(OW_TILE_ARGS);
void vec_dot_q5_0_q8_0_rows_avx2(OW_TILE_ARGS);
void vec_dot_q4_0_q8_0_rows_avx2_vnni(OW_TILE_ARGS);
void vec_dot_q5_0_q8_0_rows_avx2_vnni(OW_TILE_ARGS);
void vec_dot_q4_0_q8_0_gemm_avx2(OW_TILE_ARGS);
void vec_dot_q5_0_q8_0_gemm_avx2(OW_TILE_ARGS);
void vec_dot_q4_0_q8_0_gemm_avx2_vnni(OW_TILE_ARGS);
void vec_dot_q5_0_q8_0_gemm_avx2_vnni(OW_TILE_ARGS);
/* ... and of Q4_1 / Q5_1 with Q8_1 activations, the same way */
void vec_dot_q4_1_q8_1_rows_avx2(OW_TILE_ARGS);
void vec_dot_q5_1_q8_1_rows_avx2(OW_TILE_ARGS);
void vec_dot_q4_1_q8_1_rows_avx2_vnni(OW_TILE_ARGS);
void vec_dot_q5_1_q8_1_rows_avx2_vnni(OW_TILE_ARGS);
void vec_dot_q4_1_q8_1_gemm_avx2(OW_TILE_ARGS);
void vec_dot_q5_1_q8_1_gemm_avx2(OW_TILE_ARGS);
void vec_dot_q4_1_q8_1_gemm_avx2_vnni(OW_TILE_ARGS);
void vec_dot_q5_1_q8_1_gemm_avx2_vnni(OW_TILE_ARGS);
/* ... and on the AVX-512 path with the EVEX vpdpbusd (gemm_i8_rows_avx512.c), behind its tiles below */
void vec_dot_q4_0_q8_0_rows_avx512(OW_TILE_ARGS);
void vec_dot_q5_0_q8_0_rows_avx512(OW_TILE_ARGS);
void vec_dot_q4_0_q8_0_rows_avx512_wide(OW_TILE_ARGS);   /* zmm, 16 rows per panel, where ow_wide_tiles */
void vec_dot_q5_0_q8_0_rows_avx512_wide(OW_TILE_ARGS);
void vec_dot_q4_0_q8_0_gemm_avx512(OW_TILE_ARGS);
void vec_dot_q5_0_q8_0_gemm_avx512(OW_TILE_ARGS);
/* ... and of Q4_1 / Q5_1 on the AVX-512 path (their file layout) */
void vec_dot_q4_1_q8_1_rows_avx512(OW_TILE_ARGS);
void vec_dot_q5_1_q8_1_rows_avx512(OW_TILE_ARGS);
void vec_dot_q4_1_q8_1_rows_avx512_wide(OW_TILE_ARGS);
void vec_dot_q5_1_q8_1_rows_avx512_wide(OW_TILE_ARGS);
void vec_dot_q4_1_q8_1_gemm_avx512(OW_TILE_ARGS);
void vec_dot_q5_1_q8_1_gemm_avx512(OW_TILE_ARGS);
/* ... and Q4_1 R16 (q4_1_r16.h) with R16 activations: below the GEMM its tile, vec_dot_q4_1r16_q8_0r16_avx512 */
void vec_dot_q4_1r16_q8_0r16_rows_avx512(OW_TILE_ARGS);
void vec_dot_q4_1r16_q8_0r16_rows_avx512_wide(OW_TILE_ARGS);
void vec_dot_q4_1r16_q8_0r16_gemm_avx512(OW_TILE_ARGS);
/* ... and Q8_0 R16 (q8_0_r16.h): below the GEMM vec_dot_q8_0r16_q8_0r16_avx512 */
void vec_dot_q8_0r16_q8_0r16_rows_avx512(OW_TILE_ARGS);
void vec_dot_q8_0r16_q8_0r16_rows_avx512_wide(OW_TILE_ARGS);
void vec_dot_q8_0r16_q8_0r16_gemm_avx512(OW_TILE_ARGS);
/* ... and of IQ4_NL on every x86 path, Q8_0's kernel after a codebook lookup; below the GEMM its decode kernel */
void vec_dot_iq4_nl_q8_0_rows_avx2(OW_TILE_ARGS);
void vec_dot_iq4_nl_q8_0_fgemm_avx2(OW_TILE_ARGS);   /* ... IQ4_NL as a float GEMM (gemm_iq4_nl_f32_avx2.c) */
void vec_dot_iq4_nl_q8_0_rows_avx2_vnni(OW_TILE_ARGS);
void vec_dot_iq4_nl_q8_0_rows_avx512(OW_TILE_ARGS);
void vec_dot_iq4_nl_q8_0_rows_avx512_wide(OW_TILE_ARGS);
void vec_dot_iq4_nl_q8_0_gemm_avx2(OW_TILE_ARGS);
void vec_dot_iq4_nl_q8_0_gemm_avx2_vnni(OW_TILE_ARGS);
void vec_dot_iq4_nl_q8_0_gemm_avx512(OW_TILE_ARGS);
/* ... and of the K-quants with Q8_K activations (gemm_k_rows.inc, in the same three files), with their slots: on
 * the AVX2 paths below the GEMM the AVX2 tiles of Q4_K / Q6_K and Q5_K's decode kernel, on AVX-512 its K tiles */
#define OW_FOR_EACH_K_ROWS(X) X(q4_K) X(q5_K) X(q6_K) X(q2_K) X(q3_K) X(iq4_xs)
#define OW_DECLARE_K_ROWS(t)                                                                                   \
    void vec_dot_##t##_q8_K_rows_avx2(OW_TILE_ARGS); void vec_dot_##t##_q8_K_rows_avx2_vnni(OW_TILE_ARGS);     \
    void vec_dot_##t##_q8_K_rows_avx512(OW_TILE_ARGS); void vec_dot_##t##_q8_K_rows_avx512_wide(OW_TILE_ARGS); \
    void vec_dot_##t##_q8_K_gemm_avx2(OW_TILE_ARGS); void vec_dot_##t##_q8_K_gemm_avx2_vnni(OW_TILE_ARGS);     \
    void vec_dot_##t##_q8_K_gemm_avx512(OW_TILE_ARGS);
OW_FOR_EACH_K_ROWS(OW_DECLARE_K_ROWS)
/* ... and F16 and BF16 the same way (gemm_f16_bf16_avx2.c), on both AVX2 paths; below the switch their tiles */
void vec_dot_f16_f16_gemm_avx2(OW_TILE_ARGS);
void vec_dot_bf16_f32_gemm_avx2(OW_TILE_ARGS);
void vec_dot_f16_f16_gemm_avx512(OW_TILE_ARGS);   /* 512-bit panels where ow_wide_tiles (gemm_f16_bf16_avx512.c) */
void vec_dot_bf16_f32_gemm_avx512(OW_TILE_ARGS);  /* ... with activations rounded to bf16 on AVX512-BF16 CPUs */
/* AVX-512 VNNI prefill tiles of the offset types in their file layout (vec_dot_tile_avx512.c) */
void vec_dot_q4_0_q8_0_tile_avx512(OW_TILE_ARGS);
void vec_dot_q5_0_q8_0_tile_avx512(OW_TILE_ARGS);
/* ... and of the K-quants, each block unpacked once for 4 vectors (vec_dot_avx512.c) */
void vec_dot_q4_K_q8_K_tile_avx512(OW_TILE_ARGS);
void vec_dot_q5_K_q8_K_tile_avx512(OW_TILE_ARGS);
void vec_dot_q6_K_q8_K_tile_avx512(OW_TILE_ARGS);

/* kernels that use the full 512-bit registers; other types run their _avx512_256 twin on this path */
#define OW_FOR_EACH_DOT_512(X) X(f32_f32) X(q8_0_q8_0) X(q4_K_q8_K) X(q5_K_q8_K) X(q6_K_q8_K)
#define OW_DECLARE_AVX512(name) OW_DECLARE_DOT(name, avx512)
OW_FOR_EACH_DOT_512(OW_DECLARE_AVX512)

/* activation quantizers for every SIMD path (AVX2 is plenty: they touch n_cols floats, the matmul n_cols*rows) */
void act_quant_f16_avx2(const float *x, void *xq, int64_t n);
void act_quant_q8_0_avx2(const float *x, void *xq, int64_t n);
void act_quant_q8_1_avx2(const float *x, void *xq, int64_t n);
void act_quant_q8_K_avx2(const float *x, void *xq, int64_t n);
void act_quant_q8_0r16_avx2(const float *x, void *xq, int64_t n);
#endif

#if OW_NEON_KERNELS
/* aarch64 kernels (vec_dot_neon.c): plain NEON and NEON + dotprod from one source */
#define OW_FOR_EACH_DOT_NEON(X) \
    X(q8_0_q8_0) X(q4_0_q8_0) X(q4_1_q8_1) X(q5_0_q8_0) X(q4_K_q8_K) X(q6_K_q8_K) X(f16_f16) \
    X(iq4_nl_q8_0) X(iq4_xs_q8_K) X(bf16_f32)
#define OW_DECLARE_NEON(name) OW_DECLARE_DOT(name, neon)
#define OW_DECLARE_NEON_DOTPROD(name) OW_DECLARE_DOT(name, neon_dotprod)
OW_FOR_EACH_DOT_NEON(OW_DECLARE_NEON)
OW_FOR_EACH_DOT_NEON(OW_DECLARE_NEON_DOTPROD)
#endif

#endif
