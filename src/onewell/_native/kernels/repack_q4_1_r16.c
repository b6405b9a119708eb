/* Load-time repacking of Q4_1 weight rows into the Q4_1 R16 layout (q4_1_r16.h).
 *
 * Runs once per matrix at load, reading each source row once; plain C is enough (nibble moves, no arithmetic).
 * onewell/quant/repack.py (repack_q4_1_r16) is its numpy twin, byte for byte. */
#include "matvec.h"
#include "q4_1_r16.h"
#include "quant_blocks.h"

/* element t (0..31) of a ggml Q4_1 block: low nibble of qs[t] for t < 16, high nibble of qs[t - 16] above */
static int q4_1_elem(const ow_block_q4_1 *blk, int t) {
    return t < OW_QK / 2 ? blk->qs[t] & 0x0f : blk->qs[t - OW_QK / 2] >> 4;
}

int ow_repack_q4_1_r16(const uint8_t *src, size_t src_row_bytes, int64_t rows, int64_t n_cols, uint8_t *dst,
                       size_t dst_stride) {
    if (rows < 0 || n_cols <= 0 || n_cols % OW_QK) return -1;
    const int64_t nb = n_cols / OW_QK;
    if (src_row_bytes < (size_t)nb * sizeof(ow_block_q4_1) || dst_stride < ow_q41r16_min_row_bytes(n_cols)) return -1;
    for (int64_t r = 0; r < rows; r++) {
        const uint8_t *in = src + (size_t)r * src_row_bytes;
        uint8_t *out = dst + (size_t)r * dst_stride;
        for (int64_t b = 0; b < nb; b++) {
            ow_block_q4_1 blk;
            memcpy(&blk, in + (size_t)b * sizeof blk, sizeof blk);
            const int64_t g = b / OW_R16_GROUP * OW_R16_GROUP;
            const int m = ow_r16_group_blocks(nb, g);
            for (int i = 0; i < OW_Q41R16_PAIRS; i++)
                for (int t = 0; t < 4; t++)   /* low nibble: R16 chunk 2i; high nibble: chunk 2i + 1 */
                    out[ow_q41r16_pair(g, m, i) + (size_t)(4 * (b - g) + t)] =
                        (uint8_t)(q4_1_elem(&blk, 8 * i + t) | q4_1_elem(&blk, 8 * i + 4 + t) << 4);
            memcpy(out + ow_q41r16_d_at(n_cols) + 2 * b, &blk.d, 2);
            memcpy(out + ow_q41r16_m_at(n_cols) + 2 * b, &blk.m, 2);
        }
        const size_t used = ow_q41r16_min_row_bytes(n_cols);
        memset(out + used, 0, dst_stride - used);
    }
    return 0;
}
