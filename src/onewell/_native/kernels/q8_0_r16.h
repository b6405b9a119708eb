/* Q8_0 "R16": a load-time repacked layout of Q8_0 weight rows (Q5_0 converts to it losslessly) for AVX-512 VNNI.
 *
 * Why: in ggml's layout every 32-byte block carries its own fp16 scale, so a kernel spends a broadcast, a
 * conversion and a multiply per block and cannot keep up with memory on one core. Here 16 consecutive blocks
 * (512 weights) form a group whose quants are interleaved so that one 64-byte load feeds vpdpbusd with int32 lane
 * k accumulating block k: after 8 loads lane k holds block k's whole dot product, and ONE convert + ONE fma with
 * the 16 scales finish the group. Nothing is lost: the same integers, the same fp16 scales.
 *
 * Weight row (row_bytes = stride, any value >= OW_R16_MIN_ROW_BYTES; the plan pads it to a multiple of 64):
 *   [quants: n_cols bytes][fp16 scales d: n_blocks x 2 bytes][zero padding]
 *   quants of the group of m blocks starting at block g (m = 16, or fewer in a row's last group):
 *     chunk j (j = 0..7) at byte 32g + 4mj holds bytes 4j..4j+3 of blocks g, g+1, ..., g+m-1 (4 bytes each)
 *   each quant stored as q ^ 0x80 = q + 128, the unsigned operand vpdpbusd wants.
 * Activation row (OW_ACT_Q8_0_R16, 1.25 bytes per column), quantized exactly as OW_TYPE_Q8_0 activations:
 *   [quants interleaved as above, signed, not offset: n_cols bytes][f32 d = fp16-rounded scale: n_blocks x 4]
 *   [int32 seed = -128 * (sum of the block's quants): n_blocks x 4]
 * so dot(block) = seed + sum (q_w + 128) * q_x, exactly the integer Q8_0 kernels compute, times d_w * d_x.
 */
#ifndef ONEWELL_Q8_0_R16_H
#define ONEWELL_Q8_0_R16_H

#include <stddef.h>
#include <stdint.h>

#include "quant_blocks.h"

#define OW_R16_GROUP 16      /* blocks per interleaved group: one int32 lane of a 512-bit register each */
#define OW_R16_CHUNKS 8      /* 4-byte chunks per 32-element block */
#define OW_R16_ROW_ALIGN 64  /* the plan's row stride: whole cache lines, every group 64-byte aligned */

/* blocks in the group that starts at block g of a row of nb blocks */
static inline int ow_r16_group_blocks(int64_t nb, int64_t g) {
    return nb - g < OW_R16_GROUP ? (int)(nb - g) : OW_R16_GROUP;
}

/* byte offset, in a row's quants, of chunk j of the group starting at block g (m blocks) */
static inline size_t ow_r16_chunk(int64_t g, int m, int j) { return (size_t)(OW_QK * g + 4 * m * j); }

/* byte offset, in a row's quants, of element t (0..31) of block b */
static inline size_t ow_r16_pos(int64_t nb, int64_t b, int t) {
    const int64_t g = b / OW_R16_GROUP * OW_R16_GROUP;
    return ow_r16_chunk(g, ow_r16_group_blocks(nb, g), t / 4) + (size_t)(4 * (b - g) + t % 4);
}

/* weight rows: quants then fp16 scales, before padding */
static inline size_t ow_r16_min_row_bytes(int64_t n_cols) { return (size_t)n_cols + 2 * (size_t)(n_cols / OW_QK); }
static inline size_t ow_r16_row_stride(int64_t n_cols) {
    return (ow_r16_min_row_bytes(n_cols) + OW_R16_ROW_ALIGN - 1) / OW_R16_ROW_ALIGN * OW_R16_ROW_ALIGN;
}

/* activation rows: offsets of the f32 scales and the int32 seeds */
static inline size_t ow_r16_act_scales(int64_t n_cols) { return (size_t)n_cols; }
static inline size_t ow_r16_act_seeds(int64_t n_cols) { return (size_t)n_cols + 4 * (size_t)(n_cols / OW_QK); }

/* Writes one quantized activation block b (32 signed quants, fp16 scale bits d, quant sum) into an R16 row. */
static inline void ow_r16_put_act_block(uint8_t *row, int64_t n_cols, int64_t b, const int8_t qs[OW_QK], uint16_t d,
                                        int32_t qsum) {
    const int64_t nb = n_cols / OW_QK, g = b / OW_R16_GROUP * OW_R16_GROUP;
    const int m = ow_r16_group_blocks(nb, g);
    for (int j = 0; j < OW_R16_CHUNKS; j++) memcpy(row + ow_r16_chunk(g, m, j) + 4 * (b - g), qs + 4 * j, 4);
    const float df = ow_fp16_to_fp32(d);
    const int32_t seed = -128 * qsum;
    memcpy(row + ow_r16_act_scales(n_cols) + 4 * b, &df, 4);
    memcpy(row + ow_r16_act_seeds(n_cols) + 4 * b, &seed, 4);
}

#endif
