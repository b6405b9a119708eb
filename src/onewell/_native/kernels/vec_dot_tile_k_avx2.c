/* AVX2 prefill tiles of Q4_K and Q6_K (Q8_K activations): each weight row is decoded once into element-order
 * bytes and 16-bit scale vectors in a scratch that stays in L1, then dotted with every activation vector, rows in
 * pairs and TA_VECS vectors at a time.
 *
 * Why (docs/perf-log.md, entry 18): without a tile a prefill matmul runs the decode dot once per vector, so each
 * vector redoes the row's unpacking (nibbles, the 6-bit scales and mins, Q6_K's high bits, the scale shuffles),
 * which is more work than the products. Here each further vector and 32 elements cost a load, vpmaddubsw,
 * vpmaddwd against the stored scale vector and an add; per 256 elements the block's float arithmetic.
 *
 * Bit-identical to the decode kernels (vec_dot_x86_256.inc's tile_q45_K and tile_q6_K) for every vector: the same
 * int32 lane sums (integer, so the order of the adds does not matter), the same per-block fma of d_w * d_x and,
 * for Q4_K, of -dmin_w * d_x times the mins' dot with the sub-block sums, and the same horizontal sums. */
#include "vec_dot.h"

#if OW_X86_KERNELS
#include "tile_avx2.h"

#define TK_MAX_BLOCKS 80   /* rows up to 20,480 columns (Qwen2.5-7B's 18,944) decode into the scratch */

/* A decoded row: per block the 256 quants in element order (unsigned: Q4_K 0..15, Q6_K 0..63), per 32 elements
 * the 16-bit scale vector the decode kernel multiplies their byte-pair sums by, and the block's floats. */
typedef struct {
    uint8_t q[TK_MAX_BLOCKS][OW_QK_K] __attribute__((aligned(32)));
    __m256i scale[TK_MAX_BLOCKS][OW_QK_K / 32];
    __m256i extra[TK_MAX_BLOCKS];   /* Q4_K: the 8 mins as words (low half); Q6_K: the 16 scales as words */
    float d[TK_MAX_BLOCKS];         /* the fp16 d as float */
    float neg_dmin[TK_MAX_BLOCKS];  /* Q4_K: -dmin as float */
} tk_row;

TA_INLINE void tk_decode_q4_K(const uint8_t *w, int64_t nb, tk_row *row) {
    const ow_block_q4_K *wb = (const ow_block_q4_K *)w;
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    for (int64_t b = 0; b < nb; b++) {
        for (int c = 0; c < 4; c++) {   /* 64 elements: sub-block 2c in the low nibbles, 2c+1 in the high */
            const __m256i q4 = _mm256_loadu_si256((const __m256i *)(wb[b].qs + 32 * c));
            _mm256_store_si256((__m256i *)(row->q[b] + 64 * c), _mm256_and_si256(q4, low4));
            _mm256_store_si256((__m256i *)(row->q[b] + 64 * c + 32), _mm256_and_si256(_mm256_srli_epi16(q4, 4), low4));
        }
        uint8_t scales[8], mins[8];
        ow_unpack_k4_scales(wb[b].scales, scales, mins);
        for (int k = 0; k < 8; k++) row->scale[b][k] = _mm256_set1_epi16(scales[k]);
        row->extra[b] = _mm256_castsi128_si256(_mm_setr_epi16(mins[0], mins[1], mins[2], mins[3], mins[4], mins[5],
                                                              mins[6], mins[7]));
        row->d[b] = _cvtsh_ss(wb[b].d);
        row->neg_dmin[b] = -_cvtsh_ss(wb[b].dmin);
    }
}

