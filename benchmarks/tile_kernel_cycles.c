/* Cycles per 32 elements per vector of the AVX2 prefill tiles with everything in L1/L2, one thread.
 *
 * tile_throughput.py times the tiles on real weight matrices (rows streamed from memory); this takes memory out:
 * ROWS rows (one matmul chunk) of COLS columns (in L2) against NV vectors, called over and over, so the figure is the core's
 * arithmetic alone. Minimum over the repetitions. Build and run (GHZ only scales the cycle figures):
 *   K=src/onewell/_native/kernels
 *   gcc -O3 -std=c11 -fno-math-errno -I$K -I$K/.. benchmarks/tile_kernel_cycles.c $K/vec_dot_tile_avx2.c \
 *       $K/vec_dot_tile_avx2_vnni.c $K/vec_dot_tile_k_avx2.c $K/gemm_q8_0_f32_avx2.c $K/vec_dot_avx2.c \
 *       -o /tmp/tkc && /tmp/tkc 2.95
 * On an AVX-VNNI CPU the 32-element tiles are timed in both variants (the _vnni lines). */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "vec_dot.h"

size_t ow_r16_prefetch(void) { return 0; }
size_t ow_f16_prefetch(void) { return 0; }
int ow_r16_row_stream(void) { return 1; }

typedef void (*tile_fn)(OW_TILE_ARGS);
enum { ROWS = 128, REPS = 21 };   /* a matmul chunk: the executor calls a tile with 128 rows */

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* block_bytes / act_bytes: weight / activation bytes per block of `per_block` elements */
static void measure(const char *name, tile_fn f, size_t block_bytes, size_t act_bytes, int per_block, int64_t cols,
                    int nv, double ghz) {
    const int64_t nb = cols / per_block;
    const size_t stride = (size_t)nb * block_bytes, x_stride = (size_t)nb * act_bytes;
    uint8_t *w = malloc(stride * ROWS), *x = malloc(x_stride * (size_t)nv);
    float *y = malloc(sizeof(float) * ROWS * (size_t)nv);
    for (size_t i = 0; i < stride * ROWS; i++) w[i] = (uint8_t)(rand() & 0x37);   /* finite fp16 scales */
    for (size_t i = 0; i < x_stride * (size_t)nv; i++) x[i] = (uint8_t)(rand() & 0x33);
    const int iters = (int)(2e8 / ((double)ROWS * (double)cols * nv)) + 1;
    double best = 1e9;
    for (int rep = 0; rep < REPS; rep++) {
        const double t0 = now();
        for (int k = 0; k < iters; k++) f(cols, w, stride, ROWS, x, x_stride, nv, y, ROWS);
        const double t = now() - t0;
        if (t < best) best = t;
    }
    const double macs = (double)iters * ROWS * (double)cols * nv;
    printf("%-9s %5ld cols %3d vectors: %5.2f MAC/cycle, %5.2f cycles per 32 per vector\n", name, (long)cols, nv,
           macs / (best * ghz * 1e9), 32.0 * best * ghz * 1e9 / macs);
    free(w); free(x); free(y);
}

int main(int argc, char **argv) {
    const double ghz = argc > 1 ? atof(argv[1]) : 3.0;
    const int nv = argc > 2 ? atoi(argv[2]) : 16;
    measure("q8_0 gemm", vec_dot_q8_0_q8_0_gemm_avx2, 34, 34, 32, 896, nv, ghz);
    measure("q5_0", vec_dot_q5_0_q8_0_tile_avx2, 22, 34, 32, 896, nv, ghz);
    measure("q4_1", vec_dot_q4_1_q8_1_tile_avx2, 20, 36, 32, 896, nv, ghz);
    if (__builtin_cpu_supports("avxvnni")) {
        measure("q5_0_vnni", vec_dot_q5_0_q8_0_tile_avx2_vnni, 22, 34, 32, 896, nv, ghz);
        measure("q4_1_vnni", vec_dot_q4_1_q8_1_tile_avx2_vnni, 20, 36, 32, 896, nv, ghz);
    }
    measure("q4_K", vec_dot_q4_K_q8_K_tile_avx2, 144, 292, 256, 4864, nv, ghz);
    measure("q6_K", vec_dot_q6_K_q8_K_tile_avx2, 210, 292, 256, 4864, nv, ghz);
    measure("q4_K", vec_dot_q4_K_q8_K_tile_avx2, 144, 292, 256, 1024, nv, ghz);   /* activations in L1 */
    measure("q6_K", vec_dot_q6_K_q8_K_tile_avx2, 210, 292, 256, 1024, nv, ghz);
    measure("q8_0 gemm", vec_dot_q8_0_q8_0_gemm_avx2, 34, 34, 32, 256, nv, ghz);
    return 0;
}
