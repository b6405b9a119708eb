/* The AVX2 prefill tiles of the 32-element types with vpmaddubsw + vpmaddwd (tile_q32_x86_256.inc) */
#include "vec_dot.h"

#if OW_X86_KERNELS
#define TQ_VNNI 0
#include "tile_q32_x86_256.inc"
#endif
