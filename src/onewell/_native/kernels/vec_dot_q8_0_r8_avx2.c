/* AVX2 kernels of the Q8_0 R8 layout (q8_0_r8.h): decode, and prefill as the float GEMM.
 *
 * Decode (up to OW_FLOAT_GEMM_MIN_VECS - 1 vectors): each vector's quants are interleaved once per call as the weights' chunks are (an 8 x 8
 * transpose of int32 per full group), its scales converted to floats; then rows go in pairs from the two halves of
 * the call's rows (two streams from memory, as the file layout's kernels read: vec_dot_x86_rows.h). Per group and
 * row: 8 x (load, vpsignb x2, vpmaddubsw, vpmaddwd, vpaddd), then one convert, one fp16 scale conversion, one
 * vmulps and one FMA for all 8 blocks. A row's last m < 8 blocks run as a full group whose lanes past m meet
 * scales of zero, so they add +0 (a tail of 4 on 128-bit lanes, the same floats): every row gives the same floats
 * whichever way it is read (alone, in a pair, or as the last row, whose tail is copied into a zero-padded buffer).
 *
 * Prefill: from OW_FLOAT_GEMM_MIN_VECS vectors (with the float_gemm knob on) what the file layout's prefill runs on
 * this CPU (ow_rows_gemm), on panels built straight from this layout: the float GEMM of the AVX2 paths
 * (gemm_f32_avx2.h; rows_gemm 0 or 3, family 0x17), or the int8 GEMM with rows in the lanes (gemm_i8_rows.inc;
 * rows_gemm 1 or 2, Zen 3, where it beats the floats; perf-log 46). The panels hold what the Q8_0 GEMMs' hold, so
 * the results are the file layout's prefill. Smaller batches run as decode, each row pair against every vector in
 * turn while it is in L1 (bit for bit the one-vector results; perf-log entry 43: 1.17-1.28x at 2-8 vectors on a
 * matrix from memory, against one vector at a time).
 *
 * No column limit: one vector of rows up to R8_STACK_BLOCKS blocks (16,384 columns) is interleaved on the stack,
 * longer rows (Qwen2.5-7B's 18,944-column ffn_down) and batches into one heap buffer (up to OW_FLOAT_GEMM_MIN_VECS
 * vectors at a time). Reads stay inside the call's rows: only a tail other than 4 blocks reads past its row, into
 * the next one, and the call's last row copies its tail instead. */
#include "vec_dot.h"

#if OW_X86_KERNELS
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "tile_avx2.h"
#include "q8_0_r8.h"
#include "r8_act_avx2.h"

#define R8_STACK_BLOCKS 512

/* int32 lane k = the sum of the 4 signed byte products of block k: |q| times a carrying q's sign keeps every pair
 * within int16 (vpmaddubsw's unsigned operand |q| <= 128, |a| <= 127) */
TA_INLINE __m256i r8_dot4(__m256i q, __m256i a) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_sign_epi8(q, q), _mm256_sign_epi8(a, q)), _mm256_set1_epi16(1));
}

/* A Q8_0 vector as the kernel reads it, in R8_VECTOR_BYTES(nb) bytes (32-aligned): quants interleaved as the
 * weights' (r8_act_avx2.h), then the scales as floats and 8 zeros */
#define R8_VECTOR_BYTES(nb) ((size_t)(nb) * OW_QK + 32 + (((size_t)(nb) + 8) * 4 + 31) / 32 * 32)
typedef struct {
    int8_t *q;
    float *d;
} r8_vector;

static r8_vector r8_vector_at(uint8_t *buf, int64_t nb) {
    return (r8_vector){(int8_t *)buf, (float *)(buf + (size_t)nb * OW_QK + 32)};
}

TA_INLINE void r8_act(const ow_block_q8_0 *x, int64_t nb, const r8_vector *v) {
    r8_interleave_quants((const uint8_t *)x, sizeof *x, offsetof(ow_block_q8_0, qs), nb, v->q);
    for (int64_t b = 0; b < nb; b++) v->d[b] = _cvtsh_ss(x[b].d);
    _mm256_storeu_ps(v->d + nb, _mm256_setzero_ps());
}

/* One group of m blocks (8, or a tail of 5..7: chunk stride 4m, read as r8_rows says) of R rows against the vector;
 * a tail's lanes past m meet zero scales */
