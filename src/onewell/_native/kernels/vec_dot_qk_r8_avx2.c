/* AVX2 kernels of the Q4_K R8, Q5_K R8, Q6_K R8 and IQ4_XS R8 layouts (qk_r8.h): decode, and prefill through the
 * file types' GEMMs.
 *
 * Decode (up to OW_FLOAT_GEMM_MIN_VECS - 1 vectors; more, that many at a time, with the float_gemm knob off): each
 * vector's quants interleaved once per call as the layout's weights are (Q4_K / Q5_K R8: a super-block's 8
 * sub-blocks as Q4_0 R8's 8 blocks; Q6_K R8: an 8 x 16 transpose of int16), rows in pairs from the two halves of
 * the call's rows, each pair against every vector (OW_R8_ROW_PAIRS). Q4_K R8, per super-block and row: 4 loads of
 * 32 nibble bytes, each split into its low and high nibbles, 8 vpmaddubsw of unsigned weights against signed
 * activations summed in int16 (<= 30,720), one vpmaddwd by the scales (sub-block k's in both words of lane k, one
 * byte shuffle from the unpacked scales), one convert and one FMA by d times the activation's scale; the minima:
 * one 128-bit vpmaddwd of the 8 minima with the activation's 8 sub-block sums, a convert and an FMA by dmin times
 * it. ggml's layout needs 8 vpmaddubsw and 8 vpmaddwd (vec_dot_x86_256.inc's tile_q45_K). Q5_K R8 adds a shift and
 * an AND per chunk for the fifth bits and a second int16 sum. Q6_K R8: 6 loads, 6 shifts and 14 logic operations give the 8
 * vectors of 6-bit values, then 8 vpmaddubsw, 4 vpmaddwd by the scales (ggml's layout: 10 shifts, 8 shuffles of
 * scales, 8 vpmaddwd), one vpmaddwd for the offset, one convert and one FMA. IQ4_XS R8: Q4_K R8's nibble split, a
 * vpshufb per half into codebook values given their activation's sign (vpsignb) against its absolute value, and
 * a vpmaddwd by the scales for each vpmaddubsw (its int16 results leave no room to add two).
 *
 * Prefill: from OW_FLOAT_GEMM_MIN_VECS vectors (float_gemm knob on) the rows are turned back into the file's blocks,
 * a slab at a time in a buffer that stays in L2, and given to the file type's AVX2 GEMM: its results. */
#include "vec_dot.h"

#if OW_X86_KERNELS
#include <stdlib.h>
#include <string.h>

#include "qk_r8.h"
#include "r8_act_avx2.h"
#include "tile_avx2.h"

/* the layouts, a compile-time argument K of the functions below */
enum { QKR8_Q4_K, QKR8_Q5_K, QKR8_Q6_K, QKR8_IQ4_XS };

/* a vector's side, in one allocation per call: per super-block its 256 quants interleaved as the layout's weights,
 * 32 bytes of sums (Q4_K R8: the 8 sub-block sums, |sum| <= 32 x 128; Q6_K R8: Q8_K's 16 bsums) and its scale */
typedef struct {
    const int8_t *q;
    const int16_t *sums;
    const float *d;
} qkr8_vector;

static size_t qkr8_vector_bytes(int64_t nb) { return ((size_t)nb * (256 + 32 + 4) + 31) / 32 * 32; }

