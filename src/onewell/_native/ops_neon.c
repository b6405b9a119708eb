/* aarch64 NEON kernels of the ops (ops_kernels.h): translations of the generic twins in ops.c, 4 floats per
 * register. Tails go through a zero-padded copy, so every element passes through the same vector math (the
 * results do not depend on where a caller splits the work). AdvSIMD is baseline on aarch64: no target
 * attribute; the dotprod level runs these too. GeGLU and the soft-cap use the generic C versions. */
#include "ops_kernels.h"

#if OW_OPS_NEON
#include <arm_neon.h>
#include <math.h>
#include <string.h>

/* lanes [0, min(left, 4)) of p, the others 0 */
static inline float32x4_t load4(const float *p, int64_t left) {
    if (left >= 4) return vld1q_f32(p);
    float tmp[4] = {0};
    memcpy(tmp, p, (size_t)left * sizeof(float));
    return vld1q_f32(tmp);
}

static inline void store4(float *p, float32x4_t v, int64_t left) {
    if (left >= 4) { vst1q_f32(p, v); return; }
    float tmp[4];
    vst1q_f32(tmp, v);
    memcpy(p, tmp, (size_t)left * sizeof(float));
}

static inline float32x4_t load4_f16(const uint16_t *p, int64_t left) {
    uint16_t tmp[4] = {0};
    memcpy(tmp, p, (size_t)(left >= 4 ? 4 : left) * sizeof(uint16_t));
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(tmp)));
}

/* the exp of ops_kernels.h with fused multiply-adds, as the x86 paths evaluate it */
static inline float32x4_t exp4(float32x4_t x) {
    const float32x4_t lo = vdupq_n_f32(OW_EXP_LO), hi = vdupq_n_f32(OW_EXP_HI);
    const uint32x4_t tiny = vcltq_f32(x, lo), huge = vcgtq_f32(x, hi);   /* false for NaN */
    /* clamp keeping a NaN x: fmin/fmax would return the number, so select instead */
    x = vbslq_f32(tiny, lo, vbslq_f32(huge, hi, x));
    const float32x4_t kf = vrndnq_f32(vmulq_f32(x, vdupq_n_f32(OW_LOG2E)));   /* round to nearest even */
    float32x4_t r = vfmsq_f32(x, kf, vdupq_n_f32(OW_LN2_HI));
    r = vfmsq_f32(r, kf, vdupq_n_f32(OW_LN2_LO));
    float32x4_t p = vdupq_n_f32(OW_EXP_P0);
    p = vfmaq_f32(vdupq_n_f32(OW_EXP_P1), p, r);
    p = vfmaq_f32(vdupq_n_f32(OW_EXP_P2), p, r);
    p = vfmaq_f32(vdupq_n_f32(OW_EXP_P3), p, r);
    p = vfmaq_f32(vdupq_n_f32(OW_EXP_P4), p, r);
    p = vfmaq_f32(vdupq_n_f32(OW_EXP_P5), p, r);
    float32x4_t y = vaddq_f32(vfmaq_f32(r, p, vmulq_f32(r, r)), vdupq_n_f32(1.0f));
    const int32x4_t k = vcvtnq_s32_f32(kf);
    const int32x4_t k1 = vshrq_n_s32(k, 1), k2 = vsubq_s32(k, k1), bias = vdupq_n_s32(127);
    y = vmulq_f32(y, vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(k1, bias), 23)));
    y = vmulq_f32(y, vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(k2, bias), 23)));
    y = vbslq_f32(tiny, vdupq_n_f32(0.0f), y);
    return vbslq_f32(huge, vdupq_n_f32(INFINITY), y);
}

static float sumsq_neon(const float *x, int64_t n) {
    float32x4_t a0 = vdupq_n_f32(0.0f), a1 = vdupq_n_f32(0.0f);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const float32x4_t v0 = vld1q_f32(x + i), v1 = vld1q_f32(x + i + 4);
        a0 = vfmaq_f32(a0, v0, v0);
        a1 = vfmaq_f32(a1, v1, v1);
    }
    for (; i < n; i += 4) {
        const float32x4_t v = load4(x + i, n - i);
        a0 = vfmaq_f32(a0, v, v);
    }
    return vaddvq_f32(vaddq_f32(a0, a1));
}

static float max_neon(const float *x, int64_t n) {
    /* vmaxq propagates NaN like the generic loop's first-NaN-wins does not; keep the generic semantics:
     * m = x[i] > m ? x[i] : m, i.e. a NaN never replaces m, and m = x[0] even if x[0] is NaN */
    float32x4_t m = vdupq_n_f32(x[0]);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const float32x4_t v = vld1q_f32(x + i);
        m = vbslq_f32(vcgtq_f32(v, m), v, m);
    }
    float r = x[0], lanes[4];
    vst1q_f32(lanes, m);
    for (int j = 0; j < 4; j++) r = lanes[j] > r ? lanes[j] : r;
    for (; i < n; i++) r = x[i] > r ? x[i] : r;
    return r;
}

