/* AVX2 kernels of the R16 layouts (q8_0_r16.h, q4_1_r16.h): the AVX2 path's decode and prefill matmuls.
 *
 * Why these exist (docs/perf-log.md, entry 10): on an AVX2-only Zen 3 the ggml-layout kernels with 4-row tiles
 * streamed about half of the plain read speed on one core. What won on AVX-512 wins here too: the R16 interleave
 * (one convert + one fma per 8 blocks instead of per block), rows streamed one at a time, and a software
 * prefetch of every 64-byte line ahead of the stream (ow_r16_prefetch()).
 *
 * A 256-bit register holds half a group: lanes 0..7 are blocks g..g+7 (the low 32 bytes of each 64-byte chunk),
 * lanes 8..15 of the group are the high 32 bytes. Each int32 lane accumulates its block's dot product.
 *
 * u8 x s8: vpmaddubsw multiplies an unsigned byte by a signed byte. Q8_0 R16 stores q + 128 (the VNNI operand):
 * here it goes back to signed q, and |q| times (a with q's sign) keeps every pair within int16 (128 * 127 * 2).
 * Q4_1 R16 nibbles are unsigned 0..15 already and go in as they are.
 *
 * Prefill: n_vec > 1 vectors share each weight load (up to R16A_VECS at once, their int32 sums in registers), so
 * the weights stream from memory once per call. Every vector's arithmetic is the same whatever n_vec is, and the
 * same as the decode path's: batched and token-by-token results are bit-identical. */
#include "q4_1_r16.h"
#include "vec_dot.h"

#if OW_X86_KERNELS
#include <immintrin.h>

#define R16A_TARGET __attribute__((target("avx2,fma,f16c")))
#define R16A_INLINE static inline __attribute__((always_inline)) R16A_TARGET
#define R16A_VECS 4   /* vectors per weight load: 4 x 2 int32 sums + the weights fit the 16 ymm registers */

R16A_INLINE float r16a_hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* int32 lanes of the first `lanes` (1..8) of 8: the mask of a half group's partial load */
R16A_INLINE __m256i r16a_lane_mask(int lanes) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(lanes), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* How a half group is read (FULL): R16A_FULL a whole group; R16A_PART the first lanes of a row's last group, with
 * masked loads that read nothing past them; R16A_WIDE the same group with plain loads of the quants, reading up to
 * 32 bytes past its last chunk (a row's scales and padding, which the row and activation strides must hold:
 * r16a_wide). vpmaskmovd is slow where 256-bit instructions are two µops (AMD family 0x17: a row of 896 columns,
 * one full group and 12 blocks, decoded at a third of the speed of a full one, perf-log entry 42). The junk lanes
 * of a wide read meet scales loaded masked, zeros, so they add +0 to the sums: the same floats as R16A_PART. */
enum { R16A_PART = 0, R16A_FULL = 1, R16A_WIDE = 2 };

/* 8 int32 lanes at p (all of them when FULL, else the first lanes: zeros after, no read past them) */
R16A_INLINE __m256i r16a_load(const uint8_t *p, __m256i mask, const int FULL) {
    return FULL ? _mm256_loadu_si256((const __m256i *)p) : _mm256_maskload_epi32((const int *)p, mask);
}

/* Whether a row's last group may be read wide: 32 bytes past the quants (w_quant_bytes) inside the weight row (its
 * stride) and inside the activation row (its 8 bytes of scale and seed per block: from 4 blocks on). */
R16A_INLINE int r16a_wide(size_t w_quant_bytes, size_t w_stride, int64_t nb) {
    return w_stride >= w_quant_bytes + 32 && 8 * nb >= 32;
}

/* 8 fp16 at p as floats (zeros past lanes) */
R16A_INLINE __m256 r16a_halfs(const uint8_t *p, int lanes, const int FULL) {
    if (FULL) return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
    uint8_t part[16] = {0};
    memcpy(part, p, 2 * (size_t)lanes);
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)part));
}