/* 8 x 8 int16 transposed in each 128-bit lane: word c of row r <-> word r of row c */
TA_INLINE void qkr8_transpose8_epi16(__m256i r[8]) {
    __m256i t[8], u[8];
    for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm256_unpacklo_epi16(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_epi16(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 2; i++) {   /* rows 4i..4i+3: columns 0-1, 2-3 (from t[4i]), 4-5, 6-7 (from t[4i + 1]) */
        u[4 * i] = _mm256_unpacklo_epi32(t[4 * i], t[4 * i + 2]);
        u[4 * i + 1] = _mm256_unpackhi_epi32(t[4 * i], t[4 * i + 2]);
        u[4 * i + 2] = _mm256_unpacklo_epi32(t[4 * i + 1], t[4 * i + 3]);
        u[4 * i + 3] = _mm256_unpackhi_epi32(t[4 * i + 1], t[4 * i + 3]);
    }
    for (int c = 0; c < 4; c++) {
        r[2 * c] = _mm256_unpacklo_epi64(u[c], u[c + 4]);
        r[2 * c + 1] = _mm256_unpackhi_epi64(u[c], u[c + 4]);
    }
}

TA_INLINE qkr8_vector qkr8_act(const ow_block_q8_K *x, int64_t nb, uint8_t *buf, const int K) {
    int8_t *q = (int8_t *)buf;
    int16_t *sums = (int16_t *)(buf + 256 * (size_t)nb);
    float *d = (float *)(buf + 288 * (size_t)nb);
    if (K != QKR8_Q6_K)   /* Q4_0 R8's interleave of 8 blocks; its 32 zero bytes past each land where the next
                             super-block's quants (past the last: the sums, written below) go */
        for (int64_t b = 0; b < nb; b++) r8_interleave_quants((const uint8_t *)x[b].qs, 32, 0, OW_R8_GROUP, q + 256 * b);
    for (int64_t b = 0; b < nb; b++) {
        const __m256i bsums = _mm256_loadu_si256((const __m256i *)x[b].bsums);
        if (K != QKR8_Q6_K) {
            _mm_store_si128((__m128i *)(sums + 16 * b),
                            _mm_hadd_epi16(_mm256_castsi256_si128(bsums), _mm256_extracti128_si256(bsums, 1)));
        } else {
            __m256i r[8];   /* row p = sub-blocks p | p + 8 (8 words each); transposed, row v = vector v */
            for (int p = 0; p < 8; p++)
                r[p] = _mm256_loadu2_m128i((const __m128i *)(x[b].qs + 16 * (p + 8)), (const __m128i *)(x[b].qs + 16 * p));
            qkr8_transpose8_epi16(r);
            for (int v = 0; v < 8; v++) _mm256_store_si256((__m256i *)(q + 256 * b + 32 * v), r[v]);
            _mm256_store_si256((__m256i *)(sums + 16 * b), bsums);
        }
        d[b] = x[b].d;
    }
    return (qkr8_vector){q, sums, d};
}

/* Q6_K R8: the 8 vectors of 6-bit values of the super-block at blk (vector v: elements 2v, 2v + 1 of each
 * sub-block) */
TA_INLINE void q6kr8_quants(const uint8_t *blk, __m256i q[8]) {
    const __m256i m6 = _mm256_set1_epi8(0x3f), m4 = _mm256_set1_epi8(0x0f), bits45 = _mm256_set1_epi8(0x30);
    const __m256i y0 = _mm256_loadu_si256((const __m256i *)(blk + OW_Q6_K_R8_Y_AT));
    const __m256i y1 = _mm256_loadu_si256((const __m256i *)(blk + OW_Q6_K_R8_Y_AT + 32));
    const __m256i low[4] = {_mm256_and_si256(y0, m4), _mm256_and_si256(_mm256_srli_epi16(y0, 4), m4),
                            _mm256_and_si256(y1, m4), _mm256_and_si256(_mm256_srli_epi16(y1, 4), m4)};
    for (int k = 0; k < 4; k++) {
        const __m256i x = _mm256_loadu_si256((const __m256i *)(blk + OW_Q6_K_R8_X_AT + 32 * k));
        q[k] = _mm256_and_si256(x, m6);
        q[k + 4] = _mm256_or_si256(low[k], _mm256_and_si256(_mm256_srli_epi16(x, 2), bits45));
    }
}

/* Q6_K R8: R (1 or 2) rows against the vector: out[r]. Per super-block: the 16 scales sign-extended, pairs of
 * vpmaddubsw (unsigned q against signed activations) summed in int16, each pair by vpmaddwd with the scales; the
 * 32 sum(scale * activation) offset (weights are q - 32) from the bsums, as tile_q6_K's. */
TA_INLINE void q6kr8_rows(const uint8_t *const *wr, int64_t nb, const qkr8_vector *v, float *out, const int R) {
    __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int64_t b = 0; b < nb; b++) {
        const int8_t *xb = v->q + 256 * b;
        const __m256i bsums = _mm256_load_si256((const __m256i *)(v->sums + 16 * b));
        for (int r = 0; r < R; r++) {
            const uint8_t *blk = wr[r] + (size_t)b * OW_Q6_K_R8_BLOCK_BYTES;
            const __m256i scales = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(blk + 2)));
            __m256i q[8];
            q6kr8_quants(blk, q);
            __m256i isum = _mm256_slli_epi32(_mm256_madd_epi16(bsums, scales), 5);
            isum = _mm256_sub_epi32(_mm256_setzero_si256(), isum);
            for (int i = 0; i < 8; i += 2) {
                const __m256i a0 = _mm256_load_si256((const __m256i *)(xb + 32 * i));
                const __m256i a1 = _mm256_load_si256((const __m256i *)(xb + 32 * (i + 1)));
                const __m256i pair = _mm256_add_epi16(_mm256_maddubs_epi16(q[i], a0), _mm256_maddubs_epi16(q[i + 1], a1));
                isum = _mm256_add_epi32(isum, _mm256_madd_epi16(pair, scales));
            }
            acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(_cvtsh_ss(ow_read_u16(blk)) * v->d[b]),
                                     acc[r]);
        }
    }
    for (int r = 0; r < R; r++) out[r] = ta_hsum(acc[r]);
}

