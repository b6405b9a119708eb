/* Memory-bandwidth probe (bandwidth.h). Kernels per ISA carry target attributes; ow_isa_best() picks one.
 * Arrays hold doubles: the element type does not change the bytes moved, and double sums stay exact. */
#define _GNU_SOURCE
#include "bandwidth.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpu_features.h"

#ifdef __linux__
#include <sys/mman.h>
#endif

#if defined(__x86_64__) && !defined(OW_GENERIC_ONLY)
#define OW_BW_X86 1
#include <immintrin.h>
#else
#define OW_BW_X86 0
#endif

#define HUGE_PAGE ((int64_t)2 << 20)
#define TRIAD_SCALAR 3.0

typedef double (*read_fn)(const double *x, int64_t n);
typedef void (*triad_fn)(double *a, const double *b, const double *c, double s, int64_t n);

/* ---- generic kernels (SSE2 is part of x86-64, so "generic" x86 still streams) ---- */

static double read_generic(const double *x, int64_t n) {
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) { s0 += x[i]; s1 += x[i + 1]; s2 += x[i + 2]; s3 += x[i + 3]; }
    for (; i < n; i++) s0 += x[i];
    return (s0 + s1) + (s2 + s3);
}

static void triad_generic(double *a, const double *b, const double *c, double s, int64_t n) {
    for (int64_t i = 0; i < n; i++) a[i] = b[i] + s * c[i];
}

static void triad_nt_generic(double *a, const double *b, const double *c, double s, int64_t n) {
#if OW_BW_X86
    int64_t i = 0;
    for (; i < n && ((uintptr_t)(a + i) & 15); i++) a[i] = b[i] + s * c[i];
    __m128d vs = _mm_set1_pd(s);
    for (; i + 2 <= n; i += 2)
        _mm_stream_pd(a + i, _mm_add_pd(_mm_loadu_pd(b + i), _mm_mul_pd(vs, _mm_loadu_pd(c + i))));
    for (; i < n; i++) a[i] = b[i] + s * c[i];
    _mm_sfence(); /* streaming stores are weakly ordered: drain them before the pool's barrier publishes */
#else
    triad_generic(a, b, c, s, n);
#endif
}

#if OW_BW_X86
/* ---- AVX2 ---- */

__attribute__((target("avx2,fma"))) static double read_avx2(const double *x, int64_t n) {
    __m256d acc[8];
    for (int k = 0; k < 8; k++) acc[k] = _mm256_setzero_pd();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32)
        for (int k = 0; k < 8; k++) acc[k] = _mm256_add_pd(acc[k], _mm256_loadu_pd(x + i + 4 * k));
    for (int k = 1; k < 8; k++) acc[0] = _mm256_add_pd(acc[0], acc[k]);
    double lanes[4];
    _mm256_storeu_pd(lanes, acc[0]);
    double s = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
    for (; i < n; i++) s += x[i];
    return s;
}

__attribute__((target("avx2,fma"))) static void triad_avx2(double *a, const double *b, const double *c, double s,
                                                           int64_t n) {
    __m256d vs = _mm256_set1_pd(s);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        _mm256_storeu_pd(a + i, _mm256_fmadd_pd(vs, _mm256_loadu_pd(c + i), _mm256_loadu_pd(b + i)));
    for (; i < n; i++) a[i] = b[i] + s * c[i];
}

__attribute__((target("avx2,fma"))) static void triad_nt_avx2(double *a, const double *b, const double *c,
                                                              double s, int64_t n) {
    __m256d vs = _mm256_set1_pd(s);
    int64_t i = 0;
    for (; i < n && ((uintptr_t)(a + i) & 31); i++) a[i] = b[i] + s * c[i];
    for (; i + 4 <= n; i += 4)
        _mm256_stream_pd(a + i, _mm256_fmadd_pd(vs, _mm256_loadu_pd(c + i), _mm256_loadu_pd(b + i)));
    for (; i < n; i++) a[i] = b[i] + s * c[i];
    _mm_sfence();
}

