/* AVX2 kernels of the Q4_1 R8, Q5_0 R8, Q4_0 R8 and IQ4_NL R8 layouts (q4_r8.h): decode, and prefill through the
 * file types' GEMMs.
 *
 * Decode (up to OW_FLOAT_GEMM_MIN_VECS - 1 vectors): as Q8_0 R8's (vec_dot_q8_0_r8_avx2.c): each vector's quants
 * interleaved once per call, rows in pairs from the two halves of the call's rows, each pair against every vector. Per group of 8 blocks and row: 4 loads of 32 nibble bytes, each
 * split into its low and high nibbles (Q5_0: each ORed with its fifth bits, one shift and one AND from h'), 8
 * vpmaddubsw of unsigned weights against signed activations summed in int16 (bounded: Q4_1's and Q4_0's 8 results
 * reach 30,720; Q5_0's 4 reach 31,744, so it keeps two sums), one vpmaddwd per sum, then for all 8 blocks one
 * convert, one fp16 conversion, one vmulps and one FMA; Q4_1 adds its minima (m_w times the activation's s, one
 * conversion and one FMA), Q5_0 and Q4_0 subtract 16 or 8 times each activation block's quant sum before the
 * convert (their weights are q - 16 with q in 0..31, q - 8 with q in 0..15). IQ4_NL looks each nibble up in the
 * codebook (vpshufb), gives the value its activation's sign (vpsignb) against the activation's absolute value, and
 * widens every vpmaddubsw result at once (pairs reach 2 x 127 x 127). A row's last m < 8 blocks run as a
 * group (m <= 4: on 128-bit lanes) whose lanes past m meet zero scales (and zero minima), read in place past the
 * row except in the call's last row, which is copied first.
 *
 * Prefill: from OW_FLOAT_GEMM_MIN_VECS vectors (float_gemm knob on) what the file type's AVX2 slot runs: its int8
 * GEMM with rows in the lanes (rows_gemm on), on panels built straight from these rows (gemm_i8_rows.inc, perf-log
 * 46), or else (its exact tile; IQ4_NL's float GEMM at rows_gemm 3) on the rows turned back into the file's blocks, a
 * slab at a time in a buffer that stays in L2: either way the file layout's prefill results. Smaller batches run as
 * decode (bit for bit the one-vector results).
 *
 * No column limit: one vector of rows up to Q4R8_STACK_BLOCKS blocks (16,384 columns) is interleaved on the stack,
 * longer rows and batches into one heap buffer (up to OW_FLOAT_GEMM_MIN_VECS vectors at a time). */
#include "vec_dot.h"

#if OW_X86_KERNELS
#include <stdlib.h>
#include <string.h>

#include "q4_r8.h"
#include "r8_act_avx2.h"
#include "tile_avx2.h"

#define Q4R8_STACK_BLOCKS 512

/* the layouts, a compile-time argument K of every function below */
enum { Q4R8_Q4_1, Q4R8_Q5_0, Q4R8_Q4_0, Q4R8_IQ4_NL };   /* IQ4_NL R8: Q4_0 R8's bytes */
#define Q4R8_BYTES(K) \
    ((K) == Q4R8_Q4_1 ? OW_Q4_1_R8_BLOCK_BYTES : (K) == Q4R8_Q5_0 ? OW_Q5_0_R8_BLOCK_BYTES : OW_Q4_0_R8_BLOCK_BYTES)
#define Q4R8_OFFSET(K) ((K) == Q4R8_Q5_0 ? 16 : 8)   /* Q5_0, Q4_0: weight = d (q - offset) */

/* A vector as the kernel reads it, in Q4R8_VECTOR_BYTES(nb) bytes (32-aligned): its quants interleaved, then the
 * per-block side: its scales as floats, and Q4_1's s (d times its quant sum) as floats or, for Q5_0 and Q4_0, the
 * quant sum times the weights' offset (16, 8) as int32; each then 8 zeros */
#define Q4R8_SIDE_BYTES(nb) ((((size_t)(nb) + 8) * 4 + 31) / 32 * 32)
#define Q4R8_VECTOR_BYTES(nb) ((size_t)(nb) * OW_QK + 32 + 2 * Q4R8_SIDE_BYTES(nb))
typedef struct {
    int8_t *q;
    float *d;
    union { float *s; int32_t *offset_sum; };
} q4r8_vector;

