/* Internal to ops.c / ops_avx2.c / ops_avx512.c / ops_neon.c: the per-ISA inner loops of the ops, and the exp they share.
 * Every path evaluates exp with the same algorithm (below), so paths differ only by FMA rounding. */
#ifndef ONEWELL_OPS_KERNELS_H
#define ONEWELL_OPS_KERNELS_H

#include <stdint.h>

#if defined(__x86_64__) && !defined(OW_GENERIC_ONLY)
#define OW_OPS_X86 1
#else
#define OW_OPS_X86 0
#endif
#if defined(__aarch64__) && !defined(OW_GENERIC_ONLY)
#define OW_OPS_NEON 1
#else
#define OW_OPS_NEON 0
#endif

typedef struct {
    const char *name;
    float (*sumsq)(const float *x, int64_t n);
    float (*max)(const float *x, int64_t n);                               /* n >= 1 */
    float (*exp_sum)(float *y, const float *x, float shift, int64_t n);   /* y = exp(x - shift); returns sum y */
    void (*swiglu)(float *out, const float *g, const float *u, int64_t n);
    void (*geglu)(float *out, const float *g, const float *u, int64_t n);
    void (*softcap)(float *out, const float *x, int64_t n, float cap);
    /* One head: k, v point at the head's row of position 0; positions are `stride` elements apart; cap > 0
     * soft-caps the scaled scores. */
    void (*attend_f32)(float *out, const float *q, const float *k, const float *v, int64_t stride, int64_t n_ctx,
                       int64_t head_dim, float scale, float cap, float *scores);
    void (*attend_f16)(float *out, const float *q, const uint16_t *k, const uint16_t *v, int64_t stride,
                       int64_t n_ctx, int64_t head_dim, float scale, float cap, float *scores);
    /* Q8_0 (kv_cache.h): k, v at the head's first block of position 0, positions stride_bytes apart;
     * head_dim a multiple of 32 */
    void (*attend_q8_0)(float *out, const float *q, const uint8_t *k, const uint8_t *v, int64_t stride_bytes,
                        int64_t n_ctx, int64_t head_dim, float scale, float cap, float *scores);
    void (*f32_to_f16)(uint16_t *out, const float *x, int64_t n);
    void (*f16_to_f32)(float *out, const uint16_t *x, int64_t n);
} ow_ops_kernels;

extern const ow_ops_kernels ow_ops_generic;
/* the generic GeGLU, soft-cap and Q8_0-cache attention (ops.c), shared with paths that have no vector version of them (NEON) */
void ow_geglu_generic(float *out, const float *g, const float *u, int64_t n);
void ow_softcap_generic(float *out, const float *x, int64_t n, float cap);
void ow_attend_q8_0_generic(float *out, const float *q, const uint8_t *k, const uint8_t *v, int64_t stride_bytes,
                            int64_t n_ctx, int64_t head_dim, float scale, float cap, float *scores);
#if OW_OPS_X86
extern const ow_ops_kernels ow_ops_avx2;
extern const ow_ops_kernels ow_ops_avx512;
/* AVX2 kernels the AVX-512 table borrows where it has no tested kernel of its own (GeGLU, soft-capping: not
 * measurable on the AVX2-only machines this was written on; a CPU with AVX-512 runs AVX2 too). */
void ow_geglu_avx2(float *out, const float *g, const float *u, int64_t n);
void ow_softcap_avx2(float *out, const float *x, int64_t n, float cap);
/* likewise the Q8_0 attention (no AVX-512 machine to tune and test a 512-bit one on) */
void ow_attend_q8_0_avx2(float *out, const float *q, const uint8_t *k, const uint8_t *v, int64_t stride_bytes,
                         int64_t n_ctx, int64_t head_dim, float scale, float cap, float *scores);
#endif
#if OW_OPS_NEON
extern const ow_ops_kernels ow_ops_neon;   /* ops_neon.c: both aarch64 levels (the ops use no dotprod) */
#endif

/* GELU-tanh constants: gelu(x) = x / (1 + exp(OW_GELU_K * (x + OW_GELU_C * x^3))), OW_GELU_K = -2 sqrt(2/pi) */
#define OW_GELU_K -1.5957691216057308f
#define OW_GELU_C 0.044715f
/* tanh(a) for 0 <= a < OW_TANH_SERIES as a + a^3 (C3 + a^2 C5): error below a^7 / 17 < 2^-28 a there */
#define OW_TANH_SERIES 0.0625f
#define OW_TANH_C3 -0.33333333333f
#define OW_TANH_C5 0.13333333333f

/* exp(x) for float32, Cephes-style: k = round(x / ln 2), r = x - k ln 2 (in two parts, exact first product),
 * exp(r) by a degree-7 polynomial on [-ln2/2, ln2/2], times 2^k built from two halves so k = 128 is fine.
 * Below OW_EXP_LO the result is 0 (the true value is subnormal), above OW_EXP_HI it is +inf, NaN stays NaN.
 * Relative error about 2 ulp. */
#define OW_EXP_LO -87.33654f
#define OW_EXP_HI 88.72283f
#define OW_LOG2E 1.44269504088896341f
#define OW_LN2_HI 0.693359375f
#define OW_LN2_LO -2.12194440e-4f
#define OW_EXP_P0 1.9875691500e-4f
#define OW_EXP_P1 1.3981999507e-3f
#define OW_EXP_P2 8.3334519073e-3f
#define OW_EXP_P3 4.1665795894e-2f
#define OW_EXP_P4 1.6666665459e-1f
#define OW_EXP_P5 5.0000001201e-1f

#endif
