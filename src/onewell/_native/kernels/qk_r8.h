/* Q4_K R8, Q5_K R8, Q6_K R8 and IQ4_XS R8: load-time layouts of K-quant weight rows for the AVX2 path of CPUs whose 256-bit
 * instructions are two 128-bit µops (AMD family 0x17), the K-quant counterparts of Q4_0 R8 (q4_r8.h). On such a
 * CPU vpmaddubsw and vpmaddwd are two µops each on the one integer-multiply pipe, and vector shifts have one pipe of
 * their own; ggml's layouts make the AVX2 kernels spend both per sub-block (docs/perf-log.md entry 44).
 *
 * Q4_K R8. A Q4_K super-block is 8 sub-blocks of 32 elements, each with a 6-bit scale and minimum; ggml's layout
 * puts two sub-blocks in each byte (low and high nibbles of a 32-byte chunk), so the kernel multiplies each
 * sub-block's vpmaddubsw result by its own broadcast scale: 8 vpmaddubsw and 8 vpmaddwd per super-block. Here int32
 * lane k of a 256-bit register holds sub-block k: the 8 vpmaddubsw results add up in int16 (8 x 15 x 128 x 2 =
 * 30,720 < 32,767) and ONE vpmaddwd by the 8 scales (each in both words of its lane) finishes the super-block; the
 * minima take one 128-bit vpmaddwd against the activation's sub-block sums. The 12 bytes of packed 6-bit scales and
 * minima are stored unpacked, 16 bytes (4 more per 144: +2.8 %), read with one load and one byte shuffle instead of
 * a dozen scalar operations.
 *   super-block (148 bytes): [fp16 d][fp16 dmin][8 u8 scales][8 u8 minima][4 chunks of 32 bytes]
 *   chunk j, bytes 4k..4k+3 = bytes 4j..4j+3 of sub-block k's 16 nibble bytes in Q4_0's order: byte t's low nibble
 *   is element t of the sub-block, its high nibble element 16 + t. Weight = d scale_k q - dmin min_k, as Q4_K.
 *
 * Q5_K R8. Q4_K R8 plus the fifth bits, as Q5_0 R8 carries them (q4_r8.h): lane k of 8 u32 h' holds sub-block k's
 * 32 fifth bits, element e's at bit 8 (e % 4) + e / 4 (Q5_0 R8's bit 8b + t for its qh bit 4t + b),
 * so one 16-bit shift and one AND per chunk align them with the nibbles; 4 vpmaddubsw results per int16 sum
 * (4 x 31 x 128 x 2 = 31,744), two vpmaddwd by the scales.
 *   super-block (180 bytes; the file's 176): [fp16 d][fp16 dmin][8 u8 scales][8 u8 minima][8 u32 h'][4 chunks]
 *
 * Q6_K R8. A Q6_K super-block is 16 sub-blocks of 16 elements with an int8 scale each; ggml's kernel builds the
 * 6-bit values from 4 low bits and 2 high bits (10 shifts per super-block) and multiplies each vpmaddubsw result by
 * a shuffled scale (8 vpmaddubsw, 8 vpmaddwd). Here int16 word p of every 256-bit "vector" of 6-bit values belongs
 * to sub-block p: vector v (0..7) holds elements 2v and 2v + 1 of each of the 16 sub-blocks, so the 16 scales
 * (sign-extended once) multiply two vpmaddubsw results at a time (2 x 63 x 128 x 2 = 32,256): 4 vpmaddwd. Vectors
 * 0..3 are stored whole in the low 6 bits of 4 chunks whose top 2 bits carry the high bits of vectors 4..7, whose
 * low 4 bits fill the nibbles of 2 more chunks: 6 shifts per super-block, and the file's 210 bytes.
 *   super-block (210 bytes): [fp16 d][16 i8 scales][4 chunks X0..X3 of 32 bytes][2 chunks Y0, Y1 of 32 bytes]
 *   element 16 p + 2 v + s (sub-block p, s = 0, 1) of the super-block is "byte 2 p + s of vector v", which is
 *   bits 0-5 of X_v for v < 4; for v = 4 + k, bits 6-7 of X_k are its high 2 bits and nibble k % 2 of Y_{k/2} its
 *   low 4. Weight = d scale_p (q - 32), as Q6_K.
 *
 * IQ4_XS R8. An IQ4_XS super-block is 8 sub-blocks of 32 codebook indices (IQ4_NL's values) in Q4_0's nibble order,
 * each with a 6-bit scale (minus 32) packed in 6 bytes; ggml's layout gives the AVX2 kernel one vpmaddubsw, one
 * vpmaddwd by a broadcast scale and a 16-byte nibble split per sub-block, plus a dozen scalar operations per
 * super-block for the scales. Here, as in Q4_K R8, lane k holds sub-block k, so the 8 scales multiply every
 * vpmaddubsw result at once and the nibble split works on 32 bytes; the products of codebook values with
 * activations reach 2 x 127 x 127 per pair, so each vpmaddubsw still needs its own vpmaddwd (by the scales). The
 * scales are stored as 8 signed bytes (2 more per 136: +1.5 %).
 *   super-block (138 bytes): [fp16 d][8 i8 scales][4 chunks of 32 bytes as Q4_K R8's]
 *   weight = d scale_k ow_iq4nl_values[index], as IQ4_XS.
 *
 * Rows are n_cols / 256 super-blocks, no padding. Activations: plain Q8_K (the file types'); the AVX2 kernels
 * interleave a vector's quants once per call as the weights are. */
