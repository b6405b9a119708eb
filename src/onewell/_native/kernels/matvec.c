/* Type table, kernel-path dispatch and the row-range matmul loop. */
#include "matvec.h"

#include <string.h>

#include "q4_1_r16.h"
#include "vec_dot.h"

/* --- types ------------------------------------------------------------------------------------------------ */

int64_t ow_type_block_size(ow_ggml_type t) {
    switch (t) {
    case OW_TYPE_F32: case OW_TYPE_F16: return 1;
    case OW_TYPE_Q4_0: case OW_TYPE_Q4_1: case OW_TYPE_Q5_0: case OW_TYPE_Q5_1:
    case OW_TYPE_Q8_0: case OW_TYPE_Q8_1: case OW_TYPE_Q8_0_R16: case OW_ACT_Q8_0_R16:
    case OW_TYPE_Q4_1_R16: return OW_QK;
    case OW_TYPE_Q4_K: case OW_TYPE_Q5_K: case OW_TYPE_Q6_K: case OW_TYPE_Q8_K: return OW_QK_K;
    }
    return 0;
}

size_t ow_type_block_bytes(ow_ggml_type t) {
    switch (t) {
    case OW_TYPE_F32: return 4;
    case OW_TYPE_F16: return 2;
    case OW_TYPE_Q4_0: return sizeof(ow_block_q4_0);
    case OW_TYPE_Q4_1: return sizeof(ow_block_q4_1);
    case OW_TYPE_Q5_0: return sizeof(ow_block_q5_0);
    case OW_TYPE_Q5_1: return sizeof(ow_block_q5_1);
    case OW_TYPE_Q8_0: return sizeof(ow_block_q8_0);
    case OW_TYPE_Q8_1: return sizeof(ow_block_q8_1);
    case OW_TYPE_Q4_K: return sizeof(ow_block_q4_K);
    case OW_TYPE_Q5_K: return sizeof(ow_block_q5_K);
    case OW_TYPE_Q6_K: return sizeof(ow_block_q6_K);
    case OW_TYPE_Q8_K: return sizeof(ow_block_q8_K);
    /* the repacked layouts are not blocked in memory: bytes per 32 elements, padding excluded */
    case OW_TYPE_Q8_0_R16: return OW_QK + 2;      /* quants + fp16 scale */
    case OW_ACT_Q8_0_R16: return OW_QK + 4 + 4;   /* quants + f32 scale + int32 seed */
    case OW_TYPE_Q4_1_R16: return OW_QK / 2 + 2 + 2;   /* nibbles + fp16 d + fp16 m */
    }
    return 0;
}

int ow_wtype_supported(int wt) {
    switch (wt) {
    case OW_TYPE_F32: case OW_TYPE_F16: case OW_TYPE_Q4_0: case OW_TYPE_Q4_1: case OW_TYPE_Q5_0:
    case OW_TYPE_Q5_1: case OW_TYPE_Q8_0: case OW_TYPE_Q4_K: case OW_TYPE_Q5_K: case OW_TYPE_Q6_K:
    case OW_TYPE_Q8_0_R16: case OW_TYPE_Q4_1_R16:
        return 1;
    default:
        return 0;
    }
}

ow_atype ow_act_type_for(ow_wtype wt) {
    switch (wt) {
    case OW_TYPE_F32: return OW_TYPE_F32;
    case OW_TYPE_F16: return OW_TYPE_F16;
    case OW_TYPE_Q4_1: case OW_TYPE_Q5_1: return OW_TYPE_Q8_1;
    case OW_TYPE_Q4_K: case OW_TYPE_Q5_K: case OW_TYPE_Q6_K: return OW_TYPE_Q8_K;
    case OW_TYPE_Q8_0_R16: case OW_TYPE_Q4_1_R16: return OW_ACT_Q8_0_R16;
    default: return OW_TYPE_Q8_0;   /* Q4_0, Q5_0, Q8_0 */
    }
}

size_t ow_act_row_bytes(ow_atype at, int64_t n_cols) {
    const int64_t bs = ow_type_block_size(at);
    return bs ? (size_t)(n_cols / bs) * ow_type_block_bytes(at) : 0;
}

int ow_row_bytes_ok(ow_wtype wt, int64_t n_cols, size_t row_bytes) {
    const int64_t bs = ow_type_block_size(wt);
    if (!ow_wtype_supported(wt) || bs <= 0 || n_cols <= 0 || n_cols % bs) return 0;
    const size_t packed = (size_t)(n_cols / bs) * ow_type_block_bytes(wt);
    return wt == OW_TYPE_Q8_0_R16 || wt == OW_TYPE_Q4_1_R16 ? row_bytes >= packed : row_bytes == packed;
}

size_t ow_q8_0_r16_row_stride(int64_t n_cols) { return ow_r16_row_stride(n_cols); }
size_t ow_q4_1_r16_row_stride(int64_t n_cols) { return ow_q41r16_row_stride(n_cols); }