static q4r8_vector q4r8_vector_at(uint8_t *buf, int64_t nb) {
    uint8_t *side = buf + (size_t)nb * OW_QK + 32;
    return (q4r8_vector){(int8_t *)buf, (float *)side, {(float *)(side + Q4R8_SIDE_BYTES(nb))}};
}

TA_INLINE void q4r8_act(const void *x, int64_t nb, const q4r8_vector *v, const int K) {
    if (K == Q4R8_IQ4_NL) {   /* signed weights: no offset to take off */
        const ow_block_q8_0 *b = x;
        r8_interleave_quants(x, sizeof *b, offsetof(ow_block_q8_0, qs), nb, v->q);
        for (int64_t i = 0; i < nb; i++) v->d[i] = _cvtsh_ss(b[i].d);
    } else if (K != Q4R8_Q4_1) {
        const ow_block_q8_0 *b = x;
        r8_interleave_quants(x, sizeof *b, offsetof(ow_block_q8_0, qs), nb, v->q);
        for (int64_t i = 0; i < nb; i++) {
            /* the 32 quants' sum: vpmaddubsw of ones (unsigned) with them (signed), then pairs of int16 */
            const __m256i q = _mm256_loadu_si256((const __m256i *)b[i].qs);
            const __m256i s = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), q), _mm256_set1_epi16(1));
            const __m128i h = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
            const __m128i h2 = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0x4e));
            v->offset_sum[i] = Q4R8_OFFSET(K) * _mm_cvtsi128_si32(_mm_add_epi32(h2, _mm_shuffle_epi32(h2, 0xb1)));
            v->d[i] = _cvtsh_ss(b[i].d);
        }
        memset(v->offset_sum + nb, 0, 8 * sizeof(int32_t));
    } else {
        const ow_block_q8_1 *b = x;
        r8_interleave_quants(x, sizeof *b, offsetof(ow_block_q8_1, qs), nb, v->q);
        for (int64_t i = 0; i < nb; i++) {
            v->d[i] = _cvtsh_ss(b[i].d);
            v->s[i] = _cvtsh_ss(b[i].s);
        }
        memset(v->s + nb, 0, 8 * sizeof(float));
    }
    memset(v->d + nb, 0, 8 * sizeof(float));
}

/* One group of m blocks (8, or a row's last m < 8: fields and chunks 4m apart, read past the group) of R rows
 * against the vector at block g; lanes past m meet zero scales and minima */
TA_INLINE void q4r8_group(const uint8_t *const *grp, int m, const q4r8_vector *v, int64_t g, __m256 *acc,
                          __m256 *acc_min, const int R, const int FULL, const int K) {
    const int Q5 = K == Q4R8_Q5_0, IQ = K == Q4R8_IQ4_NL, n = FULL ? OW_R8_GROUP : m;
    const int stride = 4 * n, head = (Q4R8_BYTES(K) - 16) * n;
    const int8_t *xg = v->q + 32 * g;
    const __m256i low4 = _mm256_set1_epi8(0x0f), bit5 = _mm256_set1_epi8(0x10);
    const __m256i zero = _mm256_setzero_si256(), ones = _mm256_set1_epi16(1);
    const __m256i book = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)ow_iq4nl_values));
    __m256i p[2][2] = {{zero, zero}, {zero, zero}};
    __m256i h[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
    if (Q5)
        for (int r = 0; r < R; r++) h[r] = _mm256_loadu_si256((const __m256i *)(grp[r] + 2 * n));
    for (int j = 0; j < 4; j++) {
        const __m256i a_lo = _mm256_loadu_si256((const __m256i *)(xg + stride * j));
        const __m256i a_hi = _mm256_loadu_si256((const __m256i *)(xg + stride * (j + 4)));
        const __m256i abs_lo = IQ ? _mm256_abs_epi8(a_lo) : zero, abs_hi = IQ ? _mm256_abs_epi8(a_hi) : zero;
        for (int r = 0; r < R; r++) {
            const __m256i q = _mm256_loadu_si256((const __m256i *)(grp[r] + head + stride * j));
            __m256i lo = _mm256_and_si256(q, low4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), low4);
            if (Q5) {
                lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_slli_epi16(h[r], 4 - j), bit5));
                hi = _mm256_or_si256(hi, _mm256_and_si256(_mm256_srli_epi16(h[r], j), bit5));
            }
            if (IQ) {   /* int32 at once: |a| times v carrying a's sign reaches 2 x 127 x 127 per pair */
                const __m256i v_lo = _mm256_sign_epi8(_mm256_shuffle_epi8(book, lo), a_lo);
                const __m256i v_hi = _mm256_sign_epi8(_mm256_shuffle_epi8(book, hi), a_hi);
                p[r][0] = _mm256_add_epi32(p[r][0], _mm256_add_epi32(
                    _mm256_madd_epi16(_mm256_maddubs_epi16(abs_lo, v_lo), ones),
                    _mm256_madd_epi16(_mm256_maddubs_epi16(abs_hi, v_hi), ones)));
                continue;
            }
            const __m256i t = _mm256_add_epi16(_mm256_maddubs_epi16(lo, a_lo), _mm256_maddubs_epi16(hi, a_hi));
            p[r][Q5 ? j / 2 : 0] = _mm256_add_epi16(p[r][Q5 ? j / 2 : 0], t);
        }
    }
    const __m256 dx = _mm256_loadu_ps(v->d + g);
    const __m256 lanes = _mm256_castsi256_ps(
        _mm256_cmpgt_epi32(_mm256_set1_epi32(m), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)));
    for (int r = 0; r < R; r++) {
        __m256i isum = IQ ? p[r][0] : _mm256_madd_epi16(p[r][0], ones);
        if (Q5) isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p[r][1], ones));
        if (K == Q4R8_Q5_0 || K == Q4R8_Q4_0)
            isum = _mm256_sub_epi32(isum, _mm256_loadu_si256((const __m256i *)(v->offset_sum + g)));
        __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)grp[r]));
        if (!FULL) dw = _mm256_and_ps(dw, lanes);   /* lanes past m: other bytes, not scales (maybe NaN) */
        acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(dw, dx), acc[r]);
        if (K == Q4R8_Q4_1) {
            __m256 mw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(grp[r] + 2 * n)));
            if (!FULL) mw = _mm256_and_ps(mw, lanes);
            acc_min[r] = _mm256_fmadd_ps(mw, _mm256_loadu_ps(v->s + g), acc_min[r]);
        }
    }
}

