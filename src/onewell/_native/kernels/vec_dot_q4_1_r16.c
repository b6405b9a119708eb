/* Dot kernels of the Q4_1 R16 layout (q4_1_r16.h) against R16 activations (q8_0_r16.h): the readable generic
 * twin, which every other path except AVX-512 runs (the plan only repacks for AVX-512), and the AVX-512 VNNI one.
 *
 * Per block: d_w d_x sum(q x_q) + m_w (d_x sum(x_q)), sum(x_q) = -seed / 128 read from the activation row. */
#include "q4_1_r16.h"
#include "vec_dot.h"

/* Generic: block by block in ggml's order (as dot_row_q4_1_q8_1 in vec_dot_generic.c). -------------------- */

static float dot_row_q4_1r16(const uint8_t *w, const uint8_t *x, int64_t n_cols) {
    const int64_t nb = n_cols / OW_QK;
    float sum = 0.0f;
    for (int64_t b = 0; b < nb; b++) {
        int32_t sumi = 0, seed;
        for (int t = 0; t < OW_QK; t++) {
            int high;
            const uint8_t byte = w[ow_q41r16_pos(nb, b, t, &high)];
            sumi += (high ? byte >> 4 : byte & 0x0f) * (int8_t)x[ow_r16_pos(nb, b, t)];
        }
        float dx;
        memcpy(&dx, x + ow_r16_act_scales(n_cols) + 4 * b, 4);
        memcpy(&seed, x + ow_r16_act_seeds(n_cols) + 4 * b, 4);
        const float dw = ow_fp16_to_fp32(ow_read_u16(w + ow_q41r16_d_at(n_cols) + 2 * b));
        const float mw = ow_fp16_to_fp32(ow_read_u16(w + ow_q41r16_m_at(n_cols) + 2 * b));
        sum += (dw * dx) * (float)sumi + mw * (dx * (float)(seed / -128));
    }
    return sum;
}

void vec_dot_q4_1r16_q8_0r16_generic(OW_DOT_ARGS) {
    for (int r = 0; r < nr; r++) s[r] = dot_row_q4_1r16(w + (size_t)r * w_stride, x, n_cols);
}

#if OW_X86_KERNELS
#include <immintrin.h>

#define Q41_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))
#define Q41_INLINE static inline __attribute__((always_inline)) Q41_TARGET
#define Q41_VECS 16   /* vectors per pass over a row: their accumulators live in registers or on the stack */

/* the 64 bytes at p, or the first 4m of them (m int32 lanes, mask mk) in a row's last, partial group */
Q41_INLINE __m512i q41_load(const uint8_t *p, __mmask16 mk, const int FULL) {
    return FULL ? _mm512_loadu_si512((const void *)p) : _mm512_maskz_loadu_epi32(mk, p);
}

Q41_INLINE __m512 q41_halfs(const uint8_t *p, __mmask16 mk, const int FULL) {
    return _mm512_cvtph_ps(FULL ? _mm256_loadu_si256((const __m256i *)p) : _mm256_maskz_loadu_epi16(mk, p));
}

/* One group (blocks g.., m of them) of one row for vectors x[0..nv): the 4 weight lines are loaded and split
 * into nibbles once, then serve every vector; lanes past m load as zeros and add nothing. */
Q41_INLINE void q41_group(const uint8_t *wr, const uint8_t *const *x, int nv, int64_t n_cols, int64_t g, int m,
                          __mmask16 mk, __m512 *acc, const int NV, const int FULL) {
    const int group = FULL ? OW_R16_GROUP : m;   /* a constant in full groups: offsets fold */
    const __m512i low4 = _mm512_set1_epi8(0x0f);
    __m512i lo[OW_Q41R16_PAIRS], hi[OW_Q41R16_PAIRS];
    for (int i = 0; i < OW_Q41R16_PAIRS; i++) {
        const __m512i v = q41_load(wr + ow_q41r16_pair(g, group, i), mk, FULL);
        lo[i] = _mm512_and_si512(v, low4);
        hi[i] = _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
    }
    const __m512 dw = q41_halfs(wr + ow_q41r16_d_at(n_cols) + 2 * (size_t)g, mk, FULL);
    const __m512 mw = q41_halfs(wr + ow_q41r16_m_at(n_cols) + 2 * (size_t)g, mk, FULL);
    const __m512 minus_1_128 = _mm512_set1_ps(-1.0f / 128.0f);   /* seed = -128 sum(x_q): exact in f32 */
    const int n = NV ? NV : nv;
    for (int v = 0; v < n; v++) {
        const uint8_t *xv = x[v];
        __m512i p0 = _mm512_setzero_si512(), p1 = _mm512_setzero_si512();   /* two chains: half the latency */
        for (int i = 0; i < OW_Q41R16_PAIRS; i++) {
            p0 = _mm512_dpbusd_epi32(p0, lo[i], q41_load(xv + ow_r16_chunk(g, group, 2 * i), mk, FULL));
            p1 = _mm512_dpbusd_epi32(p1, hi[i], q41_load(xv + ow_r16_chunk(g, group, 2 * i + 1), mk, FULL));
        }
        const __m512 dx = _mm512_castsi512_ps(q41_load(xv + ow_r16_act_scales(n_cols) + 4 * g, mk, FULL));
        const __m512i seed = q41_load(xv + ow_r16_act_seeds(n_cols) + 4 * g, mk, FULL);
        const __m512 dx_sx = _mm512_mul_ps(dx, _mm512_mul_ps(_mm512_cvtepi32_ps(seed), minus_1_128));
        acc[v] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(p0, p1)), _mm512_mul_ps(dw, dx), acc[v]);
        acc[v] = _mm512_fmadd_ps(mw, dx_sx, acc[v]);
    }
}