/* One core's memory-level parallelism, not instructions, limits the R16 kernel (docs/perf-log.md, entry 3):
 * streaming rows one at a time with software prefetch ahead of the stream beat 4-row tiles without it. */
static _Atomic size_t r16_prefetch_bytes = OW_R16_DEFAULT_PREFETCH;
static _Atomic int r16_row_stream_on = 1;
void ow_r16_set_prefetch(size_t bytes) { r16_prefetch_bytes = bytes; }
size_t ow_r16_prefetch(void) { return r16_prefetch_bytes; }
void ow_r16_set_row_stream(int on) { r16_row_stream_on = on != 0; }
int ow_r16_row_stream(void) { return r16_row_stream_on; }

/* --- paths ------------------------------------------------------------------------------------------------ */

static int cpu_has_avx2(void) { const ow_cpu_features *f = ow_cpu(); return f->avx2 && f->fma && f->f16c; }
static int cpu_has_avx512(void) {
    const ow_cpu_features *f = ow_cpu();
    return cpu_has_avx2() && f->avx512f && f->avx512bw && f->avx512vl && f->avx512_vnni;
}

int ow_kpath_available(ow_kpath p) {
#if OW_X86_KERNELS
    switch (p) {
    case OW_KPATH_GENERIC: return 1;
    case OW_KPATH_AVX2: return cpu_has_avx2();
    case OW_KPATH_AVX2_VNNI: return cpu_has_avx2() && ow_cpu()->avx_vnni;
    case OW_KPATH_AVX512: return cpu_has_avx512();
    default: return 0;
    }
#else
    return p == OW_KPATH_GENERIC;
#endif
}

ow_kpath ow_kpath_for_isa(ow_isa isa) {
    if (isa >= OW_ISA_AVX512 && ow_kpath_available(OW_KPATH_AVX512)) return OW_KPATH_AVX512;
    if (isa >= OW_ISA_AVX2 && ow_kpath_available(OW_KPATH_AVX2_VNNI)) return OW_KPATH_AVX2_VNNI;
    if (isa >= OW_ISA_AVX2 && ow_kpath_available(OW_KPATH_AVX2)) return OW_KPATH_AVX2;
    return OW_KPATH_GENERIC;
}

const char *ow_kpath_name(ow_kpath p) {
    switch (p) {
    case OW_KPATH_AVX2: return "avx2";
    case OW_KPATH_AVX2_VNNI: return "avx2-vnni";
    case OW_KPATH_AVX512: return "avx512";
    default: return "generic";
    }
}

/* --- dispatch --------------------------------------------------------------------------------------------- */

#if OW_X86_KERNELS
#define OW_SIMD_DOT(name)                                                 \
    case OW_KPATH_AVX2: return vec_dot_##name##_avx2;                     \
    case OW_KPATH_AVX2_VNNI: return vec_dot_##name##_avx2_vnni;
#define OW_DOT_CASE(name, wt, avx512_fn)                                  \
    case wt:                                                              \
        switch (path) {                                                   \
        OW_SIMD_DOT(name)                                                 \
        case OW_KPATH_AVX512: return avx512_fn;                           \
        default: return vec_dot_##name##_generic;                         \
        }
#else
#define OW_DOT_CASE(name, wt, avx512_fn) case wt: return vec_dot_##name##_generic;
#endif

static ow_vec_dot_fn dot_kernel(ow_wtype wt, ow_kpath path) {
    switch (wt) {
    OW_DOT_CASE(f32_f32, OW_TYPE_F32, vec_dot_f32_f32_avx512)
    OW_DOT_CASE(f16_f16, OW_TYPE_F16, vec_dot_f16_f16_avx512)
    OW_DOT_CASE(q4_0_q8_0, OW_TYPE_Q4_0, vec_dot_q4_0_q8_0_avx512_256)
    OW_DOT_CASE(q4_1_q8_1, OW_TYPE_Q4_1, vec_dot_q4_1_q8_1_avx512_256)
    OW_DOT_CASE(q5_0_q8_0, OW_TYPE_Q5_0, vec_dot_q5_0_q8_0_avx512_256)
    OW_DOT_CASE(q5_1_q8_1, OW_TYPE_Q5_1, vec_dot_q5_1_q8_1_avx512_256)
    OW_DOT_CASE(q8_0_q8_0, OW_TYPE_Q8_0, vec_dot_q8_0_q8_0_avx512)
    OW_DOT_CASE(q4_K_q8_K, OW_TYPE_Q4_K, vec_dot_q4_K_q8_K_avx512)
    OW_DOT_CASE(q5_K_q8_K, OW_TYPE_Q5_K, vec_dot_q5_K_q8_K_avx512)
    OW_DOT_CASE(q6_K_q8_K, OW_TYPE_Q6_K, vec_dot_q6_K_q8_K_avx512)
    /* the AVX-512 path runs its tile kernel (tile_kernel); never reached with that path */
    OW_DOT_CASE(q8_0r16_q8_0r16, OW_TYPE_Q8_0_R16, vec_dot_q8_0r16_q8_0r16_generic)
    /* every path but AVX-512 (the only one the plan repacks for) runs the generic twin */
    case OW_TYPE_Q4_1_R16: return vec_dot_q4_1r16_q8_0r16_generic;
    default: return NULL;
    }
}

