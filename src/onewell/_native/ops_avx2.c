/* AVX2 (+FMA, F16C) kernels of the ops (ops_kernels.h): translations of the generic twins in ops.c. Tails use
 * masked loads/stores (f16: a zero-padded copy), so every element goes through the same vector math; whole vectors
 * store plainly (store_f32), vmaskmovps to memory being microcoded on AMD (docs/perf-log.md, entry 47). */
#include "ops_kernels.h"

#if OW_OPS_X86
#include <immintrin.h>
#include <math.h>
#include <string.h>

#define T256 __attribute__((target("avx2,fma,f16c")))

static const int32_t mask_table[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};

/* lanes [0, min(left, 8)) set */
T256 static inline __m256i tail_mask(int64_t left) {
    return _mm256_loadu_si256((const __m256i *)(mask_table + 8 - (left >= 8 ? 8 : left)));
}

/* the first min(left, 8) lanes of v to p */
T256 static inline void store_f32(float *p, int64_t left, __m256 v) {
    if (left >= 8)
        _mm256_storeu_ps(p, v);
    else
        _mm256_maskstore_ps(p, tail_mask(left), v);
}

T256 static inline float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

T256 static inline float hmax8(__m256 v) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

T256 static inline __m256 exp8(__m256 x) {
    const __m256 lo = _mm256_set1_ps(OW_EXP_LO), hi = _mm256_set1_ps(OW_EXP_HI);
    __m256 tiny = _mm256_cmp_ps(x, lo, _CMP_LT_OQ); /* false for NaN */
    __m256 huge = _mm256_cmp_ps(x, hi, _CMP_GT_OQ);
    x = _mm256_max_ps(lo, _mm256_min_ps(hi, x)); /* operand order keeps a NaN x */
    __m256 kf = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(OW_LOG2E)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(kf, _mm256_set1_ps(OW_LN2_HI), x);
    r = _mm256_fnmadd_ps(kf, _mm256_set1_ps(OW_LN2_LO), r);
    __m256 p = _mm256_set1_ps(OW_EXP_P0);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(OW_EXP_P1));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(OW_EXP_P2));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(OW_EXP_P3));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(OW_EXP_P4));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(OW_EXP_P5));
    __m256 y = _mm256_add_ps(_mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r), _mm256_set1_ps(1.0f));
    __m256i k = _mm256_cvtps_epi32(kf);
    __m256i k1 = _mm256_srai_epi32(k, 1), k2 = _mm256_sub_epi32(k, k1);
    const __m256i bias = _mm256_set1_epi32(127);
    y = _mm256_mul_ps(y, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k1, bias), 23)));
    y = _mm256_mul_ps(y, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k2, bias), 23)));
    y = _mm256_blendv_ps(y, _mm256_setzero_ps(), tiny);
    return _mm256_blendv_ps(y, _mm256_set1_ps(INFINITY), huge);
}

T256 static float sumsq_avx2(const float *x, int64_t n) {
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256 v0 = _mm256_loadu_ps(x + i), v1 = _mm256_loadu_ps(x + i + 8);
        a0 = _mm256_fmadd_ps(v0, v0, a0);
        a1 = _mm256_fmadd_ps(v1, v1, a1);
    }
    for (; i < n; i += 8) {
        __m256 v = _mm256_maskload_ps(x + i, tail_mask(n - i));
        a0 = _mm256_fmadd_ps(v, v, a0);
    }
    return hsum8(_mm256_add_ps(a0, a1));
}

T256 static float max_avx2(const float *x, int64_t n) {
    const __m256 neg_inf = _mm256_set1_ps(-INFINITY);
    __m256 m = neg_inf;
    for (int64_t i = 0; i < n; i += 8) {
        __m256i mask = tail_mask(n - i);
        __m256 v = _mm256_blendv_ps(neg_inf, _mm256_maskload_ps(x + i, mask), _mm256_castsi256_ps(mask));
        m = _mm256_max_ps(m, v);
    }
    return hmax8(m);
}

