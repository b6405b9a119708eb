/* AVX2 (no VNNI) Q8_0 matvec variants on one matrix far larger than the caches: which layout and access pattern
 * streams closest to the plain read on Zen 3 (docs/perf-log.md, entry 10). Standalone:
 *   gcc -O3 -mavx2 -mfma -mf16c -pthread -DNCOLS=896 -DNROWS=151936 avx2_q8_0.c -o /tmp/avx2_q8_0 && /tmp/avx2_q8_0 [threads]
 * Variants (GB/s = bytes of the layout streamed per second):
 *   read     plain AVX2 sum over the R16 copy (the ceiling)
 *   ggml4    ggml blocks, 4-row tiles (today's AVX2 kernel)
 *   ggml1pf  ggml blocks, one row at a time, software prefetch PF bytes ahead (one per 64-byte line)
 *   r16x     R16 layout, quants stored q+128 (the VNNI layout): xor back, |q| * sign(a), rows streamed + PF
 *   r16s     R16 layout, quants stored signed (an AVX2 variant of the layout): rows streamed + PF
 */
#include <immintrin.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct { uint16_t d; int8_t qs[32]; } __attribute__((packed)) blk;
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }

static inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
static inline __m256i dot4(__m256i q, __m256i a) {   /* int32 lane = sum of 4 products q*a (signed) */
    const __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(q, q), _mm256_sign_epi8(a, q));
    return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

static int NB, PF;
static const blk *W1; static const blk *X1;
static const uint8_t *W3; static size_t STRIDE3; static const uint8_t *XI; static const float *XD;

static void ggml4(int r0, int r1, float *s) {
    for (int r = r0; r < r1; r += 4) {
        __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
        for (int b = 0; b < NB; b++) {
            const __m256i a = _mm256_loadu_si256((const __m256i *)X1[b].qs);
            const __m256 dx = _mm256_set1_ps(_cvtsh_ss(X1[b].d));
            for (int i = 0; i < 4; i++) {
                const blk *wb = W1 + (size_t)(r + i) * NB + b;
                const __m256i p = dot4(_mm256_loadu_si256((const __m256i *)wb->qs), a);
                acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_mul_ps(_mm256_set1_ps(_cvtsh_ss(wb->d)), dx), acc[i]);
            }
        }
        for (int i = 0; i < 4; i++) s[r + i] = hsum(acc[i]);
    }
}

static void ggml1pf(int r0, int r1, float *s) {
    for (int r = r0; r < r1; r++) {
        const blk *wr = W1 + (size_t)r * NB;
        __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
        int b = 0;
        for (; b + 2 <= NB; b += 2) {
            if (PF) _mm_prefetch((const char *)(wr + b) + PF, _MM_HINT_T0);   /* 68 bytes per step: ~one line */
            const __m256i p0 = dot4(_mm256_loadu_si256((const __m256i *)wr[b].qs), _mm256_loadu_si256((const __m256i *)X1[b].qs));
            const __m256i p1 = dot4(_mm256_loadu_si256((const __m256i *)wr[b + 1].qs), _mm256_loadu_si256((const __m256i *)X1[b + 1].qs));
            acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p0), _mm256_set1_ps(_cvtsh_ss(wr[b].d) * _cvtsh_ss(X1[b].d)), acc0);
            acc1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p1), _mm256_set1_ps(_cvtsh_ss(wr[b + 1].d) * _cvtsh_ss(X1[b + 1].d)), acc1);
        }
        for (; b < NB; b++) {
            const __m256i p0 = dot4(_mm256_loadu_si256((const __m256i *)wr[b].qs), _mm256_loadu_si256((const __m256i *)X1[b].qs));
            acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p0), _mm256_set1_ps(_cvtsh_ss(wr[b].d) * _cvtsh_ss(X1[b].d)), acc0);
        }
        s[r] = hsum(_mm256_add_ps(acc0, acc1));
    }
}