TA_INLINE void r8_group(const uint8_t *const *grp, int m, const int8_t *xg, const float *xsg, __m256 *acc, const int R,
                        const int FULL) {
    const int stride = FULL ? 32 : 4 * m, scales = FULL ? 16 : 2 * m;
    __m256i p[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
    for (int j = 0; j < 8; j++) {
        const __m256i a = _mm256_loadu_si256((const __m256i *)(xg + stride * j));
        for (int r = 0; r < R; r++)
            p[r] = _mm256_add_epi32(p[r], r8_dot4(_mm256_loadu_si256((const __m256i *)(grp[r] + scales + stride * j)), a));
    }
    const __m256 dx = _mm256_loadu_ps(xsg);
    const __m256 lanes = _mm256_castsi256_ps(
        _mm256_cmpgt_epi32(_mm256_set1_epi32(m), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)));
    for (int r = 0; r < R; r++) {
        __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)grp[r]));
        if (!FULL) dw = _mm256_and_ps(dw, lanes);   /* lanes past m: chunk bytes, not scales (maybe NaN) */
        acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p[r]), _mm256_mul_ps(dw, dx), acc[r]);
    }
}

/* A tail of m <= 4 blocks (896 columns: Qwen2.5-0.5B's rows end with 4; SmolLM2's 576 with 2) on 128-bit lanes:
 * chunks of 4m bytes read 16 at a time (m < 4: up to 16 - 4m bytes past the row, as r8_rows says), lanes past m
 * meet zero scales. Lanes 0..3 get the same FMA as in r8_group, whose lanes 4..7 add +0 there: the same floats. */
TA_INLINE void r8_group_x4(const uint8_t *const *grp, int m, const int8_t *xg, const float *xsg, __m256 *acc,
                           const int R) {
    __m128i p[2] = {_mm_setzero_si128(), _mm_setzero_si128()};
    for (int j = 0; j < 8; j++) {
        const __m128i a = _mm_loadu_si128((const __m128i *)(xg + 4 * m * j));
        for (int r = 0; r < R; r++) {
            const __m128i q = _mm_loadu_si128((const __m128i *)(grp[r] + 2 * m + 4 * m * j));
            const __m128i d4 = _mm_madd_epi16(_mm_maddubs_epi16(_mm_sign_epi8(q, q), _mm_sign_epi8(a, q)), _mm_set1_epi16(1));
            p[r] = _mm_add_epi32(p[r], d4);
        }
    }
    const __m128 dx = _mm_loadu_ps(xsg);
    const __m128 lanes = _mm_castsi128_ps(_mm_cmpgt_epi32(_mm_set1_epi32(m), _mm_setr_epi32(0, 1, 2, 3)));
    for (int r = 0; r < R; r++) {
        const __m128 dw = _mm_and_ps(_mm_cvtph_ps(_mm_loadl_epi64((const __m128i *)grp[r])), lanes);
        const __m128 low = _mm_fmadd_ps(_mm_cvtepi32_ps(p[r]), _mm_mul_ps(dw, dx), _mm256_castps256_ps128(acc[r]));
        acc[r] = _mm256_insertf128_ps(acc[r], low, 0);
    }
}

/* R (1 or 2) rows against an interleaved vector (quants xi, scales xs): out[r]. A tail of m blocks other than 4 is read in
 * place up to 32 - 4m (m > 4) or 16 - 4m bytes past the row, into the next row's (junk lanes that meet zero
 * scales), except in the call's last row (`last`: row R - 1 is it), which has no next row and is copied first. */
TA_INLINE void r8_rows(const uint8_t *const *wr, int64_t nb, const int8_t *xi, const float *xs, float *out, const int R,
                       int last) {
    __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    int64_t g = 0;
    for (; g + OW_R8_GROUP <= nb; g += OW_R8_GROUP) {
        const uint8_t *grp[2] = {wr[0] + ow_r8_group_at(g), wr[R - 1] + ow_r8_group_at(g)};
        r8_group(grp, OW_R8_GROUP, xi + 32 * g, xs + g, acc, R, 1);
    }
    if (g < nb) {
        const int m = (int)(nb - g);
        uint8_t tail[OW_R8_GROUP * OW_R8_BLOCK_BYTES + 32];
        const uint8_t *grp[2] = {wr[0] + ow_r8_group_at(g), wr[R - 1] + ow_r8_group_at(g)};
        if (last && m != 4) {   /* a tail of 4 is read exactly */
            memcpy(tail, grp[R - 1], (size_t)OW_R8_BLOCK_BYTES * m);
            memset(tail + OW_R8_BLOCK_BYTES * m, 0, sizeof tail - (size_t)OW_R8_BLOCK_BYTES * m);
            grp[R - 1] = tail;
        }
        if (m == 4)   /* the common tail (896 columns), its offsets constant */
            r8_group_x4(grp, 4, xi + 32 * g, xs + g, acc, R);
        else if (m < 4)
            r8_group_x4(grp, m, xi + 32 * g, xs + g, acc, R);
        else
            r8_group(grp, m, xi + 32 * g, xs + g, acc, R, 0);
    }
    for (int r = 0; r < R; r++) out[r] = ta_hsum(acc[r]);
}

