/* Q8_0 prefill on AVX2 as a float GEMM: weights and activations dequantized to f32, multiplied with FMAs.
 *
 * Why (docs/perf-log.md, entry 25): the int8 tile (tile_q32_x86_256.inc) spends five instructions per (row, vector,
 * 32 elements) on the two pipes that run them all (vpsignb, vpmaddubsw, vpmaddwd, vcvtdq2ps, the FMA), and
 * llama.cpp's the same five. In floats the same 32 products are four FMAs. Dequantizing costs little: a row panel
 * serves every vector of the batch, a vector every row of the chunk. Measured 1.2x the int8 tile at 64 vectors.
 *
 * Numerics: every dequantized value is exact (an int8 times an fp16 scale fits a float's 24 bits), so the only
 * difference from the int8 tile is rounding: one float chain per (row, vector) over the columns, GF_KC at a time,
 * against the int8 kernel's exact block sums, about 1e-7 relative. A vector's result does not depend on which
 * other vectors share its batch (each output is the same chain in its own lane). Through a model the difference
 * grows where it flips the rounding of a later layer's 8-bit activations: Qwen2.5-0.5B logits of a prefill and of
 * the same tokens one at a time then differ by ~0.04 nats mean (top 10), the size of onewell's distance to
 * llama.cpp. So batches below OW_FLOAT_GEMM_MIN_VECS vectors (batched decode of a few sequences) run the int8
 * tile and stay bit-identical to one vector at a time; prompts, 32 tokens and up, run the GEMM.
 *
 * Shape: panels of 16 rows, dequantized and transposed column-major (panel[k][16]), times 6 vectors at a time:
 * per column 2 panel loads, 6 broadcast activations, 12 FMAs into 12 accumulators (BLIS's 6 x 16 on AVX2). */
#include "vec_dot.h"

#if OW_X86_KERNELS
#include "tile_avx2.h"

#define GF_ROWS 16     /* panel rows: two ymm per column */
#define GF_VECS 6      /* vectors per micro-kernel call: 12 accumulators + 2 panel + 1 broadcast registers */
#define GF_KC 256      /* columns per pass: the panel (16 KiB) stays in L1, the vectors' floats (128 KiB) in L2 */
#define GF_VGROUP 128  /* vectors whose floats are dequantized per pass: each panel serves up to this many */
#define GF_INLINE TA_INLINE

/* Columns k0..k0+kc of n Q8_0 vectors as floats, GF_KC apart */
GF_INLINE void gf_vectors(const uint8_t *x, size_t x_stride, int n, int64_t k0, int64_t kc, float *out) {
    for (int v = 0; v < n; v++) {
        const ow_block_q8_0 *xb = (const ow_block_q8_0 *)(x + (size_t)v * x_stride) + k0 / OW_QK;
        float *o = out + (int64_t)v * GF_KC;
        for (int64_t b = 0; b < kc / OW_QK; b++) {
            const __m256 d = _mm256_set1_ps(_cvtsh_ss(xb[b].d));
            for (int j = 0; j < OW_QK; j += 8) _mm256_store_ps(o + OW_QK * b + j, ta_dequant8_q8(xb[b].qs + j, d));
        }
    }
}

/* Part `part` of a panel: block b (of kc / 32) of rows 8 * half .. 8 * half + 7 (of n, 1..16; rows n..15 are
 * zeros), with part = half * (kc / 32) + b. The whole panel holds columns k0..k0+kc column-major, panel[k * 16 + r];
 * 8 x 8 floats are transposed by shuffles. (Transposing the 16 x 32 quants as bytes first takes fewer shuffles and
 * ran 1.3x faster with the rows in L1, but made prefill 4 % slower with the rows streamed from memory:
 * docs/perf-log.md, entry 25.) */
