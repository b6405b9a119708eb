/* Portable dot kernels: the readable twins every SIMD file translates, and the path of CPUs without AVX2.
 *
 * Arithmetic follows ggml: each block's integer dot product is exact, then it is scaled once by the product
 * of the weight and activation scales, and the scaled block sums are added in float in block order. */
#include "vec_dot.h"
#include "vec_dot_generic_rows.h"

/* Legacy 32-element blocks -------------------------------------------------------------------------------- */

static float dot_row_q4_0_q8_0(const ow_block_q4_0 *w, const ow_block_q8_0 *x, int64_t nb) {
    float sum = 0.0f;
    for (int64_t b = 0; b < nb; b++) {
        int32_t sumi = 0;
        for (int j = 0; j < OW_QK / 2; j++) {
            sumi += ((w[b].qs[j] & 0x0f) - 8) * x[b].qs[j];       /* element j */
            sumi += ((w[b].qs[j] >> 4) - 8) * x[b].qs[j + 16];    /* element j + 16 */
        }
        sum += (float)sumi * (ow_fp16_to_fp32(w[b].d) * ow_fp16_to_fp32(x[b].d));
    }
    return sum;
}

static float dot_row_q4_1_q8_1(const ow_block_q4_1 *w, const ow_block_q8_1 *x, int64_t nb) {
    float sum = 0.0f;
    for (int64_t b = 0; b < nb; b++) {
        int32_t sumi = 0;
        for (int j = 0; j < OW_QK / 2; j++) {
            sumi += (w[b].qs[j] & 0x0f) * x[b].qs[j];
            sumi += (w[b].qs[j] >> 4) * x[b].qs[j + 16];
        }
        /* sum_j (d q_j + m) dx a_j = d dx sumi + m (dx sum_j a_j) = d dx sumi + m s */
        sum += (ow_fp16_to_fp32(w[b].d) * ow_fp16_to_fp32(x[b].d)) * (float)sumi
             + ow_fp16_to_fp32(w[b].m) * ow_fp16_to_fp32(x[b].s);
    }
    return sum;
}

static float dot_row_q5_0_q8_0(const ow_block_q5_0 *w, const ow_block_q8_0 *x, int64_t nb) {
    float sum = 0.0f;
    for (int64_t b = 0; b < nb; b++) {
        const uint32_t qh = ow_read_u32(w[b].qh);
        int32_t sumi = 0;
        for (int j = 0; j < OW_QK / 2; j++) {
            const int lo = (w[b].qs[j] & 0x0f) | (int)(((qh >> j) & 1u) << 4);
            const int hi = (w[b].qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1u) << 4);
            sumi += (lo - 16) * x[b].qs[j] + (hi - 16) * x[b].qs[j + 16];
        }
        sum += (float)sumi * (ow_fp16_to_fp32(w[b].d) * ow_fp16_to_fp32(x[b].d));
    }
    return sum;
}

static float dot_row_q5_1_q8_1(const ow_block_q5_1 *w, const ow_block_q8_1 *x, int64_t nb) {
    float sum = 0.0f;
    for (int64_t b = 0; b < nb; b++) {
        const uint32_t qh = ow_read_u32(w[b].qh);
        int32_t sumi = 0;
        for (int j = 0; j < OW_QK / 2; j++) {
            const int lo = (w[b].qs[j] & 0x0f) | (int)(((qh >> j) & 1u) << 4);
            const int hi = (w[b].qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1u) << 4);
            sumi += lo * x[b].qs[j] + hi * x[b].qs[j + 16];
        }
        sum += (ow_fp16_to_fp32(w[b].d) * ow_fp16_to_fp32(x[b].d)) * (float)sumi
             + ow_fp16_to_fp32(w[b].m) * ow_fp16_to_fp32(x[b].s);
    }
    return sum;
}