static float exp_sum_neon(float *y, const float *x, float shift, int64_t n) {
    float32x4_t acc = vdupq_n_f32(0.0f);
    const float32x4_t s = vdupq_n_f32(shift);
    for (int64_t i = 0; i < n; i += 4) {
        const int64_t left = n - i;
        float32x4_t e = exp4(vsubq_f32(load4(x + i, left), s));
        if (left < 4) {   /* padding lanes would add exp(-shift): zero them */
            static const uint32_t keep[7] = {~0u, ~0u, ~0u, 0, 0, 0, 0};
            e = vreinterpretq_f32_u32(vandq_u32(vreinterpretq_u32_f32(e), vld1q_u32(keep + 3 - left)));
        }
        store4(y + i, e, left);
        acc = vaddq_f32(acc, e);
    }
    return vaddvq_f32(acc);
}

static void swiglu_neon(float *out, const float *g, const float *u, int64_t n) {
    const float32x4_t one = vdupq_n_f32(1.0f);
    for (int64_t i = 0; i < n; i += 4) {
        const float32x4_t gv = load4(g + i, n - i), uv = load4(u + i, n - i);
        const float32x4_t e = exp4(vnegq_f32(gv));
        store4(out + i, vmulq_f32(vdivq_f32(gv, vaddq_f32(one, e)), uv), n - i);
    }
}

static float weigh(float *scores, int64_t n_ctx) {
    return 1.0f / exp_sum_neon(scores, scores, max_neon(scores, n_ctx), n_ctx);
}

/* One head; V summed in blocks of up to 4 vectors (16 dims) held in registers across the positions. */
#define ATTEND(name, type, LOAD)                                                                               \
    static void name(float *out, const float *q, const type *k, const type *v, int64_t stride, int64_t n_ctx,   \
                     int64_t hd, float scale, float cap, float *scores) {                                       \
        for (int64_t t = 0; t < n_ctx; t++) {                                                                  \
            const type *kt = k + t * stride;                                                                   \
            float32x4_t acc = vdupq_n_f32(0.0f);                                                               \
            for (int64_t d = 0; d < hd; d += 4) acc = vfmaq_f32(acc, load4(q + d, hd - d), LOAD(kt + d, hd - d)); \
            scores[t] = vaddvq_f32(acc) * scale;                                                               \
        }                                                                                                      \
        if (cap > 0) ow_softcap_generic(scores, scores, n_ctx, cap);                                           \
        const float inv = weigh(scores, n_ctx);                                                                \
        for (int64_t d0 = 0; d0 < hd; d0 += 16) {                                                              \
            float32x4_t acc[4] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)}; \
            int nb = (int)((hd - d0 + 3) / 4);                                                                 \
            if (nb > 4) nb = 4;                                                                                \
            for (int64_t t = 0; t < n_ctx; t++) {                                                              \
                const type *vt = v + t * stride + d0;                                                          \
                for (int b = 0; b < nb; b++) acc[b] = vfmaq_n_f32(acc[b], LOAD(vt + 4 * b, hd - d0 - 4 * b), scores[t]); \
            }                                                                                                  \
            for (int b = 0; b < nb; b++) store4(out + d0 + 4 * b, vmulq_n_f32(acc[b], inv), hd - d0 - 4 * b); \
        }                                                                                                      \
    }

static inline float32x4_t load4_f32(const float *p, int64_t left) { return load4(p, left); }
ATTEND(attend_f32_neon, float, load4_f32)
ATTEND(attend_f16_neon, uint16_t, load4_f16)

/* fcvtn rounds to nearest even (the default FPCR mode) and quiets NaNs keeping the top payload bits, as F16C */
static void f32_to_f16_neon(uint16_t *out, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i += 4) {
        uint16_t tmp[4];
        vst1_u16(tmp, vreinterpret_u16_f16(vcvt_f16_f32(load4(x + i, n - i))));
        memcpy(out + i, tmp, (size_t)(n - i >= 4 ? 4 : n - i) * sizeof(uint16_t));
    }
}

static void f16_to_f32_neon(float *out, const uint16_t *x, int64_t n) {
    for (int64_t i = 0; i < n; i += 4) store4(out + i, load4_f16(x + i, n - i), n - i);
}

const ow_ops_kernels ow_ops_neon = {
    "neon", sumsq_neon, max_neon, exp_sum_neon, swiglu_neon, ow_geglu_generic, ow_softcap_generic,
    attend_f32_neon, attend_f16_neon, ow_attend_q8_0_generic, f32_to_f16_neon, f16_to_f32_neon,
};

#endif