/* R16: group of 16 blocks (512 B of quants): chunk j (64 B) = bytes 4j..4j+3 of the 16 blocks; AVX2 takes it as
 * two halves of 8 lanes (blocks g..g+7 in the low 32 B, g+8..g+15 in the high 32 B). */
static void r16(int r0, int r1, float *s, const int XORED) {
    const int ng = NB / 16;   /* full groups only here (NCOLS multiple of 512 or tail ignored in both checks) */
    const __m256i k80 = _mm256_set1_epi8((char)0x80);
    for (int r = r0; r < r1; r++) {
        const uint8_t *wr = W3 + (size_t)r * STRIDE3;
        __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
        for (int g = 0; g < ng; g++) {
            const uint8_t *wg = wr + 512 * (size_t)g, *xg = XI + 512 * (size_t)g;
            __m256i p0 = _mm256_setzero_si256(), p1 = _mm256_setzero_si256();
            for (int j = 0; j < 8; j++) {
                if (PF) _mm_prefetch((const char *)(wg + 64 * j + PF), _MM_HINT_T0);
                __m256i q0 = _mm256_load_si256((const __m256i *)(wg + 64 * j));
                __m256i q1 = _mm256_load_si256((const __m256i *)(wg + 64 * j + 32));
                if (XORED) { q0 = _mm256_xor_si256(q0, k80); q1 = _mm256_xor_si256(q1, k80); }
                p0 = _mm256_add_epi32(p0, dot4(q0, _mm256_load_si256((const __m256i *)(xg + 64 * j))));
                p1 = _mm256_add_epi32(p1, dot4(q1, _mm256_load_si256((const __m256i *)(xg + 64 * j + 32))));
            }
            const uint8_t *sc = wr + 32 * (size_t)NB + 32 * (size_t)g;
            const __m256 d0 = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)sc)), _mm256_loadu_ps(XD + 16 * g));
            const __m256 d1 = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(sc + 16))), _mm256_loadu_ps(XD + 16 * g + 8));
            acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p0), d0, acc0);
            acc1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p1), d1, acc1);
        }
        s[r] = hsum(_mm256_add_ps(acc0, acc1));
    }
}
static void r16x(int r0, int r1, float *s) { r16(r0, r1, s, 1); }
static void r16s(int r0, int r1, float *s) { r16(r0, r1, s, 0); }

static long SINK;
static void readv(int r0, int r1, float *s) {
    (void)s;
    const uint8_t *p = W3 + (size_t)r0 * STRIDE3, *e = W3 + (size_t)r1 * STRIDE3;
    __m256i a = _mm256_setzero_si256(), b = a, c = a, d = a;
    for (; p + 128 <= e; p += 128) {
        a = _mm256_add_epi32(a, _mm256_load_si256((const __m256i *)p));
        b = _mm256_add_epi32(b, _mm256_load_si256((const __m256i *)(p + 32)));
        c = _mm256_add_epi32(c, _mm256_load_si256((const __m256i *)(p + 64)));
        d = _mm256_add_epi32(d, _mm256_load_si256((const __m256i *)(p + 96)));
    }
    a = _mm256_add_epi32(_mm256_add_epi32(a, b), _mm256_add_epi32(c, d));
    SINK += _mm256_extract_epi32(a, 0);
}

typedef void (*kern)(int, int, float *);
typedef struct { kern k; int r0, r1; float *s; } job;
static void *run(void *p) { job *j = p; j->k(j->r0, j->r1, j->s); return NULL; }
static double timed(kern k, int nrows, int nth, float *s) {
    pthread_t t[8]; job j[8];
    const double t0 = now();
    for (int i = 0; i < nth; i++) {
        j[i] = (job){k, (int)((long)nrows * i / nth) / 4 * 4, (int)((long)nrows * (i + 1) / nth) / 4 * 4, s};
        if (i == nth - 1) j[i].r1 = nrows;
        if (i) pthread_create(&t[i], NULL, run, &j[i]);
    }
    run(&j[0]);
    for (int i = 1; i < nth; i++) pthread_join(t[i], NULL);
    return now() - t0;
}