/* n_vec interleaved vectors against nr rows (y[v * y_stride + r]), in the order of OW_R8_ROW_PAIRS */
TA_INLINE void r8_decode(int64_t nb, const uint8_t *w, size_t w_stride, int nr, const r8_vector *vs, int n_vec,
                         float *y, int64_t y_stride) {
#define R8_Q8_0_ROWS(rows, R, last, v, out) r8_rows(rows, nb, vs[v].q, vs[v].d, out, R, last)
    OW_R8_ROW_PAIRS(w, w_stride, nr, n_vec, y, y_stride, R8_Q8_0_ROWS);
#undef R8_Q8_0_ROWS
}

/* The any_rows tile of the AVX2 paths (type_traits.c) */
TA_TARGET void vec_dot_q8_0r8_q8_0_avx2(OW_TILE_ARGS) {
    const int64_t nb = n_cols / OW_QK;
    if (n_vec >= OW_FLOAT_GEMM_MIN_VECS && ow_float_gemm()) {   /* as the Q8_0 GEMM chooses (gemm_q8_0_f32_avx2.c) */
        const int rows = ow_rows_gemm(OW_ROWS_GEMM_AVX2);
        (rows == 2   ? vec_dot_q8_0r8_q8_0_rows_avx2_mask
         : rows == 1 ? vec_dot_q8_0r8_q8_0_rows_avx2
                     : vec_dot_q8_0r8_q8_0_gemm_avx2)(n_cols, w, w_stride, nr, x, x_stride, n_vec, y, y_stride);
        return;
    }
    /* below the GEMM at most OW_FLOAT_GEMM_MIN_VECS - 1 vectors; with the knob off, more, that many at a time */
    const int cap = n_vec < OW_FLOAT_GEMM_MIN_VECS ? n_vec : OW_FLOAT_GEMM_MIN_VECS;
    const size_t per_vector = R8_VECTOR_BYTES(nb);   /* a multiple of 32 */
    uint8_t one[R8_VECTOR_BYTES(R8_STACK_BLOCKS)] __attribute__((aligned(32)));
    const int fits = nb <= R8_STACK_BLOCKS;
    uint8_t *buf = cap == 1 && fits ? one : aligned_alloc(32, per_vector * (size_t)cap);
    if (!buf) {   /* no memory: one vector at a time on the stack (the same results), or the generic kernel */
        for (int v = 0; v < n_vec; v++) {
            const uint8_t *xv = (const uint8_t *)x + (size_t)v * x_stride;
            if (!fits) {
                vec_dot_q8_0r8_q8_0_generic(n_cols, w, w_stride, nr, xv, y + (int64_t)v * y_stride);
                continue;
            }
            const r8_vector vs[1] = {r8_vector_at(one, nb)};
            r8_act((const ow_block_q8_0 *)xv, nb, vs);
            r8_decode(nb, w, w_stride, nr, vs, 1, y + (int64_t)v * y_stride, y_stride);
        }
        return;
    }
    r8_vector vs[OW_FLOAT_GEMM_MIN_VECS];
    for (int done = 0; done < n_vec; done += cap) {
        const int n = n_vec - done < cap ? n_vec - done : cap;
        for (int i = 0; i < n; i++) {
            vs[i] = r8_vector_at(buf + per_vector * (size_t)i, nb);
            r8_act((const ow_block_q8_0 *)((const uint8_t *)x + (size_t)(done + i) * x_stride), nb, vs + i);
        }
        r8_decode(nb, w, w_stride, nr, vs, n, y + (int64_t)done * y_stride, y_stride);
    }
    if (buf != one) free(buf);
}
#endif
