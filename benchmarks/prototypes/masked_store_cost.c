/* What one AVX2 masked store (vmaskmovps to memory) costs against a plain one (vmovups), every lane set, to lines
 * that stay in L1. On AMD the masked store is microcoded: 6-11x slower on Zen 3 (docs/perf-log.md, entry 47), which
 * is why full panels and whole vectors store plainly and only tails go through a mask.
 *   gcc -O2 benchmarks/prototypes/masked_store_cost.c -o /tmp/msc && /tmp/msc */
#include <immintrin.h>
#include <stdio.h>
#include <time.h>

static float lines[1024 * 16] __attribute__((aligned(64)));

static double seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* ns per store of n pairs of ymm stores, masked or not; the barrier keeps the compiler from merging them */
__attribute__((target("avx2"), noinline)) static double ns_per_store(int masked, long n) {
    const __m256 v = _mm256_set1_ps(1.0f);
    const __m256i all = _mm256_set1_epi32(-1);
    const double t0 = seconds();
    for (long i = 0; i < n; i++) {
        float *p = lines + (i & 1023) * 16;
        if (masked) {
            _mm256_maskstore_ps(p, all, v);
            _mm256_maskstore_ps(p + 8, all, v);
        } else {
            _mm256_storeu_ps(p, v);
            _mm256_storeu_ps(p + 8, v);
        }
        __asm__ volatile("" ::: "memory");
    }
    return 1e9 * (seconds() - t0) / (2.0 * (double)n);
}

int main(void) {
    const long n = 100000000;
    for (int round = 0; round < 3; round++) {
        const double plain = ns_per_store(0, n), masked = ns_per_store(1, n);
        printf("plain %.3f ns, masked %.3f ns per store: masked x%.1f\n", plain, masked, masked / plain);
    }
    return 0;
}