static float dot_row_q8_0_q8_0(const ow_block_q8_0 *w, const ow_block_q8_0 *x, int64_t nb) {
    float sum = 0.0f;
    for (int64_t b = 0; b < nb; b++) {
        int32_t sumi = 0;
        for (int j = 0; j < OW_QK; j++) sumi += w[b].qs[j] * x[b].qs[j];
        sum += (float)sumi * (ow_fp16_to_fp32(w[b].d) * ow_fp16_to_fp32(x[b].d));
    }
    return sum;
}

/* K-quants: 256-element super-blocks against Q8_K ------------------------------------------------------- */

/* sum_j min[j] * (sum of the 32 activation quants of sub-block j), from the activation's 16-element sums */
static int32_t k_mins_dot(const uint8_t mins[8], const ow_block_q8_K *x) {
    int16_t bsums[16];
    memcpy(bsums, x->bsums, sizeof bsums);   /* packed field: copy instead of taking an unaligned pointer */
    int32_t acc = 0;
    for (int j = 0; j < 8; j++) acc += mins[j] * (bsums[2 * j] + bsums[2 * j + 1]);
    return acc;
}

static float dot_row_q4_K_q8_K(const ow_block_q4_K *w, const ow_block_q8_K *x, int64_t nb) {
    float sum = 0.0f;
    for (int64_t b = 0; b < nb; b++) {
        uint8_t scales[8], mins[8];
        ow_unpack_k4_scales(w[b].scales, scales, mins);
        const uint8_t *q = w[b].qs;
        const int8_t *a = x[b].qs;
        int32_t isum = 0;
        for (int c = 0; c < 4; c++, q += 32, a += 64) {   /* 64 elements: sub-blocks 2c (low) and 2c+1 (high) */
            int32_t lo = 0, hi = 0;
            for (int l = 0; l < 32; l++) {
                lo += (q[l] & 0x0f) * a[l];
                hi += (q[l] >> 4) * a[l + 32];
            }
            isum += scales[2 * c] * lo + scales[2 * c + 1] * hi;
        }
        const float d = ow_fp16_to_fp32(w[b].d) * x[b].d;
        const float dmin = ow_fp16_to_fp32(w[b].dmin) * x[b].d;
        sum += d * (float)isum - dmin * (float)k_mins_dot(mins, &x[b]);
    }
    return sum;
}

static float dot_row_q5_K_q8_K(const ow_block_q5_K *w, const ow_block_q8_K *x, int64_t nb) {
    float sum = 0.0f;
    for (int64_t b = 0; b < nb; b++) {
        uint8_t scales[8], mins[8];
        ow_unpack_k4_scales(w[b].scales, scales, mins);
        const uint8_t *q = w[b].qs, *qh = w[b].qh;
        const int8_t *a = x[b].qs;
        int32_t isum = 0;
        for (int c = 0; c < 4; c++, q += 32, a += 64) {
            int32_t lo = 0, hi = 0;
            for (int l = 0; l < 32; l++) {
                lo += ((q[l] & 0x0f) | (((qh[l] >> (2 * c)) & 1) << 4)) * a[l];
                hi += ((q[l] >> 4) | (((qh[l] >> (2 * c + 1)) & 1) << 4)) * a[l + 32];
            }
            isum += scales[2 * c] * lo + scales[2 * c + 1] * hi;
        }
        const float d = ow_fp16_to_fp32(w[b].d) * x[b].d;
        const float dmin = ow_fp16_to_fp32(w[b].dmin) * x[b].d;
        sum += d * (float)isum - dmin * (float)k_mins_dot(mins, &x[b]);
    }
    return sum;
}

