/* What the AVX2 prefill tiles share (vec_dot_tile_avx2.c: the 32-element types; vec_dot_tile_k_avx2.c: Q4_K,
 * Q6_K; gemm_q8_0_f32_avx2.c: the Q8_0 float GEMM): the decode kernels' horizontal sums step for step (so a tile's
 * result is bit-identical to the decode kernel's), the walk over the vectors TA_VECS at a time, the fallback to
 * the decode kernel, and the GEMM's dequantize and transpose. Include only
 * from files compiled with OW_X86_KERNELS. */
#ifndef ONEWELL_TILE_AVX2_H
#define ONEWELL_TILE_AVX2_H

#include <immintrin.h>

#include "vec_dot.h"

#define TA_TARGET __attribute__((target("avx2,fma,f16c")))
#define TA_INLINE static inline __attribute__((always_inline)) TA_TARGET
#define TA_VECS 4   /* vectors per pass over decoded rows: their accumulators and the rows' bytes in registers */

TA_INLINE float ta_hsum(__m256 v) {   /* OW_FN(hsum_ps) of vec_dot_x86_256.inc */
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

TA_INLINE float ta_hsum128(__m128 s) {   /* OW_FN(hsum_ps128) */
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* 16 packed bytes -> 32 bytes 0..15 (low nibbles = elements 0..15, high = 16..31) */
TA_INLINE __m256i ta_nibbles(const uint8_t *qs) {
    const __m128i t = _mm_loadu_si128((const __m128i *)qs);
    return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(t, 4), t), _mm256_set1_epi8(0x0f));
}

/* IQ4_NL's / IQ4_XS's 16 bytes of packed indices -> their 32 signed codebook values (ow_iq4nl_values), in element
 * order: one vpshufb (the rows GEMMs' panels, gemm_i8_rows.inc and gemm_k_rows.inc) */
TA_INLINE __m256i ta_iq4_values(const uint8_t *qs) {
    return _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)ow_iq4nl_values)),
                               ta_nibbles(qs));
}

/* 32 bits -> 32 bytes, 0x10 where bit j is set (the fifth bit of Q5 quants) */
TA_INLINE __m256i ta_bit4(const uint8_t *qh) {
    const __m256i spread = _mm256_shuffle_epi8(_mm256_set1_epi32((int)ow_read_u32(qh)),
        _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0));
    const __m256i select = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(spread, select), select), _mm256_set1_epi8(0x10));
}

/* 8 F16 / BF16 weights at column i of a row as floats, exactly: fp16 converted, or bf16 = the top half of a float32
 * (the F16/BF16 tiles and the float GEMM's panels) */
TA_INLINE __m256 ta_half8(const uint8_t *row, int64_t i, const int BF16) {
    const __m128i h = _mm_loadu_si128((const __m128i *)(row + 2 * i));
    return BF16 ? _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)) : _mm256_cvtph_ps(h);
}

/* 8 activations at column i of a vector: fp16 for F16 weights, f32 for BF16 */
TA_INLINE __m256 ta_half_acts8(const uint8_t *xv, int64_t i, const int BF16) {
    return BF16 ? _mm256_loadu_ps((const float *)xv + i)
                : _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)xv + i / 8));
}

/* 8 Q8_0 quants times their scale as floats: exact (an int8 times an fp16 scale fits a float's 24 bits) */
TA_INLINE __m256 ta_dequant8_q8(const int8_t *q, __m256 d) {
    return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)q))), d);
}

/* 8 x 8 floats transposed in registers (the float GEMM's row panels) */
TA_INLINE void ta_transpose8_ps(__m256 r[8]) {
    const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
    const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
    const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
    const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
    const __m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44), s1 = _mm256_shuffle_ps(t0, t2, 0xee);
    const __m256 s2 = _mm256_shuffle_ps(t1, t3, 0x44), s3 = _mm256_shuffle_ps(t1, t3, 0xee);
    const __m256 s4 = _mm256_shuffle_ps(t4, t6, 0x44), s5 = _mm256_shuffle_ps(t4, t6, 0xee);
    const __m256 s6 = _mm256_shuffle_ps(t5, t7, 0x44), s7 = _mm256_shuffle_ps(t5, t7, 0xee);
    r[0] = _mm256_permute2f128_ps(s0, s4, 0x20); r[1] = _mm256_permute2f128_ps(s1, s5, 0x20);
    r[2] = _mm256_permute2f128_ps(s2, s6, 0x20); r[3] = _mm256_permute2f128_ps(s3, s7, 0x20);
    r[4] = _mm256_permute2f128_ps(s0, s4, 0x31); r[5] = _mm256_permute2f128_ps(s1, s5, 0x31);
    r[6] = _mm256_permute2f128_ps(s2, s6, 0x31); r[7] = _mm256_permute2f128_ps(s3, s7, 0x31);
}

