/* AVX-512 VNNI prefill tiles of Q4_0 and Q5_0 in their file layout (the AVX-512 path reads these types as they
 * are in the file; only Q8_0 and Q4_1 are repacked there, docs/perf-log.md entry 19).
 *
 * Why: a prefill matmul without a tile runs the decode dot once per vector, redoing each block's unpacking for
 * every vector of the batch. Here each weight row is decoded once into unsigned bytes (the nibbles, plus 16 for
 * Q5_0's fifth bit) that stay in L1, and each further (row, vector, block) costs one vpdpbusd, one convert and
 * one FMA: vpdpbusd multiplies unsigned weights by signed activations directly, where the AVX2 tiles need
 * vpsignb + vpmaddubsw + vpmaddwd. The offset (8 or 16) is removed by the decode kernels' seed, -o times the
 * activation's 4-element sums, computed once per (vector, block) and shared by TV_ROWS rows.
 *
 * Bit-identical to the AVX-512 path's decode kernels (vec_dot_x86_256.inc built as _avx512_256): every int32 lane
 * holds the same integer (sum (q - o) a over the same 4 bytes), each block is added by the same FMA of the same
 * float product d_w * d_x, in block order, and the horizontal sum is the same. One vector (decode) calls the
 * decode kernel itself. */
#include "vec_dot.h"

#if OW_X86_KERNELS
#include "tile_avx2.h"

#define TV_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))
#define TV_INLINE static inline __attribute__((always_inline)) TV_TARGET
#define TV_ROWS 4           /* rows per pass: 4 rows x 4 vectors of accumulators fit the 32 vector registers */

/* A decoded row: 32 unsigned quant bytes per block and the block scales as floats (+ 8 zeros: read in groups). */
typedef struct {
    uint8_t q[TA_MAX_BLOCKS * OW_QK] __attribute__((aligned(32)));
    float d[TA_MAX_BLOCKS + 8] __attribute__((aligned(32)));
} tv_row;

TV_INLINE void tv_decode_q4_0(const uint8_t *w, int64_t nb, tv_row *row) {
    const ow_block_q4_0 *wb = (const ow_block_q4_0 *)w;
    for (int64_t b = 0; b < nb; b++) {
        _mm256_store_si256((__m256i *)(row->q + OW_QK * b), ta_nibbles(wb[b].qs));
        row->d[b] = _cvtsh_ss(wb[b].d);
    }
    ta_pad_scales(row->d, nb);
}

TV_INLINE void tv_decode_q5_0(const uint8_t *w, int64_t nb, tv_row *row) {
    const ow_block_q5_0 *wb = (const ow_block_q5_0 *)w;
    for (int64_t b = 0; b < nb; b++) {   /* byte j gets 16 where bit j of qh is set */
        const __m256i bit4 = _mm256_maskz_mov_epi8(_cvtu32_mask32(ow_read_u32(wb[b].qh)), _mm256_set1_epi8(0x10));
        _mm256_store_si256((__m256i *)(row->q + OW_QK * b), _mm256_or_si256(ta_nibbles(wb[b].qs), bit4));
        row->d[b] = _cvtsh_ss(wb[b].d);
    }
    ta_pad_scales(row->d, nb);
}

/* NR decoded rows against NV Q8_0 vectors (xs: the vectors' float scales, nb apart, zero-padded by 8). Per 8
 * blocks the products d_w * d_x come from one vmulps per (row, vector); each block's FMA takes its product by a
 * broadcast load. */
