/* Q8_0 prefill with the ROWS in the vector lanes: an int8 GEMM whose per-block float work is shared by 8 rows
 * (the prototype of kernels/gemm_i8_rows.inc).
 *
 * The question (docs/perf-log.md, entry 29): the int8 tiles (tile_q32_x86_256.inc) and llama.cpp's keep the 32
 * elements of a block in the lanes, so every (row, vector, block) ends in a convert and an FMA on the pipes that
 * also multiply; the float GEMM spends 4 FMAs per (row, vector, 32 elements). With 8 rows in the lanes (a panel
 * built per call: each row's block is 8 dwords, an 8 x 8 dword transpose puts dword j of the 8 rows in one ymm)
 * and the vector's 4 activation bytes j broadcast, one vpdpbusd (AVX-VNNI) is 32 products of 8 rows; the block's
 * convert, scale product and FMA then serve 8 rows: 8 + 3 instructions per (8 rows, vector, block) where the
 * float GEMM needs 32. Plain AVX2 has no vpdpbusd: vpmaddubsw + vpmaddwd, with the weights' signs moved onto the
 * broadcast activations (vpsignb, or xor + sub with a mask kept in the panel).
 *
 *   K=src/onewell/_native/kernels
 *   gcc -O3 -std=c11 -mavx2 -mfma -mf16c -mavxvnni -I$K -I$K/.. benchmarks/prototypes/q8_0_rows_in_lanes.c \
 *       -o /tmp/ril -lm && /tmp/ril 4.0
 * prints, per shape, cycles per (row, vector, 32 elements) at the given GHz and MAC per cycle, and the largest
 * relative error of each kernel against a double-precision reference. */
#define _POSIX_C_SOURCE 200809L
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tile_avx2.h"

int ow_gemm_overlap(void) { return 1; }
#include "gemm_f32_avx2.h"

#define INL static inline __attribute__((always_inline))
enum { CHUNK = 128, NVEC = 128, KCB = 8 /* blocks per pass */, RL = 8 /* rows per panel */ };

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* 8 x 8 dword transpose (the float one on integer registers) */
INL void transpose8_epi32(__m256i r[8]) {
    __m256 f[8];
    for (int i = 0; i < 8; i++) f[i] = _mm256_castsi256_ps(r[i]);
    ta_transpose8_ps(f);
    for (int i = 0; i < 8; i++) r[i] = _mm256_castps_si256(f[i]);
}

/* panel of 8 rows x nb blocks from block b0: per block, 8 ymm of dword j of the 8 rows (VNNI: q ^ 0x80; AVX2:
 * |q| then, second 8, the sign source: q itself for vpsignb, or the mask q < 0 for xor + sub), then 8 float scales */
enum { P_VNNI, P_SIGN, P_MASK };
static size_t panel_block_bytes(int kind) { return kind == P_VNNI ? 8 * 32 + 32 : 16 * 32 + 32; }

static void build_panel(const uint8_t *w, size_t stride, int64_t b0, int nb, int kind, uint8_t *panel) {
    const size_t pb = panel_block_bytes(kind);
    for (int b = 0; b < nb; b++) {
        __m256i r[8];
        uint16_t h[8];
        for (int i = 0; i < 8; i++) {
            const ow_block_q8_0 *blk = (const ow_block_q8_0 *)(w + (size_t)i * stride) + b0 + b;
            r[i] = _mm256_loadu_si256((const __m256i *)blk->qs);
            h[i] = blk->d;
        }
        transpose8_epi32(r);
        uint8_t *p = panel + (size_t)b * pb;
        for (int j = 0; j < 8; j++) {
            if (kind == P_VNNI) {
                _mm256_store_si256((__m256i *)(p + 32 * j), _mm256_xor_si256(r[j], _mm256_set1_epi8((char)0x80)));
            } else {
                _mm256_store_si256((__m256i *)(p + 32 * j), _mm256_abs_epi8(r[j]));
                const __m256i s = kind == P_SIGN ? r[j] : _mm256_cmpgt_epi8(_mm256_setzero_si256(), r[j]);
                _mm256_store_si256((__m256i *)(p + 256 + 32 * j), s);
            }
        }
        _mm256_store_ps((float *)(p + pb - 32), _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)h)));
    }
}