/* One row for vectors x[0..nv) (nv <= Q41_VECS; NV = nv when a compile-time constant, else 0): y[v * y_stride].
 * Rows stream one at a time, every line of the row prefetched `prefetch` bytes ahead (docs/perf-log.md, entry 3:
 * one sequential, prefetched stream keeps more misses in flight on one core than interleaved row tiles). */
Q41_INLINE void q41_row(int64_t n_cols, const uint8_t *wr, size_t stride, const uint8_t *const *x, int nv, float *y,
                        int64_t y_stride, size_t prefetch, const int NV) {
    const int64_t nb = n_cols / OW_QK;
    if (prefetch)
        for (size_t off = 0; off < stride; off += 64) _mm_prefetch((const char *)(wr + off + prefetch), _MM_HINT_T0);
    __m512 acc[Q41_VECS];
    const int n = NV ? NV : nv;
    for (int v = 0; v < n; v++) acc[v] = _mm512_setzero_ps();
    int64_t g = 0;
    for (; g + OW_R16_GROUP <= nb; g += OW_R16_GROUP)
        q41_group(wr, x, nv, n_cols, g, OW_R16_GROUP, (__mmask16)0xffff, acc, NV, 1);
    if (g < nb) {
        const int m = (int)(nb - g);
        q41_group(wr, x, nv, n_cols, g, m, (__mmask16)((1u << m) - 1), acc, NV, 0);
    }
    for (int v = 0; v < n; v++) y[(int64_t)v * y_stride] = _mm512_reduce_add_ps(acc[v]);
}

/* Decode of two rows far apart (r and r + nr/2 of a chunk; the tile is any_rows), group by group: two sequential
 * streams, as the Q8_0 R16 decode (vec_dot_avx512.c). SmolLM2 decode 1.00 / 1.04-1.05 (1t / 2t) on Zen 4
 * (docs/perf-log.md, entry 23). Each row's arithmetic is q41_row's for one vector, so the same floats. */
Q41_INLINE void q41_row_pair(int64_t n_cols, const uint8_t *wa, const uint8_t *wb, size_t stride, const uint8_t *x,
                             float *ya, float *yb, size_t prefetch) {
    const int64_t nb = n_cols / OW_QK;
    if (prefetch)
        for (size_t off = 0; off < stride; off += 64) {
            _mm_prefetch((const char *)(wa + off + prefetch), _MM_HINT_T0);
            _mm_prefetch((const char *)(wb + off + prefetch), _MM_HINT_T0);
        }
    const uint8_t *xs[1] = {x};
    __m512 acc_a = _mm512_setzero_ps(), acc_b = _mm512_setzero_ps();
    int64_t g = 0;
    for (; g + OW_R16_GROUP <= nb; g += OW_R16_GROUP) {
        q41_group(wa, xs, 1, n_cols, g, OW_R16_GROUP, (__mmask16)0xffff, &acc_a, 1, 1);
        q41_group(wb, xs, 1, n_cols, g, OW_R16_GROUP, (__mmask16)0xffff, &acc_b, 1, 1);
    }
    if (g < nb) {
        const int m = (int)(nb - g);
        q41_group(wa, xs, 1, n_cols, g, m, (__mmask16)((1u << m) - 1), &acc_a, 1, 0);
        q41_group(wb, xs, 1, n_cols, g, m, (__mmask16)((1u << m) - 1), &acc_b, 1, 0);
    }
    *ya = _mm512_reduce_add_ps(acc_a);
    *yb = _mm512_reduce_add_ps(acc_b);
}

/* Prefill takes the vectors in blocks whose activations fit OW_R16_ACT_BYTES (vec_dot.h), so they stay in L1
 * while every row of the chunk passes (the first block streams the rows from memory, the later ones find them in
 * L2): SmolLM2's 128 vectors (92 KiB) read from L2 for every row ran 0.97x of 64, blocks of 32 1.12x
 * (docs/perf-log.md, entry 25). */
Q41_TARGET void vec_dot_q4_1r16_q8_0r16_avx512(OW_TILE_ARGS) {
    const size_t prefetch = ow_r16_prefetch();
    const uint8_t *xs[Q41_VECS];
    const uint8_t *xq = x;
    if (n_vec == 1) {   /* decode: rows r and r + half together, then a leftover odd row alone */
        const int half = nr / 2;
        for (int r = 0; r < half; r++)
            q41_row_pair(n_cols, w + (size_t)r * w_stride, w + (size_t)(r + half) * w_stride, w_stride, xq, y + r,
                         y + r + half, prefetch);
        if (nr % 2) {   /* one accumulator, everything in registers */
            xs[0] = xq;
            q41_row(n_cols, w + (size_t)(nr - 1) * w_stride, w_stride, xs, 1, y + nr - 1, y_stride, prefetch, 1);
        }
        return;
    }
    const int block = ow_r16_vector_block(x_stride, n_vec, Q41_VECS);
    for (int b0 = 0; b0 < n_vec; b0 += block) {
        const int b1 = n_vec - b0 < block ? n_vec : b0 + block;
        for (int r = 0; r < nr; r++) {
            const uint8_t *wr = w + (size_t)r * w_stride;
            /* the first pass streams the row from memory; later passes find it in L1 or L2 */
            for (int v0 = b0; v0 < b1; v0 += Q41_VECS) {
                const int nv = b1 - v0 < Q41_VECS ? b1 - v0 : Q41_VECS;
                for (int v = 0; v < nv; v++) xs[v] = xq + (size_t)(v0 + v) * x_stride;
                q41_row(n_cols, wr, w_stride, xs, nv, y + (int64_t)v0 * y_stride + r, y_stride, v0 ? 0 : prefetch, 0);
            }
        }
    }
}

#endif