GF_INLINE void gf_panel_part(const uint8_t *w, size_t w_stride, int n, int64_t k0, int64_t kc, int part,
                             float *panel) {
    const int64_t nb = kc / OW_QK, b = part % nb;
    const int half = (int)(part / nb);
    const ow_block_q8_0 *blk[8];
    __m256 d[8];
    for (int i = 0; i < 8; i++) {
        const int r = 8 * half + i;
        blk[i] = r < n ? (const ow_block_q8_0 *)(w + (size_t)r * w_stride) + k0 / OW_QK + b : NULL;
        d[i] = _mm256_set1_ps(blk[i] ? _cvtsh_ss(blk[i]->d) : 0.0f);
    }
    for (int j = 0; j < OW_QK; j += 8) {
        __m256 c[8];
        for (int i = 0; i < 8; i++) c[i] = blk[i] ? ta_dequant8_q8(blk[i]->qs + j, d[i]) : _mm256_setzero_ps();
        ta_transpose8_ps(c);
        float *p = panel + (OW_QK * b + j) * GF_ROWS + 8 * half;
        for (int i = 0; i < 8; i++) _mm256_store_ps(p + i * GF_ROWS, c[i]);
    }
}

/* parts of a panel of kc columns */
GF_INLINE int gf_panel_parts(int64_t kc) { return (int)(2 * (kc / OW_QK)); }

/* NV vectors (floats xf, GF_KC apart) times the panel's kc columns into y[v * y_stride + 0..15] (rows past
 * `rows` left alone: masked); the first pass stores, the later ones add */
GF_INLINE void gf_micro(const float *panel, int64_t kc, const float *xf, float *y, int64_t y_stride, int first,
                        __m256i m0, __m256i m1, const int NV) {
    __m256 acc[GF_VECS][2];
    for (int v = 0; v < NV; v++) acc[v][0] = acc[v][1] = _mm256_setzero_ps();
    for (int64_t k = 0; k < kc; k++) {
        const __m256 w0 = _mm256_load_ps(panel + k * GF_ROWS), w1 = _mm256_load_ps(panel + k * GF_ROWS + 8);
        for (int v = 0; v < NV; v++) {
            const __m256 a = _mm256_broadcast_ss(xf + (int64_t)v * GF_KC + k);
            acc[v][0] = _mm256_fmadd_ps(w0, a, acc[v][0]);
            acc[v][1] = _mm256_fmadd_ps(w1, a, acc[v][1]);
        }
    }
    for (int v = 0; v < NV; v++) {
        float *yv = y + (int64_t)v * y_stride;
        if (!first) {
            acc[v][0] = _mm256_add_ps(acc[v][0], _mm256_maskload_ps(yv, m0));
            acc[v][1] = _mm256_add_ps(acc[v][1], _mm256_maskload_ps(yv + 8, m1));
        }
        _mm256_maskstore_ps(yv, m0, acc[v][0]);
        _mm256_maskstore_ps(yv + 8, m1, acc[v][1]);
    }
}

