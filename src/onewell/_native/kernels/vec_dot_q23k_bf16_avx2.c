/* AVX2 dot kernels of Q2_K, Q3_K and BF16 from vec_dot_q23k_bf16_x86_256.inc. The AVX2-VNNI and
 * AVX-512 paths fall back to these (type_traits.c): the machine they were written on (Zen 3) has neither, so no
 * variant is built that could not be tested there. */
#include "vec_dot.h"

#if OW_X86_KERNELS
#include <immintrin.h>

#define OW_SUFFIX avx2
#define OW_TARGET __attribute__((target("avx2,fma,f16c")))
#define OW_VNNI 0
#include "vec_dot_q23k_bf16_x86_256.inc"
#undef OW_SUFFIX
#undef OW_TARGET
#undef OW_VNNI

#endif
