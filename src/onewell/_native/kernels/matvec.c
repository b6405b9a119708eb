/* Type queries and kernel-path dispatch over the type-traits table (type_traits.c), and the row-range matmul loop. */
#include "matvec.h"

#include "q4_1_r16.h"
#include "q8_0_r16.h"
#include "type_traits.h"

/* --- types: read from the type-traits table (type_traits.c) ---------------------------------------------- */

int64_t ow_type_block_size(ow_ggml_type t) {
    const ow_type_traits_t *tt = ow_type_traits(t);
    return tt ? tt->block_size : 0;
}

size_t ow_type_block_bytes(ow_ggml_type t) {
    const ow_type_traits_t *tt = ow_type_traits(t);
    return tt ? tt->block_bytes : 0;
}

int ow_wtype_supported(int wt) {
    const ow_type_traits_t *tt = ow_type_traits(wt);
    return tt && tt->act_type >= 0;
}

ow_atype ow_act_type_for(ow_wtype wt) {
    const ow_type_traits_t *tt = ow_type_traits(wt);
    return tt && tt->act_type >= 0 ? (ow_atype)tt->act_type : OW_TYPE_Q8_0;
}

size_t ow_act_row_bytes(ow_atype at, int64_t n_cols) {
    const int64_t bs = ow_type_block_size(at);
    return bs ? (size_t)(n_cols / bs) * ow_type_block_bytes(at) : 0;
}

int ow_row_bytes_ok(ow_wtype wt, int64_t n_cols, size_t row_bytes) {
    const ow_type_traits_t *tt = ow_type_traits(wt);
    if (!tt || tt->act_type < 0 || tt->block_size <= 0 || n_cols <= 0 || n_cols % tt->block_size) return 0;
    const size_t packed = (size_t)(n_cols / tt->block_size) * tt->block_bytes;
    return tt->repacked ? row_bytes >= packed : row_bytes == packed;
}

size_t ow_q8_0_r16_row_stride(int64_t n_cols) { return ow_r16_row_stride(n_cols); }
size_t ow_q4_1_r16_row_stride(int64_t n_cols) { return ow_q41r16_row_stride(n_cols); }

/* One core's memory-level parallelism, not instructions, limits the R16 kernel (docs/perf-log.md, entry 3):
 * streaming rows one at a time with software prefetch ahead of the stream beat 4-row tiles without it. */
static _Atomic size_t r16_prefetch_bytes;
static _Atomic int r16_prefetch_set = 0;   /* 1 after ow_r16_set_prefetch (until ow_r16_reset_prefetch): else the defaults */
static _Atomic int r16_row_stream_on = 1;
void ow_r16_set_prefetch(size_t bytes) { r16_prefetch_bytes = bytes; r16_prefetch_set = 1; }
void ow_r16_reset_prefetch(void) { r16_prefetch_set = 0; }
size_t ow_r16_prefetch(void) { return r16_prefetch_set ? r16_prefetch_bytes : ow_default_prefetch(ow_cpu()); }
size_t ow_f16_prefetch(void) { return r16_prefetch_set ? r16_prefetch_bytes : ow_default_f16_prefetch(ow_cpu()); }
/* The R16 row tiles (4 interleaved row streams, prefill) gain from software prefetch even where single-row decode
 * streams do not (Zen 4, pp128 1.05x with it, perf-log entry 19): they take the knob once it is set, else 8 KiB. */
