/* Row dequantizers (dequant_row_<type>, the type table's to_float) for the embedding gather: a step needs only
 * the table rows of its tokens. Arithmetic mirrors the onewell.quant codecs (and ggml's dequantize_row_*) in float32, product by product, so the
 * results are bit-identical to the numpy codecs (the build uses -std=c11: no implicit FMA contraction). */
#include <string.h>

#include "vec_dot.h"

/* element j of a 32-block from its 16 packed bytes: low nibbles are elements 0..15, high ones 16..31 */
static inline int nibble(const uint8_t *qs, int j) { return j < 16 ? qs[j] & 15 : qs[j - 16] >> 4; }

void dequant_row_q4_0(const uint8_t *row, float *out, int64_t n_cols) {
    const int64_t nb = n_cols / OW_QK;
    for (int64_t b = 0; b < nb; b++, out += OW_QK) {
        ow_block_q4_0 blk;
        memcpy(&blk, row + b * sizeof blk, sizeof blk);
        const float d = ow_fp16_to_fp32(blk.d);
        for (int j = 0; j < OW_QK; j++) out[j] = (float)(nibble(blk.qs, j) - 8) * d;
    }
}

void dequant_row_q4_1(const uint8_t *row, float *out, int64_t n_cols) {
    const int64_t nb = n_cols / OW_QK;
    for (int64_t b = 0; b < nb; b++, out += OW_QK) {
        ow_block_q4_1 blk;
        memcpy(&blk, row + b * sizeof blk, sizeof blk);
        const float d = ow_fp16_to_fp32(blk.d), m = ow_fp16_to_fp32(blk.m);
        for (int j = 0; j < OW_QK; j++) {
            const float scaled = (float)nibble(blk.qs, j) * d;
            out[j] = scaled + m;
        }
    }
}

void dequant_row_q5_0(const uint8_t *row, float *out, int64_t n_cols) {
    const int64_t nb = n_cols / OW_QK;
    for (int64_t b = 0; b < nb; b++, out += OW_QK) {
        ow_block_q5_0 blk;
        memcpy(&blk, row + b * sizeof blk, sizeof blk);
        const float d = ow_fp16_to_fp32(blk.d);
        const uint32_t qh = ow_read_u32(blk.qh);
        for (int j = 0; j < OW_QK; j++) {
            const int q = nibble(blk.qs, j) | (int)((qh >> j) & 1u) << 4;
            out[j] = (float)(q - 16) * d;
        }
    }
}

void dequant_row_q5_1(const uint8_t *row, float *out, int64_t n_cols) {
    const int64_t nb = n_cols / OW_QK;
    for (int64_t b = 0; b < nb; b++, out += OW_QK) {
        ow_block_q5_1 blk;
        memcpy(&blk, row + b * sizeof blk, sizeof blk);
        const float d = ow_fp16_to_fp32(blk.d), m = ow_fp16_to_fp32(blk.m);
        const uint32_t qh = ow_read_u32(blk.qh);
        for (int j = 0; j < OW_QK; j++) {
            const int q = nibble(blk.qs, j) | (int)((qh >> j) & 1u) << 4;
            const float scaled = (float)q * d;
            out[j] = scaled + m;
        }
    }
}

void dequant_row_q8_0(const uint8_t *row, float *out, int64_t n_cols) {
    const int64_t nb = n_cols / OW_QK;
    for (int64_t b = 0; b < nb; b++, out += OW_QK) {
        ow_block_q8_0 blk;
        memcpy(&blk, row + b * sizeof blk, sizeof blk);
        const float d = ow_fp16_to_fp32(blk.d);
        for (int j = 0; j < OW_QK; j++) out[j] = (float)blk.qs[j] * d;
    }
}

/* Q4_K and Q5_K: sub-block s (32 elements) = (d*scale_s) * q - (dmin*min_s); qs group g holds sub-blocks
 * 2g (low nibbles) and 2g+1 (high nibbles); Q5_K's fifth bit of element l of sub-block s is bit s of qh[l]. */
static void row_k4(const uint8_t *row, float *out, int64_t nb, int five_bit) {
    const size_t bytes = five_bit ? sizeof(ow_block_q5_K) : sizeof(ow_block_q4_K);
    for (int64_t b = 0; b < nb; b++, out += OW_QK_K) {
        const uint8_t *blk = row + b * bytes;
        const float d = ow_fp16_to_fp32(ow_read_u16(blk)), dmin = ow_fp16_to_fp32(ow_read_u16(blk + 2));
        uint8_t scales[8], mins[8];
        ow_unpack_k4_scales(blk + 4, scales, mins);
        const uint8_t *qh = blk + 16, *qs = blk + (five_bit ? 48 : 16);
        for (int s = 0; s < 8; s++) {
            const float scale = d * (float)scales[s], offset = dmin * (float)mins[s];
            const uint8_t *group = qs + (s / 2) * 32;
            for (int l = 0; l < 32; l++) {
                int q = (s & 1) ? group[l] >> 4 : group[l] & 15;
                if (five_bit) q |= ((qh[l] >> s) & 1) << 4;
                const float scaled = scale * (float)q;
                out[s * 32 + l] = scaled - offset;
            }
        }
    }
}

/* Q6_K: half h (128 elements) uses ql[64h..], qh[32h..]; element l + 32k of a half (k = 0..3) takes its low
 * nibble from ql[l] (k=0), ql[l+32] (k=1), ql[l] >> 4 (k=2), ql[l+32] >> 4 (k=3) and bits 2k..2k+1 of qh[l]. */
