/* Block layouts of the ggml quantized types, byte for byte as they sit in a GGUF file, plus the fp16 helpers
 * every kernel needs. Structs are packed: weight rows come straight from the file mapping with no alignment
 * promise, so every field may be unaligned (the compiler then emits unaligned-safe loads). */
#ifndef ONEWELL_QUANT_BLOCKS_H
#define ONEWELL_QUANT_BLOCKS_H

#include <stdint.h>
#include <string.h>

#define OW_QK 32     /* elements per block of the legacy types (Q4_0 ... Q8_1) */
#define OW_QK_K 256  /* elements per super-block of the K-quants */

#define OW_PACKED __attribute__((packed))

/* weight = d * (q - 8), q = 4 bits; element j in qs[j] low nibble, element j+16 in qs[j] high nibble */
typedef struct OW_PACKED { uint16_t d; uint8_t qs[OW_QK / 2]; } ow_block_q4_0;
/* weight = d * q + m */
typedef struct OW_PACKED { uint16_t d, m; uint8_t qs[OW_QK / 2]; } ow_block_q4_1;
/* weight = d * (q - 16), q = nibble | bit j of qh (little-endian u32) << 4 */
typedef struct OW_PACKED { uint16_t d; uint8_t qh[4]; uint8_t qs[OW_QK / 2]; } ow_block_q5_0;
/* weight = d * q + m */
typedef struct OW_PACKED { uint16_t d, m; uint8_t qh[4]; uint8_t qs[OW_QK / 2]; } ow_block_q5_1;
/* weight = d * q */
typedef struct OW_PACKED { uint16_t d; int8_t qs[OW_QK]; } ow_block_q8_0;
/* activation format of Q4_1/Q5_1: s = d * sum(qs), kept so the weight minimum m costs one multiply */
typedef struct OW_PACKED { uint16_t d, s; int8_t qs[OW_QK]; } ow_block_q8_1;

/* 8 sub-blocks of 32: weight = d * scale[j] * q - dmin * min[j], scales/mins 6-bit packed in 12 bytes;
 * each 32 bytes of qs hold sub-block 2i in the low nibbles and 2i+1 in the high nibbles */
typedef struct OW_PACKED { uint16_t d, dmin; uint8_t scales[12]; uint8_t qs[OW_QK_K / 2]; } ow_block_q4_K;
/* as Q4_K plus a fifth bit: bit 2i (low nibbles) / 2i+1 (high nibbles) of qh[l] for the i-th 64 elements */
typedef struct OW_PACKED { uint16_t d, dmin; uint8_t scales[12]; uint8_t qh[OW_QK_K / 8]; uint8_t qs[OW_QK_K / 2]; } ow_block_q5_K;
/* 16 sub-blocks of 16: weight = d * scales[i/16] * (q - 32), q = 4 low bits from ql, 2 high bits from qh */
typedef struct OW_PACKED { uint8_t ql[OW_QK_K / 2]; uint8_t qh[OW_QK_K / 4]; int8_t scales[OW_QK_K / 16]; uint16_t d; } ow_block_q6_K;
/* 16 sub-blocks of 16: weight = d * (scales[i/16] & 15) * q - dmin * (scales[i/16] >> 4), q = 2 bits; weight
 * 128h + 32j + l is bits 2j..2j+1 of qs[32h + l] */
typedef struct OW_PACKED { uint8_t scales[OW_QK_K / 16]; uint8_t qs[OW_QK_K / 4]; uint16_t d, dmin; } ow_block_q2_K;
/* 16 sub-blocks of 16: weight = d * (scale - 32) * q, q = the Q2_K-style 2 low bits - 4 unless bit i/32 of
 * hmask[i%32] is set; 6-bit scales packed in 12 bytes (ow_unpack_q3_K_scales) */
typedef struct OW_PACKED {
    uint8_t hmask[OW_QK_K / 8]; uint8_t qs[OW_QK_K / 4]; uint8_t scales[12]; uint16_t d;
} ow_block_q3_K;
/* weight = d * ow_iq4nl_values[index], indices packed as Q4_0's nibbles */
typedef struct OW_PACKED { uint16_t d; uint8_t qs[OW_QK / 2]; } ow_block_iq4_nl;
/* 8 sub-blocks of 32 packed as IQ4_NL, each scaled by d * (6-bit scale - 32): low nibble s of scales_l, 2 bits
 * 2s..2s+1 of scales_h on top */
typedef struct OW_PACKED {
    uint16_t d, scales_h; uint8_t scales_l[OW_QK_K / 64]; uint8_t qs[OW_QK_K / 2];
} ow_block_iq4_xs;
/* activation format of the K-quants: float scale, sums of each 16 quants (the K-quant minimums/offsets use them) */
typedef struct OW_PACKED { float d; int8_t qs[OW_QK_K]; int16_t bsums[OW_QK_K / 16]; } ow_block_q8_K;

