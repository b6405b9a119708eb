/* AVX2 prefill tiles of the ggml 32-element block types (Q8_0, Q4_0, Q5_0 with Q8_0 activations; Q4_1, Q5_1
 * with Q8_1): each weight row is decoded once into bytes in a scratch that stays in L1, then dotted with every
 * activation vector, TA_VECS at a time.
 *
 * Why (docs/perf-log.md, entry 11): without a tile kernel a prefill matmul runs the decode dot once per vector,
 * so a Q5_0 block's unpacking (nibbles, fifth bit, offset) is redone for each of the 64 vectors of a batch. Here
 * it is done once per row, and each further vector costs a load, a sign, vpmaddubsw, vpmaddwd and one fma. Rows
 * go in pairs, so each activation block is loaded (and its scale converted) once for two rows. Q4_0 and Q5_0 go
 * 4 rows by 3 vectors without the sign (the last section: tb_*).
 *
 * Bit-identical to the decode kernels (vec_dot_x86_256.inc) for every vector, so batched and token-by-token
 * runs agree exactly: the same int32 lane sums (sum (q - o) a over 4 bytes is sum q a - o sum a, the decode
 * kernel's seeded form), the same per-block fma of d_w * d_x in the same order, the same horizontal sum and, for
 * the _1 types, the same scalar sum of m * s. One vector (decode) calls the decode kernel itself. */
#include "vec_dot.h"

#if OW_X86_KERNELS
#include "tile_avx2.h"

/* 32 bits -> 32 bytes, 0x10 where bit j is set (the fifth bit of Q5 quants) */
TA_INLINE __m256i ta_bit4(const uint8_t *qh) {
    const __m256i spread = _mm256_shuffle_epi8(_mm256_set1_epi32((int)ow_read_u32(qh)),
        _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0));
    const __m256i select = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(spread, select), select), _mm256_set1_epi8(0x10));
}

/* A decoded row: per block 32 quant bytes (signed q - offset for the _0 types, unsigned q for the _1 types), the
 * scale d (and minimum m) as floats. */
typedef struct {
    int8_t q[TA_MAX_BLOCKS * OW_QK] __attribute__((aligned(32)));
    float d[TA_MAX_BLOCKS + 8] __attribute__((aligned(32)));   /* + 8: ta_scale_products reads whole groups */
    float m[TA_MAX_BLOCKS];
} ta_row;

TA_INLINE void ta_store(ta_row *row, int64_t b, __m256i q) { _mm256_store_si256((__m256i *)(row->q + OW_QK * b), q); }

TA_INLINE void ta_decode_q8_0(const uint8_t *w, int64_t nb, ta_row *row) {
    const ow_block_q8_0 *wb = (const ow_block_q8_0 *)w;
    for (int64_t b = 0; b < nb; b++) {
        ta_store(row, b, _mm256_loadu_si256((const __m256i *)wb[b].qs));
        row->d[b] = _cvtsh_ss(wb[b].d);
    }
}


TA_INLINE void ta_decode_q4_1(const uint8_t *w, int64_t nb, ta_row *row) {
    const ow_block_q4_1 *wb = (const ow_block_q4_1 *)w;
    for (int64_t b = 0; b < nb; b++) {
        ta_store(row, b, ta_nibbles(wb[b].qs));
        row->d[b] = _cvtsh_ss(wb[b].d);
        row->m[b] = _cvtsh_ss(wb[b].m);
    }
}

TA_INLINE void ta_decode_q5_1(const uint8_t *w, int64_t nb, ta_row *row) {
    const ow_block_q5_1 *wb = (const ow_block_q5_1 *)w;
    for (int64_t b = 0; b < nb; b++) {
        ta_store(row, b, _mm256_or_si256(ta_nibbles(wb[b].qs), ta_bit4(wb[b].qh)));
        row->d[b] = _cvtsh_ss(wb[b].d);
        row->m[b] = _cvtsh_ss(wb[b].m);
    }
}