void dequant_row_q6_K(const uint8_t *row, float *out, int64_t n_cols) {
    const int64_t nb = n_cols / OW_QK_K;
    for (int64_t b = 0; b < nb; b++, out += OW_QK_K) {
        const uint8_t *blk = row + b * sizeof(ow_block_q6_K);
        const float d = ow_fp16_to_fp32(ow_read_u16(blk + 208));
        const int8_t *sc = (const int8_t *)(blk + 192);
        for (int h = 0; h < 2; h++) {
            const uint8_t *ql = blk + 64 * h, *qh = blk + 128 + 32 * h;
            for (int k = 0; k < 4; k++) {
                for (int l = 0; l < 32; l++) {
                    const uint8_t lowbyte = ql[l + (k & 1) * 32];
                    const int low = (k < 2) ? lowbyte & 15 : lowbyte >> 4;
                    const int q = (low | ((qh[l] >> (2 * k)) & 3) << 4) - 32;
                    const int i = h * 128 + k * 32 + l;
                    const float scale = d * (float)sc[i / 16];
                    out[i] = scale * (float)q;
                }
            }
        }
    }
}

void dequant_row_q4_K(const uint8_t *row, float *out, int64_t n_cols) { row_k4(row, out, n_cols / OW_QK_K, 0); }
void dequant_row_q5_K(const uint8_t *row, float *out, int64_t n_cols) { row_k4(row, out, n_cols / OW_QK_K, 1); }

void dequant_row_f32(const uint8_t *row, float *out, int64_t n_cols) { memcpy(out, row, (size_t)n_cols * sizeof(float)); }

void dequant_row_f16(const uint8_t *row, float *out, int64_t n_cols) {
    for (int64_t i = 0; i < n_cols; i++) out[i] = ow_fp16_to_fp32(ow_read_u16(row + 2 * i));
}

/* Q2_K: weight i = (d * (scales[i/16] & 15)) * q - dmin * (scales[i/16] >> 4), q = bits 2j of qs[32h + l] for
 * i = 128h + 32j + l (ggml's dequantize_row_q2_K) */
void dequant_row_q2_K(const uint8_t *row, float *out, int64_t n_cols) {
    for (int64_t b = 0; b < n_cols / OW_QK_K; b++, out += OW_QK_K) {
        ow_block_q2_K blk;
        memcpy(&blk, row + b * sizeof blk, sizeof blk);
        const float d = ow_fp16_to_fp32(blk.d), dmin = ow_fp16_to_fp32(blk.dmin);
        for (int i = 0; i < OW_QK_K; i++) {
            const int q = (blk.qs[32 * (i / 128) + i % 32] >> (2 * ((i / 32) % 4))) & 3;
            const uint8_t sc = blk.scales[i / 16];
            const float scale = d * (float)(sc & 15), offset = dmin * (float)(sc >> 4);
            const float scaled = scale * (float)q;
            out[i] = scaled - offset;
        }
    }
}

/* Q3_K: weight i = (d * scale[i/16]) * (low 2 bits as Q2_K - (bit i/32 of hmask[i%32] ? 0 : 4)) */
void dequant_row_q3_K(const uint8_t *row, float *out, int64_t n_cols) {
    for (int64_t b = 0; b < n_cols / OW_QK_K; b++, out += OW_QK_K) {
        ow_block_q3_K blk;
        memcpy(&blk, row + b * sizeof blk, sizeof blk);
        int8_t scales[16];
        ow_unpack_q3_K_scales(blk.scales, scales);
        const float d = ow_fp16_to_fp32(blk.d);
        for (int i = 0; i < OW_QK_K; i++) {
            const int low = (blk.qs[32 * (i / 128) + i % 32] >> (2 * ((i / 32) % 4))) & 3;
            const int q = low - (((blk.hmask[i % 32] >> (i / 32)) & 1) ? 0 : 4);
            const float scale = d * (float)scales[i / 16];
            out[i] = scale * (float)q;
        }
    }
}

void dequant_row_iq4_nl(const uint8_t *row, float *out, int64_t n_cols) {
    for (int64_t b = 0; b < n_cols / OW_QK; b++, out += OW_QK) {
        ow_block_iq4_nl blk;
        memcpy(&blk, row + b * sizeof blk, sizeof blk);
        const float d = ow_fp16_to_fp32(blk.d);
        for (int j = 0; j < OW_QK; j++) out[j] = d * (float)ow_iq4nl_values[nibble(blk.qs, j)];
    }
}

void dequant_row_iq4_xs(const uint8_t *row, float *out, int64_t n_cols) {
    for (int64_t b = 0; b < n_cols / OW_QK_K; b++) {
        ow_block_iq4_xs blk;
        memcpy(&blk, row + b * sizeof blk, sizeof blk);
        const float d = ow_fp16_to_fp32(blk.d);
        for (int s = 0; s < 8; s++, out += 32) {
            const float scale = d * (float)ow_iq4_xs_scale(&blk, s);
            for (int j = 0; j < 32; j++) out[j] = scale * (float)ow_iq4nl_values[nibble(blk.qs + 16 * s, j)];
        }
    }
}

void dequant_row_bf16(const uint8_t *row, float *out, int64_t n_cols) {
    for (int64_t i = 0; i < n_cols; i++) out[i] = ow_bf16_to_fp32(ow_read_u16(row + 2 * i));
}

int ow_dequantize_row(int type, const uint8_t *row, float *out, int64_t n_cols) {
    const ow_type_traits_t *t = ow_type_traits(type);
    if (!t || !t->to_float) return -1;
    t->to_float(row, out, n_cols);
    return 0;
}
