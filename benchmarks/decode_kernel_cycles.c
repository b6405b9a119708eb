/* Cycles per 32-element block of the AVX2 decode kernels, weights in L1, one thread (docs/perf-log.md, entry 17).
 *
 * Each kernel runs on 64 rows two ways, interleaved: 16 calls of 4 rows (how ow_matmul_rows_path called it before
 * entry 17) and one call of 64 rows (an any_rows tile's chunk); the figure is the minimum over the repetitions.
 * Build and run (GHZ: the core clock, e.g. from an FMA-throughput loop; it only scales the cycle figures):
 *   K=src/onewell/_native/kernels
 *   gcc -O3 -std=c11 -fno-math-errno -I$K -I$K/.. benchmarks/decode_kernel_cycles.c $K/vec_dot_avx2.c -o /tmp/dkc
 *   /tmp/dkc 2.95
 * To A/B two versions of vec_dot_x86_256.inc, build the other copy with another OW_SUFFIX and time both the
 * same way (entry 17 did that with 61 interleaved repetitions). */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "vec_dot.h"

size_t ow_r16_prefetch(void) { return 0; }   /* the rows are in L1: no software prefetch */
size_t ow_f16_prefetch(void) { return 0; }
int ow_r16_row_stream(void) { return 1; }

typedef void (*dot_fn)(OW_DOT_ARGS);
enum { ROWS = 64, REPS = 41 };

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static double run(dot_fn f, int64_t cols, const uint8_t *w, size_t stride, const uint8_t *x, int iters, int per_call) {
    static float s[ROWS];
    const double t0 = now();
    for (int k = 0; k < iters; k++)
        for (int r = 0; r < ROWS; r += per_call) f(cols, w + (size_t)r * stride, stride, per_call, x, s + r);
    return now() - t0;
}

/* block_bytes: weight bytes per 32 elements; act_bytes: activation bytes per 32 elements */
static void measure(const char *name, dot_fn f, double block_bytes, size_t act_bytes, int64_t cols, double ghz) {
    const int64_t nb = cols / 32;
    const size_t stride = (size_t)((double)nb * block_bytes);
    uint8_t *w = malloc(stride * ROWS), *x = malloc((size_t)nb * act_bytes);
    /* random quants; 0x77 / 0x33 keep every fp16 scale finite (no inf/nan, which would not change the timing) */
    for (size_t i = 0; i < stride * ROWS; i++) w[i] = (uint8_t)(rand() & 0x77);
    for (size_t i = 0; i < (size_t)nb * act_bytes; i++) x[i] = (uint8_t)(rand() & 0x33);
    const int iters = (int)(4e6 / (double)(stride * ROWS)) + 1;
    double t4 = 1e9, t64 = 1e9;
    for (int rep = 0; rep < REPS; rep++) {
        const double a = run(f, cols, w, stride, x, iters, 4), b = run(f, cols, w, stride, x, iters, ROWS);
        if (a < t4) t4 = a;
        if (b < t64) t64 = b;
    }
    const double k = ghz * 1e9 / ((double)iters * ROWS * (double)nb);
    printf("%-10s %5ld cols: 4 rows/call %5.2f, 64 rows/call %5.2f cycles/block (%.2fx)\n", name, (long)cols, t4 * k,
           t64 * k, t4 / t64);
    free(w);
    free(x);
}

int main(int argc, char **argv) {
    const double ghz = argc > 1 ? atof(argv[1]) : 3.0;
    measure("q8_0", vec_dot_q8_0_q8_0_avx2, 34, 34, 896, ghz);
    measure("q4_0", vec_dot_q4_0_q8_0_avx2, 18, 34, 896, ghz);
    measure("q5_0", vec_dot_q5_0_q8_0_avx2, 22, 34, 896, ghz);
    measure("q5_0", vec_dot_q5_0_q8_0_avx2, 22, 34, 4864, ghz);
    measure("q4_1", vec_dot_q4_1_q8_1_avx2, 20, 36, 896, ghz);
    measure("q5_1", vec_dot_q5_1_q8_1_avx2, 24, 36, 896, ghz);
    measure("q4_K", vec_dot_q4_K_q8_K_avx2, 18, 37, 4864, ghz);      /* 144 B per 256 */
    measure("q6_K", vec_dot_q6_K_q8_K_avx2, 26.25, 37, 4864, ghz);   /* 210 B per 256; Q8_K 292 B per 256 */
    return 0;
}
