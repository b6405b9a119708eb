/* x86 dot kernels of Q2_K, Q3_K and BF16 from vec_dot_q23k_bf16_x86_256.inc: AVX2 (every type), and the Q2_K / Q3_K
 * ones again with AVX-VNNI and with the EVEX VNNI of AVX-512 (suffix _avx512_256), where vpdpwssd multiplies the
 * pair sums by the sub-block scales and adds them in one step (perf-log 33). BF16 has no integer work to gain: its
 * VNNI and AVX-512 paths fall back to the AVX2 kernel (type_traits.c), or run vec_dot_bf16_avx512.c's. */
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

#define OW_SUFFIX avx2_vnni
#define OW_TARGET __attribute__((target("avx2,fma,f16c,avxvnni")))
#define OW_VNNI 1
#include "vec_dot_q23k_bf16_x86_256.inc"
#undef OW_SUFFIX
#undef OW_TARGET
#undef OW_VNNI

#define OW_SUFFIX avx512_256
#define OW_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))
#define OW_VNNI 2
#include "vec_dot_q23k_bf16_x86_256.inc"
#undef OW_SUFFIX
#undef OW_TARGET
#undef OW_VNNI

#endif
