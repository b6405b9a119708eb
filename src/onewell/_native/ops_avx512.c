/* AVX-512 kernels of the ops (ops_kernels.h): translations of the generic twins in ops.c. Tails use masked
 * loads/stores, so every element goes through the same vector math wherever a caller's range starts. */
#include "ops_kernels.h"

#if OW_OPS_X86
#include <immintrin.h>
#include <math.h>

#define T512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")))

T512 static inline __mmask16 tail_mask(int64_t left) {
    return left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);
}

T512 static inline __m512 exp16(__m512 x) {
    const __m512 lo = _mm512_set1_ps(OW_EXP_LO), hi = _mm512_set1_ps(OW_EXP_HI);
    __mmask16 tiny = _mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ); /* false for NaN */
    __mmask16 huge = _mm512_cmp_ps_mask(x, hi, _CMP_GT_OQ);
    x = _mm512_max_ps(lo, _mm512_min_ps(hi, x)); /* operand order keeps a NaN x */
    __m512 kf = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(OW_LOG2E)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(kf, _mm512_set1_ps(OW_LN2_HI), x);
    r = _mm512_fnmadd_ps(kf, _mm512_set1_ps(OW_LN2_LO), r);
    __m512 p = _mm512_set1_ps(OW_EXP_P0);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(OW_EXP_P1));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(OW_EXP_P2));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(OW_EXP_P3));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(OW_EXP_P4));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(OW_EXP_P5));
    __m512 y = _mm512_add_ps(_mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r), _mm512_set1_ps(1.0f));
    __m512i k = _mm512_cvtps_epi32(kf);
    __m512i k1 = _mm512_srai_epi32(k, 1), k2 = _mm512_sub_epi32(k, k1);
    const __m512i bias = _mm512_set1_epi32(127);
    y = _mm512_mul_ps(y, _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(k1, bias), 23)));
    y = _mm512_mul_ps(y, _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(k2, bias), 23)));
    y = _mm512_mask_blend_ps(tiny, y, _mm512_setzero_ps());
    return _mm512_mask_blend_ps(huge, y, _mm512_set1_ps(INFINITY));
}

T512 static float sumsq_avx512(const float *x, int64_t n) {
    __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m512 v0 = _mm512_loadu_ps(x + i), v1 = _mm512_loadu_ps(x + i + 16);
        a0 = _mm512_fmadd_ps(v0, v0, a0);
        a1 = _mm512_fmadd_ps(v1, v1, a1);
    }
    for (; i < n; i += 16) {
        __m512 v = _mm512_maskz_loadu_ps(tail_mask(n - i), x + i);
        a0 = _mm512_fmadd_ps(v, v, a0);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
}

T512 static float max_avx512(const float *x, int64_t n) {
    const __m512 neg_inf = _mm512_set1_ps(-INFINITY);
    __m512 m = neg_inf;
    for (int64_t i = 0; i < n; i += 16) m = _mm512_max_ps(m, _mm512_mask_loadu_ps(neg_inf, tail_mask(n - i), x + i));
    return _mm512_reduce_max_ps(m);
}

T512 static float exp_sum_avx512(float *y, const float *x, float shift, int64_t n) {
    __m512 acc = _mm512_setzero_ps();
    const __m512 s = _mm512_set1_ps(shift);
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = tail_mask(n - i);
        __m512 e = exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), s));
        _mm512_mask_storeu_ps(y + i, m, e);
        acc = _mm512_mask_add_ps(acc, m, acc, e);
    }
    return _mm512_reduce_add_ps(acc);
}

T512 static void swiglu_avx512(float *out, const float *g, const float *u, int64_t n) {
    const __m512 one = _mm512_set1_ps(1.0f);
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = tail_mask(n - i);
        __m512 gv = _mm512_maskz_loadu_ps(m, g + i), uv = _mm512_maskz_loadu_ps(m, u + i);
        __m512 e = exp16(_mm512_sub_ps(_mm512_setzero_ps(), gv));
        _mm512_mask_storeu_ps(out + i, m, _mm512_mul_ps(_mm512_div_ps(gv, _mm512_add_ps(one, e)), uv));
    }
}