/* A wide read's per-block numbers (scales, seeds) of blocks b0..b0+lanes-1: as the plain load when all 8 lanes are
 * there, else (the row's last half group, whose numbers end the array at `end`) the 32 bytes that end at `end`,
 * moved down to lane 0, zeros past lanes: no read past the array and no masked load. */
R16A_INLINE __m256 r16a_last8(__m256 ending_at_end, int lanes, __m256i mask) {
    const __m256i down = _mm256_add_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(8 - lanes));
    return _mm256_and_ps(_mm256_permutevar8x32_ps(ending_at_end, down), _mm256_castsi256_ps(mask));
}
/* 8 f32 / int32 numbers at p (array end `end`), read as FULL says */
R16A_INLINE __m256 r16a_words(const uint8_t *p, const uint8_t *end, int lanes, __m256i mask, const int FULL) {
    if (FULL == R16A_WIDE && lanes < 8) return r16a_last8(_mm256_loadu_ps((const float *)(end - 32)), lanes, mask);
    return _mm256_castsi256_ps(r16a_load(p, mask, FULL != R16A_PART));
}
/* 8 fp16 numbers at p (array end `end`) as floats, read as FULL says */
R16A_INLINE __m256 r16a_halfs_at(const uint8_t *p, const uint8_t *end, int lanes, __m256i mask, const int FULL) {
    if (FULL == R16A_WIDE && lanes < 8)
        return r16a_last8(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(end - 16))), lanes, mask);
    return r16a_halfs(p, lanes, FULL != R16A_PART);
}

/* every 64-byte line of the row `prefetch` bytes ahead of it: rows are streamed one after another, so this keeps
 * the next rows' lines in flight while this one computes (0 = off) */
R16A_INLINE void r16a_prefetch_row(const uint8_t *wr, size_t stride, size_t prefetch) {
    if (prefetch)
        for (size_t off = 0; off < stride; off += 64) _mm_prefetch((const char *)(wr + off + prefetch), _MM_HINT_T0);
}

/* sum of the 4 signed byte products in each int32 lane; q holds Q8_0 quants as signed bytes */
R16A_INLINE __m256i r16a_dot4(__m256i abs_q, __m256i q, __m256i a) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(abs_q, _mm256_sign_epi8(a, q)), _mm256_set1_epi16(1));
}

/* --- Q8_0 R16 ------------------------------------------------------------------------------------------- */

/* Half h of the group at block g (m blocks) of row wr, for NV vectors x[0..NV): acc[v][h] += dots * d_w * d_x. */
R16A_INLINE void q80_half(const uint8_t *wr, const uint8_t *const *x, int64_t n_cols, int64_t g, int m, int h,
                          __m256 (*acc)[2], const int NV, const int FULL) {
    const int group = FULL == R16A_FULL ? OW_R16_GROUP : m;   /* a constant in full groups: the offsets fold */
    const int lanes = FULL == R16A_FULL ? 8 : (m - 8 * h < 8 ? m - 8 * h : 8);
    const __m256i mask = r16a_lane_mask(lanes), k80 = _mm256_set1_epi8((char)0x80);
    __m256i p[R16A_VECS];
    for (int v = 0; v < NV; v++) p[v] = _mm256_setzero_si256();
    for (int j = 0; j < OW_R16_CHUNKS; j++) {
        const size_t at = ow_r16_chunk(g, group, j) + 32 * (size_t)h;
        const __m256i q = _mm256_xor_si256(r16a_load(wr + at, mask, FULL != R16A_PART), k80);
        const __m256i abs_q = _mm256_sign_epi8(q, q);
        for (int v = 0; v < NV; v++)
            p[v] = _mm256_add_epi32(p[v], r16a_dot4(abs_q, q, r16a_load(x[v] + at, mask, FULL != R16A_PART)));
    }
    const int64_t b0 = g + 8 * h, nb = n_cols / OW_QK;
    const __m256 dw = r16a_halfs_at(wr + (size_t)n_cols + 2 * (size_t)b0, wr + (size_t)n_cols + 2 * (size_t)nb, lanes,
                                    mask, FULL);
    for (int v = 0; v < NV; v++) {
        const uint8_t *scales = x[v] + ow_r16_act_scales(n_cols);
        const __m256 dx = r16a_words(scales + 4 * b0, scales + 4 * nb, lanes, mask, FULL);
        acc[v][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p[v]), _mm256_mul_ps(dw, dx), acc[v][h]);
    }
}

