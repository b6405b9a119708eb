/* Portable dot kernels of Q2_K, Q3_K, IQ4_XS (x Q8_K), IQ4_NL (x Q8_0) and BF16 (x F32): the readable twins of
 * vec_dot_q23k_bf16_x86_256.inc and vec_dot_x86_256.inc. As vec_dot_generic.c: exact integer block dots, scaled once per block, block
 * sums added in float in block order (ggml's ggml_vec_dot_*_generic). */
#include "vec_dot.h"
#include "vec_dot_generic_rows.h"

/* the 2 low bits of K-quant element i (Q2_K, Q3_K): bits 2j of qs[32h + l] for i = 128h + 32j + l */
static inline int low2(const uint8_t *qs, int i) { return (qs[32 * (i / 128) + i % 32] >> (2 * ((i / 32) % 4))) & 3; }

static float dot_row_q2_K_q8_K(const ow_block_q2_K *w, const ow_block_q8_K *x, int64_t nb) {
    float sum = 0.0f;
    for (int64_t b = 0; b < nb; b++) {
        int16_t bsums[16];
        memcpy(bsums, x[b].bsums, sizeof bsums);
        int32_t isum = 0, mins = 0;
        for (int g = 0; g < 16; g++) {   /* 16 elements per 4-bit scale and 4-bit min */
            int32_t part = 0;
            for (int l = 0; l < 16; l++) part += low2(w[b].qs, 16 * g + l) * x[b].qs[16 * g + l];
            isum += (w[b].scales[g] & 15) * part;
            mins += (w[b].scales[g] >> 4) * bsums[g];
        }
        const float d = ow_fp16_to_fp32(w[b].d) * x[b].d, dmin = ow_fp16_to_fp32(w[b].dmin) * x[b].d;
        sum += d * (float)isum - dmin * (float)mins;
    }
    return sum;
}

static float dot_row_q3_K_q8_K(const ow_block_q3_K *w, const ow_block_q8_K *x, int64_t nb) {
    float sum = 0.0f;
    for (int64_t b = 0; b < nb; b++) {
        int8_t scales[16];
        ow_unpack_q3_K_scales(w[b].scales, scales);
        int32_t isum = 0;
        for (int g = 0; g < 16; g++) {
            int32_t part = 0;
            for (int l = 0; l < 16; l++) {
                const int i = 16 * g + l;
                const int q = low2(w[b].qs, i) - (((w[b].hmask[i % 32] >> (i / 32)) & 1) ? 0 : 4);
                part += q * x[b].qs[i];
            }
            isum += scales[g] * part;
        }
        sum += (ow_fp16_to_fp32(w[b].d) * x[b].d) * (float)isum;
    }
    return sum;
}

static float dot_row_iq4_nl_q8_0(const ow_block_iq4_nl *w, const ow_block_q8_0 *x, int64_t nb) {
    float sum = 0.0f;
    for (int64_t b = 0; b < nb; b++) {
        int32_t sumi = 0;
        for (int j = 0; j < OW_QK / 2; j++) {
            sumi += ow_iq4nl_values[w[b].qs[j] & 15] * x[b].qs[j];
            sumi += ow_iq4nl_values[w[b].qs[j] >> 4] * x[b].qs[j + 16];
        }
        sum += (float)sumi * (ow_fp16_to_fp32(w[b].d) * ow_fp16_to_fp32(x[b].d));
    }
    return sum;
}

static float dot_row_iq4_xs_q8_K(const ow_block_iq4_xs *w, const ow_block_q8_K *x, int64_t nb) {
    float sum = 0.0f;
    for (int64_t b = 0; b < nb; b++) {
        int32_t isum = 0;
        for (int s = 0; s < 8; s++) {   /* sub-block s: 16 bytes of indices, 32 activations */
            const uint8_t *q = w[b].qs + 16 * s;
            const int8_t *a = x[b].qs + 32 * s;
            int32_t part = 0;
            for (int j = 0; j < 16; j++)
                part += ow_iq4nl_values[q[j] & 15] * a[j] + ow_iq4nl_values[q[j] >> 4] * a[j + 16];
            isum += ow_iq4_xs_scale(&w[b], s) * part;
        }
        sum += (ow_fp16_to_fp32(w[b].d) * x[b].d) * (float)isum;
    }
    return sum;
}

static float dot_row_bf16_f32(const uint8_t *w, const float *x, int64_t n) {
    double sum = 0.0;   /* float products, double sum: as the F32 kernel */
    for (int64_t i = 0; i < n; i++) sum += (double)(ow_bf16_to_fp32(ow_read_u16(w + 2 * i)) * x[i]);
    return (float)sum;
}


OW_GENERIC_DOT(q2_K_q8_K, ow_block_q2_K, ow_block_q8_K, OW_QK_K)
OW_GENERIC_DOT(q3_K_q8_K, ow_block_q3_K, ow_block_q8_K, OW_QK_K)
OW_GENERIC_DOT(iq4_nl_q8_0, ow_block_iq4_nl, ow_block_q8_0, OW_QK)
OW_GENERIC_DOT(iq4_xs_q8_K, ow_block_iq4_xs, ow_block_q8_K, OW_QK_K)
OW_GENERIC_DOT(bf16_f32, uint8_t, float, 1)