TV_INLINE void tv_dots(const tv_row *rows, int64_t nb, const uint8_t *x, size_t x_stride, const float *xs,
                       char offset, float *y, int64_t y_stride, const int NR, const int NV) {
    __m256 acc[TV_ROWS][TA_VECS];
    float prod[TV_ROWS][TA_VECS][8] __attribute__((aligned(32)));
    const __m256i o = _mm256_set1_epi8(offset);
    for (int r = 0; r < NR; r++)
        for (int v = 0; v < NV; v++) acc[r][v] = _mm256_setzero_ps();
    for (int64_t b0 = 0; b0 < nb; b0 += 8) {
        for (int r = 0; r < NR; r++) {
            const __m256 dw8 = _mm256_load_ps(rows[r].d + b0);
            for (int v = 0; v < NV; v++)
                _mm256_store_ps(prod[r][v], _mm256_mul_ps(dw8, _mm256_loadu_ps(xs + (int64_t)v * nb + b0)));
        }
        const int64_t b_end = b0 + 8 < nb ? b0 + 8 : nb;
        for (int64_t b = b0; b < b_end; b++) {
            __m256i q[TV_ROWS];
            for (int r = 0; r < NR; r++) q[r] = _mm256_load_si256((const __m256i *)(rows[r].q + OW_QK * b));
            for (int v = 0; v < NV; v++) {
                const ow_block_q8_0 *xb = (const ow_block_q8_0 *)(x + (size_t)v * x_stride) + b;
                const __m256i a = _mm256_loadu_si256((const __m256i *)xb->qs);
                const __m256i zero = _mm256_setzero_si256();
                const __m256i seed = _mm256_sub_epi32(zero, _mm256_dpbusd_epi32(zero, o, a));
                for (int r = 0; r < NR; r++) {
                    const __m256i p = _mm256_dpbusd_epi32(seed, q[r], a);
                    acc[r][v] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_broadcast_ss(&prod[r][v][b - b0]),
                                                acc[r][v]);
                }
            }
        }
    }
    for (int v = 0; v < NV; v++)
        for (int r = 0; r < NR; r++) y[(int64_t)v * y_stride + r] = ta_hsum(acc[r][v]);
}

/* NR rows (1..TV_ROWS) against every vector of the group, TA_VECS at a time */
#define TV_CALL(NV) tv_dots(rows, nb, xb + (size_t)v * x_stride, x_stride, xs + (int64_t)v * nb, offset, \
                            yv + (int64_t)v * y_stride + r, y_stride, NR, NV)
TV_INLINE void tv_rows_all_vectors(const tv_row *rows, int64_t nb, const uint8_t *xb, size_t x_stride,
                                   const float *xs, char offset, float *yv, int64_t y_stride, int64_t r, int nv,
                                   const int NR) {
    TA_ALL_VECTORS(TV_CALL, nv);
}
#undef TV_CALL

/* ---- 512-bit: two rows per register ----
 * On a CPU with full-width 512-bit units (the Intel Xeon of perf-log entry 24 runs vpdpbusd, vcvtdq2ps and the FMA
 * on zmm registers at ~1.8 per cycle, as on ymm at 2) a zmm register holds one block of two rows, row r in the
 * low half and r + 1 in the high half, the activation block broadcast to both. Per (row pair, vector, block) a
 * multiply makes the two scale products, then vpdpbusd, convert and FMA: 4 instructions for 64 products where the
 * 256-bit tile above needs 3 for 32. Lane for lane the same integers, products and FMAs in the same block order,
 * each half summed by ta_hsum: bit-identical to the 256-bit tile. Zen 4 splits 512-bit work into two 256-bit
 * halves, so it keeps the 256-bit tile (ow_wide_tiles). */
#ifndef TW_PAIRS
#define TW_PAIRS 4   /* row pairs per pass: 4 pairs x 4 vectors of accumulators */
#endif

typedef struct {   /* a decoded row pair: per block the two rows' quant bytes side by side, their scales likewise */
    uint8_t q[TA_MAX_BLOCKS * 64] __attribute__((aligned(64)));
    float d[TA_MAX_BLOCKS * 16] __attribute__((aligned(64)));
} tw_pair;

/* rows r and r + 1 from their 256-bit decodes (tv_row): quants interleaved by block, scales as 8 + 8 lanes */
TV_INLINE void tw_join(const tv_row *r0, const tv_row *r1, int64_t nb, tw_pair *pair) {
    for (int64_t b = 0; b < nb; b++) {
        _mm256_store_si256((__m256i *)(pair->q + 64 * b), _mm256_load_si256((const __m256i *)(r0->q + OW_QK * b)));
        _mm256_store_si256((__m256i *)(pair->q + 64 * b + 32), _mm256_load_si256((const __m256i *)(r1->q + OW_QK * b)));
        _mm256_store_ps(pair->d + 16 * b, _mm256_set1_ps(r0->d[b]));
        _mm256_store_ps(pair->d + 16 * b + 8, _mm256_set1_ps(r1->d[b]));
    }
}

