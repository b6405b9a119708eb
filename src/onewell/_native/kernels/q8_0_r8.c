/* The Q8_0 R8 layout's portable code (q8_0_r8.h): the load-time repack from Q8_0 and the generic dot kernel, which
 * every path without its own kernel runs. onewell/quant/repack_r8.py is the numpy twin of both. */
#include <string.h>

#include "matvec.h"
#include "q8_0_r8.h"
#include "quant_blocks.h"
#include "vec_dot.h"

int ow_repack_q8_0_r8(const uint8_t *src, size_t src_row_bytes, int64_t rows, int64_t n_cols, uint8_t *dst,
                      size_t dst_stride) {
    if (rows < 0 || n_cols <= 0 || n_cols % OW_QK) return -1;
    const size_t row_bytes = ow_q8_0_r8_row_bytes(n_cols);
    if (src_row_bytes < row_bytes || dst_stride < row_bytes) return -1;
    const int64_t nb = n_cols / OW_QK;
    for (int64_t r = 0; r < rows; r++) {
        const uint8_t *in = src + (size_t)r * src_row_bytes;
        uint8_t *out = dst + (size_t)r * dst_stride;
        for (int64_t g = 0; g < nb; g += OW_R8_GROUP) {
            const int m = ow_r8_group_blocks(nb, g);
            for (int k = 0; k < m; k++) {
                ow_block_q8_0 blk;
                memcpy(&blk, in + (size_t)(g + k) * sizeof blk, sizeof blk);
                memcpy(out + ow_r8_scale_at(g, k), &blk.d, 2);
                for (int j = 0; j < OW_QK / 4; j++) memcpy(out + ow_r8_quant_at(g, m, k, 4 * j), blk.qs + 4 * j, 4);
            }
        }
        memset(out + row_bytes, 0, dst_stride - row_bytes);
    }
    return 0;
}

/* one row: per block the exact integer dot times d_w * d_x, summed in order (the Q8_0 generic kernel's sums) */
static float dot_row_q8_0r8(const uint8_t *w, const ow_block_q8_0 *x, int64_t nb) {
    float sum = 0.0f;
    for (int64_t g = 0; g < nb; g += OW_R8_GROUP) {
        const int m = ow_r8_group_blocks(nb, g);
        for (int k = 0; k < m; k++) {
            const ow_block_q8_0 *xb = x + g + k;
            int32_t sumi = 0;
            for (int t = 0; t < OW_QK; t++) sumi += (int8_t)w[ow_r8_quant_at(g, m, k, t)] * xb->qs[t];
            const float dw = ow_fp16_to_fp32(ow_read_u16(w + ow_r8_scale_at(g, k)));
            sum += (float)sumi * (dw * ow_fp16_to_fp32(xb->d));
        }
    }
    return sum;
}

void vec_dot_q8_0r8_q8_0_generic(OW_DOT_ARGS) {
    for (int r = 0; r < nr; r++) s[r] = dot_row_q8_0r8(w + (size_t)r * w_stride, x, n_cols / OW_QK);
}
