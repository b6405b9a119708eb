/* LayerNorm with bias (BERT-family encoders), float32, numpy twin onewell/runtime/ops_reference.layernorm.
 * Its own file so the ops table of ops.c stays as it is; the ISA follows ow_ops_isa() (generic, else AVX2). */
#ifndef ONEWELL_OPS_LAYERNORM_H
#define ONEWELL_OPS_LAYERNORM_H

#include <stdint.h>

/* out[r] = (x[r] - mean) / sqrt(var + eps) * w + b for n_rows rows of dim, mean and (biased) variance of row r,
 * as ggml_norm then the weight and bias. w or b NULL: 1 or 0. out may equal x. Sums run in 8 lanes in one
 * fixed order and without FMA on every path, so generic and AVX2 agree bit for bit. */
void ow_layernorm_f32(float *out, const float *x, const float *w, const float *b, int64_t n_rows, int64_t dim,
                      float eps);

/* The same on one explicit path ("generic" = 0, "avx2" = 1; 1 falls back to 0 where AVX2 is absent): tests. */
void ow_layernorm_f32_path(float *out, const float *x, const float *w, const float *b, int64_t n_rows, int64_t dim,
                           float eps, int avx2);

#endif