/* zeros after nb scales, which the tiles read in groups of 8 */
TA_INLINE void ta_pad_scales(float *d, int64_t nb) { _mm256_storeu_ps(d + nb, _mm256_setzero_ps()); }

/* The Q8_0 activation scales of n_vec vectors as floats, nb apart, zero-padded by 8 */
TA_INLINE void ta_scales_signed(const uint8_t *x, size_t x_stride, int64_t nb, int n_vec, float *xs) {
    for (int v = 0; v < n_vec; v++) {
        const ow_block_q8_0 *xb = (const ow_block_q8_0 *)(x + (size_t)v * x_stride);
        for (int64_t b = 0; b < nb; b++) xs[(int64_t)v * nb + b] = _cvtsh_ss(xb[b].d);
    }
    ta_pad_scales(xs, (int64_t)n_vec * nb);
}

/* Every one of count vectors against the decoded rows, TA_VECS at a time (the remainder with as many as are
 * left); `call(NV)` sees v, the first vector of the group. */
#define TA_ALL_VECTORS(call, count)                                                                          \
    do {                                                                                                     \
        int v = 0;                                                                                           \
        for (; v + TA_VECS <= (count); v += TA_VECS) call(TA_VECS);                                          \
        switch ((count) - v) {                                                                               \
        case 3: call(3); break;                                                                              \
        case 2: call(2); break;                                                                              \
        case 1: call(1); break;                                                                              \
        default: break;                                                                                      \
        }                                                                                                    \
    } while (0)

/* A tile's work done by its decode kernel instead (one vector, or rows too long for the tile's scratch): one
 * vector streams all nr rows straight into y; several go 4 rows at a time, so the rows are still in L1/L2 for
 * the next vector. */
TA_INLINE void ta_by_decode_kernel(void (*dot)(OW_DOT_ARGS), OW_TILE_ARGS) {
    const int group = n_vec < 2 ? nr : OW_ROW_TILE;
    const uint8_t *xb = x;
    for (int r0 = 0; r0 < nr; r0 += group)
        for (int v = 0; v < n_vec; v++)
            dot(n_cols, w + (size_t)r0 * w_stride, w_stride, nr - r0 < group ? nr - r0 : group,
                xb + (size_t)v * x_stride, y + (int64_t)v * y_stride + r0);
}

/* The 32-element tiles' scratch limits: rows up to TA_MAX_BLOCKS blocks (16,384 columns) decode into a row
 * scratch, longer ones go to the decode kernel; activation scales are converted TA_SCALE_FLOATS at a time (32 KiB
 * of stack), so the vectors go in groups. */
#define TA_MAX_BLOCKS 512
#define TA_SCALE_FLOATS 8192

/* A tile's work on one group of vectors: every one of nr rows of w against nv vectors (activations xb, their
 * scales as floats in xs, per_vector * nb per vector), results at yv. */
typedef void (*ta_group_fn)(const uint8_t *w, size_t w_stride, int nr, int64_t nb, const uint8_t *xb,
                            size_t x_stride, const float *xs, int nv, float *yv, int64_t y_stride);
typedef void (*ta_scales_fn)(const uint8_t *x, size_t x_stride, int64_t nb, int n_vec, float *xs);

/* The frame every 32-element tile shares (an any_rows tile: nr is a whole matmul chunk): one vector, or a row too
 * long for the scratch, goes to the decode kernel `dot`, which streams any number of rows; otherwise, per group of
 * vectors whose scales fit the buffer, `scales` converts them once and `group` does the rows. */
TA_INLINE void ta_tile_frame(void (*dot)(OW_DOT_ARGS), ta_scales_fn scales, int per_vector, ta_group_fn group,
                             OW_TILE_ARGS) {
    const int64_t nb = n_cols / OW_QK;
    if (n_vec < 2 || nb > TA_MAX_BLOCKS) {
        ta_by_decode_kernel(dot, n_cols, w, w_stride, nr, x, x_stride, n_vec, y, y_stride);
        return;
    }
    float xs[TA_SCALE_FLOATS + 8];
    const int per_group = (int)(TA_SCALE_FLOATS / (per_vector * nb));
    for (int v0 = 0; v0 < n_vec; v0 += per_group) {
        const int nv = n_vec - v0 < per_group ? n_vec - v0 : per_group;
        const uint8_t *xb = (const uint8_t *)x + (size_t)v0 * x_stride;
        scales(xb, x_stride, nb, nv, xs);
        group(w, w_stride, nr, nb, xb, x_stride, xs, nv, y + (int64_t)v0 * y_stride, y_stride);
    }
}

/* The signature of a ta_group_fn, for the tiles' definitions */
#define TA_GROUP_ARGS                                                                                        \
    const uint8_t *w, size_t w_stride, int nr, int64_t nb, const uint8_t *xb, size_t x_stride, const float *xs, \
        int nv, float *yv, int64_t y_stride

#endif
