/* Quantized matrix x vector(s): the public C API of the kernels.
 *
 * A matmul is y = W x for W stored row-major in a ggml weight type (one row = n_cols elements, row_bytes bytes)
 * and x a few activation vectors that were first quantized to the activation type the weight type pairs with
 * (ow_act_type_for), exactly as ggml does. Callers split the rows among threads with [r0, r1).
 *
 * Kernel paths: the generic C twin, AVX2 (maddubs), AVX2 + AVX-VNNI, AVX-512 (F, BW, VL, VNNI), and on aarch64
 * NEON (widening multiplies) and NEON + dotprod (sdot). An ow_isa level
 * (cpu_features.h) maps to the best path of that level this CPU has; explicit paths exist for tests.
 */
#ifndef ONEWELL_MATVEC_H
#define ONEWELL_MATVEC_H

#include <stddef.h>
#include <stdint.h>

#include "../cpu_features.h"

/* x86-64 builds carry the SIMD paths; -DOW_GENERIC_ONLY compiles what other CPUs get (to test that build here) */
#if defined(__x86_64__) && !defined(OW_GENERIC_ONLY)
#define OW_X86_KERNELS 1
#else
#define OW_X86_KERNELS 0
#endif
/* aarch64 builds carry the NEON paths (plain AdvSIMD and dotprod, both chosen at run time) */
#if defined(__aarch64__) && !defined(OW_GENERIC_ONLY)
#define OW_NEON_KERNELS 1
#else
#define OW_NEON_KERNELS 0
#endif

/* Values equal ggml's type ids (onewell.gguf.constants.GGMLType), except onewell's own load-time layouts, which
 * take ids far outside ggml's range (never found in a file; onewell.quant.repack holds the same numbers). */
typedef enum {
    OW_TYPE_F32 = 0,
    OW_TYPE_F16 = 1,
    OW_TYPE_Q4_0 = 2,
    OW_TYPE_Q4_1 = 3,
    OW_TYPE_Q5_0 = 6,
    OW_TYPE_Q5_1 = 7,
    OW_TYPE_Q8_0 = 8,
    OW_TYPE_Q8_1 = 9,
    OW_TYPE_Q4_K = 12,
    OW_TYPE_Q5_K = 13,
    OW_TYPE_Q6_K = 14,
    OW_TYPE_Q8_K = 15,
    OW_TYPE_Q2_K = 10,
    OW_TYPE_Q3_K = 11,
    OW_TYPE_IQ4_NL = 20,
    OW_TYPE_IQ4_XS = 23,
    OW_TYPE_BF16 = 30,
    OW_TYPE_Q8_0_R16 = 1008,  /* weights: Q8_0 (or Q5_0) rows repacked in interleaved groups (q8_0_r16.h) */
    OW_ACT_Q8_0_R16 = 1009,   /* its activations: Q8_0 quants in the same interleave, f32 scales, seeds */
    OW_TYPE_Q4_1_R16 = 1010,  /* weights: Q4_1 rows repacked in the same groups (q4_1_r16.h); ACT_Q8_0_R16 in */
    OW_TYPE_Q8_0_R8 = 1011,   /* weights: Q8_0 rows in groups of 8 for AVX2 (q8_0_r8.h); plain Q8_0 in */
    OW_TYPE_Q4_1_R8 = 1012,   /* weights: Q4_1 rows in groups of 8 (q4_r8.h); plain Q8_1 in */
    OW_TYPE_Q5_0_R8 = 1013,   /* weights: Q5_0 rows in groups of 8 (q4_r8.h); plain Q8_0 in */
    OW_TYPE_Q4_0_R8 = 1014,   /* weights: Q4_0 rows in groups of 8 (q4_r8.h); plain Q8_0 in */
    OW_TYPE_Q4_K_R8 = 1015,   /* weights: Q4_K rows, sub-block k in lane k (qk_r8.h); plain Q8_K in */
    OW_TYPE_Q6_K_R8 = 1016,   /* weights: Q6_K rows, sub-block p in word p (qk_r8.h); plain Q8_K in */
    OW_TYPE_Q5_K_R8 = 1017,   /* weights: Q5_K rows as Q4_K R8's + fifth bits (qk_r8.h); plain Q8_K in */
    OW_TYPE_IQ4_NL_R8 = 1018, /* weights: IQ4_NL rows in groups of 8, Q4_0 R8's bytes (q4_r8.h); plain Q8_0 in */
    OW_TYPE_IQ4_XS_R8 = 1019, /* weights: IQ4_XS rows, sub-block k in lane k (qk_r8.h); plain Q8_K in */
} ow_ggml_type;
typedef ow_ggml_type ow_wtype;  /* a weight type */
typedef ow_ggml_type ow_atype;  /* an activation type: F32, F16, Q8_0, Q8_1, Q8_K or ACT_Q8_0_R16 */