/* Q4_K R8 (Q5 0) and Q5_K R8 (Q5 1): R (1 or 2) rows against the vector: out[r]. Q5_K's fifth bits join their
 * nibbles as Q5_0 R8's do, and its 5-bit values keep two int16 sums (chunks 0-1, 2-3) */
TA_INLINE void q45kr8_rows(const uint8_t *const *wr, int64_t nb, const qkr8_vector *v, float *out, const int R,
                           const int Q5) {
    const size_t bytes = Q5 ? OW_Q5_K_R8_BLOCK_BYTES : OW_Q4_K_R8_BLOCK_BYTES;
    const int head = Q5 ? OW_Q5_K_R8_HEAD : OW_QK_R8_HEAD;
    const __m256i low4 = _mm256_set1_epi8(0x0f), bit5 = _mm256_set1_epi8(0x10);
    /* scale byte k (of the 16 loaded: scales, minima) to both int16 words of lane k, zero-extended */
    const __m256i dup = _mm256_setr_epi8(0, -1, 0, -1, 1, -1, 1, -1, 2, -1, 2, -1, 3, -1, 3, -1,
                                         4, -1, 4, -1, 5, -1, 5, -1, 6, -1, 6, -1, 7, -1, 7, -1);
    __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    __m128 acc_min[2] = {_mm_setzero_ps(), _mm_setzero_ps()};
    for (int64_t b = 0; b < nb; b++) {
        const int8_t *xb = v->q + 256 * b;
        const __m128i sub = _mm_load_si128((const __m128i *)(v->sums + 16 * b));
        const __m128 dx = _mm_set1_ps(v->d[b]);
        const __m256i zero = _mm256_setzero_si256();
        __m256i p[2][2] = {{zero, zero}, {zero, zero}}, h[2] = {zero, zero};
        if (Q5)
            for (int r = 0; r < R; r++)
                h[r] = _mm256_loadu_si256((const __m256i *)(wr[r] + (size_t)b * bytes + OW_Q5_K_R8_FIFTH_AT));
        for (int j = 0; j < 4; j++) {
            const __m256i a_lo = _mm256_load_si256((const __m256i *)(xb + 32 * j));
            const __m256i a_hi = _mm256_load_si256((const __m256i *)(xb + 32 * (j + 4)));
            for (int r = 0; r < R; r++) {
                const __m256i q = _mm256_loadu_si256((const __m256i *)(wr[r] + (size_t)b * bytes + head + 32 * j));
                __m256i lo = _mm256_and_si256(q, low4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), low4);
                if (Q5) {
                    lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_slli_epi16(h[r], 4 - j), bit5));
                    hi = _mm256_or_si256(hi, _mm256_and_si256(_mm256_srli_epi16(h[r], j), bit5));
                }
                const __m256i t = _mm256_add_epi16(_mm256_maddubs_epi16(lo, a_lo), _mm256_maddubs_epi16(hi, a_hi));
                p[r][Q5 ? j / 2 : 0] = _mm256_add_epi16(p[r][Q5 ? j / 2 : 0], t);
            }
        }
        for (int r = 0; r < R; r++) {
            const uint8_t *blk = wr[r] + (size_t)b * bytes;
            const __m128i sm = _mm_loadu_si128((const __m128i *)(blk + OW_QK_R8_SCALES_AT));
            const __m256i scales = _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(sm), dup);
            __m256i isum = _mm256_madd_epi16(p[r][0], scales);
            if (Q5) isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p[r][1], scales));
            const __m128 dd = _mm_mul_ps(_mm_cvtph_ps(_mm_cvtsi32_si128((int)ow_read_u32(blk))), dx);   /* d, dmin */
            acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_broadcastss_ps(dd), acc[r]);
            const __m128i mins = _mm_cvtepu8_epi16(_mm_srli_si128(sm, 8));
            acc_min[r] = _mm_fmadd_ps(_mm_cvtepi32_ps(_mm_madd_epi16(mins, sub)), _mm_shuffle_ps(dd, dd, 0x55),
                                      acc_min[r]);
        }
    }
    for (int r = 0; r < R; r++) out[r] = ta_hsum(acc[r]) - ta_hsum128(acc_min[r]);
}