T256 static float exp_sum_avx2(float *y, const float *x, float shift, int64_t n) {
    __m256 acc = _mm256_setzero_ps();
    const __m256 s = _mm256_set1_ps(shift);
    for (int64_t i = 0; i < n; i += 8) {
        __m256i mask = tail_mask(n - i);
        __m256 e = exp8(_mm256_sub_ps(_mm256_maskload_ps(x + i, mask), s));
        e = _mm256_and_ps(e, _mm256_castsi256_ps(mask));
        store_f32(y + i, n - i, e);
        acc = _mm256_add_ps(acc, e);
    }
    return hsum8(acc);
}

T256 static void swiglu_avx2(float *out, const float *g, const float *u, int64_t n) {
    const __m256 one = _mm256_set1_ps(1.0f);
    for (int64_t i = 0; i < n; i += 8) {
        __m256i mask = tail_mask(n - i);
        __m256 gv = _mm256_maskload_ps(g + i, mask), uv = _mm256_maskload_ps(u + i, mask);
        __m256 e = exp8(_mm256_sub_ps(_mm256_setzero_ps(), gv));
        store_f32(out + i, n - i, _mm256_mul_ps(_mm256_div_ps(gv, _mm256_add_ps(one, e)), uv));
    }
}

T256 void ow_geglu_avx2(float *out, const float *g, const float *u, int64_t n) {
    const __m256 one = _mm256_set1_ps(1.0f), k = _mm256_set1_ps(OW_GELU_K), c = _mm256_set1_ps(OW_GELU_C);
    for (int64_t i = 0; i < n; i += 8) {
        __m256i mask = tail_mask(n - i);
        __m256 x = _mm256_maskload_ps(g + i, mask), uv = _mm256_maskload_ps(u + i, mask);
        /* the generic twin's order: k * (x + c * x * x * x), rounded after each product (no FMA) */
        __m256 x3 = _mm256_mul_ps(_mm256_mul_ps(_mm256_mul_ps(c, x), x), x);
        __m256 e = exp8(_mm256_mul_ps(k, _mm256_add_ps(x, x3)));
        store_f32(out + i, n - i, _mm256_mul_ps(_mm256_div_ps(x, _mm256_add_ps(one, e)), uv));
    }
}

T256 void ow_softcap_avx2(float *out, const float *x, int64_t n, float cap) {
    const __m256 one = _mm256_set1_ps(1.0f), two = _mm256_set1_ps(2.0f), vcap = _mm256_set1_ps(cap);
    const __m256 inv = _mm256_set1_ps(1.0f / cap), sign = _mm256_set1_ps(-0.0f);
    for (int64_t i = 0; i < n; i += 8) {
        __m256i mask = tail_mask(n - i);
        __m256 y = _mm256_mul_ps(_mm256_maskload_ps(x + i, mask), inv);
        __m256 a = _mm256_andnot_ps(sign, y), a2 = _mm256_mul_ps(a, a);
        __m256 t = _mm256_sub_ps(one, _mm256_div_ps(two, _mm256_add_ps(exp8(_mm256_add_ps(a, a)), one)));
        /* the generic twin's series below 1/16, same order of operations, no FMA */
        __m256 poly = _mm256_add_ps(_mm256_set1_ps(OW_TANH_C3), _mm256_mul_ps(a2, _mm256_set1_ps(OW_TANH_C5)));
        __m256 series = _mm256_add_ps(a, _mm256_mul_ps(_mm256_mul_ps(a, a2), poly));
        t = _mm256_blendv_ps(t, series, _mm256_cmp_ps(a, _mm256_set1_ps(OW_TANH_SERIES), _CMP_LT_OQ));
        t = _mm256_or_ps(t, _mm256_and_ps(sign, y));   /* tanh is odd: the sign of y */
        store_f32(out + i, n - i, _mm256_mul_ps(vcap, t));
    }
}

T256 static inline __m256 load_f32(const float *p, int64_t left) {
    return left >= 8 ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, tail_mask(left));
}

