/* Q8_0 decode (one activation vector) on an AVX2 CPU whose 256-bit instructions are two 128-bit µops (AMD family
 * 0x17, docs/perf-log.md entries 41-42): which per-block sequence and which layout need the fewest cycles? Weights
 * in L2 and in memory, rows r and r + n/2 together (the package's two streams) unless said, variants interleaved,
 * minimum over rounds. Every variant but the probes is checked against a scalar reference.
 *   gcc -O3 -mavx2 -mfma -mf16c benchmarks/prototypes/q8_0_decode_zen1.c -o /tmp/qz && /tmp/qz [cols] [l2_rows]
 * (cols a multiple of 512 for the r16 variants: they run whole groups only.)
 * The file layout:
 *   cur    today's kernel: |w| x sign(a, w), vpmaddubsw, vpmaddwd, convert, fp16 scale broadcast, vmulps, fma
 *   sc     the scale product d_w * d_x in scalar (one vcvtph2ps/vmulss on xmm, a broadcast) instead of vmulps
 *   f128   sc with the int32 lanes folded to 128 bits before the convert and the fma
 *   w16    activations widened to int16 once per call; weights by vpmovsxbw, two vpmaddwd (no vpsignb)
 *   w16f   w16 folded to 128 bits
 *   pair   sc, two blocks folded to 128 bits each and joined: one convert + one fma per two blocks
 *   sc4    sc on four rows at a time (four streams)
 * Repacked layouts (one convert + one fma per group):
 *   r8     groups of 8 blocks, [8 fp16 scales][8 chunks of 32 bytes], the file's bytes reordered (a tail of 4 on
 *          xmm): what kernels/q8_0_r8.h became
 *   r16x   the package's R16 (groups of 16, 64-byte chunks read in halves, q + 128, scales after the row), one
 *          row at a time as vec_dot_r16_avx2.c
 *   r16p   r16x on two rows, each row's scales converted first (then one sequential pass over its quants)
 *   r16j   r16x on two rows, both halves of each 64-byte chunk read together
 *   r16s2  R16 with signed quants (no xor), two rows
 * Probes (wrong results, timing only): int (the integer part), nosign (no vpsignb), load (loads only), float (the
 * scale, convert and fma only).
 * The clock comes from a chain of dependent vaddps (latency 3 on Zen 1/2); it only scales the c/b figures. */
#define _POSIX_C_SOURCE 200809L
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct { uint16_t d; int8_t qs[32]; } __attribute__((packed)) blk;
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }

static int NB;
static const blk *X;        /* activation blocks */
static const int16_t *X16;  /* activations as int16, 32 per block */
static const float *XS;     /* activation scales as floats */

static inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
static inline float hsum128(__m128 s) {
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
static inline __m256i dot4(__m256i q, __m256i a) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_sign_epi8(q, q), _mm256_sign_epi8(a, q)), _mm256_set1_epi16(1));
}
static inline __m256i dot16(const blk *w, int b) {   /* int16 operands: lanes hold pairs, not quads */
    const __m256i w0 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)w->qs));
    const __m256i w1 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(w->qs + 16)));
    const __m256i p0 = _mm256_madd_epi16(w0, _mm256_loadu_si256((const __m256i *)(X16 + 32 * b)));
    const __m256i p1 = _mm256_madd_epi16(w1, _mm256_loadu_si256((const __m256i *)(X16 + 32 * b + 16)));
    return _mm256_add_epi32(p0, p1);
}
static inline __m128i fold(__m256i p) { return _mm_add_epi32(_mm256_castsi256_si128(p), _mm256_extracti128_si256(p, 1)); }
static inline float sprod(const blk *w, int b) { return _cvtsh_ss(w->d) * XS[b]; }

#define ROWS_LOOP(R, body_init, body_block, body_end)                                                        \
    for (int r0 = 0; r0 < nr / (R); r0++) {   /* rows r0, r0 + nr/R, ...: R streams, as the package reads */ \
        const blk *wr[R];                                                                                    \
        int rows_[R];                                                                                        \
        for (int i = 0; i < (R); i++) { rows_[i] = r0 + i * (nr / (R)); wr[i] = W + (size_t)rows_[i] * NB; } \
        body_init;                                                                                           \
        for (int b = 0; b < NB; b++) { body_block; }                                                         \
        body_end;                                                                                            \
    }

