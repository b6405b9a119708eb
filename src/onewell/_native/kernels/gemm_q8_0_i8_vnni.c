/* The AVX-VNNI path's Q8_0 int8 GEMM with 8 rows in the lanes (gemm_q8_0_i8_rows.inc): vpdpbusd, 32 products of
 * 8 rows per instruction. Intel client CPUs since Alder Lake (and their E-core servers), AMD Zen 5. */
#include "vec_dot.h"

#if OW_X86_KERNELS
#define GI_VNNI 1
#define GI_MASK 0
#define GI_SUFFIX avx2_vnni
#define GI_TARGET __attribute__((target("avx2,fma,f16c,avxvnni")))
#include "gemm_q8_0_i8_rows.inc"
#endif
