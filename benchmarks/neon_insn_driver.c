/* Calls one aarch64 dot kernel once on one row of zeros, for benchmarks/neon_insn_count.py, which counts the
 * instructions it executes under qemu-user (-singlestep -d exec). Not part of the core or its tests.
 *
 *   neon_insn_driver ours|llama TYPE neon|neon_dotprod N_COLS
 *
 * "llama" is whichever build of llama.cpp's ggml-cpu/arch/arm/quants.c this binary was linked with (plain
 * armv8-a or armv8.2-a+dotprod). Zeros are fine: no kernel branches on the data. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/vec_dot.h"

typedef void (*llama_dot)(int n, float *s, size_t bs, const void *vx, size_t bx, const void *vy, size_t by, int nrc);
void ggml_vec_dot_q8_0_q8_0(int, float *, size_t, const void *, size_t, const void *, size_t, int);
void ggml_vec_dot_q4_0_q8_0(int, float *, size_t, const void *, size_t, const void *, size_t, int);
void ggml_vec_dot_q4_1_q8_1(int, float *, size_t, const void *, size_t, const void *, size_t, int);
void ggml_vec_dot_q5_0_q8_0(int, float *, size_t, const void *, size_t, const void *, size_t, int);
void ggml_vec_dot_q4_K_q8_K(int, float *, size_t, const void *, size_t, const void *, size_t, int);
void ggml_vec_dot_q6_K_q8_K(int, float *, size_t, const void *, size_t, const void *, size_t, int);
void ggml_vec_dot_iq4_nl_q8_0(int, float *, size_t, const void *, size_t, const void *, size_t, int);
void ggml_vec_dot_iq4_xs_q8_K(int, float *, size_t, const void *, size_t, const void *, size_t, int);

static const struct {
    const char *type;
    ow_vec_dot_fn neon, neon_dotprod;
    llama_dot llama;
} kernels[] = {
    {"q8_0", vec_dot_q8_0_q8_0_neon, vec_dot_q8_0_q8_0_neon_dotprod, ggml_vec_dot_q8_0_q8_0},
    {"q4_0", vec_dot_q4_0_q8_0_neon, vec_dot_q4_0_q8_0_neon_dotprod, ggml_vec_dot_q4_0_q8_0},
    {"q4_1", vec_dot_q4_1_q8_1_neon, vec_dot_q4_1_q8_1_neon_dotprod, ggml_vec_dot_q4_1_q8_1},
    {"q5_0", vec_dot_q5_0_q8_0_neon, vec_dot_q5_0_q8_0_neon_dotprod, ggml_vec_dot_q5_0_q8_0},
    {"q4_K", vec_dot_q4_K_q8_K_neon, vec_dot_q4_K_q8_K_neon_dotprod, ggml_vec_dot_q4_K_q8_K},
    {"q6_K", vec_dot_q6_K_q8_K_neon, vec_dot_q6_K_q8_K_neon_dotprod, ggml_vec_dot_q6_K_q8_K},
    {"iq4_nl", vec_dot_iq4_nl_q8_0_neon, vec_dot_iq4_nl_q8_0_neon_dotprod, ggml_vec_dot_iq4_nl_q8_0},
    {"iq4_xs", vec_dot_iq4_xs_q8_K_neon, vec_dot_iq4_xs_q8_K_neon_dotprod, ggml_vec_dot_iq4_xs_q8_K},
    {"f16", vec_dot_f16_f16_neon, vec_dot_f16_f16_neon_dotprod, NULL},
    {"bf16", vec_dot_bf16_f32_neon, vec_dot_bf16_f32_neon_dotprod, NULL},
};

int main(int argc, char **argv) {
    if (argc != 5) { fprintf(stderr, "usage: %s ours|llama TYPE neon|neon_dotprod N_COLS\n", argv[0]); return 2; }
    const int n = atoi(argv[4]);
    uint8_t *w = calloc(1, 4u << 20), *x = calloc(1, 4u << 20);
    float s[4] = {0};
    for (size_t i = 0; i < sizeof kernels / sizeof *kernels; i++) {
        if (strcmp(argv[2], kernels[i].type)) continue;
        if (!strcmp(argv[1], "llama")) {
            if (!kernels[i].llama) return 3;
            kernels[i].llama(n, s, 0, w, 0, x, 0, 1);
        } else {
            (strcmp(argv[3], "neon") ? kernels[i].neon_dotprod : kernels[i].neon)(n, w, 0, 1, x, s);
        }
        printf("%g\n", s[0]);
        return 0;
    }
    return 2;
}
