/* The portable code of the Q4_K R8, Q5_K R8, Q6_K R8 and IQ4_XS R8 layouts (qk_r8.h): the load-time repacks from the file's blocks,
 * and the generic dot kernels, which every path without its own kernel runs (the inverses, for the AVX2 prefill,
 * are in vec_dot_qk_r8_avx2.c). onewell/quant/repack_qk_r8.py is the numpy twin. */
#include <string.h>

#include "matvec.h"
#include "qk_r8.h"
#include "quant_blocks.h"
#include "vec_dot.h"

/* Q4_K (qh NULL) or Q5_K: d and dmin, the 12 packed scale bytes, Q5_K's qh, the nibbles -> the R8 super-block at
 * out. Element e (0..31) of sub-block k is nibble k % 2 of file byte 32 (k / 2) + e (its fifth bit: bit k of
 * qh[e]); in the layout, nibble e / 16 of byte e % 16 of the sub-block (its fifth bit in h'_k) */
static void q45_k_to_r8(const uint8_t *d_dmin, const uint8_t *scales, const uint8_t *qh, const uint8_t *qs, uint8_t *out) {
    const int head = qh ? OW_Q5_K_R8_HEAD : OW_QK_R8_HEAD;
    memcpy(out, d_dmin, 4);
    ow_unpack_k4_scales(scales, out + OW_QK_R8_SCALES_AT, out + OW_QK_R8_MINS_AT);
    for (int k = 0; k < 8; k++) {
        const uint8_t *q = qs + 32 * (k / 2);
        const int shift = 4 * (k % 2);
        for (int t = 0; t < 16; t++)
            out[ow_qk_r8_nibble_at(head, k, t)] = (uint8_t)(((q[t] >> shift) & 0x0f) | (((q[t + 16] >> shift) & 0x0f) << 4));
        if (qh) {
            uint32_t bits = 0;
            for (int e = 0; e < 32; e++) bits |= (uint32_t)((qh[e] >> k) & 1) << e;
            const uint32_t h = ow_q5_0_r8_spread(bits);
            memcpy(out + OW_Q5_K_R8_FIFTH_AT + 4 * k, &h, 4);
        }
    }
}

/* Q6_K's 256 6-bit values (0..63) in element order: half h, quarter j, l < 32 -> element 128 h + 32 j + l is the
 * low (j < 2) or high nibble of ql[64 h + 32 (j % 2) + l], bits 2j..2j+1 of qh[32 h + l] on top */
static void q6_k_quants(const ow_block_q6_K *in, uint8_t q[OW_QK_K]) {
    for (int h = 0; h < 2; h++)
        for (int j = 0; j < 4; j++)
            for (int l = 0; l < 32; l++)
                q[128 * h + 32 * j + l] = (uint8_t)(((in->ql[64 * h + 32 * (j % 2) + l] >> (4 * (j / 2))) & 15) |
                                                    (((in->qh[32 * h + l] >> (2 * j)) & 3) << 4));
}

static void q6_k_to_r8(const ow_block_q6_K *in, uint8_t *out) {
    uint8_t q[OW_QK_K];
    q6_k_quants(in, q);
    memcpy(out, &in->d, 2);
    memcpy(out + 2, in->scales, 16);
    uint8_t *x = out + OW_Q6_K_R8_X_AT, *y = out + OW_Q6_K_R8_Y_AT;
    memset(x, 0, 6 * 32);
    for (int e = 0; e < OW_QK_K; e++) {
        const int v = (e % 16) / 2, b = 2 * (e / 16) + e % 2;
        if (v < 4) {
            x[32 * v + b] |= q[e];
        } else {
            const int k = v - 4;
            x[32 * k + b] |= (uint8_t)((q[e] >> 4) << 6);
            y[32 * (k / 2) + b] |= (uint8_t)((q[e] & 15) << (4 * (k % 2)));
        }
    }
}