T512 static inline __m512 load_f16(const uint16_t *p, __mmask16 m) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
}

/* scores -> softmax weights (unnormalized); returns 1 / their sum */
T512 static float weigh(float *scores, int64_t n_ctx) {
    return 1.0f / exp_sum_avx512(scores, scores, max_avx512(scores, n_ctx), n_ctx);
}

/* ATTEND(name, type, load): one head; `load(ptr, mask)` turns 16 cache elements into floats. V is summed in
 * blocks of up to 4 vectors (64 dims) held in registers across the positions. */
#define ATTEND(name, type, LOAD)                                                                               \
    T512 static void name(float *out, const float *q, const type *k, const type *v, int64_t stride,            \
                          int64_t n_ctx, int64_t hd, float scale, float cap, float *scores) {                  \
        for (int64_t t = 0; t < n_ctx; t++) {                                                                  \
            const type *kt = k + t * stride;                                                                   \
            __m512 acc = _mm512_setzero_ps();                                                                  \
            for (int64_t d = 0; d < hd; d += 16) {                                                             \
                __mmask16 m = tail_mask(hd - d);                                                               \
                acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, q + d), LOAD(kt + d, m), acc);                  \
            }                                                                                                  \
            scores[t] = _mm512_reduce_add_ps(acc) * scale;                                                     \
        }                                                                                                      \
        if (cap > 0) ow_softcap_avx2(scores, scores, n_ctx, cap);                                              \
        const __m512 inv = _mm512_set1_ps(weigh(scores, n_ctx));                                               \
        for (int64_t d0 = 0; d0 < hd; d0 += 64) {                                                              \
            __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()}; \
            int nb = (int)((hd - d0 + 15) / 16);                                                               \
            if (nb > 4) nb = 4;                                                                                \
            for (int64_t t = 0; t < n_ctx; t++) {                                                              \
                const type *vt = v + t * stride + d0;                                                          \
                __m512 w = _mm512_set1_ps(scores[t]);                                                          \
                for (int b = 0; b < nb; b++)                                                                   \
                    acc[b] = _mm512_fmadd_ps(w, LOAD(vt + 16 * b, tail_mask(hd - d0 - 16 * b)), acc[b]);       \
            }                                                                                                  \
            for (int b = 0; b < nb; b++)                                                                       \
                _mm512_mask_storeu_ps(out + d0 + 16 * b, tail_mask(hd - d0 - 16 * b), _mm512_mul_ps(acc[b], inv)); \
        }                                                                                                      \
    }

#define LOAD_F32(p, m) _mm512_maskz_loadu_ps((m), (p))
ATTEND(attend_f32_avx512, float, LOAD_F32)
ATTEND(attend_f16_avx512, uint16_t, load_f16)

T512 static void f32_to_f16_avx512(uint16_t *out, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = tail_mask(n - i);
        __m256i h = _mm512_cvtps_ph(_mm512_maskz_loadu_ps(m, x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        _mm256_mask_storeu_epi16(out + i, m, h);
    }
}

T512 static void f16_to_f32_avx512(float *out, const uint16_t *x, int64_t n) {
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = tail_mask(n - i);
        _mm512_mask_storeu_ps(out + i, m, load_f16(x + i, m));
    }
}

const ow_ops_kernels ow_ops_avx512 = {
    "avx512", sumsq_avx512, max_avx512, exp_sum_avx512, swiglu_avx512, ow_geglu_avx2, ow_softcap_avx2,
    attend_f32_avx512, attend_f16_avx512, ow_attend_q8_0_avx2, f32_to_f16_avx512, f16_to_f32_avx512,
};

#endif