/* A tail of m <= 4 blocks (SmolLM2's 576 columns end with 2, Qwen's 896 with 4) on 128-bit lanes: fields and chunks
 * 4m apart read 16 bytes at a time (m < 4: up to 16 - 4m bytes past the row), lanes past m meet zero scales and
 * minima. The low half of acc gets what q4r8_group would give it (its upper lanes would add +0): the same floats. */
TA_INLINE void q4r8_group_x4(const uint8_t *const *grp, int m, const q4r8_vector *v, int64_t g, __m256 *acc,
                             __m256 *acc_min, const int R, const int K) {
    const int Q5 = K == Q4R8_Q5_0, IQ = K == Q4R8_IQ4_NL;
    const int stride = 4 * m, head = (Q4R8_BYTES(K) - 16) * m;
    const int8_t *xg = v->q + 32 * g;
    const __m128i low4 = _mm_set1_epi8(0x0f), bit5 = _mm_set1_epi8(0x10), ones = _mm_set1_epi16(1);
    const __m128i book = _mm_loadu_si128((const __m128i *)ow_iq4nl_values);
    __m128i p[2][2] = {{_mm_setzero_si128(), _mm_setzero_si128()}, {_mm_setzero_si128(), _mm_setzero_si128()}};
    __m128i h[2] = {_mm_setzero_si128(), _mm_setzero_si128()};
    if (Q5)
        for (int r = 0; r < R; r++) h[r] = _mm_loadu_si128((const __m128i *)(grp[r] + 2 * m));
    for (int j = 0; j < 4; j++) {
        const __m128i a_lo = _mm_loadu_si128((const __m128i *)(xg + stride * j));
        const __m128i a_hi = _mm_loadu_si128((const __m128i *)(xg + stride * (j + 4)));
        const __m128i abs_lo = _mm_abs_epi8(a_lo), abs_hi = _mm_abs_epi8(a_hi);
        for (int r = 0; r < R; r++) {
            const __m128i q = _mm_loadu_si128((const __m128i *)(grp[r] + head + stride * j));
            __m128i lo = _mm_and_si128(q, low4), hi = _mm_and_si128(_mm_srli_epi16(q, 4), low4);
            if (Q5) {
                lo = _mm_or_si128(lo, _mm_and_si128(_mm_slli_epi16(h[r], 4 - j), bit5));
                hi = _mm_or_si128(hi, _mm_and_si128(_mm_srli_epi16(h[r], j), bit5));
            }
            if (IQ) {
                const __m128i v_lo = _mm_sign_epi8(_mm_shuffle_epi8(book, lo), a_lo);
                const __m128i v_hi = _mm_sign_epi8(_mm_shuffle_epi8(book, hi), a_hi);
                p[r][0] = _mm_add_epi32(p[r][0], _mm_add_epi32(_mm_madd_epi16(_mm_maddubs_epi16(abs_lo, v_lo), ones),
                                                               _mm_madd_epi16(_mm_maddubs_epi16(abs_hi, v_hi), ones)));
                continue;
            }
            const __m128i t = _mm_add_epi16(_mm_maddubs_epi16(lo, a_lo), _mm_maddubs_epi16(hi, a_hi));
            p[r][Q5 ? j / 2 : 0] = _mm_add_epi16(p[r][Q5 ? j / 2 : 0], t);
        }
    }
    const __m128 dx = _mm_loadu_ps(v->d + g);
    const __m128 lanes = _mm_castsi128_ps(_mm_cmpgt_epi32(_mm_set1_epi32(m), _mm_setr_epi32(0, 1, 2, 3)));
    for (int r = 0; r < R; r++) {
        __m128i isum = IQ ? p[r][0] : _mm_madd_epi16(p[r][0], ones);
        if (Q5) isum = _mm_add_epi32(isum, _mm_madd_epi16(p[r][1], ones));
        if (K == Q4R8_Q5_0 || K == Q4R8_Q4_0)
            isum = _mm_sub_epi32(isum, _mm_loadu_si128((const __m128i *)(v->offset_sum + g)));
        const __m128 dw = _mm_and_ps(_mm_cvtph_ps(_mm_loadl_epi64((const __m128i *)grp[r])), lanes);
        const __m128 low = _mm_fmadd_ps(_mm_cvtepi32_ps(isum), _mm_mul_ps(dw, dx), _mm256_castps256_ps128(acc[r]));
        acc[r] = _mm256_insertf128_ps(acc[r], low, 0);
        if (K == Q4R8_Q4_1) {
            const __m128 mw = _mm_and_ps(_mm_cvtph_ps(_mm_loadl_epi64((const __m128i *)(grp[r] + 2 * m))), lanes);
            const __m128 mins = _mm_fmadd_ps(mw, _mm_loadu_ps(v->s + g), _mm256_castps256_ps128(acc_min[r]));
            acc_min[r] = _mm256_insertf128_ps(acc_min[r], mins, 0);
        }
    }
}