TA_INLINE void tk_decode_q6_K(const uint8_t *w, int64_t nb, tk_row *row) {
    const ow_block_q6_K *wb = (const ow_block_q6_K *)w;
    const __m256i low4 = _mm256_set1_epi8(0x0f), bits45 = _mm256_set1_epi8(0x30);
    for (int64_t b = 0; b < nb; b++) {
        for (int half = 0; half < 2; half++) {   /* elements +0, +32, +64, +96 of this half, as the decode kernel */
            const __m256i ql0 = _mm256_loadu_si256((const __m256i *)(wb[b].ql + 64 * half));
            const __m256i ql1 = _mm256_loadu_si256((const __m256i *)(wb[b].ql + 64 * half + 32));
            const __m256i qh = _mm256_loadu_si256((const __m256i *)(wb[b].qh + 32 * half));
            uint8_t *q = row->q[b] + 128 * half;
            _mm256_store_si256((__m256i *)q, _mm256_or_si256(_mm256_and_si256(ql0, low4),
                                                              _mm256_and_si256(_mm256_slli_epi16(qh, 4), bits45)));
            _mm256_store_si256((__m256i *)(q + 32), _mm256_or_si256(_mm256_and_si256(ql1, low4),
                                                                     _mm256_and_si256(_mm256_slli_epi16(qh, 2), bits45)));
            _mm256_store_si256((__m256i *)(q + 64), _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), low4),
                                                                     _mm256_and_si256(qh, bits45)));
            _mm256_store_si256((__m256i *)(q + 96), _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), low4),
                                                                     _mm256_and_si256(_mm256_srli_epi16(qh, 2), bits45)));
        }
        const int8_t *sc = wb[b].scales;
        for (int g = 0; g < 8; g++)   /* 32 elements: scale 2g for the first 16 (low lane), 2g+1 for the last 16 */
            row->scale[b][g] = _mm256_setr_m128i(_mm_set1_epi16(sc[2 * g]), _mm_set1_epi16(sc[2 * g + 1]));
        row->extra[b] = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)sc));
        row->d[b] = _cvtsh_ss(wb[b].d);
    }
}

/* The 8 chunks of 32 elements of block b: isum[r][v] += (byte-pair sums of q_r a_v) x the scale vector. */
TA_INLINE void tk_block_products(const tk_row *rows, int64_t b, const ow_block_q8_K *const *xb, __m256i isum[2][TA_VECS],
                                 const int NR, const int NV) {
    for (int k = 0; k < OW_QK_K / 32; k++) {
        __m256i q[2];
        for (int r = 0; r < NR; r++) q[r] = _mm256_load_si256((const __m256i *)(rows[r].q[b] + 32 * k));
        for (int v = 0; v < NV; v++) {
            const __m256i a = _mm256_loadu_si256((const __m256i *)(xb[v][b].qs + 32 * k));
            for (int r = 0; r < NR; r++)
                isum[r][v] = _mm256_add_epi32(isum[r][v],
                                              _mm256_madd_epi16(_mm256_maddubs_epi16(q[r], a), rows[r].scale[b][k]));
        }
    }
}

/* NR (1 or 2) decoded Q4_K rows against NV vectors */
TA_INLINE void tk_dots_q4_K(const tk_row *rows, int64_t nb, const uint8_t *x, size_t x_stride, float *y,
                            int64_t y_stride, const int NR, const int NV) {
    const ow_block_q8_K *xb[TA_VECS];
    __m256 acc[2][TA_VECS];
    __m128 acc_min[2][TA_VECS];
    for (int v = 0; v < NV; v++) xb[v] = (const ow_block_q8_K *)(x + (size_t)v * x_stride);
    for (int r = 0; r < NR; r++)
        for (int v = 0; v < NV; v++) { acc[r][v] = _mm256_setzero_ps(); acc_min[r][v] = _mm_setzero_ps(); }
    for (int64_t b = 0; b < nb; b++) {
        __m256i isum[2][TA_VECS];
        for (int r = 0; r < NR; r++)
            for (int v = 0; v < NV; v++) isum[r][v] = _mm256_setzero_si256();
        tk_block_products(rows, b, xb, isum, NR, NV);
        for (int v = 0; v < NV; v++) {
            const float dx = xb[v][b].d;
            const __m256i bsums = _mm256_loadu_si256((const __m256i *)xb[v][b].bsums);
            const __m128i sub_sums = _mm_hadd_epi16(_mm256_castsi256_si128(bsums), _mm256_extracti128_si256(bsums, 1));
            for (int r = 0; r < NR; r++) {
                const __m128i min_dot = _mm_madd_epi16(_mm256_castsi256_si128(rows[r].extra[b]), sub_sums);
                acc_min[r][v] = _mm_fmadd_ps(_mm_set1_ps(rows[r].neg_dmin[b] * dx), _mm_cvtepi32_ps(min_dot),
                                             acc_min[r][v]);
                acc[r][v] = _mm256_fmadd_ps(_mm256_set1_ps(rows[r].d[b] * dx), _mm256_cvtepi32_ps(isum[r][v]), acc[r][v]);
            }
        }
    }
    for (int v = 0; v < NV; v++)
        for (int r = 0; r < NR; r++) y[(int64_t)v * y_stride + r] = ta_hsum(acc[r][v]) + ta_hsum128(acc_min[r][v]);
}

