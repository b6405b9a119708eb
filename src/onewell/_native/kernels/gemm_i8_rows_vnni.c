/* The AVX-VNNI path's int8 GEMMs with 8 rows in the lanes (gemm_i8_rows.inc: Q8_0, Q4_0, Q5_0, Q4_1, Q5_1, IQ4_NL;
 * gemm_k_rows.inc: the K-quants): vpdpbusd, 32 products of 8 rows per instruction. Intel client CPUs since Alder
 * Lake (and their E-core servers), AMD Zen 5. */
#include "gemm_i8_rows_slot.h"

#if OW_X86_KERNELS
#define GI_TARGET __attribute__((target("avx2,fma,f16c,avxvnni")))
#define GI_VNNI 1

#define GI_TYPE 0
#define GI_SUFFIX q8_0_avx2_vnni
#define GI_NAME vec_dot_q8_0_q8_0_rows_avx2_vnni
#include "gemm_i8_rows.inc"

/* Q4_0, Q5_0, Q4_1, Q5_1, IQ4_NL (gemm_i8_rows_types.inc) */
#define GI_VARIANT avx2_vnni
#include "gemm_i8_rows_types.inc"

/* the K-quants (gemm_k_rows_types.inc) */
#define GK_VARIANT avx2_vnni
#include "gemm_k_rows_types.inc"

/* the Q4_0 / Q5_0 / Q4_1 / Q5_1 tile slots of this path (gemm_i8_rows_slot.h) */
#define GI_ROWS_OF(t, a) vec_dot_##t##_##a##_rows_avx2_vnni
#define GI_SLOT_OF(t, a) \
    GI_SLOT(GI_TARGET, OW_ROWS_GEMM_AVX2_VNNI, vec_dot_##t##_##a##_gemm_avx2_vnni, GI_ROWS_OF(t, a), \
            vec_dot_##t##_##a##_tile_avx2_vnni)
GI_SLOT_OF(q4_0, q8_0)
GI_SLOT_OF(q5_0, q8_0)
GI_SLOT_OF(q4_1, q8_1)
GI_SLOT_OF(q5_1, q8_1)
#undef GI_SLOT_OF
/* the K-quants: below the GEMM the AVX2 tiles (VNNI has no step for their sub-block scales), Q5_K its decode
 * kernel */
GI_SLOT(GI_TARGET, OW_ROWS_GEMM_AVX2_VNNI, vec_dot_q4_K_q8_K_gemm_avx2_vnni, GI_ROWS_OF(q4_K, q8_K),
        vec_dot_q4_K_q8_K_tile_avx2)
GI_SLOT(GI_TARGET, OW_ROWS_GEMM_AVX2_VNNI, vec_dot_q6_K_q8_K_gemm_avx2_vnni, GI_ROWS_OF(q6_K, q8_K),
        vec_dot_q6_K_q8_K_tile_avx2)
GI_DECODE_SLOT(GI_TARGET, OW_ROWS_GEMM_AVX2_VNNI, vec_dot_q5_K_q8_K_gemm_avx2_vnni, GI_ROWS_OF(q5_K, q8_K),
               vec_dot_q5_K_q8_K_avx2_vnni)
/* Q2_K, Q3_K and IQ4_XS have no tiles: below the GEMM their decode kernels */
GI_DECODE_SLOT(GI_TARGET, OW_ROWS_GEMM_AVX2_VNNI, vec_dot_q2_K_q8_K_gemm_avx2_vnni, GI_ROWS_OF(q2_K, q8_K),
               vec_dot_q2_K_q8_K_avx2_vnni)
GI_DECODE_SLOT(GI_TARGET, OW_ROWS_GEMM_AVX2_VNNI, vec_dot_q3_K_q8_K_gemm_avx2_vnni, GI_ROWS_OF(q3_K, q8_K),
               vec_dot_q3_K_q8_K_avx2_vnni)
GI_DECODE_SLOT(GI_TARGET, OW_ROWS_GEMM_AVX2_VNNI, vec_dot_iq4_xs_q8_K_gemm_avx2_vnni, GI_ROWS_OF(iq4_xs, q8_K),
               vec_dot_iq4_xs_q8_K_avx2_vnni)
/* IQ4_NL has no tile: below the GEMM its decode kernel */
GI_DECODE_SLOT(GI_TARGET, OW_ROWS_GEMM_AVX2_VNNI, vec_dot_iq4_nl_q8_0_gemm_avx2_vnni, GI_ROWS_OF(iq4_nl, q8_0),
               vec_dot_iq4_nl_q8_0_avx2_vnni)
#undef GI_ROWS_OF
#undef GI_TARGET
#undef GI_VNNI
#endif