/* --- Q4_1 R16 ------------------------------------------------------------------------------------------- */

/* Half h of the group at block g: pair i's bytes 32h.. hold chunk 2i (low nibbles) and 2i+1 (high nibbles) of
 * blocks g+8h..; block value d_w d_x sum(q x_q) + m_w d_x sum(x_q), sum(x_q) = -seed / 128 (exact in f32). */
R16A_INLINE void q41_half(const uint8_t *wr, const uint8_t *const *x, int64_t n_cols, int64_t g, int m, int h,
                          __m256 (*acc)[2], const int NV, const int FULL) {
    const int group = FULL == R16A_FULL ? OW_R16_GROUP : m;
    const int lanes = FULL == R16A_FULL ? 8 : (m - 8 * h < 8 ? m - 8 * h : 8);
    const __m256i mask = r16a_lane_mask(lanes), low4 = _mm256_set1_epi8(0x0f), ones = _mm256_set1_epi16(1);
    __m256i p[R16A_VECS];
    for (int v = 0; v < NV; v++) p[v] = _mm256_setzero_si256();
    for (int i = 0; i < OW_Q41R16_PAIRS; i++) {
        const size_t at = ow_q41r16_pair(g, group, i) + 32 * (size_t)h;
        const __m256i b = r16a_load(wr + at, mask, FULL != R16A_PART);
        const __m256i lo = _mm256_and_si256(b, low4), hi = _mm256_and_si256(_mm256_srli_epi16(b, 4), low4);
        const size_t a0 = ow_r16_chunk(g, group, 2 * i) + 32 * (size_t)h, a1 = ow_r16_chunk(g, group, 2 * i + 1) + 32 * (size_t)h;
        for (int v = 0; v < NV; v++) {
            const __m256i s = _mm256_add_epi16(_mm256_maddubs_epi16(lo, r16a_load(x[v] + a0, mask, FULL != R16A_PART)),
                                               _mm256_maddubs_epi16(hi, r16a_load(x[v] + a1, mask, FULL != R16A_PART)));
            p[v] = _mm256_add_epi32(p[v], _mm256_madd_epi16(s, ones));   /* two pairs <= 4 * 15 * 127: no overflow */
        }
    }
    const int64_t b0 = g + 8 * h, nb = n_cols / OW_QK;
    const uint8_t *d_at = wr + ow_q41r16_d_at(n_cols), *m_at = wr + ow_q41r16_m_at(n_cols);
    const __m256 dw = r16a_halfs_at(d_at + 2 * (size_t)b0, d_at + 2 * (size_t)nb, lanes, mask, FULL);
    const __m256 mw = r16a_halfs_at(m_at + 2 * (size_t)b0, m_at + 2 * (size_t)nb, lanes, mask, FULL);
    const __m256 minus_1_128 = _mm256_set1_ps(-1.0f / 128.0f);
    for (int v = 0; v < NV; v++) {
        const uint8_t *scales = x[v] + ow_r16_act_scales(n_cols), *seeds = x[v] + ow_r16_act_seeds(n_cols);
        const __m256 dx = r16a_words(scales + 4 * b0, scales + 4 * nb, lanes, mask, FULL);
        const __m256 seed = _mm256_cvtepi32_ps(_mm256_castps_si256(r16a_words(seeds + 4 * b0, seeds + 4 * nb, lanes, mask, FULL)));
        acc[v][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p[v]), _mm256_mul_ps(dw, dx), acc[v][h]);
        acc[v][h] = _mm256_fmadd_ps(mw, _mm256_mul_ps(dx, _mm256_mul_ps(seed, minus_1_128)), acc[v][h]);
    }
}