#ifndef ONEWELL_QK_R8_H
#define ONEWELL_QK_R8_H

#include <stddef.h>
#include <stdint.h>

#include "q4_r8.h"   /* Q5_0 R8's fifth-bit permutation */

#define OW_Q4_K_R8_BLOCK_BYTES 148
#define OW_Q5_K_R8_BLOCK_BYTES 180
#define OW_QK_R8_HEAD 20      /* Q4_K R8's nibbles start after d, dmin, 8 scales, 8 minima */
#define OW_Q5_K_R8_FIFTH_AT 20
#define OW_Q5_K_R8_HEAD 52    /* ... Q5_K R8's after the 8 h' too */
#define OW_Q6_K_R8_BLOCK_BYTES 210
#define OW_Q6_K_R8_X_AT 18    /* after d and the 16 scales */
#define OW_Q6_K_R8_Y_AT 146
#define OW_IQ4_XS_R8_BLOCK_BYTES 138
#define OW_IQ4_XS_R8_SCALES_AT 2
#define OW_IQ4_XS_R8_HEAD 10  /* the nibbles after d and the 8 scales */

/* byte offsets in a Q4_K R8 / Q5_K R8 super-block: the scales (then the minima), and byte t (0..15) of sub-block
 * k's nibbles (head: OW_QK_R8_HEAD, OW_Q5_K_R8_HEAD or, in IQ4_XS R8, OW_IQ4_XS_R8_HEAD) */
#define OW_QK_R8_SCALES_AT 4
#define OW_QK_R8_MINS_AT 12
static inline size_t ow_qk_r8_nibble_at(int head, int k, int t) {
    return (size_t)head + 32 * (size_t)(t / 4) + 4 * (size_t)k + (size_t)(t % 4);
}

/* Q6_K R8: the 6-bit value (0..63) of element e of the super-block at blk */
static inline int ow_q6_k_r8_quant(const uint8_t *blk, int e) {
    const int v = (e % 16) / 2, b = 2 * (e / 16) + e % 2;
    const uint8_t *x = blk + OW_Q6_K_R8_X_AT, *y = blk + OW_Q6_K_R8_Y_AT;
    if (v < 4) return x[32 * v + b] & 63;
    const int k = v - 4;
    return ((x[32 * k + b] >> 6) << 4) | ((y[32 * (k / 2) + b] >> (4 * (k % 2))) & 15);
}

/* ggml's 12-byte packing of 8 6-bit scales and minima (the inverse of ow_unpack_k4_scales, quant_blocks.h) */
static inline void ow_pack_k4_scales(const uint8_t scales[8], const uint8_t mins[8], uint8_t packed[12]) {
    for (int j = 0; j < 4; j++) {
        packed[j] = (uint8_t)((scales[j] & 63) | ((scales[j + 4] >> 4) << 6));
        packed[j + 4] = (uint8_t)((mins[j] & 63) | ((mins[j + 4] >> 4) << 6));
        packed[j + 8] = (uint8_t)((scales[j + 4] & 0x0f) | ((mins[j + 4] & 0x0f) << 4));
    }
}

#endif
