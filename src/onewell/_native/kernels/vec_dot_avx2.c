/* AVX2 dot kernels in two flavours from one source (vec_dot_x86_256.inc, which includes issue 10's Q2_K / Q3_K /
 * BF16 ones from vec_dot_q23k_bf16_x86_256.inc): plain AVX2, where u8 x s8 byte products go through vpmaddubsw +
 * vpmaddwd, and AVX2 + AVX-VNNI, where vpdpbusd/vpdpwssd do it in one step.
 * The whole extension is built without -m flags; target attributes enable the instructions per function and
 * matvec.c only calls these after checking the CPU. */
#include "vec_dot.h"

#if OW_X86_KERNELS
#include <immintrin.h>

#define OW_SUFFIX avx2
#define OW_TARGET __attribute__((target("avx2,fma,f16c")))
#define OW_VNNI 0
#include "vec_dot_x86_256.inc"
#undef OW_SUFFIX
#undef OW_TARGET
#undef OW_VNNI

#define OW_SUFFIX avx2_vnni
#define OW_TARGET __attribute__((target("avx2,fma,f16c,avxvnni")))
#define OW_VNNI 1
#include "vec_dot_x86_256.inc"
#undef OW_SUFFIX
#undef OW_TARGET
#undef OW_VNNI

#endif