static inline int32_t act32(const ow_block_q8_0 *xb, int j) { int32_t v; memcpy(&v, xb->qs + 4 * j, 4); return v; }

/* NV vectors x the panel's nb blocks into y[v * ys + 0..7] */
__attribute__((target("avx2,fma,f16c,avxvnni")))
INL void micro_vnni(const uint8_t *panel, int nb, int64_t b0, const uint8_t *x, size_t xs_bytes, const float *dx,
                    const int32_t *seed, int64_t nbt, float *y, int64_t ys, int first, const int NV) {
    const size_t pb = panel_block_bytes(P_VNNI);
    __m256 acc[8];
    for (int v = 0; v < NV; v++) acc[v] = first ? _mm256_setzero_ps() : _mm256_loadu_ps(y + v * ys);
    for (int b = 0; b < nb; b++) {
        const uint8_t *p = panel + (size_t)b * pb;
        __m256i ia[8];
        const ow_block_q8_0 *xb[8];
        for (int v = 0; v < NV; v++) {
            ia[v] = _mm256_set1_epi32(seed[v * nbt + b0 + b]);
            xb[v] = (const ow_block_q8_0 *)(x + (size_t)v * xs_bytes) + b0 + b;
        }
        for (int j = 0; j < 8; j++) {
            const __m256i u = _mm256_load_si256((const __m256i *)(p + 32 * j));
            for (int v = 0; v < NV; v++) ia[v] = _mm256_dpbusd_avx_epi32(ia[v], u, _mm256_set1_epi32(act32(xb[v], j)));
        }
        const __m256 dw = _mm256_load_ps((const float *)(p + pb - 32));
        for (int v = 0; v < NV; v++)
            acc[v] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ia[v]), _mm256_mul_ps(dw, _mm256_set1_ps(dx[v * nbt + b0 + b])),
                                     acc[v]);
    }
    for (int v = 0; v < NV; v++) _mm256_storeu_ps(y + v * ys, acc[v]);
}

__attribute__((target("avx2,fma,f16c")))
INL void micro_avx2(const uint8_t *panel, int nb, int64_t b0, const uint8_t *x, size_t xs_bytes, const float *dx,
                    int64_t nbt, float *y, int64_t ys, int first, const int KIND, const int NV) {
    const size_t pb = panel_block_bytes(KIND);
    __m256 acc[8];
    for (int v = 0; v < NV; v++) acc[v] = first ? _mm256_setzero_ps() : _mm256_loadu_ps(y + v * ys);
    const __m256i ones = _mm256_set1_epi16(1);
    for (int b = 0; b < nb; b++) {
        const uint8_t *p = panel + (size_t)b * pb;
        __m256i ia[8];
        const ow_block_q8_0 *xb[8];
        for (int v = 0; v < NV; v++) {
            ia[v] = _mm256_setzero_si256();
            xb[v] = (const ow_block_q8_0 *)(x + (size_t)v * xs_bytes) + b0 + b;
        }
        for (int j = 0; j < 8; j++) {
            const __m256i u = _mm256_load_si256((const __m256i *)(p + 32 * j));
            const __m256i s = _mm256_load_si256((const __m256i *)(p + 256 + 32 * j));
            for (int v = 0; v < NV; v++) {
                const __m256i a = _mm256_set1_epi32(act32(xb[v], j));
                const __m256i sa = KIND == P_SIGN ? _mm256_sign_epi8(a, s) : _mm256_sub_epi8(_mm256_xor_si256(a, s), s);
                ia[v] = _mm256_add_epi32(ia[v], _mm256_madd_epi16(_mm256_maddubs_epi16(u, sa), ones));
            }
        }
        const __m256 dw = _mm256_load_ps((const float *)(p + pb - 32));
        for (int v = 0; v < NV; v++)
            acc[v] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ia[v]), _mm256_mul_ps(dw, _mm256_set1_ps(dx[v * nbt + b0 + b])),
                                     acc[v]);
    }
    for (int v = 0; v < NV; v++) _mm256_storeu_ps(y + v * ys, acc[v]);
}