/* ---- AVX-512 ---- */

__attribute__((target("avx512f"))) static double read_avx512(const double *x, int64_t n) {
    __m512d acc[8];
    for (int k = 0; k < 8; k++) acc[k] = _mm512_setzero_pd();
    int64_t i = 0;
    for (; i + 64 <= n; i += 64)
        for (int k = 0; k < 8; k++) acc[k] = _mm512_add_pd(acc[k], _mm512_loadu_pd(x + i + 8 * k));
    for (int k = 1; k < 8; k++) acc[0] = _mm512_add_pd(acc[0], acc[k]);
    double s = _mm512_reduce_add_pd(acc[0]);
    for (; i < n; i++) s += x[i];
    return s;
}

__attribute__((target("avx512f"))) static void triad_avx512(double *a, const double *b, const double *c, double s,
                                                            int64_t n) {
    __m512d vs = _mm512_set1_pd(s);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm512_storeu_pd(a + i, _mm512_fmadd_pd(vs, _mm512_loadu_pd(c + i), _mm512_loadu_pd(b + i)));
    for (; i < n; i++) a[i] = b[i] + s * c[i];
}

__attribute__((target("avx512f"))) static void triad_nt_avx512(double *a, const double *b, const double *c,
                                                               double s, int64_t n) {
    __m512d vs = _mm512_set1_pd(s);
    int64_t i = 0;
    for (; i < n && ((uintptr_t)(a + i) & 63); i++) a[i] = b[i] + s * c[i];
    for (; i + 8 <= n; i += 8)
        _mm512_stream_pd(a + i, _mm512_fmadd_pd(vs, _mm512_loadu_pd(c + i), _mm512_loadu_pd(b + i)));
    for (; i < n; i++) a[i] = b[i] + s * c[i];
    _mm_sfence();
}
#endif

typedef struct {
    read_fn read;
    triad_fn triad, triad_nt;
    const char *name;
} bw_kernels;

static bw_kernels pick_kernels(void) {
    bw_kernels k = {read_generic, triad_generic, triad_nt_generic, "generic"};
#if OW_BW_X86
    ow_isa isa = ow_isa_best();
    if (isa == OW_ISA_AVX512) k = (bw_kernels){read_avx512, triad_avx512, triad_nt_avx512, "avx512"};
    else if (isa == OW_ISA_AVX2 || isa == OW_ISA_AVXVNNI) k = (bw_kernels){read_avx2, triad_avx2, triad_nt_avx2, "avx2"};
#endif
    return k;
}

const char *ow_bandwidth_isa(void) { return pick_kernels().name; }

/* ---- big buffers: 2 MiB aligned so transparent huge pages can back them (fewer TLB misses) ---- */

typedef struct {
    void *base;
    size_t len;
    double *data;
} big_buffer;

static int big_alloc(big_buffer *b, int64_t n_doubles) {
    size_t bytes = (size_t)n_doubles * sizeof(double);
    bytes = (bytes + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE;
#ifdef __linux__
    size_t len = bytes + HUGE_PAGE;
    void *base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) return -1;
    uintptr_t aligned = ((uintptr_t)base + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1);
    madvise((void *)aligned, bytes, MADV_HUGEPAGE); /* a hint: fine if THP is off */
    b->base = base;
    b->len = len;
    b->data = (double *)aligned;
#else
    void *mem = NULL;
    if (posix_memalign(&mem, HUGE_PAGE, bytes) != 0) return -1;
    b->base = mem;
    b->len = bytes;
    b->data = mem;
#endif
    return 0;
}

static void big_free(big_buffer *b) {
    if (!b->base) return;
#ifdef __linux__
    munmap(b->base, b->len);
#else
    free(b->base);
#endif
    b->base = NULL;
}

/* ---- the parallel tasks ---- */

#define SLOT 8 /* doubles per partial-sum slot: one cache line each, no false sharing */

typedef struct {
    bw_kernels k;
    ow_bw_kind kind;
    double *a;
    const double *b, *c, *x;
    double *partial;
    int first_touch; /* fill instead of measure */
} bw_job;