typedef enum {
    OW_KPATH_GENERIC = 0,
    OW_KPATH_AVX2 = 1,       /* AVX2 + FMA + F16C, u8 x s8 products with vpmaddubsw */
    OW_KPATH_AVX2_VNNI = 2,  /* the same with AVX-VNNI's vpdpbusd/vpdpwssd */
    OW_KPATH_AVX512 = 3,     /* AVX-512 F/BW/VL/VNNI, 512-bit registers */
    OW_KPATH_NEON = 4,       /* aarch64 AdvSIMD: s8 x s8 products with smull/sadalp */
    OW_KPATH_NEON_DOTPROD = 5, /* the same with the dot-product extension's sdot */
    OW_KPATH_COUNT = 6,
} ow_kpath;

#define OW_ROW_TILE 4  /* rows computed together, sharing each activation load */

/* --- types ----------------------------------------------------------------------------------------------- */
int ow_wtype_supported(int wt);                        /* 1 if ow_matmul_rows handles weight type id wt */
ow_atype ow_act_type_for(ow_wtype wt);                 /* the activation type weights of type wt pair with */
int64_t ow_type_block_size(ow_ggml_type t);            /* elements per block (1 for F32/F16), 0 if unknown */
size_t ow_type_block_bytes(ow_ggml_type t);            /* bytes per block, 0 if unknown */
size_t ow_act_row_bytes(ow_atype at, int64_t n_cols);  /* bytes of one quantized activation vector */
/* 1 if row_bytes is a valid row pitch for n_cols elements of weight type wt: exactly the packed size for ggml
 * types; at least quants + scales for Q8_0_R16 and Q4_1_R16 (their rows may be padded to any stride) */
int ow_row_bytes_ok(ow_wtype wt, int64_t n_cols, size_t row_bytes);

/* --- paths ----------------------------------------------------------------------------------------------- */
ow_kpath ow_kpath_for_isa(ow_isa isa);   /* best path of that ISA level on this CPU (AVX-VNNI if present) */
int ow_kpath_available(ow_kpath p);      /* 1 if this CPU can run path p */
const char *ow_kpath_name(ow_kpath p);   /* "generic", "avx2", "avx2-vnni", "avx512", "neon", "neon-dotprod" */

/* --- work ------------------------------------------------------------------------------------------------ */
/* Quantize n_cols floats into one activation vector of type at (n_cols a multiple of its block size).
 * Every path produces the same bytes. */
void ow_quantize_act(ow_atype at, const float *x, void *xq, int64_t n_cols, ow_isa isa);
void ow_quantize_act_path(ow_atype at, const float *x, void *xq, int64_t n_cols, ow_kpath path);

/* y[v*y_stride + r] = dot(W row r, activation v) for rows r in [r0, r1) and v in [0, n_vec).
 * Row r starts at w + r*row_bytes (any alignment); activation v at (const uint8_t *)xq + v*xq_stride, quantized
 * with ow_quantize_act(ow_act_type_for(wt), ...). Each tile of OW_ROW_TILE rows is streamed from memory once and
 * then reused from cache for every activation vector. */
void ow_matmul_rows(ow_wtype wt, const uint8_t *w, size_t row_bytes, int64_t n_cols,
                    const void *xq, size_t xq_stride, int n_vec, float *y, int64_t y_stride,
                    int64_t r0, int64_t r1, ow_isa isa);