T256 static inline __m256 load_f16(const uint16_t *p, int64_t left) {
    if (left >= 8) return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
    uint16_t tmp[8] = {0};
    memcpy(tmp, p, (size_t)left * sizeof(uint16_t));
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)tmp));
}

T256 static float weigh(float *scores, int64_t n_ctx) {
    return 1.0f / exp_sum_avx2(scores, scores, max_avx2(scores, n_ctx), n_ctx);
}

/* One head. Scores: 4 positions at a time, one accumulator each, so 4 FMA chains hide each other's latency (a
 * position's products are still summed in dimension order, as one position alone: the same floats). V: up to 8
 * vectors (64 dims) of accumulators held in registers across the positions, each one chain in position order;
 * 64 dims are a whole f16 row of most heads, read in one pass. */
#define ATTEND_SCORE(LOAD, n)                                                                                  \
    do {                                                                                                       \
        __m256 acc[n];                                                                                         \
        for (int i = 0; i < n; i++) acc[i] = _mm256_setzero_ps();                                              \
        for (int64_t d = 0; d < hd; d += 8) {                                                                  \
            const __m256 qd = load_f32(q + d, hd - d);                                                         \
            for (int i = 0; i < n; i++) acc[i] = _mm256_fmadd_ps(qd, LOAD(k + (t + i) * stride + d, hd - d), acc[i]); \
        }                                                                                                      \
        for (int i = 0; i < n; i++) scores[t + i] = hsum8(acc[i]) * scale;                                     \
    } while (0)
#define ATTEND_V(type, LOAD, NB)                                                                               \
    do {                                                                                                       \
        __m256 acc[8];                                                                                         \
        for (int b = 0; b < NB; b++) acc[b] = _mm256_setzero_ps();                                             \
        for (int64_t t = 0; t < n_ctx; t++) {                                                                  \
            const type *vt = v + t * stride + d0;                                                              \
            const __m256 w = _mm256_set1_ps(scores[t]);                                                        \
            for (int b = 0; b < NB; b++) acc[b] = _mm256_fmadd_ps(w, LOAD(vt + 8 * b, hd - d0 - 8 * b), acc[b]); \
        }                                                                                                      \
        for (int b = 0; b < NB; b++)                                                                           \
            store_f32(out + d0 + 8 * b, hd - d0 - 8 * b, _mm256_mul_ps(acc[b], inv));                           \
    } while (0)
#define ATTEND(name, type, LOAD)                                                                               \
    T256 static void name(float *out, const float *q, const type *k, const type *v, int64_t stride,            \
                          int64_t n_ctx, int64_t hd, float scale, float cap, float *scores) {                  \
        int64_t t = 0;                                                                                         \
        for (; t + 4 <= n_ctx; t += 4) ATTEND_SCORE(LOAD, 4);                                                  \
        for (; t < n_ctx; t++) ATTEND_SCORE(LOAD, 1);                                                          \
        if (cap > 0) ow_softcap_avx2(scores, scores, n_ctx, cap);                                              \
        const __m256 inv = _mm256_set1_ps(weigh(scores, n_ctx));                                               \
        for (int64_t d0 = 0; d0 < hd; d0 += 64) {                                                              \
            const int64_t nb = (hd - d0 + 7) / 8;                                                              \
            if (nb >= 8) ATTEND_V(type, LOAD, 8);   /* constant: the accumulators stay in registers */        \
            else ATTEND_V(type, LOAD, nb);                                                                     \
        }                                                                                                      \
    }

ATTEND(attend_f32_avx2, float, load_f32)
ATTEND(attend_f16_avx2, uint16_t, load_f16)

/* 8 int8 quants to floats */
T256 static inline __m256 q8_to_ps(const int8_t *qs) {
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)qs)));
}

T256 static inline float q8_0_d(const uint8_t *block) {
    uint16_t h;
    memcpy(&h, block, 2);
    return _cvtsh_ss(h);
}

