/* The non-matmul ops of a forward step, float32, each with a numpy twin in onewell/runtime/ops_reference.py.
 *
 * Callers pass sizes already validated (onewell/runtime/native_ops.py for Python). Arrays are contiguous.
 * Determinism: every output element is computed by one thread with a fixed order of operations that does not
 * depend on how a caller splits the work (element-wise ops use the same vector math for every element, tails
 * included), so results are bit-identical for any thread count. They may differ in the last bits between ISA
 * paths (generic / AVX2 / AVX-512: FMA, exp polynomial evaluated with or without FMA).
 */
#ifndef ONEWELL_OPS_H
#define ONEWELL_OPS_H

#include <stdint.h>

#include "cpu_features.h"
#include "threadpool.h"

typedef enum {
    OW_ROPE_NORMAL = 0, /* rotate pairs (2i, 2i+1)             (llama.cpp LLAMA_ROPE_TYPE_NORM: Llama) */
    OW_ROPE_NEOX = 1,   /* rotate pairs (i, i + n_rot/2)        (LLAMA_ROPE_TYPE_NEOX: Qwen2) */
} ow_rope_style;

/* KV cache element types (kv_cache.h): f32, IEEE f16, ggml Q8_0 blocks of 32 along head_dim */
typedef enum { OW_KV_F32 = 0, OW_KV_F16 = 1, OW_KV_Q8_0 = 2 } ow_kv_type;

/* out[r] = x[r] * w / sqrt(mean(x[r]^2) + eps) for n_rows rows of dim. out may equal x. */
void ow_rmsnorm_f32(float *out, const float *x, const float *w, int64_t n_rows, int64_t dim, float eps);

/* cos/sin table for positions pos[0..n_tok): cs[t][i] = {cos, sin}(pos[t] * freq_base^(-2i/n_rot)) for
 * i < n_rot/2 (angles in double, rounded to float). n_rot even. Compute once per step, use for every layer. */
void ow_rope_table_f32(float *cs, const int32_t *pos, int64_t n_tok, int64_t n_rot, float freq_base);
/* The same with RoPE frequency factors (Llama 3.x rope_freqs): angle i is divided by freq_factors[i]
 * (n_rot/2 values); freq_factors NULL = all 1, the table above. */
void ow_rope_table_ff_f32(float *cs, const int32_t *pos, int64_t n_tok, int64_t n_rot, float freq_base,
                          const float *freq_factors);
/* Rotates, in place, the first n_rot dims of each head of x[n_tok][n_head][head_dim] by table row t. */
void ow_rope_apply_f32(float *x, const float *cs, int64_t n_tok, int64_t n_head, int64_t head_dim, int64_t n_rot,
                       ow_rope_style style);

/* out = silu(g) * u = g / (1 + exp(-g)) * u. out may equal g or u. */
void ow_swiglu_f32(float *out, const float *g, const float *u, int64_t n);
/* out = gelu_tanh(g) * u (GeGLU, Gemma), GELU with the tanh approximation written as
 * g / (1 + exp(-2 sqrt(2/pi) (g + 0.044715 g^3))) (= 0.5 g (1 + tanh(...))). out may equal g or u. */
void ow_geglu_f32(float *out, const float *g, const float *u, int64_t n);
/* out = cap * tanh(x / cap), logit soft-capping (cap > 0). tanh as sign(y) (1 - 2 / (exp(2|y|) + 1)), its
 * series near 0: relative error about 1e-6. out may equal x. */
void ow_softcap_f32(float *out, const float *x, int64_t n, float cap);
/* out = a + b (the residual add). out may equal a or b. */
void ow_add_f32(float *out, const float *a, const float *b, int64_t n);
/* x[r][d] += bias[d] for n_rows rows of dim. */
void ow_add_bias_f32(float *x, const float *bias, int64_t n_rows, int64_t dim);
/* out[r] = softmax(x[r]) for n_rows rows of n (max subtracted first). out may equal x. */
void ow_softmax_f32(float *out, const float *x, int64_t n_rows, int64_t n);
/* Index of the first maximum (greedy sampling); a NaN counts as the maximum, like numpy.argmax. n >= 1. */
int64_t ow_argmax_f32(const float *x, int64_t n);
/* IEEE binary16 <-> float32, rounding to nearest even (bit-identical to numpy astype). */
void ow_f32_to_f16(uint16_t *out, const float *x, int64_t n);
void ow_f16_to_f32(float *out, const uint16_t *x, int64_t n);

/* Attention of one query position over the first n_ctx positions of one layer's KV cache.
 *   q, out: [n_head][head_dim]; k, v: [n_ctx][n_head_kv][head_dim] of kv_type (row stride n_head_kv*head_dim
 *   values; Q8_0: head_dim a multiple of 32, each head's values whole 34-byte blocks, kv_cache.h;
 *   a cache allocated for more positions has the same layout, pass its first n_ctx rows).
 *   Query head h reads kv head h / (n_head / n_head_kv) (grouped-query attention; n_head % n_head_kv == 0).
 *   out[h] = sum_t softmax_t(cap(scale * q[h].k[t])) v[t], softmax with the max subtracted; scale usually
 *   1/sqrt(head_dim), cap the optional soft-capping. The caller makes the cache hold the current position
 *   (causality = n_ctx); a sliding window is k, v starting at the window's first position. */
typedef struct {
    float *out;
    const float *q;
    const void *k, *v;
    int64_t n_ctx, n_head, n_head_kv, head_dim;
    float scale;
    ow_kv_type kv_type;
    float softcap;      /* > 0: scores = softcap * tanh(scores / softcap) after scaling (Gemma 2); 0 = off */
} ow_attn_args;

/* Heads [head_begin, head_end) only: the unit a thread pool splits. scores: n_ctx floats of scratch. */
void ow_attention_heads(const ow_attn_args *a, int64_t head_begin, int64_t head_end, float *scores);
/* All heads across the pool (contiguous head ranges claimed dynamically). scores: ow_pool_threads(p) * n_ctx
 * floats of scratch (worker w uses scores + w*n_ctx). p may be NULL (runs on the calling thread). */
void ow_attention(ow_pool *p, const ow_attn_args *a, float *scores);

/* Which ISA path the ops use ("avx512", "avx2", "neon", "generic"): ow_isa_best() at first use. */
const char *ow_ops_isa(void);
/* Tests: switch every op to another path (not while ops run). Returns 0, or -1 if this CPU (or the cap
 * ONEWELL_ISA) does not allow `isa`. */
int ow_ops_set_isa(ow_isa isa);

#endif