/* The products d_w * d_x of blocks b0..b0+7 for NR rows and NV vectors (xs: the vectors' float scales, nb apart):
 * one vmulps per row and vector instead of one per block; each block then takes its product with a broadcast
 * load, which needs no FP pipe (docs/perf-log.md, entry 18). The same floats as the decode kernel's per-block
 * product. Lanes past nb multiply the zero padding of both scratches. */
TA_INLINE void ta_scale_products(const float *const *dw, int64_t b0, const float *xs, int64_t xs_stride,
                                 float prod[][TA_VECS][8], const int NR, const int NV) {
    for (int r = 0; r < NR; r++) {
        const __m256 dw8 = _mm256_load_ps(dw[r] + b0);
        for (int v = 0; v < NV; v++)
            _mm256_store_ps(prod[r][v], _mm256_mul_ps(dw8, _mm256_loadu_ps(xs + (int64_t)v * xs_stride + b0)));
    }
}

/* NR (1 or 2) decoded rows of signed quants against NV Q8_0 vectors: |q| times a carrying q's sign keeps every
 * pair of products within int16 (vpmaddubsw's unsigned operand is |q| <= 128). Each activation block is loaded
 * once for the NR rows; per row and vector the arithmetic is the decode kernel's. */
TA_INLINE void ta_dots_signed(const ta_row *rows, int64_t nb, const uint8_t *x, size_t x_stride, const float *xs,
                              float *y, int64_t y_stride, const int NR, const int NV) {
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[2][TA_VECS];
    float prod[2][TA_VECS][8] __attribute__((aligned(32)));
    const float *const dw[2] = {rows[0].d, rows[NR - 1].d};
    for (int r = 0; r < NR; r++)
        for (int v = 0; v < NV; v++) acc[r][v] = _mm256_setzero_ps();
    for (int64_t b0 = 0; b0 < nb; b0 += 8) {
        ta_scale_products(dw, b0, xs, nb, prod, NR, NV);
        const int64_t b_end = b0 + 8 < nb ? b0 + 8 : nb;
        for (int64_t b = b0; b < b_end; b++) {
            __m256i q[2], abs_q[2];
            for (int r = 0; r < NR; r++) {
                q[r] = _mm256_load_si256((const __m256i *)(rows[r].q + OW_QK * b));
                abs_q[r] = _mm256_sign_epi8(q[r], q[r]);
            }
            for (int v = 0; v < NV; v++) {
                const ow_block_q8_0 *xb = (const ow_block_q8_0 *)(x + (size_t)v * x_stride) + b;
                const __m256i a = _mm256_loadu_si256((const __m256i *)xb->qs);
                for (int r = 0; r < NR; r++) {
                    const __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(abs_q[r], _mm256_sign_epi8(a, q[r])), ones);
                    acc[r][v] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_broadcast_ss(&prod[r][v][b - b0]),
                                                acc[r][v]);
                }
            }
        }
    }
    for (int v = 0; v < NV; v++)
        for (int r = 0; r < NR; r++) y[(int64_t)v * y_stride + r] = ta_hsum(acc[r][v]);
}

/* NR decoded rows of unsigned quants and minimums against NV Q8_1 vectors: d_w d_x sum(q a) + m_w s_x per block
 * (xs: per vector nb scales d, then nb sums s) */