/* kernels that take every activation vector in one call (the others are called once per vector) */
static ow_tile_fn tile_kernel(ow_wtype wt, ow_kpath path) {
#if OW_X86_KERNELS
    if (wt == OW_TYPE_Q8_0_R16 && path == OW_KPATH_AVX512) return vec_dot_q8_0r16_q8_0r16_avx512;
    if (wt == OW_TYPE_Q4_1_R16 && path == OW_KPATH_AVX512) return vec_dot_q4_1r16_q8_0r16_avx512;
#else
    (void)wt; (void)path;
#endif
    return NULL;
}

static ow_act_quant_fn act_quantizer(ow_atype at, ow_kpath path) {
#if OW_X86_KERNELS
    if (path != OW_KPATH_GENERIC) {
        switch (at) {
        case OW_TYPE_F16: return act_quant_f16_avx2;
        case OW_TYPE_Q8_0: return act_quant_q8_0_avx2;
        case OW_TYPE_Q8_1: return act_quant_q8_1_avx2;
        case OW_TYPE_Q8_K: return act_quant_q8_K_avx2;
        case OW_ACT_Q8_0_R16: return act_quant_q8_0r16_avx2;
        default: break;
        }
    }
#else
    (void)path;
#endif
    switch (at) {
    case OW_TYPE_F16: return act_quant_f16_generic;
    case OW_TYPE_Q8_0: return act_quant_q8_0_generic;
    case OW_TYPE_Q8_1: return act_quant_q8_1_generic;
    case OW_TYPE_Q8_K: return act_quant_q8_K_generic;
    case OW_ACT_Q8_0_R16: return act_quant_q8_0r16_generic;
    default: return NULL;
    }
}

/* --- work ------------------------------------------------------------------------------------------------- */

void ow_quantize_act_path(ow_atype at, const float *x, void *xq, int64_t n_cols, ow_kpath path) {
    if (at == OW_TYPE_F32) { memcpy(xq, x, (size_t)n_cols * sizeof(float)); return; }
    const ow_act_quant_fn quantize = act_quantizer(at, path);
    if (quantize) quantize(x, xq, n_cols);
}

void ow_quantize_act(ow_atype at, const float *x, void *xq, int64_t n_cols, ow_isa isa) {
    ow_quantize_act_path(at, x, xq, n_cols, ow_kpath_for_isa(isa));
}

void ow_matmul_rows_path(ow_wtype wt, const uint8_t *w, size_t row_bytes, int64_t n_cols,
                         const void *xq, size_t xq_stride, int n_vec, float *y, int64_t y_stride,
                         int64_t r0, int64_t r1, ow_kpath path) {
    const ow_tile_fn tile_fn = tile_kernel(wt, path);
    if (tile_fn) {
        for (int64_t r = r0; r < r1; r += OW_ROW_TILE) {
            const int nr = (int)(r1 - r < OW_ROW_TILE ? r1 - r : OW_ROW_TILE);
            tile_fn(n_cols, w + (size_t)r * row_bytes, row_bytes, nr, xq, xq_stride, n_vec, y + r, y_stride);
        }
        return;
    }
    const ow_vec_dot_fn dot = dot_kernel(wt, path);
    if (!dot) return;
    const uint8_t *xbase = xq;
    for (int64_t r = r0; r < r1; r += OW_ROW_TILE) {
        const int nr = (int)(r1 - r < OW_ROW_TILE ? r1 - r : OW_ROW_TILE);
        const uint8_t *tile = w + (size_t)r * row_bytes;
        /* the first vector pulls the tile's rows from memory; the others find them in L1/L2 */
        for (int v = 0; v < n_vec; v++) {
            float s[OW_ROW_TILE];
            dot(n_cols, tile, row_bytes, nr, xbase + (size_t)v * xq_stride, s);
            for (int i = 0; i < nr; i++) y[(int64_t)v * y_stride + r + i] = s[i];
        }
    }
}

void ow_matmul_rows(ow_wtype wt, const uint8_t *w, size_t row_bytes, int64_t n_cols,
                    const void *xq, size_t xq_stride, int n_vec, float *y, int64_t y_stride,
                    int64_t r0, int64_t r1, ow_isa isa) {
    ow_matmul_rows_path(wt, w, row_bytes, n_cols, xq, xq_stride, n_vec, y, y_stride, r0, r1, ow_kpath_for_isa(isa));
}