/* IQ4_XS R8: R (1 or 2) rows against the vector: out[r]. Per super-block the 8 scales sign-extended into both int16
 * words of their lanes; per chunk the low and high nibbles looked up, each value signed as its activation and
 * multiplied by the activation's absolute value (pairs <= 2 x 127 x 127), each result by the scales into int32 */
TA_INLINE void iq4xsr8_rows(const uint8_t *const *wr, int64_t nb, const qkr8_vector *v, float *out, const int R) {
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    const __m256i book = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)ow_iq4nl_values));
    __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int64_t b = 0; b < nb; b++) {
        const int8_t *xb = v->q + 256 * b;
        __m256i isum[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()}, scales[2];
        for (int r = 0; r < R; r++) {
            const __m128i s8 = _mm_loadl_epi64((const __m128i *)(wr[r] + (size_t)b * OW_IQ4_XS_R8_BLOCK_BYTES +
                                                                 OW_IQ4_XS_R8_SCALES_AT));
            scales[r] = _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(s8, s8));
        }
        for (int j = 0; j < 4; j++) {
            const __m256i a_lo = _mm256_load_si256((const __m256i *)(xb + 32 * j));
            const __m256i a_hi = _mm256_load_si256((const __m256i *)(xb + 32 * (j + 4)));
            const __m256i abs_lo = _mm256_abs_epi8(a_lo), abs_hi = _mm256_abs_epi8(a_hi);
            for (int r = 0; r < R; r++) {
                const __m256i q = _mm256_loadu_si256(
                    (const __m256i *)(wr[r] + (size_t)b * OW_IQ4_XS_R8_BLOCK_BYTES + OW_IQ4_XS_R8_HEAD + 32 * j));
                const __m256i v_lo = _mm256_sign_epi8(_mm256_shuffle_epi8(book, _mm256_and_si256(q, low4)), a_lo);
                const __m256i v_hi = _mm256_sign_epi8(
                    _mm256_shuffle_epi8(book, _mm256_and_si256(_mm256_srli_epi16(q, 4), low4)), a_hi);
                isum[r] = _mm256_add_epi32(isum[r], _mm256_add_epi32(
                    _mm256_madd_epi16(_mm256_maddubs_epi16(abs_lo, v_lo), scales[r]),
                    _mm256_madd_epi16(_mm256_maddubs_epi16(abs_hi, v_hi), scales[r])));
            }
        }
        for (int r = 0; r < R; r++) {
            const float d = _cvtsh_ss(ow_read_u16(wr[r] + (size_t)b * OW_IQ4_XS_R8_BLOCK_BYTES)) * v->d[b];
            acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[r]), _mm256_set1_ps(d), acc[r]);
        }
    }
    for (int r = 0; r < R; r++) out[r] = ta_hsum(acc[r]);
}

