/* The non-matmul ops (ops.h): the public functions, the generic C kernels (the readable twins of
 * ops_avx2.c / ops_avx512.c / ops_neon.c) and the run-time choice between them. */
#include "ops.h"

#include <math.h>
#include <stdatomic.h>
#include <string.h>

#include "cpu_features.h"
#include "kv_cache.h"
#include "ops_kernels.h"

/* ---- generic kernels ---- */

static inline uint32_t f2u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float u2f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

static inline float exp_generic(float x) {
    if (!(x >= OW_EXP_LO)) return x != x ? x : 0.0f; /* NaN stays, tiny flushes to 0 */
    if (x > OW_EXP_HI) return INFINITY;
    float kf = (x * OW_LOG2E + 12582912.0f) - 12582912.0f; /* round to nearest even (1.5 * 2^23 trick) */
    float r = x - kf * OW_LN2_HI;                          /* exact: kf * LN2_HI has few bits */
    r = r - kf * OW_LN2_LO;
    float p = OW_EXP_P0;
    p = p * r + OW_EXP_P1;
    p = p * r + OW_EXP_P2;
    p = p * r + OW_EXP_P3;
    p = p * r + OW_EXP_P4;
    p = p * r + OW_EXP_P5;
    float y = (p * (r * r) + r) + 1.0f;
    int32_t k = (int32_t)kf;
    int32_t k1 = k >> 1, k2 = k - k1; /* 2^k as 2^k1 * 2^k2: each factor normal for k in [-126, 128] */
    y *= u2f((uint32_t)(k1 + 127) << 23);
    y *= u2f((uint32_t)(k2 + 127) << 23);
    return y;
}

static float sumsq_generic(const float *x, int64_t n) {
    float acc[8] = {0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) acc[j] += x[i + j] * x[i + j];
    for (; i < n; i++) acc[0] += x[i] * x[i];
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

static float max_generic(const float *x, int64_t n) {
    float m = x[0];
    for (int64_t i = 1; i < n; i++) m = x[i] > m ? x[i] : m;
    return m;
}

static float exp_sum_generic(float *y, const float *x, float shift, int64_t n) {
    float acc[8] = {0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) { y[i + j] = exp_generic(x[i + j] - shift); acc[j] += y[i + j]; }
    for (; i < n; i++) { y[i] = exp_generic(x[i] - shift); acc[0] += y[i]; }
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

static void swiglu_generic(float *out, const float *g, const float *u, int64_t n) {
    for (int64_t i = 0; i < n; i++) out[i] = g[i] / (1.0f + exp_generic(-g[i])) * u[i];
}

void ow_geglu_generic(float *out, const float *g, const float *u, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        const float x = g[i];
        out[i] = x / (1.0f + exp_generic(OW_GELU_K * (x + OW_GELU_C * x * x * x))) * u[i];
    }
}

void ow_softcap_generic(float *out, const float *x, int64_t n, float cap) {
    const float inv = 1.0f / cap;
    for (int64_t i = 0; i < n; i++) {
        const float y = x[i] * inv, a = fabsf(y), a2 = a * a;
        /* tanh(|y|): 1 - 2 / (exp(2|y|) + 1), where exp overflow gives 1; below 1/16 its series (no cancellation) */
        const float t = a < OW_TANH_SERIES ? a + a * a2 * (OW_TANH_C3 + a2 * OW_TANH_C5)
                                           : 1.0f - 2.0f / (exp_generic(a + a) + 1.0f);
        out[i] = cap * (y < 0 ? -t : t);                            /* NaN stays NaN */
    }
}

static uint16_t half_from_float(float f) {
    uint32_t x = f2u(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    uint32_t ax = x & 0x7fffffff;
    if (ax >= 0x7f800000) /* inf, or NaN made quiet keeping the top payload bits (as F16C does) */
        return sign | 0x7c00 | (ax > 0x7f800000 ? 0x200 | ((ax >> 13) & 0x3ff) : 0);
    if (ax >= 0x477ff000) return sign | 0x7c00; /* >= 65520 rounds to inf */
    if (ax < 0x38800000) {                        /* below 2^-14: a subnormal half (or 0) */
        if (ax <= 0x33000000) return sign;        /* <= 2^-25 rounds to 0 (the tie goes to even 0) */
        uint32_t mant = (ax & 0x7fffff) | 0x800000;
        int shift = 126 - (int)(ax >> 23); /* value / 2^-24 = mant >> shift */
        uint32_t q = mant >> shift, rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1))) q++;
        return sign | (uint16_t)q;
    }
    uint32_t h = (ax >> 13) - ((uint32_t)(127 - 15) << 10); /* re-biased exponent and the top 10 mantissa bits */
    uint32_t rem = ax & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) h++;   /* a carry into the exponent is right */
    return sign | (uint16_t)h;
}

