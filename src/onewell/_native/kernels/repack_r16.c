/* Load-time repacking of Q8_0 and Q5_0 weight rows into the Q8_0 R16 layout (q8_0_r16.h).
 *
 * Runs once per matrix when a model is loaded, reading each source row once: plain C is enough (it moves
 * 4-byte chunks, no arithmetic). onewell/quant/repack.py is its numpy twin, byte for byte. */
#include "matvec.h"
#include "q8_0_r16.h"
#include "quant_blocks.h"

/* Writes block b (32 signed quants, fp16 scale bits d) of a row of nb blocks into an R16 row. */
static void put_block(uint8_t *row, int64_t n_cols, int64_t nb, int64_t b, const int8_t qs[OW_QK], uint16_t d) {
    const int64_t g = b / OW_R16_GROUP * OW_R16_GROUP;
    const int m = ow_r16_group_blocks(nb, g);
    for (int j = 0; j < OW_R16_CHUNKS; j++) {
        const uint32_t unsigned4 = ow_read_u32(qs + 4 * j) ^ 0x80808080u;   /* q + 128, four at a time */
        memcpy(row + ow_r16_chunk(g, m, j) + 4 * (b - g), &unsigned4, 4);
    }
    memcpy(row + n_cols + 2 * b, &d, 2);
}

static int sizes_ok(size_t src_row_bytes, size_t src_block_bytes, int64_t rows, int64_t n_cols, size_t dst_stride) {
    if (rows < 0 || n_cols <= 0 || n_cols % OW_QK) return 0;
    return src_row_bytes >= (size_t)(n_cols / OW_QK) * src_block_bytes && dst_stride >= ow_r16_min_row_bytes(n_cols);
}

static void zero_padding(uint8_t *row, int64_t n_cols, size_t dst_stride) {
    const size_t used = ow_r16_min_row_bytes(n_cols);
    memset(row + used, 0, dst_stride - used);
}

int ow_repack_q8_0_r16(const uint8_t *src, size_t src_row_bytes, int64_t rows, int64_t n_cols, uint8_t *dst,
                       size_t dst_stride) {
    if (!sizes_ok(src_row_bytes, sizeof(ow_block_q8_0), rows, n_cols, dst_stride)) return -1;
    const int64_t nb = n_cols / OW_QK;
    for (int64_t r = 0; r < rows; r++) {
        const uint8_t *in = src + (size_t)r * src_row_bytes;
        uint8_t *out = dst + (size_t)r * dst_stride;
        for (int64_t b = 0; b < nb; b++) {
            ow_block_q8_0 blk;
            memcpy(&blk, in + (size_t)b * sizeof blk, sizeof blk);
            put_block(out, n_cols, nb, b, blk.qs, blk.d);
        }
        zero_padding(out, n_cols, dst_stride);
    }
    return 0;
}

int ow_repack_q5_0_r16(const uint8_t *src, size_t src_row_bytes, int64_t rows, int64_t n_cols, uint8_t *dst,
                       size_t dst_stride) {
    if (!sizes_ok(src_row_bytes, sizeof(ow_block_q5_0), rows, n_cols, dst_stride)) return -1;
    const int64_t nb = n_cols / OW_QK;
    for (int64_t r = 0; r < rows; r++) {
        const uint8_t *in = src + (size_t)r * src_row_bytes;
        uint8_t *out = dst + (size_t)r * dst_stride;
        for (int64_t b = 0; b < nb; b++) {
            ow_block_q5_0 blk;
            memcpy(&blk, in + (size_t)b * sizeof blk, sizeof blk);
            const uint32_t qh = ow_read_u32(blk.qh);
            int8_t qs[OW_QK];
            for (int j = 0; j < OW_QK / 2; j++) {   /* element j: low nibble, element j + 16: high nibble */
                qs[j] = (int8_t)(((blk.qs[j] & 0x0f) | (int)((qh >> j) & 1u) << 4) - 16);
                qs[j + 16] = (int8_t)(((blk.qs[j] >> 4) | (int)((qh >> (j + 16)) & 1u) << 4) - 16);
            }
            put_block(out, n_cols, nb, b, qs, blk.d);
        }
        zero_padding(out, n_cols, dst_stride);
    }
    return 0;
}