/* Q5_K's qh from the 8 h' lanes: qh[e] bit k = bit 8 (e % 4) + e / 4 of lane k. Byte b of every lane gathered into
 * 64-bit word b (byte k = lane k's byte b: bit 8k + t) is an 8 x 8 bit matrix whose transpose (three delta swaps,
 * as ow_bits_transpose8) has qh[4t + b] as byte t; a 4 x 8 byte transpose puts those in order. */
TA_INLINE void q5kr8_qh(__m256i h, uint8_t qh[32]) {
    const __m256i by_byte = _mm256_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15,
                                             0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    __m256i x = _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8(h, by_byte), _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    __m256i t = _mm256_and_si256(_mm256_xor_si256(x, _mm256_srli_epi64(x, 7)), _mm256_set1_epi64x(0x00AA00AA00AA00AAll));
    x = _mm256_xor_si256(x, _mm256_xor_si256(t, _mm256_slli_epi64(t, 7)));
    t = _mm256_and_si256(_mm256_xor_si256(x, _mm256_srli_epi64(x, 14)), _mm256_set1_epi64x(0x0000CCCC0000CCCCll));
    x = _mm256_xor_si256(x, _mm256_xor_si256(t, _mm256_slli_epi64(t, 14)));
    t = _mm256_and_si256(_mm256_xor_si256(x, _mm256_srli_epi64(x, 28)), _mm256_set1_epi64x(0x00000000F0F0F0F0ll));
    x = _mm256_xor_si256(x, _mm256_xor_si256(t, _mm256_slli_epi64(t, 28)));
    /* word b, byte t = qh[4t + b]: pairs (b, b + 1) per t in each 128-bit lane, then the lanes' pairs interleaved */
    const __m256i pairs = _mm256_setr_epi8(0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15,
                                           0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15);
    x = _mm256_shuffle_epi8(x, pairs);
    const __m128i lo = _mm256_castsi256_si128(x), hi = _mm256_extracti128_si256(x, 1);
    _mm_storeu_si128((__m128i *)qh, _mm_unpacklo_epi16(lo, hi));
    _mm_storeu_si128((__m128i *)(qh + 16), _mm_unpackhi_epi16(lo, hi));
}

/* One row back in Q4_K (Q5 0) or Q5_K (Q5 1) blocks: per super-block the 4 chunks are a 4 x 8 transpose of int32
 * (sub-block k | k + 4 in the halves of u[k]), then file chunk c takes sub-blocks 2c and 2c + 1's nibbles side by
 * side; Q5_K's qh by q5kr8_qh */