/* ---- drivers ---------------------------------------------------------------------------------------------- */

static float g_dx[NVEC * 512];
static int32_t g_seed[NVEC * 512];
static uint8_t g_panel[KCB * 64 * (16 * 32 + 32)] __attribute__((aligned(64)));
static int g_kcb = KCB, g_nv = 4;

static void act_prep(const uint8_t *x, size_t xs, int n_vec, int64_t nbt) {
    for (int v = 0; v < n_vec; v++)
        for (int64_t b = 0; b < nbt; b++) {
            const ow_block_q8_0 *xb = (const ow_block_q8_0 *)(x + (size_t)v * xs) + b;
            int s = 0;
            for (int t = 0; t < 32; t++) s += xb->qs[t];
            g_dx[v * nbt + b] = _cvtsh_ss(xb->d);
            g_seed[v * nbt + b] = -128 * s;
        }
}

#define DISPATCH_NV(CALL)                                                                                          \
    switch (nv) {                                                                                                  \
    case 1: CALL(1); break; case 2: CALL(2); break; case 3: CALL(3); break; case 4: CALL(4); break;                 \
    case 5: CALL(5); break; case 6: CALL(6); break; case 7: CALL(7); break; default: CALL(8); break;                \
    }

static void gemm_rl(int kind, OW_TILE_ARGS) {
    const int64_t nbt = n_cols / 32;
    act_prep(x, x_stride, n_vec, nbt);
    for (int64_t kb0 = 0; kb0 < nbt; kb0 += g_kcb) {
        const int nb = nbt - kb0 < g_kcb ? (int)(nbt - kb0) : g_kcb;
        for (int r0 = 0; r0 < nr; r0 += RL) {
            build_panel(w + (size_t)r0 * w_stride, w_stride, kb0, nb, kind, g_panel);
            for (int v0 = 0; v0 < n_vec; v0 += g_nv) {
                const int nv = n_vec - v0 < g_nv ? n_vec - v0 : g_nv;
                const uint8_t *xv = (const uint8_t *)x + (size_t)v0 * x_stride;
                float *yv = y + v0 * y_stride + r0;
#define CV(N) micro_vnni(g_panel, nb, kb0, xv, x_stride, g_dx + v0 * nbt, g_seed + v0 * nbt, nbt, yv, y_stride, kb0 == 0, N)
#define CS(N) micro_avx2(g_panel, nb, kb0, xv, x_stride, g_dx + v0 * nbt, nbt, yv, y_stride, kb0 == 0, P_SIGN, N)
#define CM(N) micro_avx2(g_panel, nb, kb0, xv, x_stride, g_dx + v0 * nbt, nbt, yv, y_stride, kb0 == 0, P_MASK, N)
                if (kind == P_VNNI) { DISPATCH_NV(CV) }
                else if (kind == P_SIGN) { DISPATCH_NV(CS) }
                else { DISPATCH_NV(CM) }
            }
        }
    }
}

static void run_float(OW_TILE_ARGS) { gf_gemm(q8_0_vectors, q8_0_panel_part, n_cols, w, w_stride, nr, x, x_stride, n_vec, y, y_stride); }
static void run_vnni(OW_TILE_ARGS) { gemm_rl(P_VNNI, n_cols, w, w_stride, nr, x, x_stride, n_vec, y, y_stride); }
static void run_sign(OW_TILE_ARGS) { gemm_rl(P_SIGN, n_cols, w, w_stride, nr, x, x_stride, n_vec, y, y_stride); }
static void run_mask(OW_TILE_ARGS) { gemm_rl(P_MASK, n_cols, w, w_stride, nr, x, x_stride, n_vec, y, y_stride); }

/* ---- main --------------------------------------------------------------------------------------------------- */