#define COMMA ,
static void v_cur(const blk *W, int nr, float *y) {
    ROWS_LOOP(2, __m256 acc[2] = {_mm256_setzero_ps() COMMA _mm256_setzero_ps()},
        const __m256i a = _mm256_loadu_si256((const __m256i *)X[b].qs);
        const __m256 dx = _mm256_broadcast_ss(XS + b);
        for (int i = 0; i < 2; i++) {
            const __m256i p = dot4(_mm256_loadu_si256((const __m256i *)wr[i][b].qs), a);
            acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_mul_ps(_mm256_cvtph_ps(_mm_set1_epi16((short)wr[i][b].d)), dx), acc[i]);
        },
        for (int i = 0; i < 2; i++) y[rows_[i]] = hsum(acc[i]))
}
static void v_sc(const blk *W, int nr, float *y) {
    ROWS_LOOP(2, __m256 acc[2] = {_mm256_setzero_ps() COMMA _mm256_setzero_ps()},
        const __m256i a = _mm256_loadu_si256((const __m256i *)X[b].qs);
        for (int i = 0; i < 2; i++) {
            const __m256i p = dot4(_mm256_loadu_si256((const __m256i *)wr[i][b].qs), a);
            acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(sprod(&wr[i][b], b)), acc[i]);
        },
        for (int i = 0; i < 2; i++) y[rows_[i]] = hsum(acc[i]))
}
static void v_sc4(const blk *W, int nr, float *y) {
    ROWS_LOOP(4, __m256 acc[4] = {_mm256_setzero_ps() COMMA _mm256_setzero_ps() COMMA _mm256_setzero_ps() COMMA _mm256_setzero_ps()},
        const __m256i a = _mm256_loadu_si256((const __m256i *)X[b].qs);
        for (int i = 0; i < 4; i++) {
            const __m256i p = dot4(_mm256_loadu_si256((const __m256i *)wr[i][b].qs), a);
            acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(sprod(&wr[i][b], b)), acc[i]);
        },
        for (int i = 0; i < 4; i++) y[rows_[i]] = hsum(acc[i]))
}
static void v_f128(const blk *W, int nr, float *y) {
    ROWS_LOOP(2, __m128 acc[2] = {_mm_setzero_ps() COMMA _mm_setzero_ps()},
        const __m256i a = _mm256_loadu_si256((const __m256i *)X[b].qs);
        for (int i = 0; i < 2; i++) {
            const __m128i p = fold(dot4(_mm256_loadu_si256((const __m256i *)wr[i][b].qs), a));
            acc[i] = _mm_fmadd_ps(_mm_cvtepi32_ps(p), _mm_set1_ps(sprod(&wr[i][b], b)), acc[i]);
        },
        for (int i = 0; i < 2; i++) y[rows_[i]] = hsum128(acc[i]))
}
static void v_w16(const blk *W, int nr, float *y) {
    ROWS_LOOP(2, __m256 acc[2] = {_mm256_setzero_ps() COMMA _mm256_setzero_ps()},
        for (int i = 0; i < 2; i++)
            acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot16(&wr[i][b], b)), _mm256_set1_ps(sprod(&wr[i][b], b)), acc[i]);,
        for (int i = 0; i < 2; i++) y[rows_[i]] = hsum(acc[i]))
}
static void v_w16f(const blk *W, int nr, float *y) {
    ROWS_LOOP(2, __m128 acc[2] = {_mm_setzero_ps() COMMA _mm_setzero_ps()},
        for (int i = 0; i < 2; i++)
            acc[i] = _mm_fmadd_ps(_mm_cvtepi32_ps(fold(dot16(&wr[i][b], b))), _mm_set1_ps(sprod(&wr[i][b], b)), acc[i]);,
        for (int i = 0; i < 2; i++) y[rows_[i]] = hsum128(acc[i]))
}
static void v_pair(const blk *W, int nr, float *y) {   /* NB even */
    for (int r = 0; r < nr / 2; r++) {
        const blk *wr[2] = {W + (size_t)r * NB, W + (size_t)(r + nr / 2) * NB};
        __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
        for (int b = 0; b < NB; b += 2) {
            const __m256i a0 = _mm256_loadu_si256((const __m256i *)X[b].qs), a1 = _mm256_loadu_si256((const __m256i *)X[b + 1].qs);
            for (int i = 0; i < 2; i++) {
                const __m128i p0 = fold(dot4(_mm256_loadu_si256((const __m256i *)wr[i][b].qs), a0));
                const __m128i p1 = fold(dot4(_mm256_loadu_si256((const __m256i *)wr[i][b + 1].qs), a1));
                const __m256 d = _mm256_set_m128(_mm_set1_ps(sprod(&wr[i][b + 1], b + 1)), _mm_set1_ps(sprod(&wr[i][b], b)));
                acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_set_m128i(p1, p0)), d, acc[i]);
            }
        }
        for (int i = 0; i < 2; i++) y[r + i * (nr / 2)] = hsum(acc[i]);
    }
}