TA_INLINE void q45kr8_unpack_row(const uint8_t *r8, uint8_t *file, int64_t n_cols, const int Q5) {
    const __m256i low4 = _mm256_set1_epi8(0x0f), high4 = _mm256_set1_epi8((char)0xf0);
    const size_t bytes = Q5 ? OW_Q5_K_R8_BLOCK_BYTES : OW_Q4_K_R8_BLOCK_BYTES;
    const size_t file_bytes = Q5 ? sizeof(ow_block_q5_K) : sizeof(ow_block_q4_K);
    const int head = Q5 ? OW_Q5_K_R8_HEAD : OW_QK_R8_HEAD;
    for (int64_t b = 0; b < n_cols / OW_QK_K; b++) {
        const uint8_t *in = r8 + (size_t)b * bytes;
        uint8_t *out = file + (size_t)b * file_bytes;   /* d, dmin, scales[12], (qh[32],) qs[128] */
        uint8_t *qs = out + 16 + (Q5 ? 32 : 0);
        memcpy(out, in, 4);
        ow_pack_k4_scales(in + OW_QK_R8_SCALES_AT, in + OW_QK_R8_MINS_AT, out + 4);
        if (Q5) q5kr8_qh(_mm256_loadu_si256((const __m256i *)(in + OW_Q5_K_R8_FIFTH_AT)), out + 16);
        __m256i u[4];   /* sub-blocks 0 | 4, 1 | 5, 2 | 6, 3 | 7 */
        r8_chunks_to_blocks(in + head, u);
        for (int e = 0; e < 2; e++) {   /* u[2e]: sub-blocks 2e | 2e + 4 (low nibbles of chunks e | e + 2) */
            const __m256i even = u[2 * e], odd = u[2 * e + 1];
            /* elements 0..15 (the low nibbles) and 16..31 (the high ones) of the even and odd sub-blocks */
            const __m256i first = _mm256_or_si256(_mm256_and_si256(even, low4),
                                                  _mm256_slli_epi16(_mm256_and_si256(odd, low4), 4));
            const __m256i second = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(even, 4), low4),
                                                   _mm256_and_si256(odd, high4));
            _mm256_storeu_si256((__m256i *)(qs + 32 * e), _mm256_permute2x128_si256(first, second, 0x20));
            _mm256_storeu_si256((__m256i *)(qs + 32 * (e + 2)), _mm256_permute2x128_si256(first, second, 0x31));
        }
    }
}
/* One row back in IQ4_XS blocks: the 4 x 8 int32 transpose (r8_chunks_to_blocks) gives sub-blocks k | k + 4 in the
 * halves of u[k], each already the file's 16 bytes; the scales packed again */
TA_TARGET static void iq4xsr8_unpack_row(const uint8_t *r8, uint8_t *file, int64_t n_cols) {
    for (int64_t b = 0; b < n_cols / OW_QK_K; b++) {
        const uint8_t *in = r8 + (size_t)b * OW_IQ4_XS_R8_BLOCK_BYTES;
        ow_block_iq4_xs *out = (ow_block_iq4_xs *)file + b;
        uint16_t high = 0;
        memcpy(&out->d, in, 2);
        memset(out->scales_l, 0, sizeof out->scales_l);
        for (int k = 0; k < 8; k++) {
            const int ls = (int8_t)in[OW_IQ4_XS_R8_SCALES_AT + k] + 32;
            out->scales_l[k / 2] |= (uint8_t)((ls & 15) << (4 * (k % 2)));
            high |= (uint16_t)(((ls >> 4) & 3) << (2 * k));
        }
        memcpy((uint8_t *)out + 2, &high, 2);
        __m256i u[4];
        r8_chunks_to_blocks(in + OW_IQ4_XS_R8_HEAD, u);
        for (int k = 0; k < 4; k++) {
            _mm_storeu_si128((__m128i *)(out->qs + 16 * k), _mm256_castsi256_si128(u[k]));
            _mm_storeu_si128((__m128i *)(out->qs + 16 * (k + 4)), _mm256_extracti128_si256(u[k], 1));
        }
    }
}

TA_TARGET static void q4kr8_unpack_row(const uint8_t *r8, uint8_t *file, int64_t n_cols) { q45kr8_unpack_row(r8, file, n_cols, 0); }
TA_TARGET static void q5kr8_unpack_row(const uint8_t *r8, uint8_t *file, int64_t n_cols) { q45kr8_unpack_row(r8, file, n_cols, 1); }

/* One row back in Q6_K blocks: the 8 vectors of 6-bit values transposed (in-lane 8 x 8 int16) into element order,
 * then ggml's ql (two values' low 4 bits per byte) and qh (four values' high 2 bits per byte) */