/* NR decoded Q6_K rows against NV vectors: weight ~ q - 32, the 32 * sum(scale * activation) offset from bsums
 * seeds each block's integer sum */
TA_INLINE void tk_dots_q6_K(const tk_row *rows, int64_t nb, const uint8_t *x, size_t x_stride, float *y,
                            int64_t y_stride, const int NR, const int NV) {
    const ow_block_q8_K *xb[TA_VECS];
    __m256 acc[2][TA_VECS];
    for (int v = 0; v < NV; v++) xb[v] = (const ow_block_q8_K *)(x + (size_t)v * x_stride);
    for (int r = 0; r < NR; r++)
        for (int v = 0; v < NV; v++) acc[r][v] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        __m256i isum[2][TA_VECS];
        for (int v = 0; v < NV; v++) {
            const __m256i bsums = _mm256_loadu_si256((const __m256i *)xb[v][b].bsums);
            for (int r = 0; r < NR; r++)
                isum[r][v] = _mm256_sub_epi32(_mm256_setzero_si256(),
                                              _mm256_slli_epi32(_mm256_madd_epi16(rows[r].extra[b], bsums), 5));
        }
        tk_block_products(rows, b, xb, isum, NR, NV);
        for (int v = 0; v < NV; v++)
            for (int r = 0; r < NR; r++)
                acc[r][v] = _mm256_fmadd_ps(_mm256_set1_ps(rows[r].d[b] * xb[v][b].d), _mm256_cvtepi32_ps(isum[r][v]),
                                            acc[r][v]);
    }
    for (int v = 0; v < NV; v++)
        for (int r = 0; r < NR; r++) y[(int64_t)v * y_stride + r] = ta_hsum(acc[r][v]);
}

/* The tile entry (an any_rows tile: nr is a whole matmul chunk): one vector or an over-long row goes to the
 * decode kernel; otherwise the rows are decoded two at a time and dotted with every vector. */
#define TK_TILE(type)                                                                                        \
    TA_TARGET void vec_dot_##type##_q8_K_tile_avx2(OW_TILE_ARGS) {                                           \
        const int64_t nb = n_cols / OW_QK_K;                                                                 \
        if (n_vec < 2 || nb > TK_MAX_BLOCKS) {                                                               \
            ta_by_decode_kernel(vec_dot_##type##_q8_K_avx2, n_cols, w, w_stride, nr, x, x_stride, n_vec, y,  \
                                y_stride);                                                                   \
            return;                                                                                          \
        }                                                                                                    \
        const uint8_t *xv = x;                                                                               \
        tk_row rows[2];                                                                                      \
        int r = 0;                                                                                           \
        for (; r + 2 <= nr; r += 2) {   /* rows in pairs: each activation load serves both */                \
            tk_decode_##type(w + (size_t)r * w_stride, nb, &rows[0]);                                        \
            tk_decode_##type(w + (size_t)(r + 1) * w_stride, nb, &rows[1]);                                  \
            TA_ALL_VECTORS(TK_PAIR_CALL_##type, n_vec);                                                     \
        }                                                                                                    \
        if (r < nr) {                                                                                        \
            tk_decode_##type(w + (size_t)r * w_stride, nb, &rows[0]);                                        \
            TA_ALL_VECTORS(TK_ROW_CALL_##type, n_vec);                                                      \
        }                                                                                                    \
    }
#define TK_CALL(type, NR, NV) \
    tk_dots_##type(rows, nb, xv + (size_t)v * x_stride, x_stride, y + (int64_t)v * y_stride + r, y_stride, NR, NV)
#define TK_PAIR_CALL_q4_K(NV) TK_CALL(q4_K, 2, NV)
#define TK_ROW_CALL_q4_K(NV) TK_CALL(q4_K, 1, NV)
#define TK_PAIR_CALL_q6_K(NV) TK_CALL(q6_K, 2, NV)
#define TK_ROW_CALL_q6_K(NV) TK_CALL(q6_K, 1, NV)

TK_TILE(q4_K)
TK_TILE(q6_K)

#endif
