/* Q4_1 "R16": a load-time repacked layout of Q4_1 weight rows for AVX-512 VNNI, built on the Q8_0 R16 interleave
 * (q8_0_r16.h), whose activation rows it reuses unchanged.
 *
 * Why: a ggml Q4_1 block is 16 bytes of nibbles plus two fp16 numbers (d, m), so a 512-bit kernel on that layout
 * shuffles across lanes and converts/multiplies per block. Here 16 blocks form a group: ONE 64-byte load carries
 * two vpdpbusd operands (low and high nibbles, one AND and one shift + AND), int32 lane k accumulating block k,
 * and one convert + two fma per group apply all 16 d's and m's. Nothing is lost: same nibbles, same fp16 d and m.
 *
 * Weight row (row_bytes >= OW_Q41R16 min row bytes; the plan pads it to a multiple of 64):
 *   [nibbles: n_cols/2 bytes][fp16 d: n_blocks x 2][fp16 m: n_blocks x 2][zero padding]
 *   the group of m blocks starting at block g (m = 16, or fewer in a row's last group) takes 16m bytes at 16g,
 *   as 4 "pairs" i = 0..3 of 4m bytes each at byte 16g + 4mi. Byte 4k + t of pair i (block g + k, t = 0..3) is
 *       q[g + k][8i + t]  |  q[g + k][8i + 4 + t] << 4
 *   i.e. its low nibbles are R16 chunk 2i of the group and its high nibbles R16 chunk 2i + 1: a full pair is one
 *   64-byte line lined up with the activation's chunks 2i and 2i + 1 (ow_r16_chunk), a partial one 4m bytes.
 *   q are Q4_1's unsigned nibbles (0..15): vpdpbusd takes them as they are, no offset, no seed.
 * Activations: OW_ACT_Q8_0_R16 (q8_0_r16.h): Q8_0 quants x_q and f32 scales d_x; the int32 seed -128 * sum(x_q)
 * gives sum(x_q) exactly. Block value: d_w d_x sum(q x_q) + m_w (d_x sum(x_q)).
 * ggml pairs Q4_1 with Q8_1, whose quants and d are Q8_0's; it takes the second term from s = fp16(d * sum(x_q)),
 * this layout from d_x * sum(x_q) in f32, so results differ from the Q4_1 kernels by at most |m_w s| * 2^-11 per
 * block (fp16 rounding of s) plus f32 rounding (tests/test_repack_q4_1.py bounds it).
 */
#ifndef ONEWELL_Q4_1_R16_H
#define ONEWELL_Q4_1_R16_H

#include <stddef.h>
#include <stdint.h>

#include "q8_0_r16.h"

#define OW_Q41R16_PAIRS 4   /* 64-byte loads per full group: two R16 chunks each */

/* byte offset, in a row's nibbles, of pair i of the group starting at block g (m blocks) */
static inline size_t ow_q41r16_pair(int64_t g, int m, int i) { return (size_t)(OW_QK / 2 * g + 4 * m * i); }

/* byte offset of the nibble of element t (0..31) of block b in a row of nb blocks; *high = 1 for the top nibble */
static inline size_t ow_q41r16_pos(int64_t nb, int64_t b, int t, int *high) {
    const int64_t g = b / OW_R16_GROUP * OW_R16_GROUP;
    const int j = t / 4;   /* the R16 chunk of element t */
    *high = j & 1;
    return ow_q41r16_pair(g, ow_r16_group_blocks(nb, g), j / 2) + (size_t)(4 * (b - g) + t % 4);
}

/* offsets of the fp16 d's and m's in a row, and its size before padding */
static inline size_t ow_q41r16_d_at(int64_t n_cols) { return (size_t)n_cols / 2; }
static inline size_t ow_q41r16_m_at(int64_t n_cols) { return (size_t)n_cols / 2 + 2 * (size_t)(n_cols / OW_QK); }
static inline size_t ow_q41r16_min_row_bytes(int64_t n_cols) { return (size_t)n_cols / 2 + 4 * (size_t)(n_cols / OW_QK); }
static inline size_t ow_q41r16_row_stride(int64_t n_cols) {
    return (ow_q41r16_min_row_bytes(n_cols) + OW_R16_ROW_ALIGN - 1) / OW_R16_ROW_ALIGN * OW_R16_ROW_ALIGN;
}

#endif