TA_INLINE void ta_dots_min(const ta_row *rows, int64_t nb, const uint8_t *x, size_t x_stride, const float *xs,
                           float *y, int64_t y_stride, const int NR, const int NV) {
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[2][TA_VECS];
    float mins[2][TA_VECS];
    float prod[2][TA_VECS][8] __attribute__((aligned(32)));
    const float *const dw[2] = {rows[0].d, rows[NR - 1].d};
    for (int r = 0; r < NR; r++)
        for (int v = 0; v < NV; v++) { acc[r][v] = _mm256_setzero_ps(); mins[r][v] = 0.0f; }
    for (int64_t b0 = 0; b0 < nb; b0 += 8) {
        ta_scale_products(dw, b0, xs, 2 * nb, prod, NR, NV);
        const int64_t b_end = b0 + 8 < nb ? b0 + 8 : nb;
        for (int64_t b = b0; b < b_end; b++) {
            __m256i q[2];
            float mw[2];
            for (int r = 0; r < NR; r++) {
                q[r] = _mm256_load_si256((const __m256i *)(rows[r].q + OW_QK * b));
                mw[r] = rows[r].m[b];
            }
            for (int v = 0; v < NV; v++) {
                const ow_block_q8_1 *xb = (const ow_block_q8_1 *)(x + (size_t)v * x_stride) + b;
                const __m256i a = _mm256_loadu_si256((const __m256i *)xb->qs);
                const float sx = xs[(int64_t)v * 2 * nb + nb + b];
                for (int r = 0; r < NR; r++) {
                    const __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(q[r], a), ones);
                    acc[r][v] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_broadcast_ss(&prod[r][v][b - b0]),
                                                acc[r][v]);
                    mins[r][v] += mw[r] * sx;
                }
            }
        }
    }
    for (int v = 0; v < NV; v++)
        for (int r = 0; r < NR; r++) y[(int64_t)v * y_stride + r] = ta_hsum(acc[r][v]) + mins[r][v];
}

/* The activation scales as floats, converted once per group of vectors instead of once per row pair: per vector d
 * (and for Q8_1 then s), nb apart. */
TA_INLINE void ta_scales_min(const uint8_t *x, size_t x_stride, int64_t nb, int n_vec, float *xs) {
    for (int v = 0; v < n_vec; v++) {
        const ow_block_q8_1 *xb = (const ow_block_q8_1 *)(x + (size_t)v * x_stride);
        for (int64_t b = 0; b < nb; b++) {
            xs[(int64_t)v * 2 * nb + b] = _cvtsh_ss(xb[b].d);
            xs[(int64_t)v * 2 * nb + nb + b] = _cvtsh_ss(xb[b].s);
        }
    }
    ta_pad_scales(xs, (int64_t)n_vec * 2 * nb);
}
#define TA_SCALES_PER_VECTOR_signed 1
#define TA_SCALES_PER_VECTOR_min 2

/* The tile of a type: per group of vectors (ta_tile_frame), each of the nr rows is decoded once and dotted with
 * every vector of the group; rows in pairs, so each activation load serves both. */
#define TA_TILE(name, wtype, kind)                                                                           \
    TA_INLINE void ta_group_##name(TA_GROUP_ARGS) {                                                          \
        ta_row rows[2];                                                                                      \
        int r = 0;                                                                                           \
        for (; r + 2 <= nr; r += 2) {                                                                        \
            ta_decode_##wtype(w + (size_t)r * w_stride, nb, &rows[0]);                                       \
            ta_decode_##wtype(w + (size_t)(r + 1) * w_stride, nb, &rows[1]);                                 \
            ta_pad_scales(rows[0].d, nb);                                                                    \
            ta_pad_scales(rows[1].d, nb);                                                                    \
            TA_ALL_VECTORS(TA_PAIR_CALL_##kind, nv);                                                         \
        }                                                                                                    \
        if (r < nr) {                                                                                        \
            ta_decode_##wtype(w + (size_t)r * w_stride, nb, &rows[0]);                                       \
            ta_pad_scales(rows[0].d, nb);                                                                    \
            TA_ALL_VECTORS(TA_ROW_CALL_##kind, nv);                                                          \
        }                                                                                                    \
    }                                                                                                        \
    TA_TARGET void vec_dot_##name##_tile_avx2(OW_TILE_ARGS) {                                                \
        ta_tile_frame(vec_dot_##name##_avx2, ta_scales_##kind, TA_SCALES_PER_VECTOR_##kind, ta_group_##name, \
                      n_cols, w, w_stride, nr, x, x_stride, n_vec, y, y_stride);                             \
    }
