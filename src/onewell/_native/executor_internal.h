/* Internal to executor*.c: the executor's state and the parallel jobs a step is made of. */
#ifndef ONEWELL_EXECUTOR_INTERNAL_H
#define ONEWELL_EXECUTOR_INTERNAL_H

#include <stdatomic.h>
#include <time.h>

#include "executor.h"
#include "kernels/matvec.h"
#include "kernels/type_traits.h"
#include "kv_cache.h"
#include "ops.h"
#include "threadpool.h"

#define OW_ACT_SLOTS 3   /* distinct activation types one input may need (Q, K, V of three weight types) */
#define OW_ALIGN 64
#define OW_DEFAULT_CHUNK_ROWS 128  /* measured: docs/perf-log.md, entry 6 */
#define OW_CHUNK_ALIGN 16          /* a resized chunk (balanced_chunk) stays whole 64-byte lines of float outputs */
#define OW_OUTPUT_CHUNKS 256  /* the vocab projection is cut in about this many chunks (fewer claims) */

/* One input quantized for one matrix: row t (token t) at data + t*stride. */
typedef struct {
    const uint8_t *data;
    size_t stride;
} ow_act_view;

/* Busy nanoseconds per category of one thread during the current job (own cache line: no false sharing). */
typedef struct {
    _Alignas(OW_ALIGN) int64_t ns[OW_PROF_COUNT];
} ow_thread_prof;

struct ow_executor {
    ow_model_desc d;
    ow_layer_desc *layers;
    ow_pool *pool;
    int n_threads, n_ctx, max_batch, n_seq;
    ow_kpath kpath;
    int64_t chunk_rows;
    int64_t n_q, n_kv;          /* n_head * head_dim, n_head_kv * head_dim */
    float attn_scale;           /* d.attn_scale, or 1 / sqrt(head_dim) when that is 0 */

    ow_kv_type kv_type;
    uint8_t *k_cache, *v_cache; /* [n_seq][n_layer][n_ctx][n_kv] values of kv_type (kv_cache.h) */

    /* scratch, carved from one 64-byte aligned arena; B = max_batch */
    void *arena;
    float *x;          /* [B][n_embd] residual stream */
    float *xn;         /* [B][n_embd] normalized input of a matmul group */
    float *q;          /* [B][n_q] queries after bias and RoPE */
    float *attn;       /* [B][n_q] attention output */
    float *proj;       /* [B][n_embd] wo / down output before the residual add */
    float *gate_up;    /* [B][2 n_ff] gate rows then up rows */
    float *ffn;        /* [B][n_ff] SwiGLU output */
    float *rope_cs;    /* [B][n_rot] cos/sin pairs of the step's positions */
    int32_t *pos;      /* [B] position of each token of the step */
    int32_t *seq;      /* [B] sequence of each token of the step */
    int32_t *span_len; /* [B] encoder steps: token count of each token's sequence (it starts at t - pos[t]) */
    float *k_new;      /* [B][n_kv] keys of the step before they are stored at (seq, pos) */
    float *v_new;      /* [B][n_kv] values, likewise */
    float *scores;     /* [n_threads][n_ctx] attention scratch per worker */
    float *logits_tmp; /* [n_vocab] for the greedy mode */
    uint8_t *xq[OW_ACT_SLOTS];
    size_t xq_slot_bytes;

    int profile;
    ow_exec_profile prof;
    ow_thread_prof *tprof;      /* [n_threads] */
    atomic_int busy;
};

static inline int64_t ow_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Inside a task: start a timer / charge the time since t0 to category c of this worker (no-ops when off). */
static inline int64_t ow_prof_start(const ow_executor *ex) { return ex->profile ? ow_now_ns() : 0; }
static inline int64_t ow_prof_lap(ow_executor *ex, int worker, ow_prof_cat c, int64_t t0) {
    if (!ex->profile) return 0;
    const int64_t t = ow_now_ns();
    ex->tprof[worker].ns[c] += t - t0;
    return t;
}

/* --- the jobs of a step (executor_jobs.c) ----------------------------------------------------------------- */

/* Quantizes n rows of x (row stride x_stride, n_cols wide; RMS-normalized with `norm` first unless NULL) once
 * per distinct activation type that mats[0..n_mats) need; views[i] is then the input of mats[i]. */
void ow_exec_prepare_input(ow_executor *ex, const float *x, int64_t x_stride, int n, int64_t n_cols,
                           const float *norm, const ow_matrix *const *mats, int n_mats, ow_act_view *views);

/* Cache rows of (sequence, layer, position 0): the layer's K or V cache of one sequence. */
static inline size_t ow_cache_offset(const ow_executor *ex, int seq, int layer) {
    return ((size_t)seq * (size_t)ex->d.n_layer + (size_t)layer) * (size_t)ex->n_ctx * (size_t)ex->n_kv;
}

/* The row of (sequence, layer, position) in cache (ex->k_cache or ex->v_cache), in the cache's element type. */
static inline uint8_t *ow_cache_row(const ow_executor *ex, uint8_t *cache, int seq, int layer, int pos) {
    return cache + ow_kv_bytes(ex->kv_type, (int64_t)(ow_cache_offset(ex, seq, layer) + (size_t)pos * (size_t)ex->n_kv));
}

/* Q, K, V of one layer as one job over their heads: matmul, bias, q/k norm, RoPE; token t's K and V land in the
 * KV cache of sequence ex->seq[t] at position ex->pos[t]. */
void ow_exec_qkv(ow_executor *ex, int layer, int n, const ow_act_view views[3]);
/* Causal attention of every (token, head): token t sees positions 0..ex->pos[t] of sequence ex->seq[t] (only the
 * last sliding_window of them in a sliding-window layer). Reads ex->q, writes ex->attn. */
void ow_exec_attention(ow_executor *ex, int layer, int n);
/* x[t] += w @ input[t] (the wo and down projections); with post_norm (not NULL), x[t] += rmsnorm(w @ input[t]) *
 * post_norm, a second job over the tokens since the norm needs the whole row. */
void ow_exec_matmul_residual(ow_executor *ex, const ow_matrix *w, ow_act_view in, int n, const float *post_norm,
                             ow_prof_cat cat);
/* ffn[t] = act(gate @ input[t]) * (up @ input[t]) with act silu or gelu_tanh, one job over the n_ff rows. */
void ow_exec_gate_up(ow_executor *ex, const ow_matrix *gate, const ow_matrix *up, const ow_act_view views[2], int n);
/* y[t*y_stride + r] = output @ input[t] for the vocab rows r (soft-capped when d.final_softcap > 0). */
void ow_exec_output(ow_executor *ex, ow_act_view in, int n, float *y, int64_t y_stride);

/* --- encoders (executor_encoder.c) ----------------------------------------------------------------------- */

/* A post-norm (BERT) layer, once the RoPE table holds the step's positions: see ow_layer_desc. */
void ow_exec_encoder_layer(ow_executor *ex, int layer, int n);
/* x[t] = LayerNorm(x[t]) * w + b for the step's n tokens, one job over the tokens. */
void ow_exec_layernorm(ow_executor *ex, int n, const float *w, const float *b);

#endif
