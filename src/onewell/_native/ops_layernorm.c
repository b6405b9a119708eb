/* LayerNorm with bias (ops_layernorm.h): the generic C kernel, its AVX2 twin and the choice between them. */
#include "ops_layernorm.h"

#include <math.h>
#include <string.h>

#include "cpu_features.h"
#include "ops.h"
#include "ops_kernels.h"

#if OW_OPS_X86
#include <immintrin.h>
#endif

/* 8 lane sums, reduced as ((0+1)+(2+3))+((4+5)+(6+7)): the AVX2 kernel keeps exactly these lanes. */
static float reduce8(const float acc[8]) {
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

static void layernorm_row_generic(float *out, const float *x, const float *w, const float *b, int64_t n, float eps) {
    float acc[8] = {0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) acc[j] += x[i + j];
    for (; i < n; i++) acc[i % 8] += x[i];
    const float mean = reduce8(acc) / (float)n;
    float sq[8] = {0};
    for (i = 0; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) { const float d = x[i + j] - mean; sq[j] += d * d; }
    for (; i < n; i++) { const float d = x[i] - mean; sq[i % 8] += d * d; }
    const float scale = 1.0f / sqrtf(reduce8(sq) / (float)n + eps);
    for (i = 0; i < n; i++) {
        float y = (x[i] - mean) * scale;
        if (w) y = y * w[i];
        if (b) y = y + b[i];
        out[i] = y;
    }
}

#if OW_OPS_X86
__attribute__((target("avx2"))) static void layernorm_row_avx2(float *out, const float *x, const float *w,
                                                                const float *b, int64_t n, float eps) {
    __m256 acc = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) acc = _mm256_add_ps(acc, _mm256_loadu_ps(x + i));
    float lanes[8];
    _mm256_storeu_ps(lanes, acc);
    for (; i < n; i++) lanes[i % 8] += x[i];
    const float mean = reduce8(lanes) / (float)n;
    const __m256 vmean = _mm256_set1_ps(mean);
    __m256 sq = _mm256_setzero_ps();
    for (i = 0; i + 8 <= n; i += 8) {
        const __m256 d = _mm256_sub_ps(_mm256_loadu_ps(x + i), vmean);
        sq = _mm256_add_ps(sq, _mm256_mul_ps(d, d));   /* no FMA: the same rounding as the generic loop */
    }
    _mm256_storeu_ps(lanes, sq);
    for (; i < n; i++) { const float d = x[i] - mean; lanes[i % 8] += d * d; }
    const float scale = 1.0f / sqrtf(reduce8(lanes) / (float)n + eps);
    const __m256 vscale = _mm256_set1_ps(scale);
    for (i = 0; i + 8 <= n; i += 8) {
        __m256 y = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), vmean), vscale);
        if (w) y = _mm256_mul_ps(y, _mm256_loadu_ps(w + i));
        if (b) y = _mm256_add_ps(y, _mm256_loadu_ps(b + i));
        _mm256_storeu_ps(out + i, y);
    }
    for (; i < n; i++) {
        float y = (x[i] - mean) * scale;
        if (w) y = y * w[i];
        if (b) y = y + b[i];
        out[i] = y;
    }
}
#endif

void ow_layernorm_f32_path(float *out, const float *x, const float *w, const float *b, int64_t n_rows, int64_t dim,
                           float eps, int avx2) {
#if OW_OPS_X86
    const int use_avx2 = avx2 && ow_cpu()->avx2;
#else
    const int use_avx2 = 0;
    (void)avx2;
#endif
    for (int64_t r = 0; r < n_rows; r++) {
#if OW_OPS_X86
        if (use_avx2) { layernorm_row_avx2(out + r * dim, x + r * dim, w, b, dim, eps); continue; }
#endif
        (void)use_avx2;
        layernorm_row_generic(out + r * dim, x + r * dim, w, b, dim, eps);
    }
}

void ow_layernorm_f32(float *out, const float *x, const float *w, const float *b, int64_t n_rows, int64_t dim,
                      float eps) {
    /* the ops' ISA (ow_ops_set_isa in tests): anything but "generic" has AVX2 (the AVX-512 ops path implies it) */
    ow_layernorm_f32_path(out, x, w, b, n_rows, dim, eps, strcmp(ow_ops_isa(), "generic") != 0);
}