static int cmp(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b; return (x > y) - (x < y); }

int main(int argc, char **argv) {
    const int nth = argc > 1 ? atoi(argv[1]) : 1;
    const int ncols = NCOLS, nrows = NROWS;
    NB = ncols / 32;
    const size_t n1 = (size_t)nrows * NB;
    blk *w = aligned_alloc(64, (n1 * sizeof(blk) + 63) / 64 * 64);
    srand(1);
    for (size_t i = 0; i < n1; i++) { w[i].d = 0x2c00 + rand() % 512; for (int k = 0; k < 32; k++) w[i].qs[k] = (int8_t)(rand() % 255 - 127); }
    blk *x = malloc(NB * sizeof(blk));
    for (int b = 0; b < NB; b++) { x[b].d = 0x2c00 + rand() % 512; for (int k = 0; k < 32; k++) x[b].qs[k] = (int8_t)(rand() % 255 - 127); }
    W1 = w; X1 = x;
    STRIDE3 = ((size_t)ncols + 2 * NB + 63) / 64 * 64;
    uint8_t *w3 = aligned_alloc(64, STRIDE3 * nrows), *w3s = aligned_alloc(64, STRIDE3 * nrows);
    uint8_t *xi = aligned_alloc(64, ncols); float *xd = aligned_alloc(64, 4 * NB);
    for (int r = 0; r < nrows; r++)
        for (int b = 0; b < NB; b++) {
            const int g = b / 16 * 16, k = b - g;
            for (int t = 0; t < 32; t++) {
                const size_t at = (size_t)r * STRIDE3 + 32 * g + 64 * (t / 4) + 4 * k + t % 4;
                w3[at] = (uint8_t)(w[(size_t)r * NB + b].qs[t] ^ 0x80);
                w3s[at] = (uint8_t)w[(size_t)r * NB + b].qs[t];
                if (r == 0) xi[32 * g + 64 * (t / 4) + 4 * k + t % 4] = (uint8_t)x[b].qs[t];
            }
            memcpy(w3 + (size_t)r * STRIDE3 + 32 * (size_t)NB + 2 * b, &w[(size_t)r * NB + b].d, 2);
            memcpy(w3s + (size_t)r * STRIDE3 + 32 * (size_t)NB + 2 * b, &w[(size_t)r * NB + b].d, 2);
            if (r == 0) xd[b] = _cvtsh_ss(x[b].d);
        }
    XI = xi; XD = xd;
    float *s = malloc(4 * nrows);
    const char *names[] = {"read", "ggml4", "ggml1pf0", "ggml1pf", "r16x pf0", "r16x", "r16s"};
    kern ks[] = {readv, ggml4, ggml1pf, ggml1pf, r16x, r16x, r16s};
    const int pfs[] = {0, 0, 0, -1, 0, -1, -1};
    const int pf_list[] = {1024, 2048, 4096, 8192};
    const size_t bytes1 = n1 * sizeof(blk), bytes3 = STRIDE3 * nrows;
    enum { REPS = 7 };
    for (int pi = 0; pi < 4; pi++) {
        double t[7][REPS];
        for (int rep = 0; rep < REPS; rep++)
            for (int v = 0; v < 7; v++) {
                PF = pfs[v] < 0 ? pf_list[pi] : 0;
                W3 = v == 6 ? w3s : w3;
                t[v][rep] = timed(ks[v], nrows, nth, s);
            }
        printf("threads %d, prefetch %d:", nth, pf_list[pi]);
        for (int v = 0; v < 7; v++) {
            qsort(t[v], REPS, sizeof(double), cmp);
            const size_t bytes = (v == 2 || v == 3 || v == 1) ? bytes1 : bytes3;
            printf("  %s %.1f", names[v], bytes / t[v][REPS / 2] / 1e9);
        }
        printf("  GB/s (sink %ld)\n", SINK);
    }
    return 0;
}
