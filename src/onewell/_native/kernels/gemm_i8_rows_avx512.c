/* The AVX-512 path's int8 GEMMs with rows in the lanes for Q4_0, Q5_0, IQ4_NL, Q4_1 and Q5_1 (gemm_i8_rows.inc),
 * which that path reads in their file layout, and for Q4_1 and Q8_0 in their R16 layouts (Q8_0 goes to R16 there), and for the K-quants (gemm_k_rows.inc): the EVEX
 * vpdpbusd, on zmm registers with 16 rows per panel where 512-bit integer work runs at full width (ow_wide_tiles:
 * Intel with AMX, perf-log 24), else on ymm registers with 8, as the AVX-VNNI kernels (Zen 4 splits 512-bit work in
 * two; perf-log entries 19, 29). */
#include "gemm_i8_rows_slot.h"

#if OW_X86_KERNELS
#define GI_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))
#define GI_VNNI 2

/* Q4_0, Q5_0, Q4_1, Q5_1, IQ4_NL (gemm_i8_rows_types.inc), on ymm and zmm panels */
#define GI_VARIANT avx512
#include "gemm_i8_rows_types.inc"
#define GI_VARIANT avx512_wide
#define GI_WIDE_VARIANT 1
#include "gemm_i8_rows_types.inc"

#define GI_TYPE 6   /* Q4_1 R16 (q4_1_r16.h) */
#define GI_SUFFIX q4_1r16_avx512
#define GI_NAME vec_dot_q4_1r16_q8_0r16_rows_avx512
#include "gemm_i8_rows.inc"

#define GI_TYPE 6
#define GI_WIDE 1
#define GI_SUFFIX q4_1r16_avx512_wide
#define GI_NAME vec_dot_q4_1r16_q8_0r16_rows_avx512_wide
#include "gemm_i8_rows.inc"

#define GI_TYPE 7   /* Q8_0 R16 (q8_0_r16.h) */
#define GI_SUFFIX q8_0r16_avx512
#define GI_NAME vec_dot_q8_0r16_q8_0r16_rows_avx512
#include "gemm_i8_rows.inc"

#define GI_TYPE 7
#define GI_WIDE 1
#define GI_SUFFIX q8_0r16_avx512_wide
#define GI_NAME vec_dot_q8_0r16_q8_0r16_rows_avx512_wide
#include "gemm_i8_rows.inc"

/* the K-quants (gemm_k_rows_types.inc) */
#define GK_VARIANT avx512
#include "gemm_k_rows_types.inc"
#define GK_VARIANT avx512_wide
#define GK_WIDE_VARIANT 1
#include "gemm_k_rows_types.inc"

/* the Q4_0 / Q5_0 tile slots of this path (gemm_i8_rows_slot.h; its exact tiles: vec_dot_tile_avx512.c) */
#define GI_ROWS_OF(t, a) \
    (ow_wide_tiles() ? vec_dot_##t##_##a##_rows_avx512_wide : vec_dot_##t##_##a##_rows_avx512)
#define GI_SLOT_OF(t, a) \
    GI_SLOT(GI_TARGET, OW_ROWS_GEMM_AVX512, vec_dot_##t##_##a##_gemm_avx512, GI_ROWS_OF(t, a), \
            vec_dot_##t##_##a##_tile_avx512)
GI_SLOT_OF(q4_0, q8_0)
GI_SLOT_OF(q5_0, q8_0)
GI_SLOT_OF(q4_K, q8_K)
GI_SLOT_OF(q5_K, q8_K)
GI_SLOT_OF(q6_K, q8_K)
#undef GI_SLOT_OF
/* Q4_1 R16 and Q8_0 R16: below the GEMM their own tiles (vec_dot_q4_1_r16.c, vec_dot_avx512.c) */
GI_SLOT(GI_TARGET, OW_ROWS_GEMM_AVX512, vec_dot_q4_1r16_q8_0r16_gemm_avx512, GI_ROWS_OF(q4_1r16, q8_0r16),
        vec_dot_q4_1r16_q8_0r16_avx512)
GI_SLOT(GI_TARGET, OW_ROWS_GEMM_AVX512, vec_dot_q8_0r16_q8_0r16_gemm_avx512, GI_ROWS_OF(q8_0r16, q8_0r16),
        vec_dot_q8_0r16_q8_0r16_avx512)
/* Q2_K, Q3_K and IQ4_XS have no tiles: below the GEMM their decode kernels */
GI_DECODE_SLOT(GI_TARGET, OW_ROWS_GEMM_AVX512, vec_dot_q2_K_q8_K_gemm_avx512, GI_ROWS_OF(q2_K, q8_K),
               vec_dot_q2_K_q8_K_avx512_256)
GI_DECODE_SLOT(GI_TARGET, OW_ROWS_GEMM_AVX512, vec_dot_q3_K_q8_K_gemm_avx512, GI_ROWS_OF(q3_K, q8_K),
               vec_dot_q3_K_q8_K_avx512_256)
GI_DECODE_SLOT(GI_TARGET, OW_ROWS_GEMM_AVX512, vec_dot_iq4_xs_q8_K_gemm_avx512, GI_ROWS_OF(iq4_xs, q8_K),
               vec_dot_iq4_xs_q8_K_avx512_256)
/* IQ4_NL, and Q4_1 / Q5_1 in their file layout (Q4_1 is repacked to R16 where that pays), have no tile on this
 * path: below the GEMM their decode kernels (before perf-log 35 those ran once per vector at any batch) */
GI_DECODE_SLOT(GI_TARGET, OW_ROWS_GEMM_AVX512, vec_dot_iq4_nl_q8_0_gemm_avx512, GI_ROWS_OF(iq4_nl, q8_0),
               vec_dot_iq4_nl_q8_0_avx512_256)
GI_DECODE_SLOT(GI_TARGET, OW_ROWS_GEMM_AVX512, vec_dot_q4_1_q8_1_gemm_avx512, GI_ROWS_OF(q4_1, q8_1),
               vec_dot_q4_1_q8_1_avx512_256)
GI_DECODE_SLOT(GI_TARGET, OW_ROWS_GEMM_AVX512, vec_dot_q5_1_q8_1_gemm_avx512, GI_ROWS_OF(q5_1, q8_1),
               vec_dot_q5_1_q8_1_avx512_256)
#undef GI_ROWS_OF
#undef GI_TARGET
#undef GI_VNNI
#endif