/* Q8_0 (kv_cache.h), head_dim a multiple of 32: a block's 32 products summed in two vectors, scaled by its d once;
 * the V sum covers 2 blocks (64 dims, 8 accumulators) per pass over the positions, d folded into the weight. */
T256 void ow_attend_q8_0_avx2(float *out, const float *q, const uint8_t *k, const uint8_t *v, int64_t stride,
                              int64_t n_ctx, int64_t hd, float scale, float cap, float *scores) {
    const int64_t nb = hd / 32;
    for (int64_t t = 0; t < n_ctx; t++) {
        const uint8_t *kt = k + t * stride;
        __m256 total = _mm256_setzero_ps();
        for (int64_t b = 0; b < nb; b++) {
            const int8_t *qs = (const int8_t *)(kt + b * 34 + 2);
            const float *qb = q + b * 32;
            __m256 a0 = _mm256_mul_ps(_mm256_loadu_ps(qb), q8_to_ps(qs));
            __m256 a1 = _mm256_mul_ps(_mm256_loadu_ps(qb + 8), q8_to_ps(qs + 8));
            a0 = _mm256_fmadd_ps(_mm256_loadu_ps(qb + 16), q8_to_ps(qs + 16), a0);
            a1 = _mm256_fmadd_ps(_mm256_loadu_ps(qb + 24), q8_to_ps(qs + 24), a1);
            total = _mm256_fmadd_ps(_mm256_set1_ps(q8_0_d(kt + b * 34)), _mm256_add_ps(a0, a1), total);
        }
        scores[t] = hsum8(total) * scale;
    }
    if (cap > 0) ow_softcap_avx2(scores, scores, n_ctx, cap);
    const __m256 inv = _mm256_set1_ps(weigh(scores, n_ctx));
    for (int64_t b0 = 0; b0 < nb; b0 += 2) {
        const int two = b0 + 1 < nb;
        __m256 acc[8];
        for (int i = 0; i < 8; i++) acc[i] = _mm256_setzero_ps();
        for (int64_t t = 0; t < n_ctx; t++) {
            const uint8_t *blk = v + t * stride + b0 * 34;
            const int8_t *qs = (const int8_t *)(blk + 2);
            const __m256 w0 = _mm256_set1_ps(scores[t] * q8_0_d(blk));
            for (int i = 0; i < 4; i++) acc[i] = _mm256_fmadd_ps(w0, q8_to_ps(qs + 8 * i), acc[i]);
            if (two) {
                const __m256 w1 = _mm256_set1_ps(scores[t] * q8_0_d(blk + 34));
                for (int i = 0; i < 4; i++) acc[4 + i] = _mm256_fmadd_ps(w1, q8_to_ps(qs + 34 + 8 * i), acc[4 + i]);
            }
        }
        for (int i = 0; i < (two ? 8 : 4); i++) _mm256_storeu_ps(out + b0 * 32 + 8 * i, _mm256_mul_ps(acc[i], inv));
    }
}

T256 static void f32_to_f16_avx2(uint16_t *out, const float *x, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(out + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    if (i < n) {
        uint16_t tmp[8];
        _mm_storeu_si128((__m128i *)tmp, _mm256_cvtps_ph(load_f32(x + i, n - i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        memcpy(out + i, tmp, (size_t)(n - i) * sizeof(uint16_t));
    }
}

T256 static void f16_to_f32_avx2(float *out, const uint16_t *x, int64_t n) {
    for (int64_t i = 0; i < n; i += 8) store_f32(out + i, n - i, load_f16(x + i, n - i));
}

const ow_ops_kernels ow_ops_avx2 = {
    "avx2", sumsq_avx2, max_avx2, exp_sum_avx2, swiglu_avx2, ow_geglu_avx2, ow_softcap_avx2,
    attend_f32_avx2, attend_f16_avx2, ow_attend_q8_0_avx2, f32_to_f16_avx2, f16_to_f32_avx2,
};

#endif