/* r8: a repacked row, the same bytes as the file's: per group of 8 blocks, 8 fp16 scales then 8 chunks of 32 bytes,
 * chunk j = bytes 4j..4j+3 of the 8 blocks, so int32 lane k sums block k (one convert + one fma per 8 blocks).
 * A row's last m < 8 blocks: m scales, then chunks of 4m bytes (m = 4 here: xmm). Activations likewise (XR8). */
static const int8_t *XR8;   /* activations interleaved the same way, scales apart (XS) */
static const uint8_t *WR8;  /* the repacked matrix, row stride NB * 34 */
static void repack_r8(const blk *src, uint8_t *dst, int nrows) {
    for (int r = 0; r < nrows; r++) {
        uint8_t *o = dst + (size_t)r * NB * 34;
        for (int g = 0; g < NB; g += 8) {
            const int m = NB - g < 8 ? NB - g : 8;
            for (int k = 0; k < m; k++) memcpy(o + 2 * k, &src[(size_t)r * NB + g + k].d, 2);
            o += 2 * m;
            for (int j = 0; j < 8; j++)
                for (int k = 0; k < m; k++) { memcpy(o, src[(size_t)r * NB + g + k].qs + 4 * j, 4); o += 4; }
        }
    }
}
static void v_r8(const blk *W, int nr, float *y) {
    (void)W;
    for (int r = 0; r < nr / 2; r++) {
        const uint8_t *wr[2] = {WR8 + (size_t)r * NB * 34, WR8 + (size_t)(r + nr / 2) * NB * 34};
        __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
        __m128 acc4[2] = {_mm_setzero_ps(), _mm_setzero_ps()};
        int g = 0;
        for (; g + 8 <= NB; g += 8) {
            __m256i p[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
            const int8_t *xg = XR8 + 32 * g;
            for (int j = 0; j < 8; j++) {
                const __m256i a = _mm256_loadu_si256((const __m256i *)(xg + 32 * j));
                for (int i = 0; i < 2; i++)
                    p[i] = _mm256_add_epi32(p[i], dot4(_mm256_loadu_si256((const __m256i *)(wr[i] + 34 * g + 16 + 32 * j)), a));
            }
            const __m256 dx = _mm256_loadu_ps(XS + g);
            for (int i = 0; i < 2; i++) {
                const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(wr[i] + 34 * g)));
                acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p[i]), _mm256_mul_ps(dw, dx), acc[i]);
            }
        }
        if (g < NB) {   /* 4 blocks */
            __m128i p[2] = {_mm_setzero_si128(), _mm_setzero_si128()};
            const int8_t *xg = XR8 + 32 * g;
            for (int j = 0; j < 8; j++) {
                const __m128i a = _mm_loadu_si128((const __m128i *)(xg + 16 * j));
                for (int i = 0; i < 2; i++) {
                    const __m128i q = _mm_loadu_si128((const __m128i *)(wr[i] + 34 * g + 8 + 16 * j));
                    p[i] = _mm_add_epi32(p[i], _mm_madd_epi16(_mm_maddubs_epi16(_mm_sign_epi8(q, q), _mm_sign_epi8(a, q)), _mm_set1_epi16(1)));
                }
            }
            const __m128 dx = _mm_loadu_ps(XS + g);
            for (int i = 0; i < 2; i++) {
                const __m128 dw = _mm_cvtph_ps(_mm_loadl_epi64((const __m128i *)(wr[i] + 34 * g)));
                acc4[i] = _mm_fmadd_ps(_mm_cvtepi32_ps(p[i]), _mm_mul_ps(dw, dx), acc4[i]);
            }
        }
        for (int i = 0; i < 2; i++) y[r + i * (nr / 2)] = hsum(acc[i]) + hsum128(acc4[i]);
    }
}