/* Exact for every half (subnormals, inf, NaN payloads) in integer masks and one float subtraction, no branches
 * or selects on floats: the loops over it vectorize, which the f16 KV cache's generic attention needs (a
 * branchy version made it ~5x slower than f32). Exponent and mantissa move into float position and the bias is
 * adjusted; inf/NaN get the rest of the float exponent; a subnormal m * 2^-24 is renormalized as
 * (2^-14 + m * 2^-24) - 2^-14, exact in float, and taken only for subnormals (so NaN bits never pass an FPU). */
static inline float float_from_half(uint16_t h) {
    const uint32_t o = (uint32_t)(h & 0x7fff) << 13, exp = o & 0x0f800000u;
    const uint32_t is_special = 0u - (uint32_t)(exp == 0x0f800000u), is_sub = 0u - (uint32_t)(exp == 0);
    const uint32_t biased = o + (112u << 23) + (is_special & (112u << 23));
    const uint32_t renorm = f2u(u2f(o + (113u << 23)) - 6.103515625e-05f);
    return u2f(((is_sub & renorm) | (~is_sub & biased)) | (uint32_t)(h & 0x8000) << 16);
}

static void f32_to_f16_generic(uint16_t *out, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) out[i] = half_from_float(x[i]);
}

static void f16_to_f32_generic(float *out, const uint16_t *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) out[i] = float_from_half(x[i]);
}

/* Softmax weights in scores (unnormalized), then out = sum_t w_t v_t / sum_t w_t. Shared by both KV types. */
static float softmax_scores(float *scores, int64_t n_ctx) {
    float m = max_generic(scores, n_ctx);
    return exp_sum_generic(scores, scores, m, n_ctx);
}

static void attend_f32_generic(float *out, const float *q, const float *k, const float *v, int64_t stride,
                               int64_t n_ctx, int64_t hd, float scale, float cap, float *scores) {
    for (int64_t t = 0; t < n_ctx; t++) {
        const float *kt = k + t * stride;
        float acc[4] = {0};
        int64_t d = 0;
        for (; d + 4 <= hd; d += 4)
            for (int j = 0; j < 4; j++) acc[j] += q[d + j] * kt[d + j];
        for (; d < hd; d++) acc[0] += q[d] * kt[d];
        scores[t] = ((acc[0] + acc[1]) + (acc[2] + acc[3])) * scale;
    }
    if (cap > 0) ow_softcap_generic(scores, scores, n_ctx, cap);
    float inv = 1.0f / softmax_scores(scores, n_ctx);
    for (int64_t d = 0; d < hd; d++) out[d] = 0.0f;
    for (int64_t t = 0; t < n_ctx; t++) {
        const float *vt = v + t * stride;
        for (int64_t d = 0; d < hd; d++) out[d] += scores[t] * vt[d];
    }
    for (int64_t d = 0; d < hd; d++) out[d] *= inv;
}