static void bw_task(void *ctx, int64_t begin, int64_t end, int worker) {
    bw_job *j = ctx;
    int64_t n = end - begin;
    if (j->first_touch) {
        if (j->kind == OW_BW_READ) {
            double *x = (double *)j->x + begin;
            for (int64_t i = 0; i < n; i++) x[i] = 1.0;
        } else {
            for (int64_t i = 0; i < n; i++) { j->a[begin + i] = 0.0; ((double *)j->b)[begin + i] = 1.0; ((double *)j->c)[begin + i] = 2.0; }
        }
        return;
    }
    switch (j->kind) {
    case OW_BW_READ: j->partial[worker * SLOT] = j->k.read(j->x + begin, n); break;
    case OW_BW_TRIAD: j->k.triad(j->a + begin, j->b + begin, j->c + begin, TRIAD_SCALAR, n); break;
    case OW_BW_TRIAD_NT: j->k.triad_nt(j->a + begin, j->b + begin, j->c + begin, TRIAD_SCALAR, n); break;
    }
}

/* Static ranges in whole huge pages when the arrays are big enough, so a page is touched by one thread. */
static int64_t range_align(int64_t n, int threads) {
    int64_t page = HUGE_PAGE / (int64_t)sizeof(double);
    return n / threads >= page ? page : SLOT;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double ow_bandwidth_read_sum(ow_pool *p, const double *x, int64_t n) {
    int threads = ow_pool_threads(p);
    double *partial = calloc((size_t)threads * SLOT, sizeof(double));
    if (!partial) return NAN;
    bw_job j = {pick_kernels(), OW_BW_READ, NULL, NULL, NULL, x, partial, 0};
    ow_pool_parallel_for_static(p, n, range_align(n, threads), bw_task, &j);
    double s = 0;
    for (int w = 0; w < threads; w++) s += partial[w * SLOT];
    free(partial);
    return s;
}

int ow_bandwidth_run(ow_pool *p, ow_bw_kind kind, int64_t total_bytes, int reps, double *seconds,
                     int64_t *traffic_bytes, double *checksum) {
    int threads = ow_pool_threads(p);
    int n_arrays = kind == OW_BW_READ ? 1 : 3;
    int64_t n = total_bytes / n_arrays / (int64_t)sizeof(double) / SLOT * SLOT; /* whole cache lines */
    if (n < SLOT) n = SLOT;
    big_buffer bufs[3] = {{0}};
    double *partial = calloc((size_t)threads * SLOT, sizeof(double));
    int ok = partial != NULL;
    for (int i = 0; ok && i < n_arrays; i++) ok = big_alloc(&bufs[i], n) == 0;
    if (!ok) {
        for (int i = 0; i < 3; i++) big_free(&bufs[i]);
        free(partial);
        return -1;
    }
    bw_job j = {pick_kernels(), kind, NULL, NULL, NULL, NULL, partial, 1};
    if (kind == OW_BW_READ) {
        j.x = bufs[0].data;
    } else {
        j.a = bufs[0].data;
        j.b = bufs[1].data;
        j.c = bufs[2].data;
    }
    int64_t align = range_align(n, threads);
    ow_pool_parallel_for_static(p, n, align, bw_task, &j); /* first touch, by the thread that will stream it */
    j.first_touch = 0;
    for (int r = 0; r < reps; r++) {
        double t0 = now_s();
        ow_pool_parallel_for_static(p, n, align, bw_task, &j);
        seconds[r] = now_s() - t0;
    }
    *traffic_bytes = n * (int64_t)sizeof(double) * n_arrays;
    if (kind == OW_BW_READ) {
        double s = 0;
        for (int w = 0; w < threads; w++) s += partial[w * SLOT];
        *checksum = s;
    } else {
        *checksum = ow_bandwidth_read_sum(p, j.a, n); /* untimed: checks every element was written */
    }
    for (int i = 0; i < 3; i++) big_free(&bufs[i]);
    free(partial);
    return 0;
}