TA_TARGET static void q6kr8_unpack_row(const uint8_t *r8, uint8_t *file, int64_t n_cols) {
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    for (int64_t b = 0; b < n_cols / OW_QK_K; b++) {
        const uint8_t *in = r8 + (size_t)b * OW_Q6_K_R8_BLOCK_BYTES;
        ow_block_q6_K *out = (ow_block_q6_K *)file + b;
        memcpy(&out->d, in, 2);
        memcpy(out->scales, in + 2, 16);
        __m256i q[8];
        q6kr8_quants(in, q);
        qkr8_transpose8_epi16(q);   /* row p: sub-blocks p | p + 8 in element order */
        for (int h = 0; h < 2; h++) {   /* elements 128 h + 32 j .. + 31 = sub-blocks 8 h + 2 j, + 1 */
            __m256i e[4];
            for (int j = 0; j < 4; j++)   /* the immediate must be a constant at every optimization level */
                e[j] = h ? _mm256_permute2x128_si256(q[2 * j], q[2 * j + 1], 0x31)
                         : _mm256_permute2x128_si256(q[2 * j], q[2 * j + 1], 0x20);
            const __m256i ql0 = _mm256_or_si256(_mm256_and_si256(e[0], m4), _mm256_slli_epi16(_mm256_and_si256(e[2], m4), 4));
            const __m256i ql1 = _mm256_or_si256(_mm256_and_si256(e[1], m4), _mm256_slli_epi16(_mm256_and_si256(e[3], m4), 4));
            const __m256i qh = _mm256_or_si256(
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(e[0], 4), _mm256_set1_epi8(0x03)),
                                _mm256_and_si256(_mm256_srli_epi16(e[1], 2), _mm256_set1_epi8(0x0c))),
                _mm256_or_si256(_mm256_and_si256(e[2], _mm256_set1_epi8(0x30)),
                                _mm256_and_si256(_mm256_slli_epi16(e[3], 2), _mm256_set1_epi8((char)0xc0))));
            _mm256_storeu_si256((__m256i *)(out->ql + 64 * h), ql0);
            _mm256_storeu_si256((__m256i *)(out->ql + 64 * h + 32), ql1);
            _mm256_storeu_si256((__m256i *)(out->qh + 32 * h), qh);
        }
    }
}