_Static_assert(sizeof(ow_block_q4_0) == 18, "Q4_0 block");
_Static_assert(sizeof(ow_block_q4_1) == 20, "Q4_1 block");
_Static_assert(sizeof(ow_block_q5_0) == 22, "Q5_0 block");
_Static_assert(sizeof(ow_block_q5_1) == 24, "Q5_1 block");
_Static_assert(sizeof(ow_block_q8_0) == 34, "Q8_0 block");
_Static_assert(sizeof(ow_block_q8_1) == 36, "Q8_1 block");
_Static_assert(sizeof(ow_block_q4_K) == 144, "Q4_K block");
_Static_assert(sizeof(ow_block_q5_K) == 176, "Q5_K block");
_Static_assert(sizeof(ow_block_q6_K) == 210, "Q6_K block");
_Static_assert(sizeof(ow_block_q8_K) == 292, "Q8_K block");
_Static_assert(sizeof(ow_block_q2_K) == 84, "Q2_K block");
_Static_assert(sizeof(ow_block_q3_K) == 110, "Q3_K block");
_Static_assert(sizeof(ow_block_iq4_nl) == 18, "IQ4_NL block");
_Static_assert(sizeof(ow_block_iq4_xs) == 136, "IQ4_XS block");

/* the non-linear codebook of IQ4_NL and IQ4_XS (ggml's kvalues_iq4nl): denser near zero */
static const int8_t ow_iq4nl_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

static inline uint32_t ow_f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float ow_bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

/* IEEE half -> float, exact (portable: the generic path may run on CPUs without F16C). */
static inline float ow_fp16_to_fp32(uint16_t h) {
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    const uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
    if (exp == 0x1f) return ow_bits_f32(sign | 0x7f800000u | (mant << 13));   /* inf / nan */
    if (exp == 0) {                                                             /* zero / subnormal: mant * 2^-24 */
        const float mag = (float)mant * 0x1p-24f;
        return ow_bits_f32(sign | ow_f32_bits(mag));
    }
    return ow_bits_f32(sign | ((exp + 112u) << 23) | (mant << 13));           /* rebias 15 -> 127 */
}

/* float -> IEEE half, round to nearest even (as F16C's vcvtps2ph and numpy's astype(float16)). */
static inline uint16_t ow_fp32_to_fp16(float f) {
    const uint32_t bits = ow_f32_bits(f);
    const uint16_t sign = (uint16_t)((bits >> 16) & 0x8000u);
    uint32_t mag = bits & 0x7fffffffu;
    if (mag >= 0x7f800000u) return sign | (mag > 0x7f800000u ? 0x7e00 : 0x7c00);   /* nan stays (quiet) nan */
    if (mag >= 0x47800000u) return sign | 0x7c00;                                  /* >= 65536: inf */
    if (mag < 0x38800000u) {
        /* below the smallest normal half (2^-14): adding 0.5 makes the FPU round the value to a multiple
         * of 2^-24 (the half subnormal step), which then sits in the low mantissa bits */
        const float rounded = ow_bits_f32(mag) + 0.5f;
        return sign | (uint16_t)(ow_f32_bits(rounded) - ow_f32_bits(0.5f));
    }
    /* normal: drop 13 mantissa bits with round-half-even (0xfff + lowest kept bit), rebias the exponent;
     * a carry out of the mantissa correctly bumps the exponent (up to inf for 65520 <= f < 65536) */
    mag += 0xc8000fffu + ((mag >> 13) & 1u);   /* 0xc8000000 = -112 << 23 (mod 2^32) */
    return sign | (uint16_t)(mag >> 13);
}

static inline uint16_t ow_read_u16(const void *p) { uint16_t v; memcpy(&v, p, 2); return v; }
/* bf16 is the top half of a float32 */
static inline float ow_bf16_to_fp32(uint16_t h) { return ow_bits_f32((uint32_t)h << 16); }
static inline uint32_t ow_read_u32(const void *p) { uint32_t v; memcpy(&v, p, 4); return v; }

/* Unpack the 12-byte scales field of Q4_K/Q5_K into 8 scales and 8 mins (6 bits each, ggml's get_scale_min_k4):
 * bytes 0-3 hold scales 0-3 (+ top bits of scales 4-7), bytes 4-7 mins 0-3 (+ top bits of mins 4-7),
 * bytes 8-11 the low nibbles of scales 4-7 (low half) and mins 4-7 (high half). */
static inline void ow_unpack_k4_scales(const uint8_t packed[12], uint8_t scales[8], uint8_t mins[8]) {
    for (int j = 0; j < 4; j++) {
        scales[j] = packed[j] & 63;
        mins[j] = packed[j + 4] & 63;
        scales[j + 4] = (uint8_t)((packed[j + 8] & 0x0f) | ((packed[j] >> 6) << 4));
        mins[j + 4] = (uint8_t)((packed[j + 8] >> 4) | ((packed[j + 4] >> 6) << 4));
    }
}

/* The 16 signed scales (-32..31) of Q3_K from its 12 packed bytes: scale s has its low 4 bits in byte s (s < 8)
 * or the high nibble of byte s - 8, its top 2 bits at bits 2(s/4) of byte 8 + s%4. */
static inline void ow_unpack_q3_K_scales(const uint8_t packed[12], int8_t scales[16]) {
    for (int s = 0; s < 16; s++) {
        const int low = s < 8 ? packed[s] & 15 : packed[s - 8] >> 4;
        const int high = (packed[8 + s % 4] >> (2 * (s / 4))) & 3;
        scales[s] = (int8_t)((low | high << 4) - 32);
    }
}

/* The 6-bit scale (-32..31) of IQ4_XS sub-block s */
static inline int ow_iq4_xs_scale(const ow_block_iq4_xs *b, int s) {
    const int high = (ow_read_u16((const uint8_t *)b + 2) >> (2 * s)) & 3;   /* scales_h, read unaligned */
    return (((b->scales_l[s / 2] >> (4 * (s % 2))) & 15) | high << 4) - 32;
}

#endif