/* R (1 or 2) rows against the vector: out[r]. A tail of m blocks other than 4 is read in place up to 32 - 4m
 * (m > 4) or 16 - 4m bytes past the row (into the next row's bytes, meeting zero scales), except in the call's last
 * row (`last`: row R - 1), which has no next row and is copied first. */
TA_INLINE void q4r8_rows(const uint8_t *const *wr, int64_t nb, const q4r8_vector *v, float *out, const int R,
                         int last, const int K) {
    const int B = Q4R8_BYTES(K);
    __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()}, acc_min[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    int64_t g = 0;
    for (; g + OW_R8_GROUP <= nb; g += OW_R8_GROUP) {
        const uint8_t *grp[2] = {wr[0] + ow_q4r8_group_at(B, g), wr[R - 1] + ow_q4r8_group_at(B, g)};
        q4r8_group(grp, OW_R8_GROUP, v, g, acc, acc_min, R, 1, K);
    }
    if (g < nb) {
        const int m = (int)(nb - g);
        uint8_t tail[OW_R8_GROUP * OW_Q5_0_R8_BLOCK_BYTES + 32];
        const uint8_t *grp[2] = {wr[0] + ow_q4r8_group_at(B, g), wr[R - 1] + ow_q4r8_group_at(B, g)};
        if (last && m != 4) {   /* a tail of 4 is read exactly */
            memcpy(tail, grp[R - 1], (size_t)B * m);
            memset(tail + B * m, 0, sizeof tail - (size_t)B * m);
            grp[R - 1] = tail;
        }
        if (m == 4)   /* the common tail (896 columns), its offsets constant */
            q4r8_group_x4(grp, 4, v, g, acc, acc_min, R, K);
        else if (m < 4)
            q4r8_group_x4(grp, m, v, g, acc, acc_min, R, K);
        else
            q4r8_group(grp, m, v, g, acc, acc_min, R, 0, K);
    }
    for (int r = 0; r < R; r++) out[r] = ta_hsum(K == Q4R8_Q4_1 ? _mm256_add_ps(acc[r], acc_min[r]) : acc[r]);
}