/* r16x: the package's R16 layout (q8_0_r16.h: groups of 16 blocks, chunk j = 64 bytes, quants stored q + 128, the
 * scales after the row's quants), full groups only (columns a multiple of 512), halves of 8 lanes as vec_dot_r16_avx2.c */
static const uint8_t *WR16;
static const int8_t *XR16;
static void repack_r16(const blk *src, uint8_t *dst, int nrows) {
    for (int r = 0; r < nrows; r++) {
        uint8_t *o = dst + (size_t)r * NB * 34;
        for (int b = 0; b < NB; b++) {
            const int g = b / 16 * 16;
            for (int j = 0; j < 8; j++)
                for (int t = 0; t < 4; t++) o[32 * g + 64 * j + 4 * (b - g) + t] = (uint8_t)(src[(size_t)r * NB + b].qs[4 * j + t] ^ 0x80);
            memcpy(o + 32 * NB + 2 * b, &src[(size_t)r * NB + b].d, 2);
        }
    }
}
static void v_r16x(const blk *W, int nr, float *y) {
    (void)W;
    const __m256i k80 = _mm256_set1_epi8((char)0x80);
    for (int r = 0; r < nr; r++) {
        const uint8_t *wr = WR16 + (size_t)r * NB * 34;
        __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
        for (int g = 0; g < NB; g += 16)
            for (int h = 0; h < 2; h++) {
                __m256i p = _mm256_setzero_si256();
                for (int j = 0; j < 8; j++) {
                    const __m256i q = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(wr + 32 * g + 64 * j + 32 * h)), k80);
                    p = _mm256_add_epi32(p, dot4(q, _mm256_loadu_si256((const __m256i *)(XR16 + 32 * g + 64 * j + 32 * h))));
                }
                const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(wr + 32 * NB + 2 * (g + 8 * h))));
                acc[h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_mul_ps(dw, _mm256_loadu_ps(XS + g + 8 * h)), acc[h]);
            }
        y[r] = hsum(_mm256_add_ps(acc[0], acc[1]));
    }
}

/* r16p: r16x on two rows from the two halves (two streams), each row's scales converted up front (so the quants are
 * then read in one sequential pass) */
static void v_r16p(const blk *W, int nr, float *y) {
    (void)W;
    const __m256i k80 = _mm256_set1_epi8((char)0x80);
    float dw[2][1024] __attribute__((aligned(32)));
    for (int r = 0; r < nr / 2; r++) {
        const uint8_t *wr[2] = {WR16 + (size_t)r * NB * 34, WR16 + (size_t)(r + nr / 2) * NB * 34};
        for (int i = 0; i < 2; i++)
            for (int b = 0; b < NB; b += 8)
                _mm256_store_ps(dw[i] + b, _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(wr[i] + 32 * NB + 2 * b))), _mm256_loadu_ps(XS + b)));
        __m256 acc[2][2] = {{_mm256_setzero_ps(), _mm256_setzero_ps()}, {_mm256_setzero_ps(), _mm256_setzero_ps()}};
        for (int g = 0; g < NB; g += 16)
            for (int h = 0; h < 2; h++)
                for (int i = 0; i < 2; i++) {
                    __m256i p = _mm256_setzero_si256();
                    for (int j = 0; j < 8; j++) {
                        const __m256i q = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(wr[i] + 32 * g + 64 * j + 32 * h)), k80);
                        p = _mm256_add_epi32(p, dot4(q, _mm256_loadu_si256((const __m256i *)(XR16 + 32 * g + 64 * j + 32 * h))));
                    }
                    acc[i][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_load_ps(dw[i] + g + 8 * h), acc[i][h]);
                }
        for (int i = 0; i < 2; i++) y[r + i * (nr / 2)] = hsum(_mm256_add_ps(acc[i][0], acc[i][1]));
    }
}