static void fill(uint8_t *buf, int rows, int64_t nbt, unsigned *seed) {
    for (int r = 0; r < rows; r++)
        for (int64_t b = 0; b < nbt; b++) {
            ow_block_q8_0 *blk = (ow_block_q8_0 *)(buf + (size_t)r * nbt * sizeof(ow_block_q8_0)) + b;
            blk->d = _cvtss_sh(0.001f + 0.01f * (float)(rand_r(seed) % 1000) / 1000.0f, 0);
            for (int t = 0; t < 32; t++) blk->qs[t] = (int8_t)(rand_r(seed) % 255 - 127);
        }
}

typedef void (*tile_fn)(OW_TILE_ARGS);

int main(int argc, char **argv) {
    const double ghz = argc > 1 ? atof(argv[1]) : 4.0;
    if (argc > 2) g_kcb = atoi(argv[2]);
    if (argc > 3) g_nv = atoi(argv[3]);
    const int64_t shapes[] = {896, 4864};
    const int total_rows = 4864;   /* the matrix: rows streamed from memory chunk by chunk, as in prefill */
    const char *names[] = {"float GEMM", "VNNI rows", "AVX2 sign", "AVX2 mask"};
    tile_fn fns[] = {run_float, run_vnni, run_sign, run_mask};
    for (int si = 0; si < 2; si++) {
        const int64_t K = shapes[si], nbt = K / 32;
        const size_t stride = (size_t)nbt * sizeof(ow_block_q8_0);
        const int rows = si == 0 ? total_rows : 896;
        uint8_t *w = malloc(stride * rows), *x = malloc(stride * NVEC);
        unsigned seed = 1;
        fill(w, rows, nbt, &seed);
        fill(x, NVEC, nbt, &seed);
        float *y = aligned_alloc(64, sizeof(float) * NVEC * CHUNK), *ref = malloc(sizeof(float) * NVEC * CHUNK);
        /* reference for the first chunk */
        for (int v = 0; v < NVEC; v++)
            for (int r = 0; r < CHUNK; r++) {
                double s = 0;
                for (int64_t b = 0; b < nbt; b++) {
                    const ow_block_q8_0 *wb = (const ow_block_q8_0 *)(w + (size_t)r * stride) + b;
                    const ow_block_q8_0 *xb = (const ow_block_q8_0 *)(x + (size_t)v * stride) + b;
                    long long d = 0;
                    for (int t = 0; t < 32; t++) d += wb->qs[t] * xb->qs[t];
                    s += (double)d * _cvtsh_ss(wb->d) * _cvtsh_ss(xb->d);
                }
                ref[v * CHUNK + r] = (float)s;
            }
        double best[4] = {1e30, 1e30, 1e30, 1e30};
        for (int f = 0; f < 4; f++) {
            fns[f](K, w, stride, CHUNK, x, stride, NVEC, y, CHUNK);
            double err = 0, scale = 0;
            for (int i = 0; i < NVEC * CHUNK; i++) {
                err = fmax(err, fabs(y[i] - ref[i]));
                scale = fmax(scale, fabs(ref[i]));
            }
            printf("K=%5lld %-11s max |err| / max |ref| = %.2e\n", (long long)K, names[f], err / scale);
        }
        for (int rep = 0; rep < 9; rep++)
            for (int f = 0; f < 4; f++) {
                const double t0 = now();
                for (int c = 0; c + CHUNK <= rows; c += CHUNK)
                    fns[f](K, w + (size_t)c * stride, stride, CHUNK, x, stride, NVEC, y, CHUNK);
                const double t = now() - t0;
                if (t < best[f]) best[f] = t;
            }
        const double macs = (double)(rows / CHUNK * CHUNK) * NVEC * K;
        for (int f = 0; f < 4; f++)
            printf("K=%5lld rows=%d %-11s %6.2f ms  %5.1f MAC/cycle  %.2fx float\n", (long long)K, rows, names[f],
                   best[f] * 1e3, macs / (best[f] * ghz * 1e9), best[0] / best[f]);
        free(w); free(x); free(y); free(ref);
    }
    return 0;
}
