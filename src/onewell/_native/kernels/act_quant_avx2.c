/* AVX2 twins of act_quant.c: the same bytes, 8 floats at a time. Used by every SIMD path (quantizing the
 * activation touches n_cols floats once; the matmul after it touches n_cols * rows weights). */
#include "vec_dot.h"

#if OW_X86_KERNELS
#include <immintrin.h>

#define OW_AVX2 __attribute__((target("avx2,fma,f16c")))
#define OW_INLINE static inline __attribute__((always_inline)) OW_AVX2

OW_INLINE float hmax_ps(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}

OW_INLINE int32_t hsum_epi32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(s);
}

OW_INLINE __m256 abs_ps(__m256 v) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v); }

OW_INLINE uint16_t to_half(float f) { return (uint16_t)_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT); }

/* 32 int32 (four vectors, in order) -> 32 int8 in order; values are within [-127, 127] */
OW_INLINE void store_i8x32(int8_t *out, __m256i i0, __m256i i1, __m256i i2, __m256i i3) {
    /* packs work per 128-bit lane, leaving the 4-element groups in the order 0 2 4 6 1 3 5 7 */
    const __m256i packed = _mm256_packs_epi16(_mm256_packs_epi32(i0, i1), _mm256_packs_epi32(i2, i3));
    _mm256_storeu_si256((__m256i *)out, _mm256_permutevar8x32_epi32(packed, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
}

/* One block of 32: round-half-even(x * 127/amax) as the generic twin; returns d = amax/127 and the quant sum. */
OW_INLINE float quantize_block_32(const float *x, int8_t *qs, int32_t *qsum) {
    __m256 v[4];
    __m256 amax = _mm256_setzero_ps();
    for (int k = 0; k < 4; k++) {
        v[k] = _mm256_loadu_ps(x + 8 * k);
        amax = _mm256_max_ps(amax, abs_ps(v[k]));
    }
    const float max_scalar = hmax_ps(amax);
    const float d = max_scalar / 127.0f;
    const __m256 id = _mm256_set1_ps(max_scalar != 0.0f ? 127.0f / max_scalar : 0.0f);
    __m256i q[4];
    for (int k = 0; k < 4; k++)
        q[k] = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v[k], id), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    *qsum = hsum_epi32(_mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3])));
    store_i8x32(qs, q[0], q[1], q[2], q[3]);
    return d;
}

OW_AVX2 void act_quant_q8_0_avx2(const float *x, void *xq, int64_t n) {
    ow_block_q8_0 *y = xq;
    for (int64_t b = 0; b < n / OW_QK; b++) {
        int32_t qsum;
        y[b].d = to_half(quantize_block_32(x + b * OW_QK, y[b].qs, &qsum));
    }
}

OW_AVX2 void act_quant_q8_0r16_avx2(const float *x, void *xq, int64_t n) {
    for (int64_t b = 0; b < n / OW_QK; b++) {
        int8_t qs[OW_QK];
        int32_t qsum;
        const float d = quantize_block_32(x + b * OW_QK, qs, &qsum);
        ow_r16_put_act_block(xq, n, b, qs, to_half(d), qsum);
    }
}

OW_AVX2 void act_quant_q8_1_avx2(const float *x, void *xq, int64_t n) {
    ow_block_q8_1 *y = xq;
    for (int64_t b = 0; b < n / OW_QK; b++) {
        int32_t qsum;
        const float d = quantize_block_32(x + b * OW_QK, y[b].qs, &qsum);
        y[b].d = to_half(d);
        y[b].s = to_half(d * (float)qsum);
    }
}

OW_AVX2 void act_quant_q8_K_avx2(const float *x, void *xq, int64_t n) {
    ow_block_q8_K *y = xq;
    for (int64_t b = 0; b < n / OW_QK_K; b++, x += OW_QK_K) {
        __m256 amax_v = _mm256_setzero_ps();
        for (int j = 0; j < OW_QK_K; j += 8) amax_v = _mm256_max_ps(amax_v, abs_ps(_mm256_loadu_ps(x + j)));
        const float amax = hmax_ps(amax_v);
        int16_t bsums[OW_QK_K / 16];
        if (amax == 0.0f) {
            y[b].d = 0.0f;
            memset(y[b].qs, 0, sizeof y[b].qs);
            memset(bsums, 0, sizeof bsums);
            memcpy(y[b].bsums, bsums, sizeof bsums);
            continue;
        }
        /* the first element of largest magnitude sets the sign, as in the generic scan */
        float max = 0.0f;
        for (int j = 0; j < OW_QK_K; j += 8) {
            const int hits = _mm256_movemask_ps(_mm256_cmp_ps(abs_ps(_mm256_loadu_ps(x + j)), _mm256_set1_ps(amax), _CMP_EQ_OQ));
            if (hits) { max = x[j + __builtin_ctz((unsigned)hits)]; break; }
        }
        const float iscale = -127.0f / max;
        const __m256 mul = _mm256_set1_ps(iscale), top = _mm256_set1_ps(127.0f);
        for (int j = 0; j < OW_QK_K; j += 32) {
            __m256i q[4];
            for (int k = 0; k < 4; k++) {
                const __m256 r = _mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(x + j + 8 * k), mul),
                                                 _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
                q[k] = _mm256_cvtps_epi32(_mm256_min_ps(r, top));
            }
            store_i8x32(y[b].qs + j, q[0], q[1], q[2], q[3]);
            bsums[j / 16] = (int16_t)hsum_epi32(_mm256_add_epi32(q[0], q[1]));
            bsums[j / 16 + 1] = (int16_t)hsum_epi32(_mm256_add_epi32(q[2], q[3]));
        }
        memcpy(y[b].bsums, bsums, sizeof bsums);
        y[b].d = 1.0f / iscale;
    }
}

OW_AVX2 void act_quant_f16_avx2(const float *x, void *xq, int64_t n) {
    uint8_t *out = xq;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(out + 2 * i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) {
        const uint16_t h = to_half(x[i]);
        memcpy(out + 2 * i, &h, 2);
    }
}

#endif