static void attend_f16_generic(float *out, const float *q, const uint16_t *k, const uint16_t *v, int64_t stride,
                               int64_t n_ctx, int64_t hd, float scale, float cap, float *scores) {
    /* K rows are widened 64 values at a time into a buffer first: that loop vectorizes, the fused one did not
     * (measured ~5x slower than f32). The sums are the f32 kernel's, in the same order. */
    float row[64];
    for (int64_t t = 0; t < n_ctx; t++) {
        const uint16_t *kt = k + t * stride;
        float acc[4] = {0};
        for (int64_t d0 = 0; d0 < hd; d0 += 64) {
            const int64_t n = hd - d0 < 64 ? hd - d0 : 64;
            for (int64_t i = 0; i < n; i++) row[i] = float_from_half(kt[d0 + i]);
            int64_t i = 0;
            for (; i + 4 <= n; i += 4)
                for (int j = 0; j < 4; j++) acc[j] += q[d0 + i + j] * row[i + j];
            for (; i < n; i++) acc[0] += q[d0 + i] * row[i];
        }
        scores[t] = ((acc[0] + acc[1]) + (acc[2] + acc[3])) * scale;
    }
    if (cap > 0) ow_softcap_generic(scores, scores, n_ctx, cap);
    float inv = 1.0f / softmax_scores(scores, n_ctx);
    for (int64_t d = 0; d < hd; d++) out[d] = 0.0f;
    for (int64_t t = 0; t < n_ctx; t++) {
        const uint16_t *vt = v + t * stride;
        for (int64_t d = 0; d < hd; d++) out[d] += scores[t] * float_from_half(vt[d]);
    }
    for (int64_t d = 0; d < hd; d++) out[d] *= inv;
}

/* Q8_0 blocks (kv_cache.h): value j of a block is d * qs[j]. Scores take d once per block, the V sum folds d into
 * the position's weight. */
static inline float q8_0_scale(const uint8_t *block) {
    uint16_t h;
    memcpy(&h, block, 2);
    return float_from_half(h);
}

void ow_attend_q8_0_generic(float *out, const float *q, const uint8_t *k, const uint8_t *v, int64_t stride,
                                int64_t n_ctx, int64_t hd, float scale, float cap, float *scores) {
    const int64_t nb = hd / 32;
    for (int64_t t = 0; t < n_ctx; t++) {
        float s = 0.0f;
        for (int64_t b = 0; b < nb; b++) {
            const uint8_t *blk = k + t * stride + b * 34;
            const int8_t *qs = (const int8_t *)(blk + 2);
            const float *qb = q + b * 32;
            float acc[4] = {0};
            for (int j = 0; j < 32; j += 4)
                for (int i = 0; i < 4; i++) acc[i] += qb[j + i] * (float)qs[j + i];
            s += q8_0_scale(blk) * ((acc[0] + acc[1]) + (acc[2] + acc[3]));
        }
        scores[t] = s * scale;
    }
    if (cap > 0) ow_softcap_generic(scores, scores, n_ctx, cap);
    float inv = 1.0f / softmax_scores(scores, n_ctx);
    for (int64_t d = 0; d < hd; d++) out[d] = 0.0f;
    for (int64_t t = 0; t < n_ctx; t++) {
        for (int64_t b = 0; b < nb; b++) {
            const uint8_t *blk = v + t * stride + b * 34;
            const int8_t *qs = (const int8_t *)(blk + 2);
            const float w = scores[t] * q8_0_scale(blk);
            for (int j = 0; j < 32; j++) out[b * 32 + j] += w * (float)qs[j];
        }
    }
    for (int64_t d = 0; d < hd; d++) out[d] *= inv;
}

const ow_ops_kernels ow_ops_generic = {
    "generic", sumsq_generic, max_generic, exp_sum_generic, swiglu_generic, ow_geglu_generic, ow_softcap_generic,
    attend_f32_generic, attend_f16_generic, ow_attend_q8_0_generic, f32_to_f16_generic, f16_to_f32_generic,
};

