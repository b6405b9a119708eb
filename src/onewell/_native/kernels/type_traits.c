/* The type-traits table (type_traits.h): one row per type, read by every dispatch instead of a switch.
 *
 * Adding a kernel for a path is one line in the type's row, e.g. `OW_AVX2(vec_dot_q2_K_q8_K_avx2),` in .vec_dot
 * (plus its declaration in vec_dot.h). A path left empty runs the kernel of the path it falls back to. */
#include "type_traits.h"

#include "q4_1_r16.h"
#include "qk_r8.h"
#include "vec_dot.h"

/* slot initializers: [path] = {function, "function"}; SIMD slots exist only in builds that compile SIMD code */
#define OW_SLOT(path, fn) [path] = {fn, #fn}
#define OW_GENERIC(fn) OW_SLOT(OW_KPATH_GENERIC, fn)
#if OW_X86_KERNELS
#define OW_AVX2(fn) OW_SLOT(OW_KPATH_AVX2, fn)
#define OW_AVX2_VNNI(fn) OW_SLOT(OW_KPATH_AVX2_VNNI, fn)
/* an any_rows tile that runs a GEMM (float, or int8 with its own block sums: not the tile's bits) from
 * OW_FLOAT_GEMM_MIN_VECS vectors on */
#define OW_AVX2_FLOAT_GEMM(fn) [OW_KPATH_AVX2] = {fn, #fn, 1, OW_FLOAT_GEMM_MIN_VECS}
#define OW_AVX2_VNNI_FLOAT_GEMM(fn) [OW_KPATH_AVX2_VNNI] = {fn, #fn, 1, OW_FLOAT_GEMM_MIN_VECS}
#define OW_AVX512(fn) OW_SLOT(OW_KPATH_AVX512, fn)
#define OW_AVX512_FLOAT_GEMM(fn) [OW_KPATH_AVX512] = {fn, #fn, 1, OW_FLOAT_GEMM_MIN_VECS}
#else
#define OW_AVX2(fn) [OW_KPATH_AVX2] = {0}
#define OW_AVX2_FLOAT_GEMM(fn) [OW_KPATH_AVX2] = {0}
#define OW_AVX2_VNNI_FLOAT_GEMM(fn) [OW_KPATH_AVX2_VNNI] = {0}
#define OW_AVX2_VNNI(fn) [OW_KPATH_AVX2_VNNI] = {0}
#define OW_AVX512(fn) [OW_KPATH_AVX512] = {0}
#define OW_AVX512_FLOAT_GEMM(fn) [OW_KPATH_AVX512] = {0}
#endif
#if OW_NEON_KERNELS
#define OW_NEON(fn) OW_SLOT(OW_KPATH_NEON, fn)
#define OW_NEON_DOTPROD(fn) OW_SLOT(OW_KPATH_NEON_DOTPROD, fn)
#else
#define OW_NEON(fn) [OW_KPATH_NEON] = {0}
#define OW_NEON_DOTPROD(fn) [OW_KPATH_NEON_DOTPROD] = {0}
#endif
/* the aarch64 dot kernels: one source (vec_dot_neon.inc) built for plain NEON and for NEON + dotprod */
#define OW_NEON_DOTS(name) OW_NEON(vec_dot_##name##_neon), OW_NEON_DOTPROD(vec_dot_##name##_neon_dotprod)

/* the common pattern of the x86 dot kernels: one source built for AVX2, AVX2 + AVX-VNNI and (as a 256-bit kernel
 * with EVEX VNNI, suffix _avx512_256, or a 512-bit one, suffix _avx512) AVX-512 */
