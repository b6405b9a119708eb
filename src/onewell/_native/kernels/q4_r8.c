/* The portable code of the Q4_1 R8, Q5_0 R8 and Q4_0 R8 layouts (q4_r8.h): the load-time repack from the file's
 * blocks, its inverse (the AVX2 prefill hands file-layout rows to the file types' GEMMs), and the generic dot
 * kernels, which every path without its own kernel runs. onewell/quant/repack_q4_r8.py is the numpy twin. */
#include <string.h>

#include "matvec.h"
#include "q4_r8.h"
#include "quant_blocks.h"
#include "vec_dot.h"

/* One row's groups from block g0 on between the file's blocks and the layout, either way (to_r8: `in` is the file
 * row, else the R8 row): the two differ only in where each field sits, and Q5_0's fifth bits in their order */
static void q4r8_convert_row(int block_bytes, const uint8_t *in, uint8_t *out, int64_t nb, int64_t g0, int to_r8) {
    const int second = ow_q4r8_head(block_bytes) - 2;   /* bytes of m (Q4_1) or qh (Q5_0); Q4_0: none */
    for (int64_t g = g0; g < nb; g += OW_R8_GROUP) {
        const int m = ow_r8_group_blocks(nb, g);
        for (int k = 0; k < m; k++) {
            const size_t file = (size_t)(g + k) * (size_t)block_bytes;
            size_t from[6], to[6], len[6];   /* d, m or qh, the 4 nibble chunks: file offset, R8 offset, bytes */
            from[0] = file, to[0] = ow_q4r8_d_at(block_bytes, g, k), len[0] = 2;
            from[1] = file + 2, to[1] = ow_q4r8_second_at(block_bytes, g, m, k), len[1] = (size_t)second;
            for (int c = 0; c < 4; c++)
                from[2 + c] = file + 2 + (size_t)second + 4 * (size_t)c,
                to[2 + c] = ow_q4r8_nibble_at(block_bytes, g, m, k, 4 * c), len[2 + c] = 4;
            for (int f = 0; f < 6; f++) {
                const size_t src = to_r8 ? from[f] : to[f], dst = to_r8 ? to[f] : from[f];
                if (f == 1 && second == 4) {   /* Q5_0's qh <-> h' */
                    const uint32_t v = ow_read_u32(in + src);
                    const uint32_t h = to_r8 ? ow_q5_0_r8_spread(v) : ow_q5_0_r8_gather(v);
                    memcpy(out + dst, &h, 4);
                } else {
                    memcpy(out + dst, in + src, len[f]);
                }
            }
        }
    }
}

static int q4r8_repack(int block_bytes, const uint8_t *src, size_t src_row_bytes, int64_t rows, int64_t n_cols,
                       uint8_t *dst, size_t dst_stride) {
    if (rows < 0 || n_cols <= 0 || n_cols % OW_QK) return -1;
    const int64_t nb = n_cols / OW_QK;
    const size_t row_bytes = (size_t)nb * (size_t)block_bytes;
    if (src_row_bytes < row_bytes || dst_stride < row_bytes) return -1;
    for (int64_t r = 0; r < rows; r++) {
        uint8_t *out = dst + (size_t)r * dst_stride;
        q4r8_convert_row(block_bytes, src + (size_t)r * src_row_bytes, out, nb, 0, 1);
        memset(out + row_bytes, 0, dst_stride - row_bytes);
    }
    return 0;
}

int ow_repack_q4_1_r8(const uint8_t *src, size_t src_row_bytes, int64_t rows, int64_t n_cols, uint8_t *dst,
                      size_t dst_stride) {
    return q4r8_repack(OW_Q4_1_R8_BLOCK_BYTES, src, src_row_bytes, rows, n_cols, dst, dst_stride);
}

int ow_repack_q4_0_r8(const uint8_t *src, size_t src_row_bytes, int64_t rows, int64_t n_cols, uint8_t *dst,
                      size_t dst_stride) {
    return q4r8_repack(OW_Q4_0_R8_BLOCK_BYTES, src, src_row_bytes, rows, n_cols, dst, dst_stride);
}

int ow_repack_iq4_nl_r8(const uint8_t *src, size_t src_row_bytes, int64_t rows, int64_t n_cols, uint8_t *dst,
                        size_t dst_stride) {
    return q4r8_repack(OW_Q4_0_R8_BLOCK_BYTES, src, src_row_bytes, rows, n_cols, dst, dst_stride);   /* the same bytes */
}

int ow_repack_q5_0_r8(const uint8_t *src, size_t src_row_bytes, int64_t rows, int64_t n_cols, uint8_t *dst,
                      size_t dst_stride) {
    return q4r8_repack(OW_Q5_0_R8_BLOCK_BYTES, src, src_row_bytes, rows, n_cols, dst, dst_stride);
}

void ow_q4r8_unpack_groups(int block_bytes, const uint8_t *r8, uint8_t *file, int64_t n_cols, int64_t g0) {
    q4r8_convert_row(block_bytes, r8, file, n_cols / OW_QK, g0, 0);
}