/* ---- the choice of path, once ---- */

static _Atomic(const ow_ops_kernels *) g_kernels;

static const ow_ops_kernels *kernels_of(ow_isa isa) {
#if OW_OPS_X86
    if (isa == OW_ISA_AVX512) return &ow_ops_avx512;
    if (isa == OW_ISA_AVX2 || isa == OW_ISA_AVXVNNI) return &ow_ops_avx2;   /* the ops have no VNNI code */
#endif
#if OW_OPS_NEON
    if (isa == OW_ISA_NEON || isa == OW_ISA_DOTPROD) return &ow_ops_neon;
#endif
    (void)isa;
    return &ow_ops_generic;
}

static const ow_ops_kernels *kern(void) {
    const ow_ops_kernels *k = atomic_load_explicit(&g_kernels, memory_order_acquire);
    if (k) return k;
    k = kernels_of(ow_isa_best());
    atomic_store_explicit(&g_kernels, k, memory_order_release); /* every thread picks the same: a race is benign */
    return k;
}

const char *ow_ops_isa(void) { return kern()->name; }

int ow_ops_set_isa(ow_isa isa) {
    if (!ow_isa_allowed(isa)) return -1;
    const ow_ops_kernels *k = kernels_of(isa);
    if (isa != OW_ISA_GENERIC && k == &ow_ops_generic) return -1;   /* a level this build has no kernels for */
    atomic_store_explicit(&g_kernels, k, memory_order_release);
    return 0;
}

/* ---- the ops ---- */

void ow_rmsnorm_f32(float *out, const float *x, const float *w, int64_t n_rows, int64_t dim, float eps) {
    const ow_ops_kernels *K = kern();
    for (int64_t r = 0; r < n_rows; r++) {
        const float *xr = x + r * dim;
        float *o = out + r * dim;
        float mean = K->sumsq(xr, dim) / (float)dim;
        float s = 1.0f / sqrtf(mean + eps);
        for (int64_t i = 0; i < dim; i++) o[i] = (xr[i] * s) * w[i];
    }
}

void ow_rope_table_f32(float *cs, const int32_t *pos, int64_t n_tok, int64_t n_rot, float freq_base) {
    ow_rope_table_ff_f32(cs, pos, n_tok, n_rot, freq_base, NULL);
}

void ow_rope_table_ff_f32(float *cs, const int32_t *pos, int64_t n_tok, int64_t n_rot, float freq_base,
                          const float *freq_factors) {
    int64_t half = n_rot / 2;
    for (int64_t t = 0; t < n_tok; t++) {
        for (int64_t i = 0; i < half; i++) {
            double theta = (double)pos[t] * pow((double)freq_base, -2.0 * (double)i / (double)n_rot);
            if (freq_factors) theta /= (double)freq_factors[i];
            cs[(t * half + i) * 2] = (float)cos(theta);
            cs[(t * half + i) * 2 + 1] = (float)sin(theta);
        }
    }
}

void ow_rope_apply_f32(float *x, const float *cs, int64_t n_tok, int64_t n_head, int64_t head_dim, int64_t n_rot,
                       ow_rope_style style) {
    int64_t half = n_rot / 2;
    for (int64_t t = 0; t < n_tok; t++) {
        const float *row = cs + t * half * 2;
        for (int64_t h = 0; h < n_head; h++) {
            float *xh = x + (t * n_head + h) * head_dim;
            for (int64_t i = 0; i < half; i++) {
                float c = row[2 * i], s = row[2 * i + 1];
                int64_t i0 = style == OW_ROPE_NEOX ? i : 2 * i;
                int64_t i1 = style == OW_ROPE_NEOX ? i + half : 2 * i + 1;
                float x0 = xh[i0], x1 = xh[i1];
                xh[i0] = x0 * c - x1 * s;
                xh[i1] = x0 * s + x1 * c;
            }
        }
    }
}