/* TW_PAIRS row pairs against NV Q8_0 vectors (xs: the vectors' float scales, nb apart) */
TV_INLINE void tw_dots(const tw_pair *pairs, int64_t nb, const uint8_t *x, size_t x_stride, const float *xs,
                       char offset, float *y, int64_t y_stride, const int NV) {
    __m512 acc[TW_PAIRS][TA_VECS];
    const __m512i o = _mm512_set1_epi8(offset), zero = _mm512_setzero_si512();
    for (int p = 0; p < TW_PAIRS; p++)
        for (int v = 0; v < NV; v++) acc[p][v] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        __m512i q[TW_PAIRS];
        __m512 dw[TW_PAIRS];
        for (int p = 0; p < TW_PAIRS; p++) {
            q[p] = _mm512_load_si512((const void *)(pairs[p].q + 64 * b));
            dw[p] = _mm512_load_ps(pairs[p].d + 16 * b);
        }
        for (int v = 0; v < NV; v++) {
            const ow_block_q8_0 *xb = (const ow_block_q8_0 *)(x + (size_t)v * x_stride) + b;
            const __m512i a = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)xb->qs));
            const __m512i seed = _mm512_sub_epi32(zero, _mm512_dpbusd_epi32(zero, o, a));
            const __m512 dx = _mm512_set1_ps(xs[(int64_t)v * nb + b]);
            for (int p = 0; p < TW_PAIRS; p++)
                acc[p][v] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_dpbusd_epi32(seed, q[p], a)),
                                            _mm512_mul_ps(dw[p], dx), acc[p][v]);
        }
    }
    for (int v = 0; v < NV; v++)
        for (int p = 0; p < TW_PAIRS; p++) {
            y[(int64_t)v * y_stride + 2 * p] = ta_hsum(_mm512_castps512_ps256(acc[p][v]));
            y[(int64_t)v * y_stride + 2 * p + 1] =   /* the high half (AVX512F has no 32x8 extract) */
                ta_hsum(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc[p][v]), 1)));
        }
}

#define TW_CALL(NV) tw_dots(pairs, nb, xb + (size_t)v * x_stride, x_stride, xs + (int64_t)v * nb, offset, \
                            yv + (int64_t)v * y_stride + r, y_stride, NV)
TV_INLINE void tw_rows_all_vectors(const tw_pair *pairs, int64_t nb, const uint8_t *xb, size_t x_stride,
                                   const float *xs, char offset, float *yv, int64_t y_stride, int64_t r, int nv) {
    TA_ALL_VECTORS(TW_CALL, nv);
}
#undef TW_CALL

/* The tile of a type: per group of vectors (ta_tile_frame), rows are decoded TV_ROWS at a time and each group of
 * rows is dotted with every vector (as row pairs in zmm registers where ow_wide_tiles() says so). */
#define TV_TILE(name, wtype, offset)                                                                          \
    TV_INLINE void tv_group_##name(TA_GROUP_ARGS) {                                                           \
        tv_row rows[TV_ROWS];                                                                                 \
        int64_t r = 0;                                                                                        \
        if (ow_wide_tiles()) {                                                                                \
            tw_pair pairs[TW_PAIRS];                                                                          \
            for (; r + 2 * TW_PAIRS <= nr; r += 2 * TW_PAIRS) {                                               \
                for (int p = 0; p < TW_PAIRS; p++) {                                                          \
                    tv_decode_##wtype(w + (size_t)(r + 2 * p) * w_stride, nb, &rows[0]);                      \
                    tv_decode_##wtype(w + (size_t)(r + 2 * p + 1) * w_stride, nb, &rows[1]);                  \
                    tw_join(&rows[0], &rows[1], nb, &pairs[p]);                                               \
                }                                                                                             \
                tw_rows_all_vectors(pairs, nb, xb, x_stride, xs, offset, yv, y_stride, r, nv);                \
            }                                                                                                 \
        }                                                                                                     \
        for (; r + TV_ROWS <= nr; r += TV_ROWS) {                                                             \
            for (int i = 0; i < TV_ROWS; i++) tv_decode_##wtype(w + (size_t)(r + i) * w_stride, nb, &rows[i]); \
            tv_rows_all_vectors(rows, nb, xb, x_stride, xs, offset, yv, y_stride, r, nv, TV_ROWS);            \
        }                                                                                                     \
        for (; r < nr; r++) {                                                                                 \
            tv_decode_##wtype(w + (size_t)r * w_stride, nb, &rows[0]);                                        \
            tv_rows_all_vectors(rows, nb, xb, x_stride, xs, offset, yv, y_stride, r, nv, 1);                  \
        }                                                                                                     \
    }                                                                                                         \
    TV_TARGET void vec_dot_##name##_tile_avx512(OW_TILE_ARGS) {                                               \
        ta_tile_frame(vec_dot_##name##_avx512_256, ta_scales_signed, 1, tv_group_##name, n_cols, w, w_stride, \
                      nr, x, x_stride, n_vec, y, y_stride);                                                   \
    }

TV_TILE(q4_0_q8_0, q4_0, 8)
TV_TILE(q5_0_q8_0, q5_0, 16)

#endif
