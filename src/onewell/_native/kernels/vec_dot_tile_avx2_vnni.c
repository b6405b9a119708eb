/* The same tiles with AVX-VNNI's vpdpbusd (tile_q32_x86_256.inc): Intel client CPUs since Alder Lake, AMD Zen 5 */
#include "vec_dot.h"

#if OW_X86_KERNELS
#define TQ_VNNI 1
#include "tile_q32_x86_256.inc"
#endif
