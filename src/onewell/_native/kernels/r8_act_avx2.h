/* The activation side of the R8 layouts' AVX2 kernels (q8_0_r8.h, q4_r8.h): a vector's quants interleaved once
 * per call as the weights' chunks are, so one 32-byte load meets 8 blocks' bytes in the lanes of their blocks. */
#ifndef ONEWELL_R8_ACT_AVX2_H
#define ONEWELL_R8_ACT_AVX2_H

#include <string.h>

#include "q8_0_r8.h"
#include "tile_avx2.h"

/* nb activation blocks at x, block_bytes apart with their 32 quants at byte qs_at: chunk j of the group at block g
 * (4m bytes at 32 g + 4 m j: bytes 4j..4j+3 of blocks g..g+m-1) into xi, then 32 zero bytes. A full group is an
 * 8 x 8 transpose of int32. */
TA_INLINE void r8_interleave_quants(const uint8_t *x, size_t block_bytes, size_t qs_at, int64_t nb, int8_t *xi) {
    int64_t g = 0;
    for (; g + OW_R8_GROUP <= nb; g += OW_R8_GROUP) {
        __m256 c[8];   /* row k = block g + k's 8 int32; transposed, row j = chunk j */
        for (int k = 0; k < 8; k++)
            c[k] = _mm256_loadu_ps((const float *)(x + (size_t)(g + k) * block_bytes + qs_at));
        ta_transpose8_ps(c);
        for (int j = 0; j < 8; j++) _mm256_storeu_ps((float *)(xi + 32 * g + 32 * j), c[j]);
    }
    if (g < nb) {
        const int m = (int)(nb - g);
        for (int k = 0; k < m; k++)
            for (int j = 0; j < 8; j++)
                memcpy(xi + 32 * g + 4 * m * j + 4 * k, x + (size_t)(g + k) * block_bytes + qs_at + 4 * j, 4);
    }
    memset(xi + 32 * nb, 0, 32);
}

#endif