/* r16j: r16x with both halves of each 64-byte chunk read together (one sequential pass over the group's lines),
 * two rows from the two halves */
static void v_r16j(const blk *W, int nr, float *y) {
    (void)W;
    const __m256i k80 = _mm256_set1_epi8((char)0x80);
    for (int r = 0; r < nr / 2; r++) {
        const uint8_t *wr[2] = {WR16 + (size_t)r * NB * 34, WR16 + (size_t)(r + nr / 2) * NB * 34};
        __m256 acc[2][2] = {{_mm256_setzero_ps(), _mm256_setzero_ps()}, {_mm256_setzero_ps(), _mm256_setzero_ps()}};
        for (int g = 0; g < NB; g += 16)
            for (int i = 0; i < 2; i++) {
                __m256i p0 = _mm256_setzero_si256(), p1 = _mm256_setzero_si256();
                for (int j = 0; j < 8; j++) {
                    const __m256i q0 = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(wr[i] + 32 * g + 64 * j)), k80);
                    const __m256i q1 = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(wr[i] + 32 * g + 64 * j + 32)), k80);
                    p0 = _mm256_add_epi32(p0, dot4(q0, _mm256_loadu_si256((const __m256i *)(XR16 + 32 * g + 64 * j))));
                    p1 = _mm256_add_epi32(p1, dot4(q1, _mm256_loadu_si256((const __m256i *)(XR16 + 32 * g + 64 * j + 32))));
                }
                const uint8_t *sc = wr[i] + 32 * NB + 2 * g;
                acc[i][0] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p0), _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)sc)), _mm256_loadu_ps(XS + g)), acc[i][0]);
                acc[i][1] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p1), _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(sc + 16))), _mm256_loadu_ps(XS + g + 8)), acc[i][1]);
            }
        for (int i = 0; i < 2; i++) y[r + i * (nr / 2)] = hsum(_mm256_add_ps(acc[i][0], acc[i][1]));
    }
}

/* r16s2: the R16 interleave with quants stored signed (no xor), two rows from the two halves, halves as r16x */
static const uint8_t *WR16S;
static void v_r16s2(const blk *W, int nr, float *y) {
    (void)W;
    for (int r = 0; r < nr / 2; r++) {
        const uint8_t *wr[2] = {WR16S + (size_t)r * NB * 34, WR16S + (size_t)(r + nr / 2) * NB * 34};
        __m256 acc[2][2] = {{_mm256_setzero_ps(), _mm256_setzero_ps()}, {_mm256_setzero_ps(), _mm256_setzero_ps()}};
        for (int g = 0; g < NB; g += 16)
            for (int h = 0; h < 2; h++) {
                __m256i p[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
                for (int j = 0; j < 8; j++) {
                    const __m256i a = _mm256_loadu_si256((const __m256i *)(XR16 + 32 * g + 64 * j + 32 * h));
                    for (int i = 0; i < 2; i++)
                        p[i] = _mm256_add_epi32(p[i], dot4(_mm256_loadu_si256((const __m256i *)(wr[i] + 32 * g + 64 * j + 32 * h)), a));
                }
                const __m256 dx = _mm256_loadu_ps(XS + g + 8 * h);
                for (int i = 0; i < 2; i++) {
                    const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(wr[i] + 32 * NB + 2 * (g + 8 * h))));
                    acc[i][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p[i]), _mm256_mul_ps(dw, dx), acc[i][h]);
                }
            }
        for (int i = 0; i < 2; i++) y[r + i * (nr / 2)] = hsum(_mm256_add_ps(acc[i][0], acc[i][1]));
    }
}