static float dot_row_q6_K_q8_K(const ow_block_q6_K *w, const ow_block_q8_K *x, int64_t nb) {
    float sum = 0.0f;
    for (int64_t b = 0; b < nb; b++) {
        /* decode the 256 six-bit quants (as q - 32) in element order */
        int8_t q[OW_QK_K];
        for (int half = 0; half < 2; half++) {
            const uint8_t *ql = w[b].ql + 64 * half, *qh = w[b].qh + 32 * half;
            int8_t *out = q + 128 * half;
            for (int l = 0; l < 32; l++) {
                out[l] = (int8_t)(((ql[l] & 0x0f) | (((qh[l] >> 0) & 3) << 4)) - 32);
                out[l + 32] = (int8_t)(((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) - 32);
                out[l + 64] = (int8_t)(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
                out[l + 96] = (int8_t)(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
            }
        }
        int32_t isum = 0;
        for (int g = 0; g < 16; g++) {   /* one signed 8-bit scale per 16 elements */
            int32_t part = 0;
            for (int l = 0; l < 16; l++) part += q[16 * g + l] * x[b].qs[16 * g + l];
            isum += w[b].scales[g] * part;
        }
        sum += (ow_fp16_to_fp32(w[b].d) * x[b].d) * (float)isum;
    }
    return sum;
}

/* Float weights ---------------------------------------------------------------------------------------- */

static float dot_row_f32_f32(const uint8_t *w, const float *x, int64_t n) {
    double sum = 0.0;   /* as ggml's scalar path: float products, double sum */
    for (int64_t i = 0; i < n; i++) {
        float wi;
        memcpy(&wi, w + 4 * i, 4);
        sum += (double)(wi * x[i]);
    }
    return (float)sum;
}

static float dot_row_f16_f16(const uint8_t *w, const uint16_t *x, int64_t n) {
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++)
        sum += (double)(ow_fp16_to_fp32(ow_read_u16(w + 2 * i)) * ow_fp16_to_fp32(x[i]));
    return (float)sum;
}

/* Row tiles (vec_dot_generic_rows.h): the generic path computes its rows one after the other */


OW_GENERIC_DOT(q4_0_q8_0, ow_block_q4_0, ow_block_q8_0, OW_QK)
OW_GENERIC_DOT(q4_1_q8_1, ow_block_q4_1, ow_block_q8_1, OW_QK)
OW_GENERIC_DOT(q5_0_q8_0, ow_block_q5_0, ow_block_q8_0, OW_QK)
OW_GENERIC_DOT(q5_1_q8_1, ow_block_q5_1, ow_block_q8_1, OW_QK)
OW_GENERIC_DOT(q8_0_q8_0, ow_block_q8_0, ow_block_q8_0, OW_QK)
OW_GENERIC_DOT(q4_K_q8_K, ow_block_q4_K, ow_block_q8_K, OW_QK_K)
OW_GENERIC_DOT(q5_K_q8_K, ow_block_q5_K, ow_block_q8_K, OW_QK_K)
OW_GENERIC_DOT(q6_K_q8_K, ow_block_q6_K, ow_block_q8_K, OW_QK_K)
OW_GENERIC_DOT(f32_f32, uint8_t, float, 1)
OW_GENERIC_DOT(f16_f16, uint8_t, uint16_t, 1)

/* Q8_0 R16 (q8_0_r16.h): the repacked layout, computed block by block in ggml's order. The integer dot of a
 * block is the seed plus the products of the unsigned (q + 128) weights, the float steps are those of
 * dot_row_q8_0_q8_0, so a repacked row gives bit for bit the result of its Q8_0 original on this path. ------- */

static float dot_row_q8_0r16(const uint8_t *w, const uint8_t *x, int64_t n_cols) {
    const int64_t nb = n_cols / OW_QK;
    float sum = 0.0f;
    for (int64_t b = 0; b < nb; b++) {
        int32_t sumi;
        memcpy(&sumi, x + ow_r16_act_seeds(n_cols) + 4 * b, 4);   /* -128 * sum of the activation quants */
        for (int t = 0; t < OW_QK; t++) {
            const size_t at = ow_r16_pos(nb, b, t);
            sumi += w[at] * (int8_t)x[at];
        }
        float dx;
        memcpy(&dx, x + ow_r16_act_scales(n_cols) + 4 * b, 4);
        sum += (float)sumi * (ow_fp16_to_fp32(ow_read_u16(w + n_cols + 2 * b)) * dx);
    }
    return sum;
}

void vec_dot_q8_0r16_q8_0r16_generic(OW_DOT_ARGS) {
    for (int r = 0; r < nr; r++) s[r] = dot_row_q8_0r16(w + (size_t)r * w_stride, x, n_cols);
}
