/* The AVX2 path's Q8_0 int8 GEMMs with 8 rows in the lanes (gemm_q8_0_i8_rows.inc): vpmaddubsw + vpmaddwd, the
 * weights' signs put on the activations by vpsignb (rows_gemm 1: 1.17x the float GEMM on an Intel Xeon, perf-log
 * 29) or by xor + sub (rows_gemm 2: 1.07x there; 2 of its 5 instructions on the multiply pipes where Zen 4 runs
 * xor / sub / add beside them, perf-log 20, so cpu_decisions.py measures it on the next AMD CPU). */
#include "vec_dot.h"

#if OW_X86_KERNELS
#define GI_VNNI 0
#define GI_MASK 0
#define GI_SUFFIX avx2
#define GI_TARGET __attribute__((target("avx2,fma,f16c")))
#include "gemm_q8_0_i8_rows.inc"

#define GI_VNNI 0
#define GI_MASK 1
#define GI_SUFFIX avx2_mask
#define GI_TARGET __attribute__((target("avx2,fma,f16c")))
#include "gemm_q8_0_i8_rows.inc"
#endif