/* probes (wrong results, timing only): which part of the block bounds it */
static void p_int(const blk *W, int nr, float *y) {   /* integer part only: int32 lanes summed, no float */
    ROWS_LOOP(2, __m256i acc[2] = {_mm256_setzero_si256() COMMA _mm256_setzero_si256()},
        const __m256i a = _mm256_loadu_si256((const __m256i *)X[b].qs);
        for (int i = 0; i < 2; i++) acc[i] = _mm256_add_epi32(acc[i], dot4(_mm256_loadu_si256((const __m256i *)wr[i][b].qs), a));,
        for (int i = 0; i < 2; i++) y[rows_[i]] = (float)_mm256_extract_epi32(acc[i], 0))
}
static void p_nosign(const blk *W, int nr, float *y) {   /* no vpsignb */
    ROWS_LOOP(2, __m256 acc[2] = {_mm256_setzero_ps() COMMA _mm256_setzero_ps()},
        const __m256i a = _mm256_loadu_si256((const __m256i *)X[b].qs);
        for (int i = 0; i < 2; i++) {
            const __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_loadu_si256((const __m256i *)wr[i][b].qs), a), _mm256_set1_epi16(1));
            acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(sprod(&wr[i][b], b)), acc[i]);
        },
        for (int i = 0; i < 2; i++) y[rows_[i]] = hsum(acc[i]))
}
static void p_load(const blk *W, int nr, float *y) {   /* loads of the weights and activations only */
    ROWS_LOOP(2, __m256i acc[2] = {_mm256_setzero_si256() COMMA _mm256_setzero_si256()},
        const __m256i a = _mm256_loadu_si256((const __m256i *)X[b].qs);
        for (int i = 0; i < 2; i++) acc[i] = _mm256_add_epi32(acc[i], _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)wr[i][b].qs), a));,
        for (int i = 0; i < 2; i++) y[rows_[i]] = (float)_mm256_extract_epi32(acc[i], 0))
}
static void p_float(const blk *W, int nr, float *y) {   /* the float part only: scale product, convert, fma */
    ROWS_LOOP(2, __m256 acc[2] = {_mm256_setzero_ps() COMMA _mm256_setzero_ps()},
        const __m256i a = _mm256_loadu_si256((const __m256i *)X[b].qs);
        for (int i = 0; i < 2; i++)
            acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_xor_si256(_mm256_loadu_si256((const __m256i *)wr[i][b].qs), a)), _mm256_set1_ps(sprod(&wr[i][b], b)), acc[i]);,
        for (int i = 0; i < 2; i++) y[rows_[i]] = hsum(acc[i]))
}

typedef void (*kern)(const blk *, int, float *);
static const struct { const char *name; kern k; } V[] = {
    {"cur", v_cur}, {"sc", v_sc}, {"f128", v_f128}, {"w16", v_w16}, {"w16f", v_w16f}, {"pair", v_pair}, {"sc4", v_sc4}, {"r8", v_r8}, {"r16x", v_r16x}, {"r16p", v_r16p}, {"r16j", v_r16j}, {"r16s2", v_r16s2},
    {"int", p_int}, {"nosign", p_nosign}, {"load", p_load}, {"float", p_float},
};
enum { CHECKED = 12 };
enum { NVAR = sizeof V / sizeof V[0], ROUNDS = 15 };

static double clock_ghz(void) {   /* 3-cycle vaddps chain, 8 independent-free steps per iteration */
    __m256 v = _mm256_set1_ps(1.0f);
    const __m256 e = _mm256_set1_ps(1e-9f);
    const long n = 50000000;
    const double t0 = now();
    for (long i = 0; i < n; i++) { v = _mm256_add_ps(v, e); __asm__ volatile("" : "+x"(v)); }
    const double t = now() - t0;
    volatile float sink = _mm256_cvtss_f32(v);
    (void)sink;
    return 3.0 * (double)n / t / 1e9;
}