void ow_matmul_rows_path(ow_wtype wt, const uint8_t *w, size_t row_bytes, int64_t n_cols,
                         const void *xq, size_t xq_stride, int n_vec, float *y, int64_t y_stride,
                         int64_t r0, int64_t r1, ow_kpath path);

/* --- load-time repacking into OW_TYPE_Q8_0_R16 (q8_0_r16.h) --------------------------------------------- */
/* rows x n_cols of Q8_0 (src rows src_row_bytes apart) -> R16 rows dst_stride apart (padding bytes zeroed).
 * Returns 0, or -1 if n_cols is not a positive multiple of 32 or a row size is too small. */
int ow_repack_q8_0_r16(const uint8_t *src, size_t src_row_bytes, int64_t rows, int64_t n_cols, uint8_t *dst,
                       size_t dst_stride);
/* the same from Q5_0, losslessly: its values q - 16 lie in [-16, 15] and the block scale is the same fp16 d */
int ow_repack_q5_0_r16(const uint8_t *src, size_t src_row_bytes, int64_t rows, int64_t n_cols, uint8_t *dst,
                       size_t dst_stride);
size_t ow_q8_0_r16_row_stride(int64_t n_cols);  /* the padded stride the plan uses: a multiple of 64 bytes */
/* rows x n_cols of Q4_1 -> OW_TYPE_Q4_1_R16 rows (q4_1_r16.h) dst_stride apart (padding zeroed); 0 or -1 as above */
int ow_repack_q4_1_r16(const uint8_t *src, size_t src_row_bytes, int64_t rows, int64_t n_cols, uint8_t *dst,
                       size_t dst_stride);
size_t ow_q4_1_r16_row_stride(int64_t n_cols);  /* its padded stride: a multiple of 64 bytes */
/* rows x n_cols of Q8_0 -> OW_TYPE_Q8_0_R8 rows (q8_0_r8.h) dst_stride apart (>= the row's 34 bytes per block;
 * padding zeroed); 0 or -1 as above */
int ow_repack_q8_0_r8(const uint8_t *src, size_t src_row_bytes, int64_t rows, int64_t n_cols, uint8_t *dst,
                      size_t dst_stride);
/* the same from Q4_1, Q5_0, Q4_0 to OW_TYPE_Q4_1_R8, Q5_0_R8, Q4_0_R8 (q4_r8.h: the file row's bytes) */
int ow_repack_q4_1_r8(const uint8_t *src, size_t src_row_bytes, int64_t rows, int64_t n_cols, uint8_t *dst,
                      size_t dst_stride);
int ow_repack_q5_0_r8(const uint8_t *src, size_t src_row_bytes, int64_t rows, int64_t n_cols, uint8_t *dst,
                      size_t dst_stride);
int ow_repack_q4_0_r8(const uint8_t *src, size_t src_row_bytes, int64_t rows, int64_t n_cols, uint8_t *dst,
                      size_t dst_stride);
int ow_repack_iq4_nl_r8(const uint8_t *src, size_t src_row_bytes, int64_t rows, int64_t n_cols, uint8_t *dst,
                        size_t dst_stride);   /* IQ4_NL to OW_TYPE_IQ4_NL_R8: Q4_0 R8's byte order */
/* ... and from Q4_K to OW_TYPE_Q4_K_R8 (qk_r8.h: 148 bytes per super-block of 256, the file's 144), from Q5_K to
 * OW_TYPE_Q5_K_R8 (180, the file's 176), from Q6_K to OW_TYPE_Q6_K_R8 (the file's 210) */
int ow_repack_q4_k_r8(const uint8_t *src, size_t src_row_bytes, int64_t rows, int64_t n_cols, uint8_t *dst,
                      size_t dst_stride);
int ow_repack_q5_k_r8(const uint8_t *src, size_t src_row_bytes, int64_t rows, int64_t n_cols, uint8_t *dst,
                      size_t dst_stride);
int ow_repack_q6_k_r8(const uint8_t *src, size_t src_row_bytes, int64_t rows, int64_t n_cols, uint8_t *dst,
                      size_t dst_stride);