/* n_vec interleaved vectors against nr rows (y[v * y_stride + r]), in the order of OW_R8_ROW_PAIRS */
TA_INLINE void q4r8_decode(int64_t n_cols, const uint8_t *w, size_t w_stride, int nr, const q4r8_vector *vs,
                           int n_vec, float *y, int64_t y_stride, const int K) {
    const int64_t nb = n_cols / OW_QK;
#define Q4R8_ROWS(rows, R, last, v, out) q4r8_rows(rows, nb, vs + (v), out, R, last, K)
    OW_R8_ROW_PAIRS(w, w_stride, nr, n_vec, y, y_stride, Q4R8_ROWS);
#undef Q4R8_ROWS
}

/* One row back in the file's blocks: full groups here (the nibble chunks are a 4 x 8 transpose of int32, the
 * headers 8 scalar moves), a last partial group by the portable code */
TA_INLINE void q4r8_unpack_row(const uint8_t *r8, uint8_t *file, int64_t n_cols, const int K) {
    const int B = Q4R8_BYTES(K), head = 8 * (B - 16);
    const int64_t nb = n_cols / OW_QK;
    int64_t g = 0;
    for (; g + OW_R8_GROUP <= nb; g += OW_R8_GROUP) {
        const uint8_t *grp = r8 + ow_q4r8_group_at(B, g);
        uint8_t *out = file + (size_t)g * B;
        __m256i u[4];
        r8_chunks_to_blocks(grp + head, u);
        for (int k = 0; k < 4; k++) {
            _mm_storeu_si128((__m128i *)(out + B * k + B - 16), _mm256_castsi256_si128(u[k]));
            _mm_storeu_si128((__m128i *)(out + B * (k + 4) + B - 16), _mm256_extracti128_si256(u[k], 1));
        }
        for (int k = 0; k < OW_R8_GROUP; k++) {
            memcpy(out + B * k, grp + 2 * k, 2);
            if (K == Q4R8_Q5_0) {
                const uint32_t qh = ow_q5_0_r8_gather(ow_read_u32(grp + 16 + 4 * k));
                memcpy(out + B * k + 2, &qh, 4);
            } else if (K == Q4R8_Q4_1) {
                memcpy(out + B * k + 2, grp + 16 + 2 * k, 2);
            }
        }
    }
    if (g < nb) ow_q4r8_unpack_groups(B, r8, file, n_cols, g);
}

/* the rows turned back for the prefill, one function per layout (r8_prefill_slabs takes a row's) */
TA_TARGET static void q4_1r8_unpack(const uint8_t *r8, uint8_t *file, int64_t n_cols) { q4r8_unpack_row(r8, file, n_cols, Q4R8_Q4_1); }
TA_TARGET static void q5_0r8_unpack(const uint8_t *r8, uint8_t *file, int64_t n_cols) { q4r8_unpack_row(r8, file, n_cols, Q4R8_Q5_0); }
TA_TARGET static void q4_0r8_unpack(const uint8_t *r8, uint8_t *file, int64_t n_cols) { q4r8_unpack_row(r8, file, n_cols, Q4R8_Q4_0); }