static void bench(const blk *W, int nr, int iters, double ghz, const char *where) {
    float *y = malloc(sizeof(float) * nr), *ref = malloc(sizeof(float) * nr);
    for (int r = 0; r < nr && r < 64; r++) {   /* scalar reference on the first rows */
        double s = 0;
        for (int b = 0; b < NB; b++) {
            long t = 0;
            for (int k = 0; k < 32; k++) t += (long)W[(size_t)r * NB + b].qs[k] * X[b].qs[k];
            s += (double)t * _cvtsh_ss(W[(size_t)r * NB + b].d) * XS[b];
        }
        ref[r] = (float)s;
    }
    uint8_t *packed = malloc((size_t)nr * NB * 34);
    repack_r8(W, packed, nr);
    WR8 = packed;
    uint8_t *packed16 = malloc((size_t)nr * NB * 34);
    if (NB % 16 == 0) repack_r16(W, packed16, nr);
    WR16 = packed16;
    uint8_t *packed16s = malloc((size_t)nr * NB * 34);
    memcpy(packed16s, packed16, (size_t)nr * NB * 34);
    for (int r = 0; r < nr; r++)
        for (int k = 0; k < 32 * NB; k++) packed16s[(size_t)r * NB * 34 + k] ^= 0x80;
    WR16S = packed16s;
    double best[NVAR];
    for (int v = 0; v < NVAR; v++) best[v] = 1e30;
    for (int round = 0; round < ROUNDS; round++)
        for (int v = 0; v < NVAR; v++) {
            const double t0 = now();
            for (int it = 0; it < iters; it++) V[v].k(W, nr, y);
            const double t = now() - t0;
            if (t < best[v]) best[v] = t;
            if (round == 0 && v < CHECKED && !((V[v].k == v_r16x || V[v].k == v_r16p || V[v].k == v_r16j || V[v].k == v_r16s2) && NB % 16))
                for (int r = 0; r < nr && r < 64; r++)
                    if (fabsf(y[r] - ref[r]) > 1e-3f * (1.0f + fabsf(ref[r]))) {
                        printf("%s: row %d %g != %g\n", V[v].name, r, y[r], ref[r]);
                        exit(1);
                    }
        }
    const double blocks = (double)nr * NB * iters;
    printf("%-7s", where);
    for (int v = 0; v < NVAR; v++)
        printf("%s%-6s %5.2f c/b %5.1f GB/s", v % 4 ? "  " : "\n  ", V[v].name, best[v] * ghz * 1e9 / blocks, blocks * 34 / best[v] / 1e9);
    printf("\n");
    free(y);
    free(ref);
    free(packed);
    free(packed16);
    free(packed16s);
}

static blk *random_blocks(size_t n) {
    blk *b = malloc(n * sizeof(blk));
    for (size_t i = 0; i < n; i++) {
        b[i].d = _cvtss_sh(0.001f * (float)(1 + rand() % 100), 0);
        for (int k = 0; k < 32; k++) b[i].qs[k] = (int8_t)(rand() % 255 - 127);
    }
    return b;
}

int main(int argc, char **argv) {
    const int cols = argc > 1 ? atoi(argv[1]) : 896, l2_rows = argc > 2 ? atoi(argv[2]) : 128;
    NB = cols / 32;
    blk *x = random_blocks((size_t)NB);
    int16_t *x16 = malloc(sizeof(int16_t) * 32 * NB);
    float *xs = malloc(sizeof(float) * NB);
    for (int b = 0; b < NB; b++) {
        xs[b] = _cvtsh_ss(x[b].d);
        for (int k = 0; k < 32; k++) x16[32 * b + k] = x[b].qs[k];
    }
    int8_t *xr8 = malloc((size_t)NB * 32);
    for (int g = 0; g < NB; g += 8) {
        const int m = NB - g < 8 ? NB - g : 8;
        for (int j = 0; j < 8; j++)
            for (int k = 0; k < m; k++) memcpy(xr8 + 32 * g + 4 * m * j + 4 * k, x[g + k].qs + 4 * j, 4);
    }
    int8_t *xr16 = malloc((size_t)NB * 32 + 1024);   /* a partial group is laid out as a full one here (unused) */
    for (int b = 0; b < NB; b++)
        for (int j = 0; j < 8; j++) memcpy(xr16 + 32 * (b / 16 * 16) + 64 * j + 4 * (b % 16), x[b].qs + 4 * j, 4);
    XR16 = xr16;
    X = x; X16 = x16; XS = xs; XR8 = xr8;
    const double ghz = clock_ghz();
    printf("clock %.2f GHz, %d columns\n", ghz, cols);
    const blk *small = random_blocks((size_t)l2_rows * NB);
    bench(small, l2_rows, (int)(4e7 / ((double)l2_rows * NB * 34)) + 1, ghz, "cache");
    const int big_rows = (int)(150e6 / (NB * 34.0)) / 4 * 4;
    const blk *big = random_blocks((size_t)big_rows * NB);
    bench(big, big_rows, 1, ghz, "memory");
    return 0;
}
