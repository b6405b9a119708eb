/* Q8_0 "R8": a load-time repacked layout of Q8_0 weight rows for AVX2 CPUs whose 256-bit instructions are two
 * 128-bit µops (AMD family 0x17, docs/perf-log.md entry 42); Zen 3 gains from it too (entry 46).
 *
 * Why: with ggml's layout an AVX2 kernel spends per 32-weight block a convert, a scale product and an FMA after the
 * integer dot; on such a CPU that is ~16 µops per block and the Q8_0 decode kernel reads 11-12 GB/s whether the
 * matrix sits in L2 or in memory. Here 8 consecutive blocks form a group whose quants are interleaved so that one
 * 32-byte load feeds vpmaddubsw with int32 lane k accumulating block k: after 8 loads lane k holds block k's dot
 * product and ONE convert + ONE FMA with the 8 scales finish the group (~11 µops per block: 17-18 GB/s from L2).
 * Unlike R16 (q8_0_r16.h: scales after the row's quants, groups of 16 read in halves) the row is read strictly in
 * order, scales first in each group, which is what kept it near 14 GB/s from memory on one core where the R16 rows
 * read 9-10 (benchmarks/prototypes/q8_0_decode_zen1.c). Nothing is lost and nothing is added: the same signed
 * quants, the same fp16 scales, the same 34 bytes per block, so a row is exactly as long as in the file.
 *
 * Weight row (stride >= ow_q8_0_r8_row_bytes(n_cols)):
 *   groups of m blocks at block g = 0, 8, 16, ... (m = 8, or fewer in a row's last group), each at byte 34 g:
 *     [m fp16 scales d of blocks g..g+m-1][8 chunks of 4m bytes: chunk j = bytes 4j..4j+3 of blocks g..g+m-1]
 * Activations: plain Q8_0 blocks (OW_TYPE_Q8_0), so the plan, the executor and the quantizers need nothing new;
 * the AVX2 kernel interleaves a vector's quants once per call. */
#ifndef ONEWELL_Q8_0_R8_H
#define ONEWELL_Q8_0_R8_H

#include <stddef.h>
#include <stdint.h>

#define OW_R8_GROUP 8   /* blocks per interleaved group: one int32 lane of a 256-bit register each */
#define OW_R8_BLOCK_BYTES 34

static inline int ow_r8_group_blocks(int64_t nb, int64_t g) { return nb - g < OW_R8_GROUP ? (int)(nb - g) : OW_R8_GROUP; }

/* bytes of one row (no padding: the file row's size) */
static inline size_t ow_q8_0_r8_row_bytes(int64_t n_cols) { return (size_t)(n_cols / 32) * OW_R8_BLOCK_BYTES; }

/* byte offsets in a row: the group at block g (m blocks), its scale k, and byte t (0..31) of its block g + k */
static inline size_t ow_r8_group_at(int64_t g) { return (size_t)g * OW_R8_BLOCK_BYTES; }
static inline size_t ow_r8_scale_at(int64_t g, int k) { return ow_r8_group_at(g) + 2 * (size_t)k; }
static inline size_t ow_r8_quant_at(int64_t g, int m, int k, int t) {
    return ow_r8_group_at(g) + 2 * (size_t)m + 4 * (size_t)m * (size_t)(t / 4) + 4 * (size_t)k + (size_t)(t % 4);
}

#endif
