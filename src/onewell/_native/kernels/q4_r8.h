/* Q4_1 R8, Q5_0 R8 and Q4_0 R8: load-time layouts of 4- and 5-bit weight rows for the AVX2 path of CPUs whose 256-bit
 * instructions are two 128-bit µops (AMD family 0x17), built as Q8_0 R8 (q8_0_r8.h) is: groups of 8 blocks whose
 * quants are interleaved so that int32 lane k of a 256-bit register accumulates block k, and ONE convert and one
 * FMA (two for Q4_1's minimum) finish 8 blocks. In ggml's layout the AVX2 kernel spends them per block, and on
 * such a CPU SmolLM2's Q4_1 matmuls read 5 GB/s of the 19 the memory gives one core (perf-log entry 43).
 *
 * Nothing is added: each row is exactly as long as in the file (20, 22 or 18 bytes per block), its bytes reordered
 * (Q5_0's fifth bits also permuted within their block's 32-bit word, see below).
 *
 * Row (stride >= the file row's bytes): groups of m blocks at block g = 0, 8, 16, ... (m = 8, or fewer in a row's
 * last group), each at byte B g (B = 20, 22, 18):
 *   Q4_1 R8: [m fp16 d][m fp16 m (the minimum)][4 chunks of 4m bytes]
 *   Q5_0 R8: [m fp16 d][m u32 fifth bits h'][4 chunks of 4m bytes]
 *   Q4_0 R8: [m fp16 d][4 chunks of 4m bytes]
 * chunk j = bytes 4j..4j+3 of the 16 nibble bytes of blocks g..g+m-1 in turn: its low nibbles are elements
 * 4j..4j+3 of each block, its high nibbles elements 16+4j..16+4j+3 (ggml's nibble order).
 * Q5_0's h' puts, for byte b of a chunk, element 4j+b's fifth bit at bit j of byte b and element 16+4j+b's at bit
 * 4+j: bit 8b+t of h' is bit 4t+b of the file's qh. One 16-bit shift and one AND then align a chunk's fifth bits
 * with its nibbles (left by 4-j for the low ones, right by j for the high ones).
 * IQ4_NL R8 is Q4_0 R8's bytes (IQ4_NL's block is Q4_0's, its nibbles indices into ggml's codebook); its AVX2
 * kernel looks the values up per chunk (perf-log entry 45).
 * Activations: plain Q8_1 (Q4_1 R8) or Q8_0 (Q5_0 R8, Q4_0 R8, IQ4_NL R8) blocks, the file types' own; the AVX2
 * kernel interleaves a vector's quants once per call. */
#ifndef ONEWELL_Q4_R8_H
#define ONEWELL_Q4_R8_H

#include <stddef.h>
#include <stdint.h>

#include "q8_0_r8.h"

#define OW_Q4_1_R8_BLOCK_BYTES 20
#define OW_Q5_0_R8_BLOCK_BYTES 22
#define OW_Q4_0_R8_BLOCK_BYTES 18

/* header bytes per block: fp16 d + fp16 m (Q4_1), fp16 d + u32 h' (Q5_0), fp16 d (Q4_0) */
static inline int ow_q4r8_head(int block_bytes) { return block_bytes - 16; }

/* byte offsets in a row of such a layout: the group at block g; in a group of m blocks, header field f (0: d,
 * 1: m or h') of block k; byte t (0..15) of block k's nibbles */
static inline size_t ow_q4r8_group_at(int block_bytes, int64_t g) { return (size_t)g * (size_t)block_bytes; }
static inline size_t ow_q4r8_d_at(int block_bytes, int64_t g, int k) {
    return ow_q4r8_group_at(block_bytes, g) + 2 * (size_t)k;
}
static inline size_t ow_q4r8_second_at(int block_bytes, int64_t g, int m, int k) {   /* Q4_1: m; Q5_0: h'; Q4_0: - */
    return ow_q4r8_group_at(block_bytes, g) + 2 * (size_t)m + (size_t)(ow_q4r8_head(block_bytes) - 2) * (size_t)k;
}
static inline size_t ow_q4r8_nibble_at(int block_bytes, int64_t g, int m, int k, int t) {
    return ow_q4r8_group_at(block_bytes, g) + (size_t)ow_q4r8_head(block_bytes) * (size_t)m
         + 4 * (size_t)m * (size_t)(t / 4) + 4 * (size_t)k + (size_t)(t % 4);
}

/* one row of n_cols elements in such a layout (block_bytes 20: Q4_1 R8, 22: Q5_0 R8, 18: Q4_0 R8) -> the file's
 * blocks, from the group at block g0 (a multiple of 8) on */
void ow_q4r8_unpack_groups(int block_bytes, const uint8_t *r8, uint8_t *file, int64_t n_cols, int64_t g0);

/* Q5_0's qh (bit i: element i's fifth bit) <-> h' (above), a bit permutation: h' byte b is row b of a 4 x 8 bit
 * matrix whose column t is qh's nibble t. Nibbles spread to bytes (or bytes packed to nibbles) and
 * Hacker's Delight 8 x 8 bit transpose (three delta swaps): a few operations instead of a loop over 32 bits, since
 * a prefill without the rows GEMM turns every row back. */
static inline uint64_t ow_bits_transpose8(uint64_t x) {   /* bit 8i + j <-> bit 8j + i */
    uint64_t t = (x ^ (x >> 7)) & 0x00AA00AA00AA00AAull;
    x ^= t ^ (t << 7);
    t = (x ^ (x >> 14)) & 0x0000CCCC0000CCCCull;
    x ^= t ^ (t << 14);
    t = (x ^ (x >> 28)) & 0x00000000F0F0F0F0ull;
    return x ^ t ^ (t << 28);
}
static inline uint32_t ow_q5_0_r8_spread(uint32_t qh) {
    uint64_t y = qh;
    y = (y | (y << 16)) & 0x0000FFFF0000FFFFull;
    y = (y | (y << 8)) & 0x00FF00FF00FF00FFull;
    y = (y | (y << 4)) & 0x0F0F0F0F0F0F0F0Full;   /* nibble t in byte t */
    return (uint32_t)ow_bits_transpose8(y);
}
static inline uint32_t ow_q5_0_r8_gather(uint32_t h) {
    uint64_t y = ow_bits_transpose8(h);   /* column t of h' in byte t's low nibble */
    y = (y | (y >> 4)) & 0x00FF00FF00FF00FFull;
    y = (y | (y >> 8)) & 0x0000FFFF0000FFFFull;
    return (uint32_t)(y | (y >> 16));
}

#endif