/* Generic dots: per block the file type's generic sums (vec_dot_generic.c), in order, so bit for bit its results */
static float dot_row_q4_1r8(const uint8_t *w, const ow_block_q8_1 *x, int64_t nb) {
    const int B = OW_Q4_1_R8_BLOCK_BYTES;
    float sum = 0.0f;
    for (int64_t g = 0; g < nb; g += OW_R8_GROUP) {
        const int m = ow_r8_group_blocks(nb, g);
        for (int k = 0; k < m; k++) {
            const ow_block_q8_1 *xb = x + g + k;
            int32_t sumi = 0;
            for (int t = 0; t < 16; t++) {
                const uint8_t q = w[ow_q4r8_nibble_at(B, g, m, k, t)];
                sumi += (q & 0x0f) * xb->qs[t];
                sumi += (q >> 4) * xb->qs[t + 16];
            }
            const float d = ow_fp16_to_fp32(ow_read_u16(w + ow_q4r8_d_at(B, g, k)));
            const float mn = ow_fp16_to_fp32(ow_read_u16(w + ow_q4r8_second_at(B, g, m, k)));
            sum += (d * ow_fp16_to_fp32(xb->d)) * (float)sumi + mn * ow_fp16_to_fp32(xb->s);
        }
    }
    return sum;
}

/* Q5_0 R8 (block_bytes 22: weight = d (q - 16), q = nibble | fifth bit << 4) and Q4_0 R8 (18: d (nibble - 8)) */
static float dot_row_q5_0r8_q4_0r8(int block_bytes, const uint8_t *w, const ow_block_q8_0 *x, int64_t nb) {
    const int B = block_bytes, fifth = B == OW_Q5_0_R8_BLOCK_BYTES, offset = fifth ? 16 : 8;
    float sum = 0.0f;
    for (int64_t g = 0; g < nb; g += OW_R8_GROUP) {
        const int m = ow_r8_group_blocks(nb, g);
        for (int k = 0; k < m; k++) {
            const ow_block_q8_0 *xb = x + g + k;
            const uint32_t qh = fifth ? ow_q5_0_r8_gather(ow_read_u32(w + ow_q4r8_second_at(B, g, m, k))) : 0;
            int32_t sumi = 0;
            for (int t = 0; t < 16; t++) {
                const uint8_t q = w[ow_q4r8_nibble_at(B, g, m, k, t)];
                const int lo = (q & 0x0f) | (int)(((qh >> t) & 1u) << 4);
                const int hi = (q >> 4) | (int)(((qh >> (t + 16)) & 1u) << 4);
                sumi += (lo - offset) * xb->qs[t] + (hi - offset) * xb->qs[t + 16];
            }
            sum += (float)sumi * (ow_fp16_to_fp32(ow_read_u16(w + ow_q4r8_d_at(B, g, k))) * ow_fp16_to_fp32(xb->d));
        }
    }
    return sum;
}

void vec_dot_q4_0r8_q8_0_generic(OW_DOT_ARGS) {
    for (int r = 0; r < nr; r++)
        s[r] = dot_row_q5_0r8_q4_0r8(OW_Q4_0_R8_BLOCK_BYTES, w + (size_t)r * w_stride, x, n_cols / OW_QK);
}

/* IQ4_NL R8 (Q4_0 R8's bytes): per block vec_dot_iq4_nl_q8_0_generic's sum, in its order */
static float dot_row_iq4_nlr8(const uint8_t *w, const ow_block_q8_0 *x, int64_t nb) {
    const int B = OW_Q4_0_R8_BLOCK_BYTES;
    float sum = 0.0f;
    for (int64_t g = 0; g < nb; g += OW_R8_GROUP) {
        const int m = ow_r8_group_blocks(nb, g);
        for (int k = 0; k < m; k++) {
            const ow_block_q8_0 *xb = x + g + k;
            int32_t sumi = 0;
            for (int t = 0; t < 16; t++) {
                const uint8_t q = w[ow_q4r8_nibble_at(B, g, m, k, t)];
                sumi += ow_iq4nl_values[q & 0x0f] * xb->qs[t] + ow_iq4nl_values[q >> 4] * xb->qs[t + 16];
            }
            sum += (float)sumi * (ow_fp16_to_fp32(ow_read_u16(w + ow_q4r8_d_at(B, g, k))) * ow_fp16_to_fp32(xb->d));
        }
    }
    return sum;
}

void vec_dot_iq4_nlr8_q8_0_generic(OW_DOT_ARGS) {
    for (int r = 0; r < nr; r++) s[r] = dot_row_iq4_nlr8(w + (size_t)r * w_stride, x, n_cols / OW_QK);
}

void vec_dot_q4_1r8_q8_1_generic(OW_DOT_ARGS) {
    for (int r = 0; r < nr; r++) s[r] = dot_row_q4_1r8(w + (size_t)r * w_stride, x, n_cols / OW_QK);
}

void vec_dot_q5_0r8_q8_0_generic(OW_DOT_ARGS) {
    for (int r = 0; r < nr; r++)
        s[r] = dot_row_q5_0r8_q4_0r8(OW_Q5_0_R8_BLOCK_BYTES, w + (size_t)r * w_stride, x, n_cols / OW_QK);
}