int ow_repack_iq4_xs_r8(const uint8_t *src, size_t src_row_bytes, int64_t rows, int64_t n_cols, uint8_t *dst,
                        size_t dst_stride);   /* IQ4_XS to OW_TYPE_IQ4_XS_R8 (qk_r8.h: 138 bytes, the file's 136) */
/* Process-wide tuning knobs of the streaming decode kernels, set before running matmuls (docs/perf-log.md,
 * entry 3): the software prefetch distance (bytes ahead of the weight stream; 0 = off; until set, this CPU's
 * ow_default_prefetch), and whether single-vector calls stream rows one at a time (1, default) or in 4-row
 * tiles (0). */
void ow_r16_set_prefetch(size_t bytes);
void ow_r16_reset_prefetch(void);   /* back to this CPU's defaults */
size_t ow_r16_prefetch(void);
/* the distance of the F16 decode streams: the knob once set, else this CPU's ow_default_f16_prefetch */
size_t ow_f16_prefetch(void);
/* the distance of the R16 row tiles (prefill): the knob once set, else OW_R16_TILE_PREFETCH */
#define OW_R16_TILE_PREFETCH 8192
size_t ow_r16_tile_prefetch(void);
void ow_r16_set_row_stream(int on);
int ow_r16_row_stream(void);
/* Whether the AVX-512 prefill tiles of Q4_0 / Q5_0 / F16 hold two rows per zmm register (1) or one per ymm (0): until
 * set, this CPU's ow_default_wide_tiles (docs/perf-log.md, entry 24). The results are the same either way. */
void ow_set_wide_tiles(int on);
int ow_wide_tiles(void);
/* Whether prefill runs batches of OW_FLOAT_GEMM_MIN_VECS+ vectors as a float GEMM where a slot has one (Q8_0, F16
 * and BF16 on the AVX2 and AVX-512 paths) (1) or through the exact tiles (0): until set, this CPU's
 * ow_default_float_gemm (docs/perf-log.md, entries 25 and 28). */
void ow_set_float_gemm(int on);
int ow_float_gemm(void);
/* Whether the float GEMM builds its next weight panel between the micro-kernel calls (1) or after them (0): until
 * set, this CPU's ow_default_gemm_overlap (docs/perf-log.md, entry 28). The results are the same either way. */
void ow_set_gemm_overlap(int on);
int ow_gemm_overlap(void);
/* Whether prefill batches of OW_FLOAT_GEMM_MIN_VECS+ vectors run the int8 GEMM with 8 rows in the lanes
 * (gemm_i8_rows.inc, gemm_k_rows.inc; 1, or 2: on the AVX2 path Q8_0's signs by xor + sub instead of vpsignb; 3:
 * all but the AVX2 paths' Q8_0 and the AVX2 path's IQ4_NL, which run float GEMMs) instead of the float GEMM (Q8_0) or the exact tiles (the
 * other 32-element types, the K-quants) (0): on every path
 * once set, else this CPU's ow_default_rows_gemm for the path (docs/perf-log.md, entries 29, 30). The int8 variants give the same floats; they and the float GEMM
 * round differently from the tiles. */
void ow_set_rows_gemm(int mode);   /* -1: back to each path's default */
int ow_rows_gemm_setting(void);    /* 0 to 3, or -1 while unset */
int ow_rows_gemm(int path);        /* OW_ROWS_GEMM_* (cpu_features.h) */
int ow_rows_gemm_runs(ow_kpath p);  /* 1 if kernel path p runs its rows GEMMs now (setting, else default) */
/* The activation bytes per vector block of the AVX-512 R16 prefill tiles (ow_r16_vector_block; 0: all vectors in
 * one block): until set, OW_R16_ACT_BYTES. 16, 24 and 32 KiB ran the same on the Xeon of docs/perf-log.md entry
 * 25; 24 leaves room in a 32 KiB L1 (Zen 4). The results are the same for any value. */
#define OW_R16_ACT_BYTES (24 << 10)
void ow_set_r16_act_bytes(size_t bytes);
void ow_reset_r16_act_bytes(void);
size_t ow_r16_act_bytes(void);

#endif
