/* What the R8 layouts' AVX2 kernels (q8_0_r8.h, q4_r8.h, qk_r8.h) share: a vector's quants interleaved once per
 * call as the weights' chunks are, so one 32-byte load meets 8 blocks' bytes in the lanes of their blocks; the order
 * in which a call's rows meet its vectors; and the prefill on rows turned back into the file's blocks. */
#ifndef ONEWELL_R8_ACT_AVX2_H
#define ONEWELL_R8_ACT_AVX2_H

#include <stdlib.h>
#include <string.h>

#include "q8_0_r8.h"
#include "tile_avx2.h"
#include "vec_dot.h"
#include "vec_dot_x86_rows.h"

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

/* The inverse for 4 chunks of 32 bytes at c (a group's nibble chunks, as the weights store them): a 4 x 8 transpose
 * of int32 giving u[k] = block (sub-block) k's 16 bytes in its low half and k + 4's in its high half, in order */
TA_INLINE void r8_chunks_to_blocks(const uint8_t *c, __m256i u[4]) {
    __m256i x[4];
    for (int j = 0; j < 4; j++) x[j] = _mm256_loadu_si256((const __m256i *)(c + 32 * j));
    const __m256i t0 = _mm256_unpacklo_epi32(x[0], x[1]), t1 = _mm256_unpackhi_epi32(x[0], x[1]);
    const __m256i t2 = _mm256_unpacklo_epi32(x[2], x[3]), t3 = _mm256_unpackhi_epi32(x[2], x[3]);
    u[0] = _mm256_unpacklo_epi64(t0, t2), u[1] = _mm256_unpackhi_epi64(t0, t2);   /* 0 | 4, 1 | 5 */
    u[2] = _mm256_unpacklo_epi64(t1, t3), u[3] = _mm256_unpackhi_epi64(t1, t3);   /* 2 | 6, 3 | 7 */
}

/* n_vec interleaved vectors against nr rows at w, w + w_stride, ... (y[v * y_stride + r]): pairs from the two halves
 * of the call's rows (two streams from memory, as the file layouts' kernels read), then the odd row; each pair meets
 * every vector while it is in L1, so a batch of a few sequences streams the weights once. Each (row, vector) runs
 * the operations it runs alone: the one-vector result bit for bit. ROWS(rows, R, last, v, out) computes R (1 or 2)
 * rows against vector v into out[0..R-1]; `last` says row R - 1 is the call's last (no row after it to read into). */
#define OW_R8_ROW_PAIRS(w, w_stride, nr, n_vec, y, y_stride, ROWS)                                        \
    do {                                                                                                 \
        const size_t distance_ = ow_r16_prefetch();                                                      \
        const int half_ = (nr) / 2;                                                                      \
        const size_t apart_ = (size_t)half_ * (w_stride);                                                \
        for (int i_ = 0; i_ < half_; i_++) {                                                             \
            const uint8_t *rows_[2] = {(w) + (size_t)i_ * (w_stride), (w) + (size_t)i_ * (w_stride) + apart_}; \
            if (distance_) {                                                                             \
                ow_prefetch_row(rows_[0], (w_stride), distance_);                                        \
                ow_prefetch_row(rows_[1], (w_stride), distance_);                                        \
            }                                                                                            \
            for (int v_ = 0; v_ < (n_vec); v_++) {                                                       \
                float pair_[2];                                                                          \
                ROWS(rows_, 2, (nr) % 2 == 0 && i_ == half_ - 1, v_, pair_);                             \
                (y)[v_ * (y_stride) + i_] = pair_[0];                                                    \
                (y)[v_ * (y_stride) + i_ + half_] = pair_[1];                                            \
            }                                                                                            \
        }                                                                                                \
        if ((nr) % 2) {                                                                                  \
            const uint8_t *row_[1] = {(w) + (size_t)((nr) - 1) * (w_stride)};                            \
            for (int v_ = 0; v_ < (n_vec); v_++) ROWS(row_, 1, 1, v_, (y) + v_ * (y_stride) + (nr) - 1); \
        }                                                                                                \
    } while (0)

/* Prefill: slabs of rows turned back into the file's blocks (file_row bytes each; `unpack` does one row) in a
 * buffer of at most ~256 KiB, so they stay in L2 for the GEMM's passes, each multiplied by the file type's GEMM
 * (`file_gemm`): its results. 0 if the buffer could not be had. */
TA_INLINE int r8_prefill_slabs(void (*unpack)(const uint8_t *, uint8_t *, int64_t), size_t file_row, ow_tile_fn file_gemm,
                               OW_TILE_ARGS) {
    size_t slab = ((size_t)256 << 10) / file_row / 8 * 8;
    slab = slab < 8 ? 8 : slab > 64 ? 64 : slab;
    if (slab > (size_t)nr) slab = (size_t)nr;
    uint8_t *buf = malloc(slab * file_row);
    if (!buf) return 0;
    for (int r0 = 0; r0 < nr; r0 += (int)slab) {
        const int n = nr - r0 < (int)slab ? nr - r0 : (int)slab;
        for (int i = 0; i < n; i++) unpack(w + (size_t)(r0 + i) * w_stride, buf + (size_t)i * file_row, n_cols);
        file_gemm(n_cols, buf, file_row, n, x, x_stride, n_vec, y + r0, y_stride);
    }
    free(buf);
    return 1;
}

#endif