#define TA_CALL(kind, NR, NV)                                                                                \
    ta_dots_##kind(rows, nb, xb + (size_t)v * x_stride, x_stride, xs + (int64_t)v * TA_SCALES_PER_VECTOR_##kind * nb, \
                   yv + (int64_t)v * y_stride + r, y_stride, NR, NV)
#define TA_PAIR_CALL_signed(NV) TA_CALL(signed, 2, NV)
#define TA_ROW_CALL_signed(NV) TA_CALL(signed, 1, NV)
#define TA_PAIR_CALL_min(NV) TA_CALL(min, 2, NV)
#define TA_ROW_CALL_min(NV) TA_CALL(min, 1, NV)

TA_TILE(q8_0_q8_0, q8_0, signed)
TA_TILE(q4_1_q8_1, q4_1, min)
TA_TILE(q5_1_q8_1, q5_1, min)

/* ---- Q4_0 and Q5_0: the activations as vpmaddubsw's unsigned operand ----
 * The sign trick above costs a vpsignb per (row, vector, block), and on Zen 4 vpsignb shares FP0/FP1 with
 * vpmaddubsw, vpmaddwd and the FMA, the pipes that bound these tiles (docs/perf-log.md, entry 20). These types'
 * quants are small (|q - o| <= 16), so the activations can be the unsigned operand instead: a + 128 = a ^ 0x80,
 * and (a + 128)(q - o) - 128 (q - o) = a (q - o); pair sums stay within int16 (2 x 255 x 16). The correction,
 * 128 times the quants' sum per int32 lane, is the row's: decoded once with its quants, as floats, and taken off
 * after the conversion by vsubps, which runs on FP2/FP3. Every lane is an integer below 2^24, so the floats are
 * the decode kernel's exactly and the result is bit-identical. The quants are a memory operand, which frees the
 * registers for 4 rows x 3 vectors (12 accumulators). */
#define TB_ROWS 4
#define TB_VECS 3

typedef struct {   /* a decoded row: signed quants q - o, 128 times their sums per int32 lane, the scales */
    int8_t q[TA_MAX_BLOCKS * OW_QK] __attribute__((aligned(32)));
    float c[TA_MAX_BLOCKS * 8] __attribute__((aligned(32)));
    float d[TA_MAX_BLOCKS + 8] __attribute__((aligned(32)));
} ta_brow;

TA_INLINE __m256i ta_quants_q4_0(const ow_block_q4_0 *b) {
    return _mm256_sub_epi8(ta_nibbles(b->qs), _mm256_set1_epi8(8));
}

TA_INLINE __m256i ta_quants_q5_0(const ow_block_q5_0 *b) {
    return _mm256_sub_epi8(_mm256_or_si256(ta_nibbles(b->qs), ta_bit4(b->qh)), _mm256_set1_epi8(16));
}

#define TB_DECODE(wtype)                                                                                     \
    TA_INLINE void tb_decode_##wtype(const uint8_t *w, int64_t nb, ta_brow *row) {                           \
        const ow_block_##wtype *wb = (const ow_block_##wtype *)w;                                            \
        for (int64_t b = 0; b < nb; b++) {                                                                   \
            const __m256i q = ta_quants_##wtype(&wb[b]);                                                     \
            const __m256i sums = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), q),             \
                                                   _mm256_set1_epi16(1));                                    \
            _mm256_store_si256((__m256i *)(row->q + OW_QK * b), q);                                          \
            _mm256_store_ps(row->c + 8 * b, _mm256_cvtepi32_ps(_mm256_slli_epi32(sums, 7)));                 \
            row->d[b] = _cvtsh_ss(wb[b].d);                                                                  \
        }                                                                                                    \
        ta_pad_scales(row->d, nb);                                                                           \
    }
TB_DECODE(q4_0)
TB_DECODE(q5_0)