/* rows of Q4_K (Q6_K) super-blocks -> the layout's, each by `convert` */
static int qk_r8_repack(size_t file_bytes, size_t r8_bytes, void (*convert)(const void *, uint8_t *),
                        const uint8_t *src, size_t src_row_bytes, int64_t rows, int64_t n_cols, uint8_t *dst,
                        size_t dst_stride) {
    if (rows < 0 || n_cols <= 0 || n_cols % OW_QK_K) return -1;
    const int64_t nb = n_cols / OW_QK_K;
    const size_t row_bytes = (size_t)nb * r8_bytes;
    if (src_row_bytes < (size_t)nb * file_bytes || dst_stride < row_bytes) return -1;
    for (int64_t r = 0; r < rows; r++) {
        const uint8_t *in = src + (size_t)r * src_row_bytes;
        uint8_t *out = dst + (size_t)r * dst_stride;
        for (int64_t b = 0; b < nb; b++) convert(in + (size_t)b * file_bytes, out + (size_t)b * r8_bytes);
        memset(out + row_bytes, 0, dst_stride - row_bytes);
    }
    return 0;
}

static void q4_k_convert(const void *in, uint8_t *out) {
    const ow_block_q4_K *b = in;
    q45_k_to_r8((const uint8_t *)b, b->scales, NULL, b->qs, out);
}
static void q5_k_convert(const void *in, uint8_t *out) {
    const ow_block_q5_K *b = in;
    q45_k_to_r8((const uint8_t *)b, b->scales, b->qh, b->qs, out);
}
static void q6_k_convert(const void *in, uint8_t *out) { q6_k_to_r8(in, out); }
/* IQ4_XS: d, the 8 scales unpacked (-32..31), sub-block k's 16 index bytes (already in Q4_0's order) to lane k */
static void iq4_xs_convert(const void *in, uint8_t *out) {
    const ow_block_iq4_xs *b = in;
    memcpy(out, &b->d, 2);
    for (int k = 0; k < 8; k++) {
        out[OW_IQ4_XS_R8_SCALES_AT + k] = (uint8_t)(int8_t)ow_iq4_xs_scale(b, k);
        for (int t = 0; t < 16; t++) out[ow_qk_r8_nibble_at(OW_IQ4_XS_R8_HEAD, k, t)] = b->qs[16 * k + t];
    }
}

int ow_repack_q4_k_r8(const uint8_t *src, size_t src_row_bytes, int64_t rows, int64_t n_cols, uint8_t *dst,
                      size_t dst_stride) {
    return qk_r8_repack(sizeof(ow_block_q4_K), OW_Q4_K_R8_BLOCK_BYTES, q4_k_convert, src, src_row_bytes, rows,
                        n_cols, dst, dst_stride);
}

int ow_repack_q5_k_r8(const uint8_t *src, size_t src_row_bytes, int64_t rows, int64_t n_cols, uint8_t *dst,
                      size_t dst_stride) {
    return qk_r8_repack(sizeof(ow_block_q5_K), OW_Q5_K_R8_BLOCK_BYTES, q5_k_convert, src, src_row_bytes, rows,
                        n_cols, dst, dst_stride);
}

int ow_repack_q6_k_r8(const uint8_t *src, size_t src_row_bytes, int64_t rows, int64_t n_cols, uint8_t *dst,
                      size_t dst_stride) {
    return qk_r8_repack(sizeof(ow_block_q6_K), OW_Q6_K_R8_BLOCK_BYTES, q6_k_convert, src, src_row_bytes, rows,
                        n_cols, dst, dst_stride);
}

int ow_repack_iq4_xs_r8(const uint8_t *src, size_t src_row_bytes, int64_t rows, int64_t n_cols, uint8_t *dst,
                        size_t dst_stride) {
    return qk_r8_repack(sizeof(ow_block_iq4_xs), OW_IQ4_XS_R8_BLOCK_BYTES, iq4_xs_convert, src, src_row_bytes, rows,
                        n_cols, dst, dst_stride);
}

/* Generic dots: the Q4_K, Q5_K and Q6_K generic kernels' integer sums (vec_dot_generic.c) and the same float
 * operations in the same order, so bit for bit their results */