/* lanes 0..n-1 of 8 set */
GF_INLINE __m256i gf_mask(int n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* A panel's place in a call's sequence: rows r0.. (rows of them) of the pass over columns k0..k0+kc */
typedef struct {
    int64_t k0, kc, r0;
    int rows;
} gf_step;

GF_INLINE gf_step gf_first_step(int64_t n_cols, int64_t nr) {
    gf_step s = {0, n_cols < GF_KC ? n_cols : GF_KC, 0, nr < GF_ROWS ? (int)nr : GF_ROWS};
    return s;
}

/* the next panel: the next 16 rows of this pass, else the first 16 of the next pass; kc = 0 after the last */
GF_INLINE gf_step gf_next_step(gf_step s, int64_t n_cols, int64_t nr) {
    s.r0 += GF_ROWS;
    if (s.r0 >= nr) {
        s.r0 = 0;
        s.k0 += s.kc;
        s.kc = n_cols - s.k0 < GF_KC ? n_cols - s.k0 : GF_KC;
    }
    s.rows = nr - s.r0 < GF_ROWS ? (int)(nr - s.r0) : GF_ROWS;
    return s;
}

/* The GEMM; fewer than OW_FLOAT_GEMM_MIN_VECS vectors, or any batch with the float_gemm knob off, go to `tile`,
 * the path's int8 tile (which sends one vector to the decode kernel).
 * With ow_gemm_overlap() the next panel is built while this one is used, a part after each micro-kernel call: its
 * loads and shuffles then run beside the FMAs instead of in a phase of their own, and its rows' memory latency
 * hides behind them (1.02-1.03x, docs/perf-log.md entry 28). Two 16 KiB panels and the vectors' lines then share
 * L1, so CPUs with a 32 KiB L1 build each panel after the last micro-kernel call of the one before. */
GF_INLINE void gf_gemm(void (*tile)(OW_TILE_ARGS), OW_TILE_ARGS) {
    if (n_vec < OW_FLOAT_GEMM_MIN_VECS || !ow_float_gemm()) {
        tile(n_cols, w, w_stride, nr, x, x_stride, n_vec, y, y_stride);
        return;
    }
    float xf[GF_VGROUP * GF_KC] __attribute__((aligned(32)));
    float panels[2][GF_ROWS * GF_KC] __attribute__((aligned(32)));
    const int overlap = ow_gemm_overlap();
    for (int v0 = 0; v0 < n_vec; v0 += GF_VGROUP) {
        const int nv = n_vec - v0 < GF_VGROUP ? n_vec - v0 : GF_VGROUP;
        const int calls = (nv + GF_VECS - 1) / GF_VECS;
        gf_step cur = gf_first_step(n_cols, nr);
        for (int p = 0; p < gf_panel_parts(cur.kc); p++) gf_panel_part(w, w_stride, cur.rows, 0, cur.kc, p, panels[0]);
        for (int i = 0; cur.kc > 0; i++) {
            const float *panel = panels[i & 1];
            float *next_panel = panels[(i + 1) & 1];
            const gf_step nxt = gf_next_step(cur, n_cols, nr);
            const uint8_t *nw = w + (size_t)nxt.r0 * w_stride;
            const int parts = nxt.kc > 0 ? gf_panel_parts(nxt.kc) : 0;
            const int per_call = overlap ? (parts + calls - 1) / calls : 0;
            if (cur.r0 == 0) gf_vectors(x + (size_t)v0 * x_stride, x_stride, nv, cur.k0, cur.kc, xf);
            const __m256i m0 = gf_mask(cur.rows), m1 = gf_mask(cur.rows - 8);
            float *yv = y + (int64_t)v0 * y_stride + cur.r0;
            const int first = cur.k0 == 0;
            int part = 0;
            for (int v = 0; v < nv; v += GF_VECS) {
                const float *xr = xf + (int64_t)v * GF_KC;
                float *yr = yv + v * y_stride;
                switch (nv - v) {
                case 1: gf_micro(panel, cur.kc, xr, yr, y_stride, first, m0, m1, 1); break;
                case 2: gf_micro(panel, cur.kc, xr, yr, y_stride, first, m0, m1, 2); break;
                case 3: gf_micro(panel, cur.kc, xr, yr, y_stride, first, m0, m1, 3); break;
                case 4: gf_micro(panel, cur.kc, xr, yr, y_stride, first, m0, m1, 4); break;
                case 5: gf_micro(panel, cur.kc, xr, yr, y_stride, first, m0, m1, 5); break;
                default: gf_micro(panel, cur.kc, xr, yr, y_stride, first, m0, m1, GF_VECS); break;
                }
                for (int e = part + per_call; part < e && part < parts; part++)
                    gf_panel_part(nw, w_stride, nxt.rows, nxt.k0, nxt.kc, part, next_panel);
            }
            for (; part < parts; part++) gf_panel_part(nw, w_stride, nxt.rows, nxt.k0, nxt.kc, part, next_panel);
            cur = nxt;
        }
    }
}

/* any_rows tiles of the AVX2 and AVX2 + AVX-VNNI paths: the GEMM needs nothing past AVX2 + FMA, only the small
 * batches differ */
TA_TARGET void vec_dot_q8_0_q8_0_gemm_avx2(OW_TILE_ARGS) {
    gf_gemm(vec_dot_q8_0_q8_0_tile_avx2, n_cols, w, w_stride, nr, x, x_stride, n_vec, y, y_stride);
}

TA_TARGET void vec_dot_q8_0_q8_0_gemm_avx2_vnni(OW_TILE_ARGS) {
    gf_gemm(vec_dot_q8_0_q8_0_tile_avx2_vnni, n_cols, w, w_stride, nr, x, x_stride, n_vec, y, y_stride);
}
#endif