/* NR (<= 4) decoded rows against NV (<= 3) Q8_0 vectors */
TA_INLINE void tb_dots(const ta_brow *rows, int64_t nb, const uint8_t *x, size_t x_stride, const float *xs,
                       float *y, int64_t y_stride, const int NR, const int NV) {
    const __m256i ones = _mm256_set1_epi16(1), bias = _mm256_set1_epi8((char)0x80);
    __m256 acc[TB_ROWS][TB_VECS];
    float prod[TB_ROWS][TA_VECS][8] __attribute__((aligned(32)));
    const float *dw[TB_ROWS];
    for (int r = 0; r < NR; r++) {
        dw[r] = rows[r].d;
        for (int v = 0; v < NV; v++) acc[r][v] = _mm256_setzero_ps();
    }
    for (int64_t b0 = 0; b0 < nb; b0 += 8) {
        ta_scale_products(dw, b0, xs, nb, prod, NR, NV);
        const int64_t b_end = b0 + 8 < nb ? b0 + 8 : nb;
        for (int64_t b = b0; b < b_end; b++)
            for (int v = 0; v < NV; v++) {
                const ow_block_q8_0 *xb = (const ow_block_q8_0 *)(x + (size_t)v * x_stride) + b;
                const __m256i a = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)xb->qs), bias);
                for (int r = 0; r < NR; r++) {
                    const __m256i q = _mm256_load_si256((const __m256i *)(rows[r].q + OW_QK * b));
                    const __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(a, q), ones);
                    const __m256 lanes = _mm256_sub_ps(_mm256_cvtepi32_ps(p), _mm256_load_ps(rows[r].c + 8 * b));
                    acc[r][v] = _mm256_fmadd_ps(lanes, _mm256_broadcast_ss(&prod[r][v][b - b0]), acc[r][v]);
                }
            }
    }
    for (int v = 0; v < NV; v++)
        for (int r = 0; r < NR; r++) y[(int64_t)v * y_stride + r] = ta_hsum(acc[r][v]);
}

/* NR rows against every vector of the group, TB_VECS at a time */
#define TB_VEC_CALL(NR, NV) tb_dots(rows, nb, xb + (size_t)v * x_stride, x_stride, xs + (int64_t)v * nb,          \
                                    yv + (int64_t)v * y_stride + r, y_stride, NR, NV)
#define TB_ALL_VECTORS(NR)                                                                                   \
    do {                                                                                                     \
        int v = 0;                                                                                           \
        for (; v + TB_VECS <= nv; v += TB_VECS) TB_VEC_CALL(NR, TB_VECS);                                    \
        if (nv - v == 2) TB_VEC_CALL(NR, 2);                                                                 \
        else if (nv - v == 1) TB_VEC_CALL(NR, 1);                                                            \
    } while (0)

/* The tile of a type (as TA_TILE): per group of vectors, rows TB_ROWS at a time, the last 1-3 as they come */
#define TB_TILE(name, wtype)                                                                                 \
    TA_INLINE void tb_group_##name(TA_GROUP_ARGS) {                                                          \
        ta_brow rows[TB_ROWS];                                                                               \
        for (int r = 0; r < nr; r += TB_ROWS) {                                                              \
            const int n = nr - r < TB_ROWS ? nr - r : TB_ROWS;                                               \
            for (int i = 0; i < n; i++) tb_decode_##wtype(w + (size_t)(r + i) * w_stride, nb, &rows[i]);     \
            switch (n) {                                                                                     \
            case 4: TB_ALL_VECTORS(4); break;                                                                \
            case 3: TB_ALL_VECTORS(3); break;                                                                \
            case 2: TB_ALL_VECTORS(2); break;                                                                \
            default: TB_ALL_VECTORS(1); break;                                                               \
            }                                                                                                \
        }                                                                                                    \
    }                                                                                                        \
    TA_TARGET void vec_dot_##name##_tile_avx2(OW_TILE_ARGS) {                                                \
        ta_tile_frame(vec_dot_##name##_avx2, ta_scales_signed, 1, tb_group_##name, n_cols, w, w_stride, nr, x, \
                      x_stride, n_vec, y, y_stride);                                                         \
    }
TB_TILE(q4_0_q8_0, q4_0)
TB_TILE(q5_0_q8_0, q5_0)

#endif