static float dot_row_q45_kr8(const uint8_t *w, const ow_block_q8_K *x, int64_t nb, const int fifth) {
    const int head = fifth ? OW_Q5_K_R8_HEAD : OW_QK_R8_HEAD;
    const size_t bytes = fifth ? OW_Q5_K_R8_BLOCK_BYTES : OW_Q4_K_R8_BLOCK_BYTES;
    float sum = 0.0f;
    for (int64_t b = 0; b < nb; b++, w += bytes) {
        const int8_t *a = x[b].qs;
        int16_t bsums[16];
        memcpy(bsums, x[b].bsums, sizeof bsums);
        int32_t isum = 0, mins = 0;
        for (int k = 0; k < 8; k++) {
            const uint32_t qh = fifth ? ow_q5_0_r8_gather(ow_read_u32(w + OW_Q5_K_R8_FIFTH_AT + 4 * k)) : 0;
            int32_t dot = 0;
            for (int t = 0; t < 16; t++) {
                const uint8_t q = w[ow_qk_r8_nibble_at(head, k, t)];
                const int lo = (q & 0x0f) | (int)(((qh >> t) & 1u) << 4);
                const int hi = (q >> 4) | (int)(((qh >> (t + 16)) & 1u) << 4);
                dot += lo * a[32 * k + t] + hi * a[32 * k + 16 + t];
            }
            isum += w[OW_QK_R8_SCALES_AT + k] * dot;
            mins += w[OW_QK_R8_MINS_AT + k] * (bsums[2 * k] + bsums[2 * k + 1]);
        }
        const float d = ow_fp16_to_fp32(ow_read_u16(w)) * x[b].d;
        const float dmin = ow_fp16_to_fp32(ow_read_u16(w + 2)) * x[b].d;
        sum += d * (float)isum - dmin * (float)mins;
    }
    return sum;
}

static float dot_row_q6_kr8(const uint8_t *w, const ow_block_q8_K *x, int64_t nb) {
    float sum = 0.0f;
    for (int64_t b = 0; b < nb; b++, w += OW_Q6_K_R8_BLOCK_BYTES) {
        int32_t isum = 0;
        for (int g = 0; g < 16; g++) {
            int32_t part = 0;
            for (int l = 0; l < 16; l++) part += (ow_q6_k_r8_quant(w, 16 * g + l) - 32) * x[b].qs[16 * g + l];
            isum += (int8_t)w[2 + g] * part;
        }
        sum += (ow_fp16_to_fp32(ow_read_u16(w)) * x[b].d) * (float)isum;
    }
    return sum;
}

/* IQ4_XS R8: vec_dot_q23k_iq4_bf16_generic.c's IQ4_XS sums, in its order */
static float dot_row_iq4_xsr8(const uint8_t *w, const ow_block_q8_K *x, int64_t nb) {
    float sum = 0.0f;
    for (int64_t b = 0; b < nb; b++, w += OW_IQ4_XS_R8_BLOCK_BYTES) {
        int32_t isum = 0;
        for (int k = 0; k < 8; k++) {
            const int8_t *a = x[b].qs + 32 * k;
            int32_t part = 0;
            for (int t = 0; t < 16; t++) {
                const uint8_t q = w[ow_qk_r8_nibble_at(OW_IQ4_XS_R8_HEAD, k, t)];
                part += ow_iq4nl_values[q & 15] * a[t] + ow_iq4nl_values[q >> 4] * a[t + 16];
            }
            isum += (int8_t)w[OW_IQ4_XS_R8_SCALES_AT + k] * part;
        }
        sum += (ow_fp16_to_fp32(ow_read_u16(w)) * x[b].d) * (float)isum;
    }
    return sum;
}

void vec_dot_iq4_xsr8_q8_K_generic(OW_DOT_ARGS) {
    for (int r = 0; r < nr; r++) s[r] = dot_row_iq4_xsr8(w + (size_t)r * w_stride, x, n_cols / OW_QK_K);
}

void vec_dot_q6_kr8_q8_K_generic(OW_DOT_ARGS) {
    for (int r = 0; r < nr; r++) s[r] = dot_row_q6_kr8(w + (size_t)r * w_stride, x, n_cols / OW_QK_K);
}

void vec_dot_q4_kr8_q8_K_generic(OW_DOT_ARGS) {
    for (int r = 0; r < nr; r++) s[r] = dot_row_q45_kr8(w + (size_t)r * w_stride, x, n_cols / OW_QK_K, 0);
}

void vec_dot_q5_kr8_q8_K_generic(OW_DOT_ARGS) {
    for (int r = 0; r < nr; r++) s[r] = dot_row_q45_kr8(w + (size_t)r * w_stride, x, n_cols / OW_QK_K, 1);
}
