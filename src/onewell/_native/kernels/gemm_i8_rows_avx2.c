/* The AVX2 path's int8 GEMMs with 8 rows in the lanes (gemm_i8_rows.inc; the K-quants: gemm_k_rows.inc):
 * vpmaddubsw + vpmaddwd. Q8_0's signed
 * weights put their signs on the activations by vpsignb (rows_gemm 1: 1.17x the float GEMM on an Intel Xeon,
 * perf-log 29) or by xor + sub (rows_gemm 2: 1.07x there; 2 of its 5 instructions on the multiply pipes where Zen 4
 * runs xor / sub / add beside them, perf-log 20, so cpu_decisions.py measures it on the next AMD CPU); the unsigned
 * quants of the other types need neither, and their pair sums add in int16 over groups of dwords (perf-log 30). */
#include "gemm_i8_rows_slot.h"

#if OW_X86_KERNELS
#define GI_TARGET __attribute__((target("avx2,fma,f16c")))
#define GI_VNNI 0

#define GI_TYPE 0
#define GI_SUFFIX q8_0_avx2
#define GI_NAME vec_dot_q8_0_q8_0_rows_avx2
#include "gemm_i8_rows.inc"

#define GI_TYPE 0
#define GI_MASK 1
#define GI_SUFFIX q8_0_avx2_mask
#define GI_NAME vec_dot_q8_0_q8_0_rows_avx2_mask
#include "gemm_i8_rows.inc"

/* the same two on Q8_0 R8 rows (q8_0_r8.h; vec_dot_q8_0_r8_avx2.c calls them as the Q8_0 GEMM calls those) */
#define GI_TYPE 8
#define GI_SUFFIX q8_0r8_avx2
#define GI_NAME vec_dot_q8_0r8_q8_0_rows_avx2
#include "gemm_i8_rows.inc"

#define GI_TYPE 8
#define GI_MASK 1
#define GI_SUFFIX q8_0r8_avx2_mask
#define GI_NAME vec_dot_q8_0r8_q8_0_rows_avx2_mask
#include "gemm_i8_rows.inc"

/* ... and of Q4_0 R8, Q5_0 R8, Q4_1 R8, IQ4_NL R8 (q4_r8.h; vec_dot_q4_r8_avx2.c calls them as the file types'
 * slots below call theirs) */
#define GI_TYPE 9
#define GI_SUFFIX q4_0r8_avx2
#define GI_NAME vec_dot_q4_0r8_q8_0_rows_avx2
#include "gemm_i8_rows.inc"

#define GI_TYPE 10
#define GI_SUFFIX q5_0r8_avx2
#define GI_NAME vec_dot_q5_0r8_q8_0_rows_avx2
#include "gemm_i8_rows.inc"

#define GI_TYPE 11
#define GI_SUFFIX q4_1r8_avx2
#define GI_NAME vec_dot_q4_1r8_q8_1_rows_avx2
#include "gemm_i8_rows.inc"

#define GI_TYPE 12
#define GI_SUFFIX iq4_nlr8_avx2
#define GI_NAME vec_dot_iq4_nlr8_q8_0_rows_avx2
#include "gemm_i8_rows.inc"

/* Q4_0, Q5_0, Q4_1, Q5_1, IQ4_NL (gemm_i8_rows_types.inc; IQ4_NL signed as Q8_0, by vpsignb: rows_gemm 2's xor +
 * sub is measured for Q8_0 only) */
#define GI_VARIANT avx2
#include "gemm_i8_rows_types.inc"

/* the K-quants (gemm_k_rows_types.inc) */
#define GK_VARIANT avx2
#include "gemm_k_rows_types.inc"

/* ... and the same GEMMs on Q4_K R8, Q5_K R8 and IQ4_XS R8 rows (qk_r8.h; vec_dot_qk_r8_avx2.c calls them as the
 * file types' slots below call theirs) */
#define GK_TYPE 0
#define GK_R8 1
#define GI_WIDE 0
#define GI_SUFFIX q4_kr8_avx2
#define GI_NAME vec_dot_q4_kr8_q8_K_rows_avx2
#include "gemm_k_rows.inc"

#define GK_TYPE 1
#define GK_R8 1
#define GI_WIDE 0
#define GI_SUFFIX q5_kr8_avx2
#define GI_NAME vec_dot_q5_kr8_q8_K_rows_avx2
#include "gemm_k_rows.inc"

#define GK_TYPE 5
#define GK_R8 1
#define GI_WIDE 0
#define GI_SUFFIX iq4_xsr8_avx2
#define GI_NAME vec_dot_iq4_xsr8_q8_K_rows_avx2
#include "gemm_k_rows.inc"

/* the Q4_0 / Q5_0 / Q4_1 / Q5_1 tile slots of this path (gemm_i8_rows_slot.h) */
#define GI_ROWS_OF(t, a) vec_dot_##t##_##a##_rows_avx2
#define GI_SLOT_OF(t, a) \
    GI_SLOT(GI_TARGET, OW_ROWS_GEMM_AVX2, vec_dot_##t##_##a##_gemm_avx2, GI_ROWS_OF(t, a), \
            vec_dot_##t##_##a##_tile_avx2)
GI_SLOT_OF(q4_0, q8_0)
GI_SLOT_OF(q5_0, q8_0)
GI_SLOT_OF(q4_1, q8_1)
GI_SLOT_OF(q5_1, q8_1)
GI_SLOT_OF(q4_K, q8_K)
GI_SLOT_OF(q6_K, q8_K)
/* Q5_K has no AVX2 tile, Q2_K, Q3_K and IQ4_XS none at all: below the GEMM their decode kernels */
#define GI_DECODE_SLOT_OF(t) \
    GI_DECODE_SLOT(GI_TARGET, OW_ROWS_GEMM_AVX2, vec_dot_##t##_q8_K_gemm_avx2, vec_dot_##t##_q8_K_rows_avx2, \
                   vec_dot_##t##_q8_K_avx2)
GI_DECODE_SLOT_OF(q5_K)
GI_DECODE_SLOT_OF(q2_K)
GI_DECODE_SLOT_OF(q3_K)
GI_DECODE_SLOT_OF(iq4_xs)
/* IQ4_NL has no tile: below the GEMM its decode kernel. From the GEMM's batch with rows_gemm 3, floats
 * (gemm_iq4_nl_f32_avx2.c), as Q8_0's: the signed types' int8 GEMM spends a vpsignb per 32 products on the
 * integer-multiply pipe (perf-log entry 45) */
static GI_TARGET void vec_dot_iq4_nl_q8_0_rows_or_floats_avx2(OW_TILE_ARGS) {
    (ow_rows_gemm(OW_ROWS_GEMM_AVX2) == 3 ? vec_dot_iq4_nl_q8_0_fgemm_avx2 : vec_dot_iq4_nl_q8_0_rows_avx2)(
        n_cols, w, w_stride, nr, x, x_stride, n_vec, y, y_stride);
}
GI_DECODE_SLOT(GI_TARGET, OW_ROWS_GEMM_AVX2, vec_dot_iq4_nl_q8_0_gemm_avx2, vec_dot_iq4_nl_q8_0_rows_or_floats_avx2,
               vec_dot_iq4_nl_q8_0_avx2)
#undef GI_DECODE_SLOT_OF
#undef GI_SLOT_OF
#undef GI_ROWS_OF
#undef GI_TARGET
#undef GI_VNNI
#endif