void ow_swiglu_f32(float *out, const float *g, const float *u, int64_t n) { kern()->swiglu(out, g, u, n); }

void ow_geglu_f32(float *out, const float *g, const float *u, int64_t n) { kern()->geglu(out, g, u, n); }
void ow_softcap_f32(float *out, const float *x, int64_t n, float cap) { kern()->softcap(out, x, n, cap); }

void ow_add_f32(float *out, const float *a, const float *b, int64_t n) {
    for (int64_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

void ow_add_bias_f32(float *x, const float *bias, int64_t n_rows, int64_t dim) {
    for (int64_t r = 0; r < n_rows; r++)
        for (int64_t i = 0; i < dim; i++) x[r * dim + i] += bias[i];
}

void ow_softmax_f32(float *out, const float *x, int64_t n_rows, int64_t n) {
    const ow_ops_kernels *K = kern();
    for (int64_t r = 0; r < n_rows; r++) {
        float *o = out + r * n;
        float inv = 1.0f / K->exp_sum(o, x + r * n, K->max(x + r * n, n), n);
        for (int64_t i = 0; i < n; i++) o[i] *= inv;
    }
}

int64_t ow_argmax_f32(const float *x, int64_t n) {
    int64_t best = 0;
    float m = x[0];
    if (m != m) return 0;
    for (int64_t i = 1; i < n; i++) {
        if (x[i] > m) { m = x[i]; best = i; }
        else if (x[i] != x[i]) return i;
    }
    return best;
}

void ow_f32_to_f16(uint16_t *out, const float *x, int64_t n) { kern()->f32_to_f16(out, x, n); }
void ow_f16_to_f32(float *out, const uint16_t *x, int64_t n) { kern()->f16_to_f32(out, x, n); }

void ow_attention_heads(const ow_attn_args *a, int64_t head_begin, int64_t head_end, float *scores) {
    const ow_ops_kernels *K = kern();
    int64_t hd = a->head_dim, group = a->n_head / a->n_head_kv, stride = a->n_head_kv * hd;
    for (int64_t h = head_begin; h < head_end; h++) {
        float *out = a->out + h * hd;
        if (a->n_ctx <= 0) { memset(out, 0, (size_t)hd * sizeof(float)); continue; }
        int64_t kv_off = (h / group) * hd;
        const float *q = a->q + h * hd;
        if (a->kv_type == OW_KV_Q8_0)
            K->attend_q8_0(out, q, (const uint8_t *)a->k + ow_kv_bytes(OW_KV_Q8_0, kv_off),
                           (const uint8_t *)a->v + ow_kv_bytes(OW_KV_Q8_0, kv_off), (int64_t)ow_kv_bytes(OW_KV_Q8_0, stride),
                           a->n_ctx, hd, a->scale, a->softcap, scores);
        else if (a->kv_type == OW_KV_F16)
            K->attend_f16(out, q, (const uint16_t *)a->k + kv_off, (const uint16_t *)a->v + kv_off, stride, a->n_ctx,
                          hd, a->scale, a->softcap, scores);
        else
            K->attend_f32(out, q, (const float *)a->k + kv_off, (const float *)a->v + kv_off, stride, a->n_ctx, hd,
                          a->scale, a->softcap, scores);
    }
}

typedef struct {
    const ow_attn_args *a;
    float *scores;
} attn_job;

static void attn_task(void *ctx, int64_t begin, int64_t end, int worker) {
    attn_job *j = ctx;
    ow_attention_heads(j->a, begin, end, j->scores + (int64_t)worker * (j->a->n_ctx > 0 ? j->a->n_ctx : 0));
}

void ow_attention(ow_pool *p, const ow_attn_args *a, float *scores) {
    attn_job j = {a, scores};
    ow_pool_parallel_for(p, a->n_head, 0, attn_task, &j);
}
