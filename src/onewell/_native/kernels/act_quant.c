/* Quantization of float activations to the formats the weight types pair with (generic C).
 *
 * Bit-exact twins: act_quant_avx2.c and onewell/quant/act_formats.py produce the same bytes. Q8_0 and Q8_1
 * follow ggml's x86 code (d = amax/127 stored as fp16, quants = round-half-even(x * (127/amax)) with the float
 * multiplier, not 1/fp16(d)); Q8_K follows ggml's quantize_row_q8_K_ref, which every CPU backend uses. */
#include "vec_dot.h"

#include <math.h>

/* Round to nearest, ties to even, for |v| < 2^22: adding 1.5 * 2^23 leaves the rounded integer in the low
 * mantissa bits (ggml's nearest_int). Same result as vroundps/cvtps2dq and numpy's rint. */
static inline int32_t round_half_even(float v) {
    const float biased = v + 12582912.0f;
    return (int32_t)(ow_f32_bits(biased) & 0x007fffffu) - 0x00400000;
}

static float block_amax(const float *x, int n) {
    float amax = 0.0f;
    for (int j = 0; j < n; j++) {
        const float a = fabsf(x[j]);
        if (a > amax) amax = a;
    }
    return amax;
}

/* shared by Q8_0 and Q8_1: writes the quants, returns d (float, before fp16 rounding) and the quant sum */
static float quantize_block_32(const float *x, int8_t *qs, int32_t *qsum) {
    const float amax = block_amax(x, OW_QK);
    const float d = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    int32_t sum = 0;
    for (int j = 0; j < OW_QK; j++) {
        qs[j] = (int8_t)round_half_even(x[j] * id);
        sum += qs[j];
    }
    *qsum = sum;
    return d;
}

void act_quant_q8_0_generic(const float *x, void *xq, int64_t n) {
    ow_block_q8_0 *y = xq;
    for (int64_t b = 0; b < n / OW_QK; b++) {
        int32_t qsum;
        const float d = quantize_block_32(x + b * OW_QK, y[b].qs, &qsum);
        y[b].d = ow_fp32_to_fp16(d);
    }
}

/* Q8_0 quantization, written in the interleaved R16 activation layout (q8_0_r16.h) */
void act_quant_q8_0r16_generic(const float *x, void *xq, int64_t n) {
    for (int64_t b = 0; b < n / OW_QK; b++) {
        int8_t qs[OW_QK];
        int32_t qsum;
        const float d = quantize_block_32(x + b * OW_QK, qs, &qsum);
        ow_r16_put_act_block(xq, n, b, qs, ow_fp32_to_fp16(d), qsum);
    }
}

void act_quant_q8_1_generic(const float *x, void *xq, int64_t n) {
    ow_block_q8_1 *y = xq;
    for (int64_t b = 0; b < n / OW_QK; b++) {
        int32_t qsum;
        const float d = quantize_block_32(x + b * OW_QK, y[b].qs, &qsum);
        y[b].d = ow_fp32_to_fp16(d);
        y[b].s = ow_fp32_to_fp16(d * (float)qsum);
    }
}

void act_quant_q8_K_generic(const float *x, void *xq, int64_t n) {
    ow_block_q8_K *y = xq;
    for (int64_t b = 0; b < n / OW_QK_K; b++, x += OW_QK_K) {
        /* the signed value of largest magnitude (the first one on ties) maps to -127 */
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < OW_QK_K; j++) {
            const float a = fabsf(x[j]);
            if (a > amax) { amax = a; max = x[j]; }
        }
        int16_t bsums[OW_QK_K / 16];
        if (amax == 0.0f) {
            y[b].d = 0.0f;
            memset(y[b].qs, 0, sizeof y[b].qs);
            memset(bsums, 0, sizeof bsums);
        } else {
            const float iscale = -127.0f / max;
            for (int j = 0; j < OW_QK_K; j++) {
                const int32_t v = round_half_even(iscale * x[j]);
                y[b].qs[j] = (int8_t)(v < 127 ? v : 127);
            }
            for (int g = 0; g < OW_QK_K / 16; g++) {
                int32_t sum = 0;
                for (int l = 0; l < 16; l++) sum += y[b].qs[16 * g + l];
                bsums[g] = (int16_t)sum;
            }
            y[b].d = 1.0f / iscale;
        }
        memcpy(y[b].bsums, bsums, sizeof bsums);
    }
}

/* F32 weights take the activations as they are */
void act_quant_f32_generic(const float *x, void *xq, int64_t n) { memcpy(xq, x, (size_t)n * sizeof(float)); }

void act_quant_f16_generic(const float *x, void *xq, int64_t n) {
    uint8_t *out = xq;
    for (int64_t i = 0; i < n; i++) {
        const uint16_t h = ow_fp32_to_fp16(x[i]);
        memcpy(out + 2 * i, &h, 2);
    }
}