/* One row against NV vectors: y[v * y_stride] = dot(row, x[v]), from the layout's half-group step `half`.
 * prefetch: bytes ahead of the row to prefetch every line of (0 = none; the first pass over a row only). */
#define R16A_ROW(row, half, quant_bytes)                                                                     \
    R16A_INLINE void row(int64_t n_cols, const uint8_t *wr, size_t stride, const uint8_t *const *x, float *y, \
                         int64_t y_stride, size_t prefetch, const int NV) {                                  \
        const int64_t nb = n_cols / OW_QK;                                                                   \
        r16a_prefetch_row(wr, stride, prefetch);                                                             \
        __m256 acc[R16A_VECS][2];                                                                            \
        for (int v = 0; v < NV; v++) acc[v][0] = acc[v][1] = _mm256_setzero_ps();                           \
        int64_t g = 0;                                                                                       \
        for (; g + OW_R16_GROUP <= nb; g += OW_R16_GROUP)                                                    \
            for (int h = 0; h < 2; h++) half(wr, x, n_cols, g, OW_R16_GROUP, h, acc, NV, R16A_FULL);         \
        if (g < nb) {                                                                                        \
            const int m = (int)(nb - g);                                                                     \
            if (r16a_wide((quant_bytes), stride, nb))                                                        \
                for (int h = 0; 8 * h < m; h++) half(wr, x, n_cols, g, m, h, acc, NV, R16A_WIDE);            \
            else                                                                                             \
                for (int h = 0; 8 * h < m; h++) half(wr, x, n_cols, g, m, h, acc, NV, R16A_PART);            \
        }                                                                                                    \
        for (int v = 0; v < NV; v++) y[(int64_t)v * y_stride] = r16a_hsum(_mm256_add_ps(acc[v][0], acc[v][1])); \
    }

R16A_ROW(q80_row, q80_half, (size_t)n_cols)
R16A_ROW(q41_row, q41_half, (size_t)n_cols / 2)

/* --- entries: rows one at a time; vectors in groups of R16A_VECS, the rest one by one ------------------- */

#define R16A_ENTRY(name, row)                                                                                  \
    R16A_TARGET void name(OW_TILE_ARGS) {                                                                      \
        const size_t prefetch = ow_r16_prefetch();                                                             \
        const uint8_t *xq = x;                                                                                 \
        for (int r = 0; r < nr; r++) {                                                                        \
            const uint8_t *wr = w + (size_t)r * w_stride;                                                      \
            int v = 0;                                                                                         \
            for (; v + R16A_VECS <= n_vec; v += R16A_VECS) {   /* the first pass streams the row, the rest hit L1 */ \
                const uint8_t *xs[R16A_VECS];                                                                  \
                for (int k = 0; k < R16A_VECS; k++) xs[k] = xq + (size_t)(v + k) * x_stride;                   \
                row(n_cols, wr, w_stride, xs, y + (int64_t)v * y_stride + r, y_stride, v ? 0 : prefetch, R16A_VECS);      \
            }                                                                                                  \
            for (; v < n_vec; v++) {                                                                           \
                const uint8_t *xs[1] = {xq + (size_t)v * x_stride};                                            \
                row(n_cols, wr, w_stride, xs, y + (int64_t)v * y_stride + r, y_stride, v ? 0 : prefetch, 1);              \
            }                                                                                                  \
        }                                                                                                      \
    }

R16A_ENTRY(vec_dot_q8_0r16_q8_0r16_avx2, q80_row)
R16A_ENTRY(vec_dot_q4_1r16_q8_0r16_avx2, q41_row)

#endif