#define OW_DOTS(name, avx512_suffix)                                                              \
    OW_GENERIC(vec_dot_##name##_generic), OW_AVX2(vec_dot_##name##_avx2),                          \
        OW_AVX2_VNNI(vec_dot_##name##_avx2_vnni), OW_AVX512(vec_dot_##name##_##avx512_suffix)

/* activation types: the generic quantizer and the AVX2 one, which every SIMD path falls back to */
#define OW_ACT_QUANT(name) .from_float = {OW_GENERIC(act_quant_##name##_generic), OW_AVX2(act_quant_##name##_avx2)}

/* a ggml weight type the executor takes: pairs with `act`, has a row dequantizer, may be repacked (-1, NULL: not) */
#define OW_WEIGHT(act, row, repack_type, repack_fn) \
    .act_type = (act), .executor_weight = 1, .to_float = dequant_row_##row, .repack_to = (repack_type), .repack = (repack_fn)
/* a type that is only ever an activation */
#define OW_ACT_ONLY .act_type = -1, .repack_to = -1

static const ow_type_traits_t ggml_rows[OW_GGML_TYPE_SLOTS] = {
    [OW_TYPE_F32] = {.name = "f32", .block_size = 1, .block_bytes = 4, OW_WEIGHT(OW_TYPE_F32, f32, -1, NULL),
                     .from_float = {OW_GENERIC(act_quant_f32_generic)}, .vec_dot = {OW_DOTS(f32_f32, avx512)}},
    [OW_TYPE_F16] = {.name = "f16", .block_size = 1, .block_bytes = 2, OW_WEIGHT(OW_TYPE_F16, f16, -1, NULL),
                     OW_ACT_QUANT(f16), .vec_dot = {OW_DOTS(f16_f16, avx512_256), OW_NEON_DOTS(f16_f16)},
                     /* several vectors: a float GEMM from 32 vectors (perf-log entry 28; 512-bit on the AVX-512
                      * path where ow_wide_tiles), below that a tile of 12 FMA chains bit-identical to the AVX2
                      * dot, two rows per zmm on the AVX-512 path where ow_wide_tiles (entries 22, 24) */
                     .tile = {OW_AVX2_FLOAT_GEMM(vec_dot_f16_f16_gemm_avx2), OW_AVX2_VNNI_FLOAT_GEMM(vec_dot_f16_f16_gemm_avx2),
                              OW_AVX512_FLOAT_GEMM(vec_dot_f16_f16_gemm_avx512)}},
    [OW_TYPE_Q4_0] = {.name = "q4_0", .block_size = OW_QK, .block_bytes = sizeof(ow_block_q4_0),
                      OW_WEIGHT(OW_TYPE_Q8_0, q4_0, -1, NULL), .vec_dot = {OW_DOTS(q4_0_q8_0, avx512_256), OW_NEON_DOTS(q4_0_q8_0)},
                      .tile = {OW_AVX2_FLOAT_GEMM(vec_dot_q4_0_q8_0_gemm_avx2), OW_AVX2_VNNI_FLOAT_GEMM(vec_dot_q4_0_q8_0_gemm_avx2_vnni),
                               OW_AVX512_FLOAT_GEMM(vec_dot_q4_0_q8_0_gemm_avx512)}},
    [OW_TYPE_Q4_1] = {.name = "q4_1", .block_size = OW_QK, .block_bytes = sizeof(ow_block_q4_1),
                      OW_WEIGHT(OW_TYPE_Q8_1, q4_1, OW_TYPE_Q4_1_R16, ow_repack_q4_1_r16),
                      .vec_dot = {OW_DOTS(q4_1_q8_1, avx512_256), OW_NEON_DOTS(q4_1_q8_1)},
                      .tile = {OW_AVX2_FLOAT_GEMM(vec_dot_q4_1_q8_1_gemm_avx2), OW_AVX2_VNNI_FLOAT_GEMM(vec_dot_q4_1_q8_1_gemm_avx2_vnni),
                               OW_AVX512_FLOAT_GEMM(vec_dot_q4_1_q8_1_gemm_avx512)}},
    [OW_TYPE_Q5_0] = {.name = "q5_0", .block_size = OW_QK, .block_bytes = sizeof(ow_block_q5_0),
                      OW_WEIGHT(OW_TYPE_Q8_0, q5_0, OW_TYPE_Q8_0_R16, ow_repack_q5_0_r16),
                      .vec_dot = {OW_DOTS(q5_0_q8_0, avx512_256), OW_NEON_DOTS(q5_0_q8_0)},
                      .tile = {OW_AVX2_FLOAT_GEMM(vec_dot_q5_0_q8_0_gemm_avx2), OW_AVX2_VNNI_FLOAT_GEMM(vec_dot_q5_0_q8_0_gemm_avx2_vnni),
                               OW_AVX512_FLOAT_GEMM(vec_dot_q5_0_q8_0_gemm_avx512)}},
    [OW_TYPE_Q5_1] = {.name = "q5_1", .block_size = OW_QK, .block_bytes = sizeof(ow_block_q5_1),
                      OW_WEIGHT(OW_TYPE_Q8_1, q5_1, -1, NULL), .vec_dot = {OW_DOTS(q5_1_q8_1, avx512_256)},
                      .tile = {OW_AVX2_FLOAT_GEMM(vec_dot_q5_1_q8_1_gemm_avx2), OW_AVX2_VNNI_FLOAT_GEMM(vec_dot_q5_1_q8_1_gemm_avx2_vnni),
                               OW_AVX512_FLOAT_GEMM(vec_dot_q5_1_q8_1_gemm_avx512)}},
    [OW_TYPE_Q8_0] = {.name = "q8_0", .block_size = OW_QK, .block_bytes = sizeof(ow_block_q8_0),
                      OW_WEIGHT(OW_TYPE_Q8_0, q8_0, OW_TYPE_Q8_0_R16, ow_repack_q8_0_r16),
                      OW_ACT_QUANT(q8_0), .vec_dot = {OW_DOTS(q8_0_q8_0, avx512), OW_NEON_DOTS(q8_0_q8_0)},
                      .tile = {OW_AVX2_FLOAT_GEMM(vec_dot_q8_0_q8_0_gemm_avx2), OW_AVX2_VNNI_FLOAT_GEMM(vec_dot_q8_0_q8_0_gemm_avx2_vnni)}},
    [OW_TYPE_Q8_1] = {.name = "q8_1", .block_size = OW_QK, .block_bytes = sizeof(ow_block_q8_1), OW_ACT_ONLY,
                      OW_ACT_QUANT(q8_1)},
    [OW_TYPE_Q4_K] = {.name = "q4_K", .block_size = OW_QK_K, .block_bytes = sizeof(ow_block_q4_K),
                      OW_WEIGHT(OW_TYPE_Q8_K, q4_K, -1, NULL), .vec_dot = {OW_DOTS(q4_K_q8_K, avx512), OW_NEON_DOTS(q4_K_q8_K)},
                      /* from 32 vectors the int8 GEMM with rows in the lanes (perf-log 30), below it the tiles */
                      .tile = {OW_AVX2_FLOAT_GEMM(vec_dot_q4_K_q8_K_gemm_avx2), OW_AVX2_VNNI_FLOAT_GEMM(vec_dot_q4_K_q8_K_gemm_avx2_vnni),
                               OW_AVX512_FLOAT_GEMM(vec_dot_q4_K_q8_K_gemm_avx512)}},
    [OW_TYPE_Q5_K] = {.name = "q5_K", .block_size = OW_QK_K, .block_bytes = sizeof(ow_block_q5_K),
                      OW_WEIGHT(OW_TYPE_Q8_K, q5_K, -1, NULL), .vec_dot = {OW_DOTS(q5_K_q8_K, avx512)},
                      .tile = {OW_AVX2_FLOAT_GEMM(vec_dot_q5_K_q8_K_gemm_avx2), OW_AVX2_VNNI_FLOAT_GEMM(vec_dot_q5_K_q8_K_gemm_avx2_vnni),
                               OW_AVX512_FLOAT_GEMM(vec_dot_q5_K_q8_K_gemm_avx512)}},
    [OW_TYPE_Q6_K] = {.name = "q6_K", .block_size = OW_QK_K, .block_bytes = sizeof(ow_block_q6_K),
                      OW_WEIGHT(OW_TYPE_Q8_K, q6_K, -1, NULL), .vec_dot = {OW_DOTS(q6_K_q8_K, avx512), OW_NEON_DOTS(q6_K_q8_K)},
                      .tile = {OW_AVX2_FLOAT_GEMM(vec_dot_q6_K_q8_K_gemm_avx2), OW_AVX2_VNNI_FLOAT_GEMM(vec_dot_q6_K_q8_K_gemm_avx2_vnni),
                               OW_AVX512_FLOAT_GEMM(vec_dot_q6_K_q8_K_gemm_avx512)}},
    [OW_TYPE_Q8_K] = {.name = "q8_K", .block_size = OW_QK_K, .block_bytes = sizeof(ow_block_q8_K), OW_ACT_ONLY,
                      OW_ACT_QUANT(q8_K)},
    /* issue 10's types. Q2_K, Q3_K: decode kernels of every x86 path (vec_dot_q23k_bf16_x86_256.inc; perf-log 34), BF16
     * generic and AVX2 ones; Q2_K's and Q3_K's prefill from 32 vectors is the rows GEMM of every x86 path (perf-log
     * 31). IQ4_NL and IQ4_XS: decode kernels of every x86 path
     * (vec_dot_x86_256.inc) and the rows GEMMs of Q8_0 / the K-quants (perf-log 33). NEON kernels for IQ4_NL,
     * IQ4_XS, BF16 (Q2_K, Q3_K: generic on aarch64) */
    [OW_TYPE_Q2_K] = {.name = "q2_K", .block_size = OW_QK_K, .block_bytes = sizeof(ow_block_q2_K),
                      OW_WEIGHT(OW_TYPE_Q8_K, q2_K, -1, NULL),
                      .vec_dot = {OW_DOTS(q2_K_q8_K, avx512_256)},
                      .tile = {OW_AVX2_FLOAT_GEMM(vec_dot_q2_K_q8_K_gemm_avx2), OW_AVX2_VNNI_FLOAT_GEMM(vec_dot_q2_K_q8_K_gemm_avx2_vnni),
                               OW_AVX512_FLOAT_GEMM(vec_dot_q2_K_q8_K_gemm_avx512)}},
    [OW_TYPE_Q3_K] = {.name = "q3_K", .block_size = OW_QK_K, .block_bytes = sizeof(ow_block_q3_K),
                      OW_WEIGHT(OW_TYPE_Q8_K, q3_K, -1, NULL),
                      .vec_dot = {OW_DOTS(q3_K_q8_K, avx512_256)},
                      .tile = {OW_AVX2_FLOAT_GEMM(vec_dot_q3_K_q8_K_gemm_avx2), OW_AVX2_VNNI_FLOAT_GEMM(vec_dot_q3_K_q8_K_gemm_avx2_vnni),
                               OW_AVX512_FLOAT_GEMM(vec_dot_q3_K_q8_K_gemm_avx512)}},
    [OW_TYPE_IQ4_NL] = {.name = "iq4_nl", .block_size = OW_QK, .block_bytes = sizeof(ow_block_iq4_nl),
                        OW_WEIGHT(OW_TYPE_Q8_0, iq4_nl, -1, NULL),
                        .vec_dot = {OW_DOTS(iq4_nl_q8_0, avx512_256), OW_NEON_DOTS(iq4_nl_q8_0)},
                        /* from 32 vectors Q8_0's int8 GEMM with rows in the lanes (perf-log 33) */
                        .tile = {OW_AVX2_FLOAT_GEMM(vec_dot_iq4_nl_q8_0_gemm_avx2),
                                 OW_AVX2_VNNI_FLOAT_GEMM(vec_dot_iq4_nl_q8_0_gemm_avx2_vnni),
                                 OW_AVX512_FLOAT_GEMM(vec_dot_iq4_nl_q8_0_gemm_avx512)}},
    [OW_TYPE_IQ4_XS] = {.name = "iq4_xs", .block_size = OW_QK_K, .block_bytes = sizeof(ow_block_iq4_xs),
                        OW_WEIGHT(OW_TYPE_Q8_K, iq4_xs, -1, NULL),
                        .vec_dot = {OW_DOTS(iq4_xs_q8_K, avx512_256), OW_NEON_DOTS(iq4_xs_q8_K)},
                        .tile = {OW_AVX2_FLOAT_GEMM(vec_dot_iq4_xs_q8_K_gemm_avx2),
                                 OW_AVX2_VNNI_FLOAT_GEMM(vec_dot_iq4_xs_q8_K_gemm_avx2_vnni),
                                 OW_AVX512_FLOAT_GEMM(vec_dot_iq4_xs_q8_K_gemm_avx512)}},
    /* F32 activations: exact, and a bf16 weight is one shift from float32 (no AVX512-BF16 needed); with
     * AVX512-BF16 the avx512 tile rounds them to bf16 for vdpbf16ps (vec_dot_bf16_avx512.c) */
    [OW_TYPE_BF16] = {.name = "bf16", .block_size = 1, .block_bytes = 2, OW_WEIGHT(OW_TYPE_F32, bf16, -1, NULL),
                      .vec_dot = {OW_GENERIC(vec_dot_bf16_f32_generic), OW_AVX2(vec_dot_bf16_f32_avx2),
                                  OW_NEON_DOTS(bf16_f32)},
                      .tile = {OW_AVX2_FLOAT_GEMM(vec_dot_bf16_f32_gemm_avx2),
                               OW_AVX2_VNNI_FLOAT_GEMM(vec_dot_bf16_f32_gemm_avx2),
                               OW_AVX512_FLOAT_GEMM(vec_dot_bf16_f32_gemm_avx512)}},
};

/* onewell's load-time layouts (never in a file); their rows may be padded, so block_bytes excludes padding */
static const ow_type_traits_t own_rows[OW_OWN_TYPE_SLOTS] = {
    [OW_TYPE_Q8_0_R16 - OW_OWN_TYPE_BASE] = {
        .name = "q8_0_r16", .block_size = OW_QK, .block_bytes = OW_QK + 2,   /* quants + fp16 scale */
        .act_type = OW_ACT_Q8_0_R16, .repack_to = -1, .repacked = 1,
        .vec_dot = {OW_GENERIC(vec_dot_q8_0r16_q8_0r16_generic)},
        /* AVX2 + AVX-VNNI CPUs run the AVX2 kernel (fallback): measured and tested on AVX2 (perf-log entry 10) */
        .tile = {OW_AVX2(vec_dot_q8_0r16_q8_0r16_avx2),
                 /* from 32 vectors the rows GEMM, below it the R16 tile (perf-log 37) */
                 OW_AVX512_FLOAT_GEMM(vec_dot_q8_0r16_q8_0r16_gemm_avx512)}},
    [OW_TYPE_Q8_0_R8 - OW_OWN_TYPE_BASE] = {
        .name = "q8_0_r8", .block_size = OW_QK, .block_bytes = OW_QK + 2,   /* the file's bytes, reordered */
        .act_type = OW_TYPE_Q8_0, .repack_to = -1, .repacked = 1, .repack = ow_repack_q8_0_r8,
        .repack_from = OW_TYPE_Q8_0, .vec_dot = {OW_GENERIC(vec_dot_q8_0r8_q8_0_generic)},
        /* AVX2 + AVX-VNNI and AVX-512 CPUs run the AVX2 kernel (fallback); from 32 vectors the Q8_0 GEMM the
         * rows_gemm knob names (float or int8 rows), on panels built from R8 rows */
        .tile = {OW_AVX2_FLOAT_GEMM(vec_dot_q8_0r8_q8_0_avx2)}},
    /* the same for Q4_1, Q5_0 and Q4_0 (q4_r8.h); from 32 vectors the file types' GEMMs (their rows GEMMs on panels
     * built from R8 rows, else on rows turned back) */
    [OW_TYPE_Q4_1_R8 - OW_OWN_TYPE_BASE] = {
        .name = "q4_1_r8", .block_size = OW_QK, .block_bytes = sizeof(ow_block_q4_1),
        .act_type = OW_TYPE_Q8_1, .repack_to = -1, .repacked = 1, .repack = ow_repack_q4_1_r8,
        .repack_from = OW_TYPE_Q4_1, .vec_dot = {OW_GENERIC(vec_dot_q4_1r8_q8_1_generic)},
        .tile = {OW_AVX2_FLOAT_GEMM(vec_dot_q4_1r8_q8_1_avx2)}},
    [OW_TYPE_Q5_0_R8 - OW_OWN_TYPE_BASE] = {
        .name = "q5_0_r8", .block_size = OW_QK, .block_bytes = sizeof(ow_block_q5_0),
        .act_type = OW_TYPE_Q8_0, .repack_to = -1, .repacked = 1, .repack = ow_repack_q5_0_r8,
        .repack_from = OW_TYPE_Q5_0, .vec_dot = {OW_GENERIC(vec_dot_q5_0r8_q8_0_generic)},
        .tile = {OW_AVX2_FLOAT_GEMM(vec_dot_q5_0r8_q8_0_avx2)}},
    [OW_TYPE_Q4_0_R8 - OW_OWN_TYPE_BASE] = {
        .name = "q4_0_r8", .block_size = OW_QK, .block_bytes = sizeof(ow_block_q4_0),
        .act_type = OW_TYPE_Q8_0, .repack_to = -1, .repacked = 1, .repack = ow_repack_q4_0_r8,
        .repack_from = OW_TYPE_Q4_0, .vec_dot = {OW_GENERIC(vec_dot_q4_0r8_q8_0_generic)},
        .tile = {OW_AVX2_FLOAT_GEMM(vec_dot_q4_0r8_q8_0_avx2)}},
    /* IQ4_NL in Q4_0 R8's byte order, the indices looked up per chunk; from 32 vectors the IQ4_NL GEMM */
    [OW_TYPE_IQ4_NL_R8 - OW_OWN_TYPE_BASE] = {
        .name = "iq4_nl_r8", .block_size = OW_QK, .block_bytes = sizeof(ow_block_iq4_nl),
        .act_type = OW_TYPE_Q8_0, .repack_to = -1, .repacked = 1, .repack = ow_repack_iq4_nl_r8,
        .repack_from = OW_TYPE_IQ4_NL, .vec_dot = {OW_GENERIC(vec_dot_iq4_nlr8_q8_0_generic)},
        .tile = {OW_AVX2_FLOAT_GEMM(vec_dot_iq4_nlr8_q8_0_avx2)}},
    /* Q4_K with sub-block k in int32 lane k, the scales unpacked (qk_r8.h); from 32 vectors the Q4_K GEMM */
    [OW_TYPE_Q4_K_R8 - OW_OWN_TYPE_BASE] = {
        .name = "q4_k_r8", .block_size = OW_QK_K, .block_bytes = OW_Q4_K_R8_BLOCK_BYTES,
        .act_type = OW_TYPE_Q8_K, .repack_to = -1, .repacked = 1, .repack = ow_repack_q4_k_r8,
        .repack_from = OW_TYPE_Q4_K, .vec_dot = {OW_GENERIC(vec_dot_q4_kr8_q8_K_generic)},
        .tile = {OW_AVX2_FLOAT_GEMM(vec_dot_q4_kr8_q8_K_avx2)}},
    [OW_TYPE_Q5_K_R8 - OW_OWN_TYPE_BASE] = {   /* ... Q5_K: Q4_K R8 with the fifth bits as Q5_0 R8's */
        .name = "q5_k_r8", .block_size = OW_QK_K, .block_bytes = OW_Q5_K_R8_BLOCK_BYTES,
        .act_type = OW_TYPE_Q8_K, .repack_to = -1, .repacked = 1, .repack = ow_repack_q5_k_r8,
        .repack_from = OW_TYPE_Q5_K, .vec_dot = {OW_GENERIC(vec_dot_q5_kr8_q8_K_generic)},
        .tile = {OW_AVX2_FLOAT_GEMM(vec_dot_q5_kr8_q8_K_avx2)}},
    /* Q6_K with sub-block p in int16 word p (qk_r8.h); from 32 vectors the Q6_K GEMM */
    [OW_TYPE_Q6_K_R8 - OW_OWN_TYPE_BASE] = {
        .name = "q6_k_r8", .block_size = OW_QK_K, .block_bytes = OW_Q6_K_R8_BLOCK_BYTES,
        .act_type = OW_TYPE_Q8_K, .repack_to = -1, .repacked = 1, .repack = ow_repack_q6_k_r8,
        .repack_from = OW_TYPE_Q6_K, .vec_dot = {OW_GENERIC(vec_dot_q6_kr8_q8_K_generic)},
        .tile = {OW_AVX2_FLOAT_GEMM(vec_dot_q6_kr8_q8_K_avx2)}},
    /* IQ4_XS with sub-block k in int32 lane k, the scales unpacked (qk_r8.h); from 32 vectors the IQ4_XS GEMM */
    [OW_TYPE_IQ4_XS_R8 - OW_OWN_TYPE_BASE] = {
        .name = "iq4_xs_r8", .block_size = OW_QK_K, .block_bytes = OW_IQ4_XS_R8_BLOCK_BYTES,
        .act_type = OW_TYPE_Q8_K, .repack_to = -1, .repacked = 1, .repack = ow_repack_iq4_xs_r8,
        .repack_from = OW_TYPE_IQ4_XS, .vec_dot = {OW_GENERIC(vec_dot_iq4_xsr8_q8_K_generic)},
        .tile = {OW_AVX2_FLOAT_GEMM(vec_dot_iq4_xsr8_q8_K_avx2)}},
    [OW_ACT_Q8_0_R16 - OW_OWN_TYPE_BASE] = {
        .name = "act_q8_0_r16", .block_size = OW_QK, .block_bytes = OW_QK + 4 + 4,   /* + f32 scale, i32 seed */
        OW_ACT_ONLY, .repacked = 1, OW_ACT_QUANT(q8_0r16)},
    [OW_TYPE_Q4_1_R16 - OW_OWN_TYPE_BASE] = {
        .name = "q4_1_r16", .block_size = OW_QK, .block_bytes = OW_QK / 2 + 2 + 2,   /* nibbles + fp16 d, m */
        .act_type = OW_ACT_Q8_0_R16, .repack_to = -1, .repacked = 1,
        .vec_dot = {OW_GENERIC(vec_dot_q4_1r16_q8_0r16_generic)},
        .tile = {OW_AVX2(vec_dot_q4_1r16_q8_0r16_avx2),
                 /* from 32 vectors the rows GEMM, below it the streaming tile (perf-log 36) */
                 OW_AVX512_FLOAT_GEMM(vec_dot_q4_1r16_q8_0r16_gemm_avx512)}},
};

const ow_type_traits_t *ow_type_traits(int t) {
    const ow_type_traits_t *row = NULL;
    if (t >= 0 && t < OW_GGML_TYPE_SLOTS) row = &ggml_rows[t];
    else if (t >= OW_OWN_TYPE_BASE && t < OW_OWN_TYPE_BASE + OW_OWN_TYPE_SLOTS) row = &own_rows[t - OW_OWN_TYPE_BASE];
    return row && row->name ? row : NULL;
}

int ow_kpath_fallback(ow_kpath p) {
    switch (p) {
    case OW_KPATH_AVX2: return OW_KPATH_GENERIC;
    case OW_KPATH_AVX2_VNNI: return OW_KPATH_AVX2;
    case OW_KPATH_AVX512: return OW_KPATH_AVX2;
    case OW_KPATH_NEON: return OW_KPATH_GENERIC;
    case OW_KPATH_NEON_DOTPROD: return OW_KPATH_NEON;
    default: return -1;
    }
}

void ow_type_kernel(const ow_type_traits_t *t, ow_kpath p, ow_tile_slot *tile, ow_dot_slot *dot) {
    *tile = (ow_tile_slot){0};
    *dot = (ow_dot_slot){0};
    for (int q = (int)p; t && q >= 0 && q < OW_KPATH_COUNT; q = ow_kpath_fallback((ow_kpath)q)) {
        if (t->tile[q].fn) { *tile = t->tile[q]; return; }
        if (t->vec_dot[q].fn) { *dot = t->vec_dot[q]; return; }
    }
}

ow_act_quant_slot ow_type_act_quant(const ow_type_traits_t *t, ow_kpath p) {
    for (int q = (int)p; t && q >= 0 && q < OW_KPATH_COUNT; q = ow_kpath_fallback((ow_kpath)q))
        if (t->from_float[q].fn) return t->from_float[q];
    return (ow_act_quant_slot){0};
}