size_t ow_r16_tile_prefetch(void) { return r16_prefetch_set ? r16_prefetch_bytes : OW_R16_TILE_PREFETCH; }
void ow_r16_set_row_stream(int on) { r16_row_stream_on = on != 0; }
int ow_r16_row_stream(void) { return r16_row_stream_on; }
static _Atomic int wide_tiles = -1;   /* -1: this CPU's default */
void ow_set_wide_tiles(int on) { wide_tiles = on != 0; }
int ow_wide_tiles(void) { const int w = wide_tiles; return w >= 0 ? w : ow_default_wide_tiles(ow_cpu()); }
static _Atomic int float_gemm = -1;   /* -1: this CPU's default */
void ow_set_float_gemm(int on) { float_gemm = on != 0; }
int ow_float_gemm(void) { const int g = float_gemm; return g >= 0 ? g : ow_default_float_gemm(ow_cpu()); }
static _Atomic int gemm_overlap = -1;   /* -1: this CPU's default */
void ow_set_gemm_overlap(int on) { gemm_overlap = on != 0; }
int ow_gemm_overlap(void) { const int g = gemm_overlap; return g >= 0 ? g : ow_default_gemm_overlap(ow_cpu()); }
static _Atomic int rows_gemm = -1;   /* -1: this CPU's default */
void ow_set_rows_gemm(int mode) { rows_gemm = mode < 0 ? -1 : mode > 3 ? 1 : mode; }
int ow_rows_gemm_setting(void) { return rows_gemm; }
int ow_rows_gemm(int path) { const int g = rows_gemm; return g >= 0 ? g : ow_default_rows_gemm(ow_cpu(), path); }
int ow_rows_gemm_runs(ow_kpath p) {
    switch (p) {
    case OW_KPATH_AVX2: return ow_rows_gemm(OW_ROWS_GEMM_AVX2) != 0;
    case OW_KPATH_AVX2_VNNI: return ow_rows_gemm(OW_ROWS_GEMM_AVX2_VNNI) != 0;
    case OW_KPATH_AVX512: return ow_rows_gemm(OW_ROWS_GEMM_AVX512) != 0;
    default: return 0;   /* generic and NEON have no rows GEMMs */
    }
}
static _Atomic size_t r16_act_bytes = OW_R16_ACT_BYTES;
void ow_set_r16_act_bytes(size_t bytes) { r16_act_bytes = bytes; }
void ow_reset_r16_act_bytes(void) { r16_act_bytes = OW_R16_ACT_BYTES; }
size_t ow_r16_act_bytes(void) { return r16_act_bytes; }

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
#elif OW_NEON_KERNELS
    switch (p) {
    case OW_KPATH_GENERIC: return 1;
    case OW_KPATH_NEON: return ow_cpu()->neon;
    case OW_KPATH_NEON_DOTPROD: return ow_cpu()->neon && ow_cpu()->dotprod;
    default: return 0;
    }
#else
    return p == OW_KPATH_GENERIC;
#endif
}

ow_kpath ow_kpath_for_isa(ow_isa isa) {
    switch (isa) {
    case OW_ISA_AVX512:
        if (ow_kpath_available(OW_KPATH_AVX512)) return OW_KPATH_AVX512;
        /* fall through */
    case OW_ISA_AVXVNNI:
        if (ow_kpath_available(OW_KPATH_AVX2_VNNI)) return OW_KPATH_AVX2_VNNI;
        /* fall through */
    case OW_ISA_AVX2:   /* plain AVX2 even on a VNNI CPU: what an AVX2-only CPU runs */
        if (ow_kpath_available(OW_KPATH_AVX2)) return OW_KPATH_AVX2;
        return OW_KPATH_GENERIC;
    case OW_ISA_DOTPROD:
        if (ow_kpath_available(OW_KPATH_NEON_DOTPROD)) return OW_KPATH_NEON_DOTPROD;
        /* fall through */
    case OW_ISA_NEON:
        if (ow_kpath_available(OW_KPATH_NEON)) return OW_KPATH_NEON;
        return OW_KPATH_GENERIC;
    default:
        return OW_KPATH_GENERIC;
    }
}

const char *ow_kpath_name(ow_kpath p) {
    switch (p) {
    case OW_KPATH_AVX2: return "avx2";
    case OW_KPATH_AVX2_VNNI: return "avx2-vnni";
    case OW_KPATH_AVX512: return "avx512";
    case OW_KPATH_NEON: return "neon";
    case OW_KPATH_NEON_DOTPROD: return "neon-dotprod";
    default: return "generic";
    }
}

/* --- work ------------------------------------------------------------------------------------------------- */

void ow_quantize_act_path(ow_atype at, const float *x, void *xq, int64_t n_cols, ow_kpath path) {
    const ow_act_quant_fn quantize = ow_type_act_quant(ow_type_traits(at), path).fn;
    if (quantize) quantize(x, xq, n_cols);
}

void ow_quantize_act(ow_atype at, const float *x, void *xq, int64_t n_cols, ow_isa isa) {
    ow_quantize_act_path(at, x, xq, n_cols, ow_kpath_for_isa(isa));
}

void ow_matmul_rows_path(ow_wtype wt, const uint8_t *w, size_t row_bytes, int64_t n_cols,
                         const void *xq, size_t xq_stride, int n_vec, float *y, int64_t y_stride,
                         int64_t r0, int64_t r1, ow_kpath path) {
    ow_tile_slot tile;
    ow_dot_slot dot_slot;
    ow_type_kernel(ow_type_traits(wt), path, &tile, &dot_slot);
    const ow_tile_fn tile_fn = tile.fn;
    if (tile_fn) {   /* an any_rows tile takes the whole chunk in one call */
        const int64_t step = tile.any_rows ? OW_TILE_MAX_ROWS : OW_ROW_TILE;
        for (int64_t r = r0; r < r1; r += step) {
            const int nr = (int)(r1 - r < step ? r1 - r : step);
            tile_fn(n_cols, w + (size_t)r * row_bytes, row_bytes, nr, xq, xq_stride, n_vec, y + r, y_stride);
        }
        return;
    }
    const ow_vec_dot_fn dot = dot_slot.fn;
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