TA_INLINE void qkr8_tile(OW_TILE_ARGS, const int K) {
    const int64_t nb = n_cols / OW_QK_K;
    if (n_vec >= OW_FLOAT_GEMM_MIN_VECS && ow_float_gemm()) {
        /* where the file type's slot runs its rows GEMM (gemm_i8_rows_slot.h), Q4_K R8, Q5_K R8 and IQ4_XS R8 run
         * the same GEMM on panels built straight from these rows (gemm_k_rows.inc's GK_R8); Q6_K R8, and every type
         * where the slot runs its tile, turn slabs of rows back into the file's blocks for the file type's slot */
        if (ow_rows_gemm(OW_ROWS_GEMM_AVX2) && K != QKR8_Q6_K) {
            (K == QKR8_Q4_K   ? vec_dot_q4_kr8_q8_K_rows_avx2
             : K == QKR8_Q5_K ? vec_dot_q5_kr8_q8_K_rows_avx2 : vec_dot_iq4_xsr8_q8_K_rows_avx2)(
                n_cols, w, w_stride, nr, x, x_stride, n_vec, y, y_stride);
            return;
        }
        if (r8_prefill_slabs(K == QKR8_Q4_K   ? q4kr8_unpack_row
                             : K == QKR8_Q5_K ? q5kr8_unpack_row
                             : K == QKR8_Q6_K ? q6kr8_unpack_row : iq4xsr8_unpack_row,
                             (size_t)nb * (K == QKR8_Q4_K   ? sizeof(ow_block_q4_K)
                                           : K == QKR8_Q5_K ? sizeof(ow_block_q5_K)
                                           : K == QKR8_Q6_K ? sizeof(ow_block_q6_K) : sizeof(ow_block_iq4_xs)),
                             K == QKR8_Q4_K   ? vec_dot_q4_K_q8_K_gemm_avx2
                             : K == QKR8_Q5_K ? vec_dot_q5_K_q8_K_gemm_avx2
                             : K == QKR8_Q6_K ? vec_dot_q6_K_q8_K_gemm_avx2 : vec_dot_iq4_xs_q8_K_gemm_avx2,
                             n_cols, w, w_stride, nr, x, x_stride, n_vec, y, y_stride))
            return;
    }
    /* below the GEMM at most OW_FLOAT_GEMM_MIN_VECS - 1 vectors; with the knob off, more, that many at a time */
    const int cap = n_vec < OW_FLOAT_GEMM_MIN_VECS ? n_vec : OW_FLOAT_GEMM_MIN_VECS;
    const size_t per_vector = qkr8_vector_bytes(nb);   /* a multiple of 32 */
    uint8_t *buf = aligned_alloc(32, per_vector * (size_t)cap);
    if (!buf) {   /* no memory for the interleaved vectors: the generic kernel (the file layout's generic results) */
        for (int i = 0; i < n_vec; i++)
            (K == QKR8_Q4_K   ? vec_dot_q4_kr8_q8_K_generic
             : K == QKR8_Q5_K ? vec_dot_q5_kr8_q8_K_generic
             : K == QKR8_Q6_K ? vec_dot_q6_kr8_q8_K_generic : vec_dot_iq4_xsr8_q8_K_generic)(
                n_cols, w, w_stride, nr, (const uint8_t *)x + (size_t)i * x_stride, y + (int64_t)i * y_stride);
        return;
    }
    qkr8_vector vs[OW_FLOAT_GEMM_MIN_VECS];
    for (int done = 0; done < n_vec; done += cap) {
        const int n = n_vec - done < cap ? n_vec - done : cap;
        for (int i = 0; i < n; i++)
            vs[i] = qkr8_act((const ow_block_q8_K *)((const uint8_t *)x + (size_t)(done + i) * x_stride), nb,
                             buf + per_vector * (size_t)i, K);
        float *yv = y + (int64_t)done * y_stride;
#define QKR8_ROWS(rows, R, last, v, out)                   \
    (K == QKR8_Q6_K     ? q6kr8_rows(rows, nb, vs + (v), out, R) \
     : K == QKR8_IQ4_XS ? iq4xsr8_rows(rows, nb, vs + (v), out, R) \
                        : q45kr8_rows(rows, nb, vs + (v), out, R, K == QKR8_Q5_K))
        OW_R8_ROW_PAIRS(w, w_stride, nr, n, yv, y_stride, QKR8_ROWS);
#undef QKR8_ROWS
    }
    free(buf);
}

/* The any_rows tiles of the AVX2 paths (type_traits.c) */
TA_TARGET void vec_dot_q4_kr8_q8_K_avx2(OW_TILE_ARGS) {
    qkr8_tile(n_cols, w, w_stride, nr, x, x_stride, n_vec, y, y_stride, QKR8_Q4_K);
}
TA_TARGET void vec_dot_q5_kr8_q8_K_avx2(OW_TILE_ARGS) {
    qkr8_tile(n_cols, w, w_stride, nr, x, x_stride, n_vec, y, y_stride, QKR8_Q5_K);
}
TA_TARGET void vec_dot_q6_kr8_q8_K_avx2(OW_TILE_ARGS) {
    qkr8_tile(n_cols, w, w_stride, nr, x, x_stride, n_vec, y, y_stride, QKR8_Q6_K);
}
TA_TARGET void vec_dot_iq4_xsr8_q8_K_avx2(OW_TILE_ARGS) {
    qkr8_tile(n_cols, w, w_stride, nr, x, x_stride, n_vec, y, y_stride, QKR8_IQ4_XS);
}
#endif