TA_INLINE void q4r8_tile(OW_TILE_ARGS, const int K) {
    const int64_t nb = n_cols / OW_QK;
    const ow_vec_dot_fn generic = K == Q4R8_Q4_1 ? vec_dot_q4_1r8_q8_1_generic
                                : K == Q4R8_Q5_0 ? vec_dot_q5_0r8_q8_0_generic
                                : K == Q4R8_Q4_0 ? vec_dot_q4_0r8_q8_0_generic : vec_dot_iq4_nlr8_q8_0_generic;
    const ow_tile_fn file_gemm = K == Q4R8_Q4_1 ? vec_dot_q4_1_q8_1_gemm_avx2
                               : K == Q4R8_Q5_0 ? vec_dot_q5_0_q8_0_gemm_avx2
                               : K == Q4R8_Q4_0 ? vec_dot_q4_0_q8_0_gemm_avx2 : vec_dot_iq4_nl_q8_0_gemm_avx2;
    const ow_tile_fn rows_gemm = K == Q4R8_Q4_1 ? vec_dot_q4_1r8_q8_1_rows_avx2
                               : K == Q4R8_Q5_0 ? vec_dot_q5_0r8_q8_0_rows_avx2
                               : K == Q4R8_Q4_0 ? vec_dot_q4_0r8_q8_0_rows_avx2 : vec_dot_iq4_nlr8_q8_0_rows_avx2;
    const size_t file_row = (size_t)nb * (size_t)Q4R8_BYTES(K);
    if (n_vec >= OW_FLOAT_GEMM_MIN_VECS && ow_float_gemm()) {
        /* where the file type's slot runs its rows GEMM (gemm_i8_rows_slot.h; IQ4_NL in floats at rows_gemm 3), the
         * same GEMM on panels built straight from these rows (gemm_i8_rows.inc) */
        const int mode = ow_rows_gemm(OW_ROWS_GEMM_AVX2);
        if (mode && !(K == Q4R8_IQ4_NL && mode == 3)) {
            rows_gemm(n_cols, w, w_stride, nr, x, x_stride, n_vec, y, y_stride);
            return;
        }
        /* IQ4_NL R8 rows are Q4_0 R8's bytes: Q4_0's unpack gives IQ4_NL's blocks */
        if (r8_prefill_slabs(K == Q4R8_Q4_1 ? q4_1r8_unpack : K == Q4R8_Q5_0 ? q5_0r8_unpack : q4_0r8_unpack, file_row,
                             file_gemm, n_cols, w, w_stride, nr, x, x_stride, n_vec, y, y_stride))
            return;
    }
    /* below the GEMM at most OW_FLOAT_GEMM_MIN_VECS - 1 vectors; with the knob off, more, that many at a time */
    const int cap = n_vec < OW_FLOAT_GEMM_MIN_VECS ? n_vec : OW_FLOAT_GEMM_MIN_VECS;
    const size_t per_vector = Q4R8_VECTOR_BYTES(nb);   /* a multiple of 32 */
    uint8_t one[Q4R8_VECTOR_BYTES(Q4R8_STACK_BLOCKS)] __attribute__((aligned(32)));
    const int fits = nb <= Q4R8_STACK_BLOCKS;
    uint8_t *buf = cap == 1 && fits ? one : aligned_alloc(32, per_vector * (size_t)cap);
    if (!buf) {   /* no memory: one vector at a time on the stack (the same results), or the generic kernel */
        for (int i = 0; i < n_vec; i++) {
            const uint8_t *xv = (const uint8_t *)x + (size_t)i * x_stride;
            if (!fits) {   /* the generic kernels loop rows: any nr */
                generic(n_cols, w, w_stride, nr, xv, y + (int64_t)i * y_stride);
                continue;
            }
            const q4r8_vector vs[1] = {q4r8_vector_at(one, nb)};
            q4r8_act(xv, nb, vs, K);
            q4r8_decode(n_cols, w, w_stride, nr, vs, 1, y + (int64_t)i * y_stride, y_stride, K);
        }
        return;
    }
    q4r8_vector vs[OW_FLOAT_GEMM_MIN_VECS];
    for (int done = 0; done < n_vec; done += cap) {
        const int n = n_vec - done < cap ? n_vec - done : cap;
        for (int i = 0; i < n; i++) {
            vs[i] = q4r8_vector_at(buf + per_vector * (size_t)i, nb);
            q4r8_act((const uint8_t *)x + (size_t)(done + i) * x_stride, nb, vs + i, K);
        }
        q4r8_decode(n_cols, w, w_stride, nr, vs, n, y + (int64_t)done * y_stride, y_stride, K);
    }
    if (buf != one) free(buf);
}

/* The any_rows tiles of the AVX2 paths (type_traits.c) */
TA_TARGET void vec_dot_q4_1r8_q8_1_avx2(OW_TILE_ARGS) {
    q4r8_tile(n_cols, w, w_stride, nr, x, x_stride, n_vec, y, y_stride, Q4R8_Q4_1);
}
TA_TARGET void vec_dot_q5_0r8_q8_0_avx2(OW_TILE_ARGS) {
    q4r8_tile(n_cols, w, w_stride, nr, x, x_stride, n_vec, y, y_stride, Q4R8_Q5_0);
}
TA_TARGET void vec_dot_q4_0r8_q8_0_avx2(OW_TILE_ARGS) {
    q4r8_tile(n_cols, w, w_stride, nr, x, x_stride, n_vec, y, y_stride, Q4R8_Q4_0);
}
TA_TARGET void vec_dot_iq4_nlr8_q8_0_avx2(OW_TILE_ARGS) {
    q4r8_tile(n_cols, w, w_stride, nr, x, x_stride, n_vec, y, y_stride, Q4R8_IQ4_NL);
}
#endif
